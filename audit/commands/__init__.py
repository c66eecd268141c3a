"""The commands layer: the capaudit command line, run_audit, and the theory and oakl commands."""
