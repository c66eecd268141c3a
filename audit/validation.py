"""Argument checks shared by the theory and the mechanisms: one message format everywhere."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_positive(value: Any, name: str) -> float:
    """``value`` as a finite float > 0, or a ``ValueError`` naming ``name`` and the value found."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0. Found {value!r}.") from None
    if not np.isfinite(number) or number <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0. Found {value!r}.")
    return number
