"""The held-out statistic of a fitted attack: the fit, its count on fresh outputs in chunks, and its estimate.

An attack (:class:`Attack`) is an adversary fitted on a training sample; a
``dp`` attack is graded into nested sets of its score (:func:`graded_attack`).
On outputs its fit never saw, the attack's statistic is summed over chunks
(:func:`accumulate`: nested-set counts for ``dp``, one set's cells for
``ipm`` and counted events, the witness's moments
:class:`attacks.witness_moments.WitnessMoments` for ``kl`` and ``renyi``), so
memory stays bounded at any budget, and the sum gives one held-out estimate
(:func:`summed_estimate`: :func:`count_estimate`, :func:`witness_estimate` or a
:class:`PooledEstimate` of several nested sets, :mod:`attacks.pooled_ratio`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import joblib
import numpy as np

from attacks import binomial_ratio, paired_ratio, pooled_ratio
from attacks.adversary import Adversary
from attacks.budget import STAGES, StageSizes
from attacks.candidates import Candidate, Draw, Target
from attacks.ceilings import pooled_ceiling
from attacks.clipped_witness import ClippedBetting, ClippedWitnessEstimate, StreamedWitness
from attacks.divergences import tail_count
from attacks.estimate import DivergenceEstimate, held_out_scores, moments_evidence, score_histogram
from attacks.event_divergence import smoothed_event_divergence
from attacks.evidence import NormalEstimate
from attacks.vocabulary import DP, IPM, divergence_of
from attacks.witness_moments import WitnessMoments

CHUNK = 1_000_000
"""Outputs per dataset drawn at once in the check and confirm stages."""
SUMMARY_BLOCK = 100_000
"""Outputs per dataset of a chunk one worker summarises (counts or witness moments) in the check and confirm stages."""
FIGURE_OUTPUTS = 100_000
"""Outputs per dataset of the confirm sample (the first, of its first chunk) whose scores the report's figures bin
(:func:`score_summary`)."""
# The nested sets of a dp attack (graded_attack): besides the fitted set, those holding GRADE_STEP^k of the
# training outputs of P, down to GRADE_FLOOR of them; pooled only where each has MIN_COUNT counts (and,
# coupled, as many separated pairs) in the check stage.
GRADE_STEP = 2 ** (-1 / 8)
GRADE_FLOOR = 100
POOLED = "pooled"
"""The ``kind`` of a :class:`PooledEstimate`'s plain record (a ``DivergenceEstimate``'s record has none)."""


@dataclass(frozen=True)
class Attack:
    """A fitted adversary; for ``dp`` its nested sets {s g > c_0} ⊇ {s g > c_1} ⊇ ... (s its side, g its score,
    cuts c_k ascending, ``fitted`` the index of its own set {s (g - t) > 0}); ``event``: (t, s) of the set
    {s (w - t) > 0} of a ``kl`` or ``renyi`` witness w counted instead of the witness's moments (a witness
    whose values show no spread: :meth:`attacks.witness_moments.WitnessMoments.separating_event`); ``betting``:
    the empty betting sequences of the clipped witness (:func:`attacks.clipped_witness.start_betting`, from the
    training split) where a clipped bound may serve its rows, fed by the confirm stage."""

    adversary: Adversary
    cuts: np.ndarray | None = None
    fitted: int = 0
    event: tuple[float, int] | None = None
    betting: ClippedBetting | None = None

    @property
    def counted(self) -> bool:
        """Whether the statistic is one set's counts (``ipm``, a set class, a witness's event), not moments."""
        return self.event is not None or self.adversary.threshold_ is not None

    def in_set(self, x: np.ndarray) -> np.ndarray:
        """Whether each output lies in the counted set."""
        if self.event is None:
            return self.adversary.witness(x) > 0
        threshold, side = self.event
        return side * (self.adversary.witness(x) - threshold) > 0

    def levels(self, x: np.ndarray) -> np.ndarray:
        """The number of sets each output lies in (``EventMoments.from_levels``)."""
        return np.searchsorted(self.cuts, self.adversary.side_ * self.adversary.discriminant(x), side="left")

    def moments(self, p: np.ndarray, q: np.ndarray) -> pooled_ratio.EventMoments:
        """Counts of the sets on row-aligned outputs of P and Q."""
        return pooled_ratio.EventMoments.from_levels(self.levels(p), self.levels(q), self.cuts.size)


def graded_attack(adversary: Adversary, p_train: np.ndarray) -> Attack:
    """The adversary's own set and the sets holding GRADE_STEP^k of the training outputs of P, k = 1, 2, ...,
    down to GRADE_FLOOR of them (nested sets of one score, for :mod:`attacks.pooled_ratio`)."""
    scores = adversary.side_ * adversary.discriminant(p_train)
    steps = np.arange(1, int(np.log(GRADE_FLOOR / scores.size) / np.log(GRADE_STEP)) + 1)
    graded = np.quantile(scores, 1.0 - GRADE_STEP ** steps, method="lower")
    own = adversary.side_ * adversary.threshold_
    cuts = np.unique(np.r_[own, graded])
    return Attack(adversary, cuts, int(np.searchsorted(cuts, own)))


@dataclass(frozen=True, kw_only=True)
class PooledEstimate(NormalEstimate):
    """A lower bound on epsilon from a weighted mean of the log-ratios of nested sets (:mod:`attacks.pooled_ratio`).

    Evidence (:class:`attacks.evidence.Evidence`): Wald bounds estimate -+ z se, and the
    one-sided p-value of H0: sum_k w_k log((P(S_k) - delta) / Q(S_k)) <= claim
    (:class:`attacks.evidence.NormalEstimate`).  ``estimate``, ``standard_error``
    and ``caveat`` may be given in that order; the other fields by name.
    """

    n: int
    weights: tuple[float, ...]
    delta: float = 0.0
    coupled: bool = False
    divergence: str = "dp"
    details: dict = field(default_factory=dict)

    def ceiling(self, level: float = 0.95) -> float:
        """log((1 - delta) n), above every bound of the pool at any ``level`` (:func:`attacks.ceilings.pooled_ceiling`)."""
        return pooled_ceiling(self.n, self.delta)

    def to_record(self) -> dict:
        """The estimate as plain JSON values (``kind = "pooled"``, weights a list), as
        :meth:`attacks.estimate.DivergenceEstimate.to_record` gives its own."""
        return dict(estimate=float(self.estimate), standard_error=float(self.standard_error), n=int(self.n),
                    weights=[float(w) for w in self.weights], delta=float(self.delta), coupled=bool(self.coupled),
                    caveat=self.caveat, divergence=self.divergence, details=dict(self.details), kind=POOLED)

    @classmethod
    def from_record(cls, record: Mapping) -> PooledEstimate:
        """The estimate of :meth:`to_record`'s record: bounds and p-values equal the original's."""
        values = {key: value for key, value in record.items() if key != "kind"}
        return cls(**dict(values, weights=tuple(values["weights"])))


def fit_attack(candidate: Candidate, p: np.ndarray, q: np.ndarray, target: Target, eval_size: int, coupled: bool,
               random_state: int) -> Attack:
    """The candidate's adversary fitted on p (y = 0) and q (y = 1), a ``dp`` set chosen for ``eval_size`` samples."""
    adversary = Adversary(candidate.function_class, target.divergence, alpha=target.alpha, delta=target.delta,
                          dp_eval_size=eval_size, coupled=coupled, random_state=random_state,
                          **target.class_params.get(candidate.function_class, {}))
    adversary.fit(np.vstack([p, q]), np.r_[np.zeros(len(p)), np.ones(len(q))])
    return Attack(adversary)


