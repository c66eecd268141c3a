"""The check stage's choice: which held-out statistic the confirm stage computes, by its promise.

Each finalist's statistic (and, for ``dp``, the minimum-variance pools of its
nested sets) is offered with its check estimate and standard error
(:func:`check_options`); the one whose confirm bound is expected to be the
largest wins (:func:`choose`): among one finalist's options by a lower bound
simultaneous over them (the cautious :func:`promise` / :func:`set_promise`),
among the finalists by the confirm bound at the check estimate (DP-Sniper's
check stage, Bichsel et al. 2021, chooses by the check estimate).  The
screen ranks candidates by the same cautious projection
(:func:`projected_bound`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from attacks import binomial_ratio, paired_ratio, pooled_ratio
from attacks.budget import StageSizes
from attacks.candidates import Candidate, Target
from attacks.estimate import DivergenceEstimate
from attacks.event_divergence import projected_event_bound
from attacks.held_out import Attack, PooledEstimate, accumulate, count_estimate, summed_estimate
from attacks.vocabulary import DP, divergence_of
from attacks.witness_moments import WitnessMoments

SELECTION_LEVEL = 0.95
MIN_COUNT = 100


@dataclass(frozen=True)
class Option:
    """A statistic the check stage may choose: a finalist and, for ``dp``, the weights on its nested sets;
    ``counts``: a one-set statistic's check evidence (its counts: a ``dp`` set, a ``kl`` or ``renyi`` event), None
    for the others; ``event``: (t, s) of a witness's separating event (:func:`attacks.held_out.event_attack`) that the confirm
    stage counts in place of the witness's moments."""

    finalist: int
    weights: np.ndarray | None
    estimate: float
    error: float
    counts: DivergenceEstimate | None = None
    event: tuple[float, int] | None = None

    def promise(self, check: int, confirm: int, family_size: int | None = None) -> float:
        """The confirm bound this statistic is expected to reach: a one-set statistic's projected count bound
        (:func:`set_promise`), the others' :func:`promise`; ``family_size``: the cautious promise among that
        many options of one finalist (None: the promise at the check estimate)."""
        if self.counts is not None:
            return set_promise(self.counts, confirm, family_size)
        return promise(self.estimate, self.error, check, confirm, family_size)


def promise(estimate: float, error: float, check: int, confirm: int, family_size: int | None = None) -> float:
    """The confirm bound a statistic is expected to reach from its check estimate and standard error.

    The estimate less z(SELECTION_LEVEL) standard errors of the confirm
    estimate, sqrt(check / confirm) times the check error: the median of the
    confirm bound's predictive law given the check sample under a flat prior
    on the statistic's value (docs/theory.md section 7, "The check stage's
    choice").  With ``family_size`` K, also less z(1 - 0.05 / K) check
    errors: a lower bound simultaneous over K options (Bonferroni), the
    cautious promise :func:`choose` ranks one finalist's options by.
    """
    selection = 0.0 if family_size is None else ndtri(1.0 - (1.0 - SELECTION_LEVEL) / family_size)
    return estimate - (selection + ndtri(SELECTION_LEVEL) * np.sqrt(check / confirm)) * error


def set_promise(evidence: DivergenceEstimate, confirm: int, family_size: int | None = None) -> float:
    """The confirm bound one ``dp`` set is expected to reach from its check counts.

    The count bound projected to ``confirm`` outputs
    (:func:`attacks.binomial_ratio.projected_lower_bound` or its paired twin:
    the delta-method spread at the confirm size, or the Clopper-Pearson
    split of the projected counts where they are too few for the score
    bound, as the confirm bound will be) at SELECTION_LEVEL; with
    ``family_size`` K, the spread at the check size as well, at level
    1 - 0.05 / K (:func:`promise`).  Unlike :func:`promise` it does not
    read the smoothed log-ratio's standard error, which a set with no
    output of Q inflates by its half count: a set holding 3 % of P's check
    outputs and none of Q's (a float's porous support, Mironov 2012) then
    promised less than a set with a ratio of 1.1, although its confirm count
    bound is the larger.
    """
    cautious = family_size is not None
    level = 1.0 - (1.0 - SELECTION_LEVEL) / family_size if cautious else SELECTION_LEVEL
    if evidence.event:
        return float(projected_event_bound(*evidence._counts(), divergence_of(evidence), level, confirm))
    if evidence.coupled:
        return float(paired_ratio.projected_lower_bound(np.asarray(evidence.details["cells"]), evidence.delta,
                                                        level, confirm, observed=cautious))
    return float(binomial_ratio.projected_lower_bound(*evidence._counts(), evidence.delta, level, confirm,
                                                      observed=cautious))


