"""The empirical trade-off curve of an attack's held-out scores, with a simultaneous upper confidence band.

An attack's score (large on P) gives one test per threshold t: reject P when
the score is at most t.  Its type-I error is a(t) = P(score <= t) and its
type-II error b(t) = Q(score > t); the lower envelope of the points
(a(t), b(t)) is the attack's trade-off curve, which lies above the restricted
trade-off curve T_H(P, Q) of its class H (docs/theory.md section 9) and above
T(P, Q).

The band: by the one-sided Dvoretzky-Kiefer-Wolfowitz inequality with
Massart's constant (Massart, "The tight constant in the DKW inequality",
Ann. Probab. 1990), P(sup_t F(t) - F_n(t) > e) <= exp(-2 n e^2) for any law
F, so with e_P and e_Q at level (1 - confidence) / 2 each, a(t) <= a_n(t) +
e_P and b(t) <= b_n(t) + e_Q hold for every t at once (thresholds read off
the same data included) with probability at least ``confidence``.  T_H is
non-increasing and T_H(a(t)) <= b(t), so

    T_H(a) <= min { b_n(t) + e_Q : a_n(t) + e_P <= a }   (and <= 1 - a)

for every a simultaneously: an upper confidence band on the class's trade-off
curve.  Where it lies below a claimed trade-off function f, the class's tests
do better than f allows.  The inputs are the binned held-out scores of
:func:`attacks.estimate.score_histogram` (bin edges are thresholds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


def dkw_margin(n: int, level: float) -> float:
    """e = sqrt(log(1 / level) / (2 n)): the one-sided DKW margin at ``level`` (Massart 1990, level <= 1/2)."""
    if n < 1:
        raise ValueError(f"n must be a positive count. Found {n!r}.")
    if not 0.0 < level <= 0.5:
        raise ValueError(f"level must be in (0, 1/2]. Found {level!r}.")
    return math.sqrt(math.log(1.0 / level) / (2.0 * n))


@dataclass(frozen=True)
class TradeoffCurve:
    """An attack's empirical trade-off points and their simultaneous upper confidence band.

    Attributes
    ----------
    type_one, type_two : ndarray of shape (k,)
        The tests' empirical errors a_n(t) and b_n(t), one per threshold (bin edge), a increasing.
    margin_p, margin_q : float
        The DKW margins e_P and e_Q.
    confidence : float
        The band's simultaneous confidence.
    n_p, n_q : int
        Held-out scores of P and Q.
    """

    type_one: np.ndarray
    type_two: np.ndarray
    margin_p: float
    margin_q: float
    confidence: float
    n_p: int
    n_q: int

    def band(self, a: np.ndarray) -> np.ndarray:
        """The upper confidence band on the class's trade-off curve at type-I errors ``a`` (module docstring)."""
        a = np.asarray(a, dtype=float)
        upper_one = self.type_one + self.margin_p
        upper_two = np.minimum(self.type_two + self.margin_q, 1.0)
        # best (smallest) upper type-II error among tests whose upper type-I error is at most a
        running = np.minimum.accumulate(upper_two)  # upper_one increases with the threshold
        index = np.searchsorted(upper_one, a, side="right") - 1
        best = np.where(index >= 0, running[np.clip(index, 0, None)], 1.0)
        return np.minimum(best, 1.0 - a)

    def below(self, claimed: Callable[[np.ndarray], np.ndarray], grid: np.ndarray | None = None
              ) -> tuple[float, float] | None:
        """The first type-I error where the band lies below ``claimed`` and the largest gap, or None.

        ``claimed`` maps type-I errors to the claimed trade-off function's
        values; ``grid``: the levels compared (default 2001 points of [0, 1]).
        """
        grid = np.linspace(0.0, 1.0, 2001) if grid is None else np.asarray(grid, dtype=float)
        gap = np.asarray(claimed(grid)) - self.band(grid)
        crossed = gap > 1e-12
        if not crossed.any():
            return None
        return float(grid[np.argmax(crossed)]), float(gap.max())


def tradeoff_curve(scores: Mapping[str, Any], confidence: float) -> TradeoffCurve:
    """The trade-off curve of the tests {score <= t} at the bin edges of binned held-out scores.

    Parameters
    ----------
    scores : mapping
        :func:`attacks.estimate.score_histogram`'s dict: ``edges`` (k + 1
        floats) and per-bin counts ``p`` and ``q`` (k each), scores large on P.
    confidence : float
        Simultaneous confidence of the band, in [0.5, 1).

    Returns
    -------
    TradeoffCurve
    """
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1). Found {confidence!r}.")
    p, q = np.asarray(scores["p"], dtype=float), np.asarray(scores["q"], dtype=float)
    if p.shape != q.shape or p.ndim != 1 or p.sum() < 1 or q.sum() < 1:
        raise ValueError(f"scores need equal-length count lists p and q with some counts each. Found {p}, {q}.")
    type_one = np.r_[0.0, np.cumsum(p)] / p.sum()  # reject P on the bins below each edge
    type_two = 1.0 - np.r_[0.0, np.cumsum(q)] / q.sum()
    level = (1.0 - confidence) / 2.0
    n_p, n_q = int(p.sum()), int(q.sum())
    return TradeoffCurve(type_one, type_two, dkw_margin(n_p, level), dkw_margin(n_q, level), confidence, n_p, n_q)
