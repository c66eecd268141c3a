"""Capacity-bounded adversaries: function classes, variational objectives, held-out scores.

This package never imports :mod:`audit`.  The names below are imported on
first use (PEP 562), so that a module that needs only, say,
:mod:`attacks.divergences` does not load scikit-learn.
"""

import importlib

_LAZY = {"Adversary": "attacks.adversary", "FunctionClass": "attacks.classes",
         "parse_function_class": "attacks.classes", "DivergenceEstimate": "attacks.estimate",
         "estimate_divergence": "attacks.estimate"}
__all__ = ["Adversary", "DivergenceEstimate", "FunctionClass", "estimate_divergence", "parse_function_class"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'attacks' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