def fit_seed(seed: int, stage: str, candidate: Candidate) -> int:
    """The seed of a candidate's fit in a stage: a function of (seed, stage, candidate) only, so results do not
    depend on n_jobs or on the order in which fits run."""
    key = [seed, STAGES.index(stage), candidate.pair, int(candidate.swapped), zlib.crc32(candidate.function_class.encode())]
    return int(np.random.SeedSequence(key).generate_state(1)[0] >> 1)


def event_attack(attack: Attack, moments: WitnessMoments) -> Attack:
    """The attack counting its witness's separating event where the witness's values show no spread
    (:meth:`attacks.witness_moments.WitnessMoments.separating_event`), else the attack as it is.

    A witness with one value on each law's sample gives its delta-method
    interval nothing to measure (a zero standard error); taken to be two-valued
    on the laws, it is an affine map of the event's indicator, so the event's
    count bound (:mod:`attacks.event_divergence`) bounds the class's divergence.
    The choice is made on samples the confirm stage does not see."""
    event = moments.separating_event()
    return attack if event is None else replace(attack, event=event)


def held_out_estimate(attack: Attack, candidate: Candidate, p: np.ndarray, q: np.ndarray, target: Target,
                      coupled: bool) -> DivergenceEstimate:
    """The fitted set's or witness's estimate on held-out outputs of P and Q; a ``kl`` or ``renyi`` witness whose
    values there show no spread, its separating event's (:func:`event_attack`)."""
    if not attack.counted:
        moments = WitnessMoments.from_values(attack.adversary.witness(p), attack.adversary.witness(q),
                                             target.divergence, target.alpha,
                                             log_weight_bound=attack.adversary.supremum_)
        attack = event_attack(attack, moments)
        if not attack.counted:
            return witness_estimate(moments, target, candidate.function_class, coupled)
    cells = paired_ratio.paired_counts(attack.in_set(p), attack.in_set(q))
    return count_estimate(cells, target, candidate.function_class, coupled)


