"""Argument checks shared by the config, the theory and the mechanisms: one message format everywhere.

Numbers are taken strictly: a bool (``True`` is an int in Python) or a string
(``"1"``) is refused rather than coerced, so that a typo in a config cannot
silently become a parameter.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (int, float or a NumPy scalar), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_positive(value: Any, name: str) -> float:
    """``value`` as a finite float > 0, or a ``ValueError`` naming ``name`` and the value found."""
    if not is_number(value):
        raise ValueError(f"{name} must be a finite number > 0, not a {type(value).__name__}. Found {value!r}.")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0. Found {value!r}.")
    return float(value)


def as_numbers(value: Any, name: str) -> np.ndarray:
    """``value`` (a number or nested lists of numbers) as a float array, or a ``ValueError``.

    Unlike ``numpy.asarray(value, dtype=float)`` this refuses bools, strings,
    tables and ragged lists instead of converting or crashing on them; the
    values may be infinite (callers that need finite values check that).
    """
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        return value.astype(float)
    if not _numbers_only(value):
        raise ValueError(f"{name} must be a number or a (nested) list of numbers, not bools or strings. Found {value!r}.")
    try:
        return np.asarray(value, dtype=float)
    except ValueError:
        raise ValueError(f"{name} must be a rectangular (nested) list of numbers. Found {value!r}.") from None


def _numbers_only(value: Any) -> bool:
    """Whether ``value`` is a number or a list / tuple / array whose leaves are all numbers (iterative, any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, np.ndarray):
            if item.dtype.kind not in "iuf":
                return False
        elif not is_number(item):
            return False
    return True


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int >= 1, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer. Found {value!r}.")
    return int(value)


def install_hint(extra: str) -> str:
    """How to install capaudit's optional dependency group ``extra``.

    capaudit is installed from a checkout (it is not on a package index), so
    the hint names the extra and the command that works in a checkout.
    """
    return f'install the extra capaudit[{extra}]: pip install ".[{extra}]" in a capaudit checkout'
