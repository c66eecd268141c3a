"""On-average claims: the mean over iid neighbouring pairs of a restricted divergence (docs/theory.md section 8).

An on-average claim (``[[claims]] on_average = true``, kl or renyi) states
E_{Z ~ D^n, z ~ D} Gamma^H(M(Z) || M(Z')) <= epsilon, Z' = Z with its first
record replaced by z (OAKL, Wang, Lei and Fienberg, Def. 3, with KL
restricted to the class H).  ``[neighbours] strategy = "on-average"`` draws
K iid pairs (Z_k, Z'_k); each pair's attack gives a held-out estimate X_k of
its fitted witness's objective, whose population value is at most the pair's
Gamma^H (theory.md section 4).

The statistic is the mean of X_1..X_K.  Two sources of noise move it: which
pairs were drawn (between-pair) and each pair's finite sample (within-pair).
The X_k are iid (the pairs are iid, each attacked with its own seeds), so by
the law of total variance Var(X_k) = Var(E[X_k | pair]) + E[Var(X_k | pair)]
holds both, and the sample variance s^2 of the X_k estimates it without
modelling either: the interval is Student's t over pairs,
mean +- t_{K-1} s / sqrt(K) (:func:`average_over_pairs`).  It covers E[X_k],
which is at most the on-average Gamma^H up to the estimator's small bias
(the held-out log-mean of a KL or Renyi objective is biased up by
O(1/n_test), far below the interval's width for the counts an audit uses).
Assumptions, stated in the report: iid pairs, held-out scores, a finite
variance of X_k; the t interval is approximate for few pairs.  Per-pair
divergences are skewed to the right (e.g. a Gaussian sum query on normal
data: a chi-square), which makes the one-sided lower bound (the violation
side) conservative.  At least ``MIN_PAIRS`` (2) pairs are needed; 10 or more
are recommended.

Beside the mean the row reports the worst case over the same pairs: the
largest per-pair estimate and the largest per-pair lower confidence bound at
level ``1 - (1 - confidence) / K`` (Bonferroni over the K pairs), a lower
confidence bound on max_k Gamma^H(M(Z_k) || M(Z'_k)) at the audit's
confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import stdtr, stdtrit

from attacks.vocabulary import KL, Renyi
from audit.results.schema import Row

MIN_PAIRS = 2
"""Fewest pairs of an on-average claim: a variance over pairs needs two."""
PAIR = "average"
"""The ``pair`` of an aggregate row (pairs are otherwise named ``p0``, ``p1``, ...)."""
DIVERGENCES = (KL.name, Renyi.name)
"""The divergences an on-average claim may state (OAKL defines KL; Renyi is its order-alpha sibling)."""


@dataclass(frozen=True)
class OnAverageEstimate:
    """The mean over pairs of per-pair estimates, with a t interval over pairs (module docstring).

    Evidence (:class:`attacks.evidence.Evidence`) for :mod:`audit.results.verdicts`.

    Attributes
    ----------
    estimate : float
        Mean of the per-pair estimates.
    standard_error : float
        Sample standard deviation of the per-pair estimates / sqrt(n_pairs).
    n_pairs : int
    worst_case : float
        Largest per-pair estimate.
    worst_case_low : float
        Largest per-pair lower confidence bound at the Bonferroni level (NaN when not given).
    caveat : str or None
        Why the interval cannot be trusted (failed or untrusted pairs, too few pairs).
    """

    estimate: float
    standard_error: float
    n_pairs: int
    worst_case: float
    worst_case_low: float = math.nan
    caveat: str | None = None

    def lower_bound(self, level: float = 0.95) -> float:
        """One-sided lower confidence bound at confidence ``level``: mean - t_{K-1}(level) SE."""
        return self.estimate - float(stdtrit(self.n_pairs - 1, level)) * self.standard_error

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Equal-tailed Student-t interval over pairs at ``confidence``."""
        half = float(stdtrit(self.n_pairs - 1, 0.5 + confidence / 2.0)) * self.standard_error
        return self.estimate - half, self.estimate + half

    def p_value(self, claim: float) -> float:
        """One-sided t-test p-value of H0: the mean over the pair distribution <= ``claim``."""
        excess = self.estimate - claim
        if self.standard_error == 0.0:  # every pair gave the same estimate
            return 0.0 if excess > 0 else 1.0
        return float(stdtr(self.n_pairs - 1, -excess / self.standard_error))  # Student's t survival function

    def ceiling(self, level: float = 0.95) -> float:
        """NaN: the sample sizes cap no t interval over pairs."""
        return math.nan

    def to_record(self) -> dict[str, Any]:
        """Plain JSON values: every field (``kind = "on_average"``)."""
        return dict(kind="on_average", **asdict(self))


