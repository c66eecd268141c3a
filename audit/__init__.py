"""Auditing privacy mechanisms: mechanisms, neighbours, theory, verdicts, runner, reports.

``run_audit`` is the Python entry point (DESIGN.md, "Contract: Python");
``bounds`` holds the closed forms of THEORY.md section 6.
"""

from audit import bounds
from audit.api import AuditResult, run_audit

__all__ = ["AuditResult", "bounds", "run_audit"]