def choose(options: list[Option], check: int, confirm: int) -> Option:
    """The statistic the confirm stage computes: each finalist's best option by its cautious promise, then the
    finalist whose best option promises most at its check estimate (docs/theory.md section 7).

    A finalist's options (its fitted set or witness and, for ``dp``, the
    pools of its nested sets, :func:`check_options`) are tail sets of one
    fitted score: their values are nearly equal wherever the likelihood
    ratio is flat (every tail set of a Laplace pair has log-ratio epsilon)
    and their estimates are correlated, so the best of many reads high by
    chance; among them the simultaneous lower bound (``family_size`` = their
    number) chooses.  Finalists are different pairs, directions or classes,
    at most :data:`attacks.staged.MAX_FINALISTS`, whose values differ (svt_4's pairs: 0.1725
    and 0.1749); among them the confirm bound at the check estimate chooses,
    not a quantile that prefers the smaller check spread whatever the value.
    """
    def best(group: list[Option], family_size: int | None) -> Option:
        promises = [option.promise(check, confirm, family_size) for option in group]
        return group[max(range(len(group)), key=promises.__getitem__)]

    finalists = sorted({option.finalist for option in options})
    leaders = []
    for finalist in finalists:
        group = [option for option in options if option.finalist == finalist]
        leaders.append(best(group, len(group)))
    return best(leaders, None)


def projected_bound(evidence: DivergenceEstimate, n_eval: int) -> tuple[float, float]:
    """(bound projected to ``n_eval`` held-out samples, standard error) of a held-out estimate.

    ``dp``: :func:`attacks.binomial_ratio.projected_lower_bound` (or its
    paired twin) of the set's counts, which lets a rare set with a large
    ratio beat a frequent weak one only when ``n_eval`` pins it down; an
    event's ``kl`` or ``renyi``: :func:`attacks.event_divergence.projected_event_bound`
    (the standard error read from its distance to the estimate); others:
    the estimate less its interval's half-width scaled by sqrt(n_test / n_eval).
    A caveat projects to -inf.
    """
    if evidence.caveat:
        return -np.inf, np.inf
    z = float(ndtri(SELECTION_LEVEL))
    if isinstance(divergence_of(evidence), DP):
        return _dp_projection(evidence, n_eval)
    if evidence.event:
        projected = float(projected_event_bound(*evidence._counts(), divergence_of(evidence), SELECTION_LEVEL,
                                                n_eval))
        return projected, max(evidence.estimate - projected, 0.0) / z
    width = max(evidence.estimate - evidence.lower_bound(SELECTION_LEVEL), 0.0)
    if not np.isfinite(width):
        return -np.inf, np.inf
    return evidence.estimate - width * np.sqrt(evidence.n_test / n_eval), width / z


def _dp_projection(evidence: DivergenceEstimate, n_eval: int) -> tuple[float, float]:
    """(projected bound at SELECTION_LEVEL, standard error of the smoothed log-ratio) of one set's counts."""
    delta = evidence.delta
    if evidence.coupled:
        cells = np.asarray(evidence.details["cells"])
        projected = paired_ratio.projected_lower_bound(cells, delta, SELECTION_LEVEL, n_eval)
    else:
        counts = evidence._counts()
        projected = binomial_ratio.projected_lower_bound(*counts, delta, SELECTION_LEVEL, n_eval)
    return float(projected), _dp_error(evidence)[1]