def count_estimate(cells: np.ndarray, target: Target, function_class: str, coupled: bool) -> DivergenceEstimate:
    """The estimate of an attack set from its held-out cells (both, only P, only Q, neither): ``dp``, ``ipm``, or
    the event estimate of ``kl`` and ``renyi`` (:mod:`attacks.event_divergence`)."""
    cells = np.asarray(cells, dtype=np.int64)
    n = int(cells.sum())
    k_p, k_q = int(cells[0] + cells[1]), int(cells[0] + cells[2])
    divergence = divergence_of(target)
    if isinstance(divergence, IPM):
        estimate = 2.0 * (k_p - k_q) / n
    elif divergence.weighted:
        estimate = float(smoothed_event_divergence(k_p, n, k_q, n, divergence))
    else:
        estimate = float(binomial_ratio.smoothed_log_ratio(k_p, n, k_q, n, target.delta)[0])
    details = dict(k_p=k_p, n_p=n, k_q=k_q, n_q=n)
    if coupled:
        details["cells"] = [int(c) for c in cells]
    return DivergenceEstimate(estimate=float(estimate), n=n, n_test=n,
                              function_class=function_class, divergence=target.divergence, alpha=target.alpha,
                              adversary=None, details=details, delta=float(target.delta), coupled=coupled,
                              event=divergence.weighted)


def witness_estimate(moments: WitnessMoments, target: Target, function_class: str,
                     coupled: bool) -> DivergenceEstimate:
    """The ``kl`` or ``renyi`` estimate of a fixed witness from the summary of its values on held-out samples of P
    and Q (the objective, its delta-method standard error, the unseen-mass ratio and caveat of
    :func:`attacks.estimate.moments_evidence`)."""
    n = min(moments.n_p, moments.n_q)
    return DivergenceEstimate(
        estimate=moments.objective(), n=n, n_test=n, function_class=function_class,
        divergence=target.divergence, alpha=target.alpha, adversary=None, coupled=coupled,
        **moments_evidence(moments, coupled),
    )


