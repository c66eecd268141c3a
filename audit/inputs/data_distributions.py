"""Data distributions D that on-average audits draw their datasets from (docs/theory.md section 8).

An on-average audit (``[neighbours] strategy = "on-average"``) draws
Z ~ D^n and z ~ D and audits M(Z) against M(Z with its first record
replaced by z).  D is named in the config by a built-in table, e.g.
``{ name = "normal", mean = 0, std = 1 }``, or by user code
``"module:function"`` with ``function(size, rng) -> records``.

Every sampler is pure given its generator: ``sampler(size, rng)`` returns a
float array of ``size`` records of shape (size, dim).  Built-in parameters
are scalars (every coordinate of a record is drawn independently from the
same law); ``dim`` (default 1) is the record width.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from audit.config.validation import is_number

Sampler = Callable[[int, np.random.Generator], np.ndarray]
MAX_DIM = 1000
"""Widest record a built-in distribution draws (each dataset is held in memory)."""
DISTRIBUTIONS: dict[str, dict[str, float | None]] = {
    "normal": {"mean": 0.0, "std": 1.0},
    "uniform": {"low": 0.0, "high": 1.0},
    "bernoulli": {"p": 0.5},
    "truncated-normal": {"mean": 0.0, "std": 1.0, "low": None, "high": None},
}
"""Built-in laws and their parameters with defaults (None: required); each also takes ``dim``."""


def normal(size: int, rng: np.random.Generator, *, mean: float = 0.0, std: float = 1.0, dim: int = 1) -> np.ndarray:
    """``size`` records with iid N(mean, std^2) coordinates."""
    return rng.normal(mean, std, size=(size, dim))


def uniform(size: int, rng: np.random.Generator, *, low: float = 0.0, high: float = 1.0, dim: int = 1) -> np.ndarray:
    """``size`` records with iid U(low, high) coordinates."""
    return rng.uniform(low, high, size=(size, dim))


def bernoulli(size: int, rng: np.random.Generator, *, p: float = 0.5, dim: int = 1) -> np.ndarray:
    """``size`` records with iid Bernoulli(p) coordinates (0.0 or 1.0)."""
    return (rng.random(size=(size, dim)) < p).astype(float)


def truncated_normal(
    size: int, rng: np.random.Generator, *, low: float, high: float, mean: float = 0.0, std: float = 1.0, dim: int = 1
) -> np.ndarray:
    """``size`` records with iid N(mean, std^2) coordinates conditioned on [low, high] (OAKL section 6's data)."""
    from scipy import stats  # here, not at the top: scipy.stats costs an import of audit.commands.api a second

    a, b = (low - mean) / std, (high - mean) / std
    return stats.truncnorm.rvs(a, b, loc=mean, scale=std, size=(size, dim), random_state=rng)


_SAMPLERS: dict[str, Callable[..., np.ndarray]] = {
    "normal": normal, "uniform": uniform, "bernoulli": bernoulli, "truncated-normal": truncated_normal,
}


def check_distribution(spec: Any, path: str = "neighbours.distribution") -> dict[str, Any]:
    """A built-in distribution table's parameters (defaults filled in), or a ValueError naming the field.

    A string ``"module:function"`` (user code) is only checked for its form
    here; :func:`make_sampler` imports it.  Returns ``{}`` for a string.
    """
    if isinstance(spec, str):
        module, colon, function = spec.partition(":")
        if not (module and colon and function):
            raise ValueError(f"{path} must be a table such as {{ name = \"normal\" }} or user code "
                             f"\"module:function\" (function(size, rng) -> records). Found {spec!r}.")
        return {}
    if not isinstance(spec, Mapping) or spec.get("name") not in DISTRIBUTIONS:
        found = spec.get("name") if isinstance(spec, Mapping) else spec
        raise ValueError(f"{path}.name must be one of {', '.join(DISTRIBUTIONS)} (or give user code "
                         f"\"module:function\"). Found {found!r}.")
    name, defaults = spec["name"], DISTRIBUTIONS[spec["name"]]
    unknown = sorted(map(str, set(spec) - {"name", "dim", *defaults}))
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(unknown)} for {name!r}; "
                         f"accepted: name, dim, {', '.join(defaults)}.")
    params = {key: spec.get(key, default) for key, default in defaults.items()}
    for key, value in params.items():
        if value is None:
            raise ValueError(f"{path}.{key} is required for {name!r} (the truncation bounds). Found nothing.")
        if not is_number(value) or not np.isfinite(value):
            raise ValueError(f"{path}.{key} must be a finite number. Found {value!r}.")
        params[key] = float(value)
    dim = spec.get("dim", 1)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 1 <= dim <= MAX_DIM:
        raise ValueError(f"{path}.dim (record width) must be an integer from 1 to {MAX_DIM}. Found {dim!r}.")
    _check_values(params, path, name)
    return {**params, "dim": int(dim)}


def _check_values(params: Mapping[str, float], path: str, name: str) -> None:
    """Raise ValueError unless the parameters define a proper law."""
    if params.get("std", 1.0) <= 0:
        raise ValueError(f"{path}.std must be > 0. Found {params['std']!r}.")
    if "low" in params and not params["low"] < params["high"]:
        raise ValueError(f"{path}: low must be < high for {name!r}. Found low={params['low']!r}, high={params['high']!r}.")
    if not 0.0 <= params.get("p", 0.5) <= 1.0:
        raise ValueError(f"{path}.p must be in [0, 1]. Found {params['p']!r}.")


def make_sampler(spec: Any, path: str = "neighbours.distribution") -> Sampler:
    """The sampler ``(size, rng) -> (size, dim) records`` of a distribution spec.

    A built-in table gives its law with validated parameters; a string
    ``"module:function"`` imports user code (the caller puts the config's
    folder on ``sys.path``), whose output is checked on every call by
    :func:`check_records`.
    """
    params = check_distribution(spec, path)
    if isinstance(spec, str):
        from audit.mechanisms.registry import _import_attribute

        function = _import_attribute(spec, what=path)
        if not callable(function):
            raise ValueError(f"{path} {spec!r} is not callable. Found {type(function).__name__}.")
        return lambda size, rng: check_records(function(size, rng), size, f"{path} {spec!r}")
    sampler = _SAMPLERS[spec["name"]]
    return lambda size, rng: sampler(size, rng, **params)


def check_records(records: Any, size: int, what: str) -> np.ndarray:
    """User records as a finite float array of shape (size, k) (1-D: k = 1), or a ValueError saying what is wrong."""
    try:
        array = np.asarray(records, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must return an array of numbers. Found {type(records).__name__}.") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or len(array) != size or not np.all(np.isfinite(array)):
        raise ValueError(f"{what} must return {size} finite records, shape ({size},) or ({size}, k). "
                         f"Found shape {np.shape(records)}.")
    return array
