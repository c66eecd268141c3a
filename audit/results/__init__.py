"""The results layer: typed rows, verdicts, on-average aggregates, provenance, results files."""