def draw_together(draw, requests: list[tuple], n_jobs: int) -> list[Draw | None]:
    """``draw(*request)`` for every request, up to n_jobs at once: a sampler that waits on processes (a slow
    mechanism drawn in children or cluster jobs) is kept busy across pairs, not only across one pair's chunks.

    Threads only wait: the draws' numbers depend on their requests, not on the order they finish in.
    """
    threads = min(len(requests), max(joblib.effective_n_jobs(n_jobs), 1))
    if threads <= 1:
        return [draw(*request) for request in requests]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda request: draw(*request), requests))


def _chunks(n: int, chunk: int) -> list[int]:
    return [min(chunk, n - begin) for begin in range(0, n, chunk)]


def accumulate(draw, candidates: list[Candidate], attacks: list[Attack], n: int, stage: str, target: Target,
                chunk: int, n_jobs: int) -> dict[int, tuple[object, bool]]:
    """Each candidate's statistic summed over chunks of ``n`` fresh outputs of its pair (a pair drawn once per
    chunk): nested-set moments (``dp``), cells (``ipm``) or witness moments (``kl``, ``renyi``: keeping the
    ``tail_count(n) + 1`` largest log weights of Q that the tail index of all n needs); and whether every chunk
    was coupled.  Each chunk is summarised in blocks of SUMMARY_BLOCK outputs on ``n_jobs`` workers, added in
    block order (the blocks do not depend on n_jobs, so neither do the sums, rounding included).  Candidates
    whose pair failed are left out."""
    tail, threads = tail_count(n) + 1, max(joblib.effective_n_jobs(n_jobs), 1)
    totals: dict[int, tuple[object, bool]] = {}
    failed = set()
    for index, size in enumerate(_chunks(n, chunk)):
        pairs = list(dict.fromkeys(c.pair for c in candidates))
        draws = dict(zip(pairs, draw_together(draw, [(pair, size, stage, index) for pair in pairs], n_jobs)))
        failed.update(i for i, candidate in enumerate(candidates) if draws[candidate.pair] is None)
        blocks = [(i, begin) for i, candidate in enumerate(candidates) if draws[candidate.pair] is not None
                  for begin in range(0, size, SUMMARY_BLOCK)]
        parts = joblib.Parallel(n_jobs=n_jobs)(
            joblib.delayed(_summary)(attacks[i], *(x[begin:begin + SUMMARY_BLOCK]
                                                   for x in candidates[i].laws(draws[candidates[i].pair])),
                                     target, tail, stage, threads)
            for i, begin in blocks)
        for (i, _), part in zip(blocks, parts):
            coupled = draws[candidates[i].pair].coupled
            totals[i] = (totals[i][0] + part, totals[i][1] and coupled) if i in totals else (part, coupled)
    return {i: value for i, value in totals.items() if i not in failed}


def _summary(attack: Attack, p: np.ndarray, q: np.ndarray, target: Target, tail: int, stage: str, threads: int = 1):
    """What the statistic keeps of one block, summed with ``+``: nested-set moments (``dp``), one set's cells
    (``ipm``, and ``kl`` or ``renyi`` counted on an event), or the witness moments with the ``tail`` largest log
    weights of Q (``kl``, ``renyi``), in the confirm stage with the clipped witness's rescaled values for its
    betting sequences where the attack has them (:class:`attacks.clipped_witness.StreamedWitness`, fed on
    ``threads`` threads)."""
    if isinstance(divergence_of(target), DP):
        return attack.moments(p, q)
    if attack.counted:
        return paired_ratio.paired_counts(attack.in_set(p), attack.in_set(q))
    w_p, w_q = attack.adversary.witness(p), attack.adversary.witness(q)
    moments = WitnessMoments.from_values(w_p, w_q, target.divergence, target.alpha, tail, attack.adversary.supremum_)
    if attack.betting is None or stage != "confirm":
        return moments
    return StreamedWitness.block(moments, attack.betting, w_p, w_q, threads)


