"""Auditing privacy mechanisms: mechanisms, neighbours, theory, verdicts, runner, reports."""
