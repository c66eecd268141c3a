"""The config layer: each table's fields and rules, and the validated AuditConfig a config becomes."""
