"""Capacity-bounded adversaries: function classes, variational objectives, held-out scores.

This package never imports :mod:`audit`.
"""

from attacks.adversary import Adversary
from attacks.classes import FunctionClass, parse_function_class
from attacks.estimate import DivergenceEstimate, estimate_divergence

__all__ = ["Adversary", "DivergenceEstimate", "FunctionClass", "estimate_divergence", "parse_function_class"]