def _dp_error(evidence: DivergenceEstimate | PooledEstimate) -> tuple[float, float]:
    """(estimate, standard error) of a pooled or one-set ``dp`` statistic (the set's smoothed log-ratio)."""
    if isinstance(evidence, PooledEstimate):
        return evidence.estimate, evidence.standard_error
    if evidence.coupled:
        cells = np.asarray(evidence.details["cells"])
        _, variance = paired_ratio.smoothed_log_ratio(cells, evidence.delta)
    else:
        _, variance_p, variance_q = binomial_ratio.smoothed_log_ratio(*evidence._counts(), evidence.delta)
        variance = variance_p + variance_q
    return evidence.estimate, float(np.sqrt(variance / evidence.n))


def check_options(draw, finalists: list[Candidate], attacks: list[Attack], target: Target, sizes: StageSizes,
           chunk: int, n_jobs: int) -> list[Option]:
    """The statistics the check stage offers, with their check estimates and standard errors.

    ``kl``, ``renyi``, ``ipm``: each finalist's witness.  ``dp``: the
    minimum-variance pools of every usable set S_j with its subsets S_{j+1},
    ... (a score that orders the likelihood ratio gives them at least S_j's
    log-ratio), and the fitted set of every attack that no pool starts from.
    """
    totals = accumulate(draw, finalists, attacks, sizes.check, "check", target, chunk, n_jobs)
    if not isinstance(divergence_of(target), DP):
        z = float(ndtri(SELECTION_LEVEL))
        options = []
        for i, (total, coupled) in totals.items():
            evidence = summed_estimate(total, finalists[i], target, coupled)
            event = total.separating_event() if isinstance(total, WitnessMoments) else None
            if event is not None:  # no spread: its separating event's counts (event_attack)
                evidence = count_estimate(np.array([0, total.n_p, 0, 0]), target, finalists[i].function_class, coupled)
            if evidence.event:
                options.append(Option(i, None, evidence.estimate, np.nan, evidence, event))
                continue
            width = evidence.estimate - evidence.lower_bound(SELECTION_LEVEL)
            usable = not evidence.caveat and np.isfinite(width)
            options.append(Option(i, None, evidence.estimate if usable else -np.inf, width / z if usable else np.inf))
        return options
    fitted, pools = [], []
    for i, (moments, coupled) in totals.items():
        starts = _pools(moments, target.delta, coupled)
        for weights in starts.values():
            pools.append(_dp_option(i, weights, summed_estimate(moments, finalists[i], target, coupled, weights)))
        if attacks[i].fitted not in starts:
            weights = np.eye(attacks[i].cuts.size)[attacks[i].fitted]
            fitted.append(_dp_option(i, weights, summed_estimate(moments, finalists[i], target, coupled, weights)))
    return fitted + pools


def _dp_option(finalist: int, weights: np.ndarray, evidence: DivergenceEstimate | PooledEstimate) -> Option:
    """A ``dp`` statistic of the check stage; a one-set statistic keeps its counts (:func:`set_promise`)."""
    counts = evidence if isinstance(evidence, DivergenceEstimate) else None
    return Option(finalist, weights, *_dp_error(evidence), counts=counts)


def _pools(moments: pooled_ratio.EventMoments, delta: float, coupled: bool) -> dict[int, np.ndarray]:
    """For every usable set S_j but the last, keyed by j, the minimum-variance weights of the usable sets
    S_j ⊇ S_{j+1} ⊇ ... when they weigh more than one set (:func:`attacks.pooled_ratio.min_variance_weights`)."""
    size = moments.in_p.size
    usable = pooled_ratio.usable_sets(moments, delta, coupled, MIN_COUNT)
    pools = {}
    for j in np.flatnonzero(usable)[:-1]:
        weights = pooled_ratio.min_variance_weights(moments, delta, coupled, MIN_COUNT, among=np.arange(size) >= j)
        weights[weights < 1e-6] = 0.0  # a set that barely counts is not pooled
        if np.count_nonzero(weights) > 1:
            pools[int(j)] = weights / weights.sum()
    return pools
