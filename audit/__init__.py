"""Auditing privacy mechanisms: mechanisms, neighbours, theory, verdicts, the engine, reports.

``run_audit`` is the Python entry point (docs/design.md, "Contract: Python");
``bounds`` holds the closed forms of docs/theory.md section 6.  The names are
imported on first use (PEP 562), so that ``capaudit --help`` does not load
numpy, scikit-learn and pandas.
"""

import importlib

_LAZY = {"bounds": "audit.bounds", "AuditResult": "audit.api", "AuditError": "audit.api", "run_audit": "audit.api"}
__all__ = ["AuditError", "AuditResult", "bounds", "run_audit"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'audit' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    return module if module.__name__ == f"audit.{name}" else getattr(module, name)
