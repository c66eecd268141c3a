"""A set's ``dp`` or ``ipm`` bound from betting confidence sequences: valid at every look of a confirm sample.

The confirm statistic of a ``dp`` or ``ipm`` claim is one attack set S,
fixed before its confirm sample, and its estimand a function of the two set
probabilities p = P(S) and q = Q(S):

* ``dp``: log((p - delta) / q), increasing in p and decreasing in q;
* ``ipm``: 2 (p - q) (:mod:`attacks.estimate`).

Each indicator stream 1[X_i in S] (X_i ~ P) and 1[Y_i in S] (Y_i ~ Q) is
iid Bernoulli whatever the coupling of the pairs, so the betting confidence
sequences of :mod:`attacks.betting` bound p and q at every n at once; with
error a / 2 on each (a union bound, which holds for coupled pairs too), the
lower bound of the estimand at confidence 1 - a is the estimand at
(lower bound of p, upper bound of q), and it holds at any stopping time of
the confirm sample (Waudby-Smith and Ramdas 2024, section 5): an audit may
look after every batch and stop at the first look that decides.  At one
fixed sample size the exact binomial bounds of :mod:`attacks.binomial_ratio`
are tighter; :mod:`attacks.sequential` chooses between them by a rule fixed
before the data (the round's confirm size), never by which is tighter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attacks.betting import BernoulliBetting
from attacks.estimate import DivergenceEstimate
from attacks.vocabulary import DP, IPM, divergence_kind, divergence_of

ANYTIME = "anytime sets"
"""The ``kind`` of an :class:`AnytimeSetEstimate`'s record."""


def estimand(divergence: str, delta: float, p: float, q: float) -> float:
    """The set's ``dp`` log-ratio log((p - delta) / q) (-inf for p <= delta, +inf for q = 0) or ``ipm`` 2 (p - q)."""
    if divergence_kind(divergence) is IPM:
        return 2.0 * (p - q)
    if p <= delta:
        return -math.inf
    return math.inf if q <= 0.0 else math.log((p - delta) / q)


@dataclass(frozen=True)
class AnytimeSetEstimate:
    """A ``dp`` or ``ipm`` set statistic whose bounds are betting confidence sequences (module docstring).

    ``counts``: the count estimate of the same outputs (:func:`attacks.held_out.count_estimate`: the point
    estimate, the counts and every descriptive attribute, read through this object); ``in_p``, ``in_q``: the
    sequences of the indicators of S on the outputs of P and of Q.  Evidence (:class:`attacks.evidence.Evidence`).
    """

    counts: DivergenceEstimate
    in_p: BernoulliBetting
    in_q: BernoulliBetting

    def __post_init__(self):
        if not isinstance(divergence_of(self.counts), DP | IPM):
            raise ValueError(f"an anytime set estimate is for dp or ipm. Found {self.counts.divergence!r}.")

    def __getattr__(self, name: str):
        if name == "counts":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.counts, name)

    @property
    def caveat(self) -> str | None:
        return None

    def _bounds(self, error: float) -> tuple[float, float]:
        """(lower, upper) bound of the estimand, each at confidence 1 - error (error / 2 on each probability)."""
        share = error / 2.0
        p_low, p_high = self.in_p.lower_bound(share), self.in_p.upper_bound(share)
        q_low, q_high = self.in_q.lower_bound(share), self.in_q.upper_bound(share)
        divergence, delta = self.counts.divergence, float(self.counts.delta)
        return estimand(divergence, delta, p_low, q_high), estimand(divergence, delta, p_high, q_low)

    def lower_bound(self, level: float = 0.95) -> float:
        return self._bounds(1.0 - level)[0]

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        return self._bounds((1.0 - confidence) / 2.0)

    def p_value(self, claim: float) -> float:
        """The smallest error a at which the lower bound reaches ``claim`` (1 when none does).

        The bound is a step function of a that moves only where a / 2 is e^-peak for one of the two sequences'
        capital peaks, so the smallest such a is found exactly among those points.
        """
        peaks = np.r_[self.in_p.log_peak, self.in_q.mirror_peak]
        # a / 2 < 1 (the smallest float where e^-peak underflows: the bound there is at least the claimed one's)
        errors = np.unique(np.maximum(2.0 * np.exp(-peaks[peaks > math.log(2.0)]), np.finfo(float).tiny))
        low, high = 0, errors.size  # the first error whose bound reaches the claim lies in errors[low:high + 1]
        while low < high:
            middle = (low + high) // 2
            if self._bounds(errors[middle])[0] >= claim:
                high = middle
            else:
                low = middle + 1
        return float(errors[low]) if low < errors.size else 1.0

    def ceiling(self, level: float = 0.95) -> float:
        return self.counts.ceiling(level)

    def with_details(self, **details: Any) -> AnytimeSetEstimate:
        """The estimate with ``details`` added to its counts' (read as ``details``)."""
        return replace(self, counts=replace(self.counts, details={**self.counts.details, **details}))

    def to_record(self) -> dict:
        """Plain JSON: ``kind``, the counts' record and the two sequences'."""
        return dict(kind=ANYTIME, counts=self.counts.to_record(), in_p=self.in_p.to_record(),
                    in_q=self.in_q.to_record())

    @classmethod
    def from_record(cls, record: Mapping) -> AnytimeSetEstimate:
        """The estimate of :meth:`to_record`'s record: bounds and p-values equal the original's."""
        return cls(DivergenceEstimate.from_record(dict(record["counts"])), BernoulliBetting.from_record(record["in_p"]),
                   BernoulliBetting.from_record(record["in_q"]))