def average_over_pairs(
    estimates: Sequence[float], lower_bounds: Sequence[float] | None = None, caveat: str | None = None
) -> OnAverageEstimate:
    """The on-average statistic of per-pair estimates (module docstring: law of total variance, t over pairs).

    Parameters
    ----------
    estimates : sequence of float
        One held-out estimate per pair, at least :data:`MIN_PAIRS`, finite.
    lower_bounds : sequence of float, optional
        Per-pair lower confidence bounds at the Bonferroni level
        (:func:`worst_case_level`); their max is ``worst_case_low``.
    caveat : str, optional
        Carried to the result (e.g. some pairs failed).

    Raises
    ------
    ValueError
        With fewer than two estimates or a non-finite one.
    """
    values = np.asarray(estimates, dtype=float)
    if values.size < MIN_PAIRS or not np.all(np.isfinite(values)):
        raise ValueError(f"an on-average estimate needs at least {MIN_PAIRS} finite per-pair estimates. Found {values!r}.")
    lows = np.asarray([] if lower_bounds is None else lower_bounds, dtype=float)
    return OnAverageEstimate(
        estimate=float(values.mean()),
        standard_error=float(values.std(ddof=1) / math.sqrt(values.size)),
        n_pairs=int(values.size),
        worst_case=float(values.max()),
        worst_case_low=float(np.max(lows)) if lows.size else math.nan,
        caveat=caveat,
    )


def worst_case_level(confidence: float, n_pairs: int) -> float:
    """Per-pair confidence ``1 - (1 - confidence) / n_pairs`` whose max bound holds at ``confidence`` (Bonferroni)."""
    return 1.0 - (1.0 - confidence) / n_pairs


def aggregate_rows(rows: Sequence[Row], confidence: float) -> list[Row]:
    """One aggregate row per (on-average claim, attack class, direction, alpha), carrying its evidence.

    Parameters
    ----------
    rows : sequence of Row
        Results rows before verdicts; those with ``on_average`` true are the
        per-pair rows of on-average claims (``refutes_claim`` false), each
        with its per-pair estimate (``evidence``: ``estimate``,
        ``lower_bound``, ``caveat``; None for a failed task).
    confidence : float
        The audit's confidence (worst-case Bonferroni level).

    Returns
    -------
    list of Row
        Aggregate rows: ``pair`` = :data:`PAIR`, ``estimate`` the mean,
        ``refutes_claim`` the attack class contained in the claim's,
        ``pairs_averaged``, ``worst_case``, ``worst_case_low``; a
        ``task`` id ``average|<direction>|<class>|<divergence>|<alpha>|<claim>``;
        ``evidence`` their :class:`OnAverageEstimate`, with a caveat (the row is
        then inconclusive) when a pair failed, was untrusted or infinite.
    """
    from attacks.classes import parse_function_class

    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        if row.on_average and row.pair != PAIR:
            key = (row.direction, row.function_class, row.divergence, _alpha_text(row.alpha), float(row.claim),
                   row.claim_class, row.delta)
            groups.setdefault(key, []).append(row)
    aggregates = []
    for (direction, attack_class, divergence, alpha, claim, claim_class, delta), members in groups.items():
        evidence = _aggregate([member.evidence for member in members], confidence)
        first = members[0]
        aggregates.append(Row(
            pair=PAIR, direction=direction, function_class=attack_class, divergence=divergence, alpha=first.alpha,
            delta=delta,
            estimate=evidence.estimate, n_samples=first.n_samples, claim=first.claim, claim_class=claim_class,
            refutes_claim=parse_function_class(attack_class).is_contained_in(parse_function_class(claim_class)),
            note=f"mean over {len(members)} iid pairs (t interval over pairs)",
            task=f"{PAIR}|{direction}|{attack_class}|{divergence}|{alpha}|{claim:g}|{claim_class}",
            on_average=True, pairs_averaged=len(members), worst_case=evidence.worst_case,
            worst_case_low=evidence.worst_case_low, evidence=evidence,
        ))
    return aggregates


def _aggregate(pair_evidence: Sequence[Any], confidence: float) -> OnAverageEstimate:
    """:func:`average_over_pairs` of the pairs that ran; a caveat naming what was left out.  A pair confirmed with
    a clipped betting bound beside its delta method enters with its delta method alone: the larger of two
    plug-ins is biased upwards, which a mean over pairs would not forgive."""
    from attacks.clipped_witness import ClippedWitnessEstimate  # attacks load scikit-learn

    pair_evidence = [e.moments if isinstance(e, ClippedWitnessEstimate) else e for e in pair_evidence]
    ran = [e for e in pair_evidence if e is not None and math.isfinite(float(e.estimate))]
    trusted = [e for e in ran if not e.caveat]
    reasons = []
    if len(ran) < len(pair_evidence):
        reasons.append(f"{len(pair_evidence) - len(ran)} of {len(pair_evidence)} pairs failed or were infinite")
    if len(trusted) < len(ran):
        reasons.append(f"{len(ran) - len(trusted)} of {len(pair_evidence)} pairs' estimates are not trusted")
    caveat = "; ".join(reasons) or None  # left-out pairs could be the large ones: no mean is trusted
    if len(ran) < MIN_PAIRS:
        estimate = float(ran[0].estimate) if ran else math.nan
        return OnAverageEstimate(estimate, math.nan, len(ran), estimate, math.nan,
                                 caveat or f"fewer than {MIN_PAIRS} pairs ran")
    level = worst_case_level(confidence, len(pair_evidence))
    lows = [e.lower_bound(level) for e in trusted]
    return average_over_pairs([e.estimate for e in ran], lows, caveat)


def _alpha_text(alpha: Any) -> str:
    return "" if alpha is None or (isinstance(alpha, float) and math.isnan(alpha)) else f"{float(alpha):g}"
