"""The evidence protocol: what every estimate gives the verdicts, the checks and the report, under one set of names.

An audit's statistics are of several kinds: a set's counts and a witness's
held-out objective (:class:`attacks.estimate.DivergenceEstimate`), a weighted
mean of several sets' log-ratios (:class:`attacks.held_out.PooledEstimate`), a
sequential search's spent look (:class:`attacks.sequential.SequentialEstimate`),
a mean over iid pairs (:class:`audit.results.on_average.OnAverageEstimate`), a theorem check's measured side
(:class:`audit.engine.checks.Measurement`) and a mean with normal bounds
(:class:`NormalEstimate`).  Each implements :class:`Evidence`, as SciPy's
result objects share ``statistic``, ``pvalue`` and ``confidence_interval``, so
that a reader of one reads them all (``ceiling`` included: the verdicts read it
off the evidence).  The three readings agree: for every
claim c and level l, ``p_value(c) <= 1 - l`` exactly when
``lower_bound(l) >= c`` (one statistic inverted two ways), and
``confidence_interval(k)`` is the two one-sided bounds at ``(1 + k) / 2``.

A leaf module (scipy.special only: the normal quantile and distribution function, without loading
scipy.stats), so that :mod:`attacks` and :mod:`audit` both
import it and :mod:`attacks` still never imports :mod:`audit`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from scipy.special import ndtr, ndtri

NORMAL = "normal"
"""The ``kind`` of a :class:`NormalEstimate`'s record."""


@runtime_checkable
class Evidence(Protocol):
    """An estimate with its uncertainty: what :mod:`audit.results.verdicts` needs to judge a row.

    Attributes
    ----------
    estimate : float
        The point estimate of the estimand (a lower bound on the restricted divergence for an attack's statistic).
    standard_error : float
        Its standard error, NaN where the intervals come from no standard
        error (count bounds of ``dp``) or none is known.
    caveat : str or None
        Why the interval cannot be trusted (the row is then never a violation), None when it can.
    """

    estimate: float
    standard_error: float
    caveat: str | None

    def lower_bound(self, level: float = 0.95) -> float:
        """One-sided lower confidence bound on the estimand at confidence ``level``."""

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided interval (low, high): the one-sided bounds at ``(1 + confidence) / 2``."""

    def p_value(self, claim: float) -> float:
        """One-sided p-value of H0: the estimand <= ``claim``."""

    def ceiling(self, level: float = 0.95) -> float:
        """The largest lower bound at ``level`` that the sample sizes allow (:mod:`attacks.ceilings`), NaN when
        none is known: no data of these sizes refute a claim at or above it."""

    def to_record(self) -> dict[str, Any]:
        """The evidence as plain JSON values (what tasks.jsonl and results.json hold)."""


@dataclass(frozen=True)
class NormalEstimate:
    """An asymptotically normal estimate: Wald bounds ``estimate -+ z(level) standard_error``.

    ``p_value(claim)`` is the normal tail of ``(estimate - claim) / standard_error``,
    and 1 (no evidence) with a caveat, a non-finite estimate or a standard error that is not positive.
    """

    estimate: float
    standard_error: float
    caveat: str | None = None

    def lower_bound(self, level: float = 0.95) -> float:
        return self.estimate - float(ndtri(level)) * self.standard_error

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        step = float(ndtri((1.0 + confidence) / 2)) * self.standard_error
        return self.estimate - step, self.estimate + step

    def p_value(self, claim: float) -> float:
        if self.caveat or not (math.isfinite(self.estimate) and self.standard_error > 0):
            return 1.0
        return float(ndtr((claim - self.estimate) / self.standard_error))  # the normal's survival function

    def ceiling(self, level: float = 0.95) -> float:
        """NaN: no bound is known that the sample sizes of a normal estimate cap (unlike counts' or a witness's,
        :meth:`attacks.estimate.DivergenceEstimate.ceiling`)."""
        return math.nan

    def to_record(self) -> dict[str, Any]:
        """Plain JSON: ``kind = "normal"``, the estimate, its standard error and caveat."""
        return dict(kind=NORMAL, estimate=float(self.estimate), standard_error=float(self.standard_error),
                    caveat=self.caveat)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> NormalEstimate:
        """The estimate of :meth:`to_record`'s record."""
        return cls(float(record["estimate"]), float(record["standard_error"]), record.get("caveat"))
