"""Auditing privacy mechanisms: mechanisms, neighbours, theory, verdicts, the engine, reports.

``run_audit`` is the Python entry point (docs/design.md, "Contract: Python");
the theory (closed forms, exact values, the bound table) is :mod:`audit.theory`.  The names are
imported on first use (PEP 562), so that ``capaudit --help`` does not load
numpy, scikit-learn and pandas.
"""

import importlib

_LAZY = {"AuditResult": "audit.commands.api", "AuditError": "audit.commands.api", "run_audit": "audit.commands.api"}
__all__ = ["AuditError", "AuditResult", "run_audit"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'audit' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
