"""The Laplace and Gaussian laws of the built-in mechanisms' outputs, on numpy and scipy.special.

:class:`Laplace` and :class:`Normal` are the location-scale laws Lap(loc, b)
and N(loc, sigma^2) with the part of the interface of a frozen
``scipy.stats`` law that the exact values (:mod:`audit.theory.exact`) and the
trade-off curves (:mod:`audit.theory.tradeoff`) read: density and log
density, CDF, survival function, their inverses, support, median, mean and
standard deviation, and draws (for the benchmarks that sample the laws).  With X = loc + scale Z, every function is the standard
law's at z = (x - loc) / scale, as scipy computes it:

* Laplace: f(z) = exp(-|z|) / 2, F(z) = exp(z) / 2 for z <= 0 and
  1 - exp(-z) / 2 above, F^-1(u) = log(2 u) for u <= 1/2 and -log(2 (1 - u))
  above; the log density is log(1/2) - |z| (scipy's is the log of the
  density, -inf beyond |z| ~ 745).
* Normal: log f(z) = -z^2 / 2 - log sqrt(2 pi), F = Phi (``scipy.special.ndtr``),
  F^-1 = ``scipy.special.ndtri``.

``scipy.stats`` is slow to import (it parses its docstrings, docs/speed.md);
with these two laws an audit of the built-in mechanisms computes its exact
values without it.
:func:`family_name` names any 1-D law's family as scipy.stats does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

_SQRT_2PI = float(np.sqrt(2 * np.pi))
_LOG_SQRT_2PI = float(np.log(_SQRT_2PI))


@dataclass(frozen=True, repr=False)
class LocationScaleLaw:
    """The law of loc + scale Z for a standard law Z on the real line, symmetric about 0 (the survival function
    and upper quantile use it: P(Z > z) = P(Z <= -z)); subclasses define Z."""

    loc: float = 0.0
    scale: float = 1.0
    name = ""
    """The family's name in scipy.stats."""
    _standard_variance = 1.0
    """Var Z."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "loc", float(self.loc))
        object.__setattr__(self, "scale", float(self.scale))
        if not (math.isfinite(self.scale) and self.scale > 0) or math.isnan(self.loc):
            raise ValueError(f"{self.name} needs a location that is a number and a finite scale > 0. Found {self!r}.")

    def __repr__(self) -> str:
        return f"{self.name}(loc={self.loc!r}, scale={self.scale!r})"

    def _standard(self, x: ArrayLike) -> np.ndarray:
        return (np.asarray(x, dtype=float) - self.loc) / self.scale

    def logpdf(self, x: ArrayLike) -> np.ndarray | float:
        """The log density at x, elementwise (a float for a scalar x)."""
        return (self._standard_logpdf(self._standard(x)) - np.log(self.scale))[()]

    def pdf(self, x: ArrayLike) -> np.ndarray | float:
        """The density at x, elementwise (a float for a scalar x)."""
        return (self._standard_pdf(self._standard(x)) / self.scale)[()]

    def cdf(self, x: ArrayLike) -> np.ndarray | float:
        """P(X <= x), elementwise (a float for a scalar x)."""
        return self._standard_cdf(self._standard(x))[()]

    def sf(self, x: ArrayLike) -> np.ndarray | float:
        """P(X > x), elementwise (a float for a scalar x)."""
        return self._standard_cdf(-self._standard(x))[()]

    def ppf(self, u: ArrayLike) -> np.ndarray | float:
        """The quantile F^-1(u): -inf at u = 0, inf at u = 1, nan outside [0, 1]."""
        return (self._standard_ppf(np.asarray(u, dtype=float)) * self.scale + self.loc)[()]

    def isf(self, u: ArrayLike) -> np.ndarray | float:
        """The upper quantile F^-1(1 - u), as loc - scale F_Z^-1(u) (Z is symmetric): accurate for a small u."""
        return (-self._standard_ppf(np.asarray(u, dtype=float)) * self.scale + self.loc)[()]

    def rvs(self, size: int | tuple[int, ...], random_state: np.random.Generator | np.random.RandomState) -> np.ndarray:
        """``size`` draws loc + scale Z, Z from ``random_state`` as scipy.stats draws it (the same numbers)."""
        return self._standard_rvs(size, random_state) * self.scale + self.loc

    def support(self) -> tuple[float, float]:
        return -np.inf, np.inf

    def median(self) -> float:
        return self.ppf(0.5)

    def mean(self) -> float:
        return self.loc

    def std(self) -> float:
        return math.sqrt(self._standard_variance * self.scale * self.scale)

    def _standard_logpdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _standard_pdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _standard_cdf(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _standard_ppf(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _standard_rvs(self, size, random_state) -> np.ndarray:
        raise NotImplementedError


class Laplace(LocationScaleLaw):
    """Lap(loc, scale): density exp(-|x - loc| / scale) / (2 scale); variance 2 scale^2 (``scipy.stats.laplace``)."""

    name = "laplace"
    _standard_variance = 2.0

    def _standard_logpdf(self, z: np.ndarray) -> np.ndarray:
        return np.log(0.5) - np.abs(z)

    def _standard_pdf(self, z: np.ndarray) -> np.ndarray:
        return 0.5 * np.exp(-np.abs(z))

    def _standard_cdf(self, z: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.where(z > 0, 1.0 - 0.5 * np.exp(-z), 0.5 * np.exp(z))

    def _standard_ppf(self, u: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):  # u = 0 or 1: -inf or inf; outside [0, 1]: nan
            return np.where(u > 0.5, -np.log(2 * (1 - u)), np.log(2 * u))

    def _standard_rvs(self, size, random_state) -> np.ndarray:
        return random_state.laplace(0.0, 1.0, size=size)


class Normal(LocationScaleLaw):
    """N(loc, scale^2): density exp(-(x - loc)^2 / (2 scale^2)) / (sqrt(2 pi) scale) (``scipy.stats.norm``)."""

    name = "norm"

    def _standard_logpdf(self, z: np.ndarray) -> np.ndarray:
        return -(z**2) / 2.0 - _LOG_SQRT_2PI

    def _standard_pdf(self, z: np.ndarray) -> np.ndarray:
        return np.exp(-(z**2) / 2.0) / _SQRT_2PI

    def _standard_cdf(self, z: np.ndarray) -> np.ndarray:
        return ndtr(z)

    def _standard_ppf(self, u: np.ndarray) -> np.ndarray:
        return ndtri(u)

    def _standard_rvs(self, size, random_state) -> np.ndarray:
        return random_state.standard_normal(size)


def family_name(law: object) -> str | None:
    """The family of a 1-D law as scipy.stats names it (``laplace``, ``norm``, ``dlaplace``, ...), None if unnamed."""
    if isinstance(law, LocationScaleLaw):
        return law.name
    return getattr(getattr(law, "dist", None), "name", None)