def summed_estimate(total, candidate: Candidate, target: Target, coupled: bool,
               weights: np.ndarray | None = None) -> DivergenceEstimate | PooledEstimate:
    """The evidence of a summed statistic (:func:`accumulate`): a set's, a witness's (with its clipped betting
    bound, :class:`attacks.clipped_witness.ClippedWitnessEstimate`, where it was streamed), or a pool's."""
    if isinstance(total, StreamedWitness):
        return ClippedWitnessEstimate(witness_estimate(total.moments, target, candidate.function_class, coupled),
                                      total.fed())
    if isinstance(total, WitnessMoments):
        return witness_estimate(total, target, candidate.function_class, coupled)
    if not isinstance(divergence_of(target), DP):
        return count_estimate(total, target, candidate.function_class, coupled)
    if np.count_nonzero(weights) > 1:
        fields = dict(n=total.n, weights=tuple(float(w) for w in weights), delta=target.delta, coupled=coupled)
        try:
            estimate, error = pooled_ratio.pooled_log_ratio(total, weights, target.delta, coupled)
        except ValueError as error:  # a pooled set holds no output of Q (or too few of P) in this sample
            return PooledEstimate(np.nan, np.nan, str(error), **fields)
        return PooledEstimate(estimate, error, **fields)
    return count_estimate(total.cells(int(np.argmax(weights))), target, candidate.function_class, coupled)


def confirm_statistic(draw, winner: Candidate, attack: Attack, weights: np.ndarray | None, target: Target, sizes: StageSizes,
             chunk: int, n_jobs: int) -> DivergenceEstimate | PooledEstimate | None:
    """The chosen statistic on ``sizes.confirm`` fresh outputs of the winner's pair, counted in chunks; its
    ``details["scores"]``: the winner's scores on the first :data:`FIGURE_OUTPUTS` of them (:func:`score_summary`)."""
    first, coupled_first = [], []

    def keep_first(pair: int, n: int, stage: str, index: int) -> Draw | None:
        samples = draw(pair, n, stage, index)
        if index == 0 and samples is not None:
            first.extend(x[:FIGURE_OUTPUTS].copy() for x in winner.laws(samples))
            coupled_first.append(samples.coupled)
        return samples

    totals = accumulate(keep_first, [winner], [attack], sizes.confirm, "confirm", target, chunk, n_jobs)
    if 0 not in totals:
        return None
    total, coupled = totals[0]
    evidence = summed_estimate(total, winner, target, coupled, weights)
    return with_scores(evidence, score_summary(attack, *first, weights, coupled_first[0]))


def with_scores(evidence, scores: dict):
    """The evidence with ``details["scores"]`` (:func:`score_summary`)."""
    if isinstance(evidence, ClippedWitnessEstimate):
        return evidence.with_details(scores=scores)
    return replace(evidence, details={**evidence.details, "scores": scores})


def score_summary(attack: Attack, p: np.ndarray, q: np.ndarray, weights: np.ndarray | None, coupled: bool) -> dict:
    """The attack's scores on outputs of P and Q binned (:func:`attacks.estimate.score_histogram`) for the
    report's witness and ROC figures and the Gaussian-DP route (independent samples only): a ``dp`` attack's
    threshold is the cut of its most weighted nested set, an ``ipm`` attack's its own set's, a ``kl`` or
    ``renyi`` witness has none."""
    adversary = attack.adversary
    scores = held_out_scores(adversary, adversary.witness(p), adversary.witness(q), p, q)
    if attack.cuts is None:
        return score_histogram(*scores, adversary.threshold_, adversary.side_, independent=not coupled)
    return score_histogram(*scores, float(attack.cuts[int(np.argmax(weights))]), 1, independent=not coupled)
