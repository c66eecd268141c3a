"""The staged search: many candidate attacks screened on small samples, one statistic confirmed on a large fresh one.

A claim about a divergence (``dp``, ``kl``, ``renyi`` or ``ipm``) and a class
C is attacked by *candidates*: a neighbouring pair, a direction (P = M(d),
Q = M(d'), or swapped) and an attack class A contained in C
(:meth:`attacks.classes.FunctionClass.is_contained_in`) that estimates the
divergence.  Four stages, each on samples no earlier stage saw:

1. **screen**: every candidate's adversary is fitted on half of a small
   sample of its pair (a ``dp`` set chosen for the other half's size, so
   that the screen can measure it: sets chosen for the confirm size from a
   small sample are rare tails whose screen counts rank the pairs at random,
   report-noisy-max 3 at 21 M picked a 0.15 pair over the 0.25 ones) and
   scored on the other half; each gets the bound its attack is projected to
   reach on the confirm sample (:func:`projected_bound`) and that bound's noise;
2. **train**: the best class of each (pair, direction) whose projection is
   within two standard errors of the best one's (at most ``MAX_FINALISTS``)
   is fitted again on a larger sample.  A ``dp`` attack is graded into
   nested sets {s g > c_0} ⊇ {s g > c_1} ⊇ ... of its oriented score
   (:func:`graded_attack`);
3. **check**: the finalists are scored on fresh samples and ONE statistic is
   chosen by its *promise* (:func:`promise`): for ``kl``, ``renyi`` and
   ``ipm`` the fitted witness of a finalist (for ``kl`` and ``renyi`` the set
   of a set class, or the separating event of a witness whose check values
   show no spread, :func:`event_attack`: counted, not summarised by moments);
   for ``dp`` the fitted set of a finalist or a minimum-variance pool of its
   nested sets (:mod:`attacks.pooled_ratio`);
4. **confirm**: that statistic alone is computed on a large fresh sample of
   its pair, counted in chunks (memory bounded at any budget: ``dp`` and
   ``ipm`` keep counts, ``kl`` and ``renyi`` the witness's summary
   :class:`attacks.witness_moments.WitnessMoments`, of fixed size but for
   its 3 sqrt(n) largest log weights of Q), and one lower confidence bound
   comes out.

No choice sees the confirm sample, so the confirm statistic is a held-out
estimate of a fixed witness: its intervals are those of
:mod:`attacks.estimate` (``kl`` / ``renyi``: the variational bound with its
unseen-mass term, or an event's count bound, :mod:`attacks.event_divergence`; ``ipm``: the difference bounds on the set's counts;
``dp``: the score / Clopper-Pearson bounds on one set's counts, or the
pooled delta-method bound of :func:`attacks.pooled_ratio.pooled_lower_bound`),
valid whatever the search did, and one statistic per claim needs no
correction for the candidates it was chosen from.

Samples come from a *sampling callable* (:class:`Sampler`), so this module
never imports :mod:`audit`: ``sample(pair, n, stage, chunk)`` returns a
:class:`Draw` (n outputs on d and on d', and whether they are coupled pairs)
and must give independent draws for different (stage, chunk) keys.  A
sampler that raises costs its pair (``StagedResult.failures``), not the
search.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol

import joblib
import numpy as np
from scipy.stats import norm

from attacks import binomial_ratio, paired_ratio, pooled_ratio
from attacks.adversary import Adversary
from attacks.classes import parse_function_class
from attacks.divergences import tail_count
from attacks.estimate import DivergenceEstimate, held_out_scores, moments_evidence, score_histogram
from attacks.budget import DEFAULT_SHARES, STAGES, train_size
from attacks.ceilings import pooled_ceiling
from attacks.event_divergence import projected_event_bound, smoothed_event_divergence
from attacks.evidence import NormalEstimate
from attacks.vocabulary import DP, IPM, divergence_of
from attacks.witness_moments import WitnessMoments

MAX_FINALISTS = 4
CHUNK = 1_000_000
"""Outputs per dataset drawn at once in the check and confirm stages."""
SUMMARY_BLOCK = 100_000
"""Outputs per dataset of a chunk one worker summarises (counts or witness moments) in the check and confirm stages."""
FIGURE_OUTPUTS = 100_000
"""Outputs per dataset of the confirm sample (the first, of its first chunk) whose scores the report's figures bin
(:func:`score_summary`)."""
SCREEN_FIT = 20_000
"""Most training rows per law of a screen fit: a cheap fit that ranks the candidates (the L-BFGS, tree and scale
searches cost in proportion to the rows), while the held-out half that projects each one keeps its full size."""
SELECTION_LEVEL = 0.95
# The nested sets of a dp attack (graded_attack): besides the fitted set, those holding GRADE_STEP^k of the
# training outputs of P, down to GRADE_FLOOR of them; pooled only where each has MIN_COUNT counts (and,
# coupled, as many separated pairs) in the check stage.
GRADE_STEP = 2 ** (-1 / 8)
GRADE_FLOOR = 100
MIN_COUNT = 100
POOLED = "pooled"
"""The ``kind`` of a :class:`PooledEstimate`'s plain record (a ``DivergenceEstimate``'s record has none)."""


@dataclass(frozen=True)
class Draw:
    """n outputs on d and on d' of one pair; ``coupled``: row i of both drawn from the same random numbers."""

    d: np.ndarray
    d_prime: np.ndarray
    coupled: bool


class Sampler(Protocol):
    """``sample(pair, n, stage, chunk)``: n fresh outputs on pair ``pair``'s two datasets.

    Draws for different ``(stage, chunk)`` keys must be independent; the same
    key must give the same draw (reproducibility).
    """

    def __call__(self, pair: int, n: int, stage: str, chunk: int) -> Draw: ...


@dataclass(frozen=True)
class StageSizes:
    """Outputs per dataset of each stage: ``screen`` on every pair, the others on the finalists' pairs."""

    screen: int
    train: int
    check: int
    confirm: int

    @classmethod
    def from_budget(cls, n_samples: int, shares: Mapping[str, float] | None = None) -> StageSizes:
        """Split ``n_samples`` (outputs per dataset of a pair over all four stages) by ``shares`` (summing to 1)."""
        shares = dict(DEFAULT_SHARES if shares is None else shares)
        if sorted(shares) != sorted(STAGES) or not all(0 < v < 1 for v in shares.values()) \
                or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-9):
            raise ValueError(
                f"shares must give each of {list(STAGES)} a number in (0, 1), summing to 1. Found {shares!r}."
            )
        sizes = {stage: int(shares[stage] * n_samples) for stage in STAGES}
        if min(sizes.values()) < 20:
            raise ValueError(
                f"every stage needs at least 20 outputs per dataset; n_samples={n_samples} with shares {shares!r} "
                f"gives {sizes}. Raise n_samples or the smallest share."
            )
        return cls(**sizes)

    @classmethod
    def from_split(cls, n_samples: int, train_fraction: float) -> StageSizes:
        """The stages of the ``every`` policy (:func:`confirm_every`): no screen, no check; ``train_fraction``
        of ``n_samples`` trains each candidate (rounded, at least 1 and at most n_samples - 1), the rest confirms it."""
        train = train_size(n_samples, train_fraction)
        return cls(screen=0, train=train, check=0, confirm=n_samples - train)


@dataclass(frozen=True)
class Target:
    """What a claim asks the search for: a divergence (alpha, delta) and the attack classes that may refute it."""

    divergence: str
    classes: tuple[str, ...]
    alpha: float | None = None
    delta: float = 0.0
    class_params: Mapping[str, Mapping] = field(default_factory=dict)

    @classmethod
    def for_claim(cls, divergence: str, claim_class: str, attack_classes: Sequence[str], alpha: float | None = None,
                  delta: float = 0.0, class_params: Mapping[str, Mapping] | None = None,
                  layer: str | None = None) -> Target:
        """The target of a claim on ``claim_class``: the attack classes contained in it that estimate the divergence
        (of one ``layer`` of :data:`attacks.classes.LAYERS` only, when given)."""
        claimed = parse_function_class(claim_class)
        usable = tuple(name for name in attack_classes
                       if divergence in parse_function_class(name).divergences
                       and parse_function_class(name).is_contained_in(claimed)
                       and layer in (None, parse_function_class(name).layer))
        return cls(divergence, usable, alpha, delta, dict(class_params or {}))


@dataclass(frozen=True)
class Candidate:
    """A pair (index), a direction (``swapped``: P = M(d'), Q = M(d)) and an attack class."""

    pair: int
    swapped: bool
    function_class: str

    @property
    def direction(self) -> str:
        return "Q|P" if self.swapped else "P|Q"

    def laws(self, draw: Draw) -> tuple[np.ndarray, np.ndarray]:
        """(outputs of P, outputs of Q) of a draw of this candidate's pair."""
        return (draw.d_prime, draw.d) if self.swapped else (draw.d, draw.d_prime)


@dataclass(frozen=True)
class Attack:
    """A fitted adversary; for ``dp`` its nested sets {s g > c_0} ⊇ {s g > c_1} ⊇ ... (s its side, g its score,
    cuts c_k ascending, ``fitted`` the index of its own set {s (g - t) > 0}); ``event``: (t, s) of the set
    {s (w - t) > 0} of a ``kl`` or ``renyi`` witness w counted instead of the witness's moments (a witness
    whose values show no spread: :meth:`attacks.witness_moments.WitnessMoments.separating_event`)."""

    adversary: Adversary
    cuts: np.ndarray | None = None
    fitted: int = 0
    event: tuple[float, int] | None = None

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


@dataclass(frozen=True)
class Option:
    """A statistic the check stage may choose: a finalist and, for ``dp``, the weights on its nested sets;
    ``counts``: a one-set statistic's check evidence (its counts: a ``dp`` set, a ``kl`` or ``renyi`` event), None
    for the others; ``event``: (t, s) of a witness's separating event (:func:`event_attack`) that the confirm
    stage counts in place of the witness's moments."""

    finalist: int
    weights: np.ndarray | None
    estimate: float
    error: float
    family_size: int = 1
    counts: DivergenceEstimate | None = None
    event: tuple[float, int] | None = None

    def promise(self, check: int, confirm: int) -> float:
        """The confirm bound this statistic is expected to reach: a one-set statistic's projected count bound
        (:func:`set_promise`), the others' :func:`promise`."""
        if self.counts is not None:
            return set_promise(self.counts, confirm, self.family_size)
        return promise(self.estimate, self.error, check, confirm, self.family_size)


@dataclass(frozen=True)
class StagedResult:
    """The outcome of :func:`staged_search` for one target.

    ``evidence`` is the confirm statistic (a :class:`DivergenceEstimate` or a
    :class:`PooledEstimate`), None when no candidate could be sampled and
    fitted (``error`` says why); ``failures`` maps a pair to its sampler's error.  ``rounds`` and ``stop``:
    the rounds of a sequential search (:func:`attacks.sequential.sequential_search`) and why it stopped (None
    for one fixed-design search).
    """

    target: Target
    sizes: StageSizes
    winner: Candidate | None
    evidence: DivergenceEstimate | PooledEstimate | None
    screened: int
    finalists: tuple[Candidate, ...]
    sets_pooled: int = 0
    failures: Mapping[int, str] = field(default_factory=dict)
    error: str | None = None
    rounds: int = 1
    stop: str | None = None


def staged_search(sample: Sampler, n_pairs: int, target: Target, sizes: StageSizes, *, seed: int = 0,
                  chunk: int = CHUNK, n_jobs: int = 1,
                  on_screened: Callable[[int], object] = lambda outputs: None,
                  confirm: Callable | None = None) -> StagedResult:
    """Screen, train, check and confirm the candidates of one target (module docstring).

    Parameters
    ----------
    sample : Sampler
        ``sample(pair, n, stage, chunk) -> Draw`` for pairs 0 .. n_pairs - 1.
    n_pairs : int
    target : Target
        Its ``classes`` are the candidates' attack classes.
    sizes : StageSizes
    seed : int
        Seeds the adversaries' fits (:func:`fit_seed`; the samples are the sampler's).
    chunk : int
        Outputs per dataset drawn at once in the check and confirm stages.
    n_jobs : int
        joblib workers for the screen and train fits and the check and confirm
        summaries (the active joblib backend); the results do not depend on it.
    on_screened : callable, optional
        Called once the screen is over with the outputs per dataset the
        later stages will draw (:func:`later_outputs`), e.g. for a progress bar.
    confirm : callable, optional
        The confirm stage, called as :func:`confirm_statistic` is (the default): e.g. one that looks as it draws
        (:func:`attacks.sequential.anytime_confirm`).

    Returns
    -------
    StagedResult
    """
    failures: dict[int, str] = {}

    def draw(pair: int, n: int, stage: str, index: int = 0) -> Draw | None:
        if pair in failures:
            return None
        try:
            return sample(pair, n, stage, index)
        except Exception as error:  # the audited code failed: its pair is out of the search
            failures[pair] = " ".join(f"{type(error).__name__}: {error}".split())
            return None

    scored = _screen(draw, n_pairs, target, sizes, seed, n_jobs)
    if not scored:
        return StagedResult(target, sizes, None, None, 0, (), failures=failures,
                            error="no candidate could be sampled and fitted: " + "; ".join(failures.values()))
    finalists = _finalists(scored)
    on_screened(later_outputs(sizes, len({candidate.pair for candidate in finalists})))
    attacks = _train(draw, finalists, target, sizes, seed, n_jobs)
    kept = [i for i, attack in enumerate(attacks) if attack is not None]
    if not kept:
        return StagedResult(target, sizes, None, None, len(scored), tuple(finalists), failures=failures,
                            error="sampling failed for every finalist: " + "; ".join(failures.values()))
    options = _check(draw, [finalists[i] for i in kept], [attacks[i] for i in kept], target, sizes, chunk, n_jobs)
    if not options:
        return StagedResult(target, sizes, None, None, len(scored), tuple(finalists), failures=failures,
                            error="sampling failed for every finalist in the check stage")
    best = max(options, key=lambda option: option.promise(sizes.check, sizes.confirm))
    winner, attack = finalists[kept[best.finalist]], attacks[kept[best.finalist]]
    if best.event is not None:
        attack = replace(attack, event=best.event)
    evidence = (confirm or confirm_statistic)(draw, winner, attack, best.weights, target, sizes, chunk, n_jobs)
    if evidence is None:
        return StagedResult(target, sizes, winner, None, len(scored), tuple(finalists), failures=failures,
                            error=f"sampling pair {winner.pair} failed in the confirm stage: {failures[winner.pair]}")
    pooled = 0 if best.weights is None else int(np.count_nonzero(best.weights))
    return StagedResult(target, sizes, winner, evidence, len(scored), tuple(finalists), pooled, failures)


def confirm_every(sample: Sampler, pair: int, target: Target, sizes: StageSizes, *, seed: int = 0,
                  chunk: int = CHUNK, n_jobs: int = 1) -> list[tuple[Candidate, DivergenceEstimate | str]]:
    """Every candidate of one pair (both directions x ``target.classes``) trained and confirmed: no choice.

    Each candidate is fitted on ``sizes.train`` outputs of the pair (a ``dp``
    set chosen for the confirm size) and its own fitted set or witness is
    counted on ``sizes.confirm`` fresh outputs, as the winner of
    :func:`staged_search` is (no pool: pooling would choose among sets), so
    every row is a held-out estimate of a fixed statistic and Holm's
    correction over the rows covers the many of them.  The sampler's
    exceptions propagate (the pair has no row without its samples); an attack
    whose fit fails gives its message in place of its evidence.

    Returns
    -------
    list of (Candidate, DivergenceEstimate or str)
        In candidate order (direction, then class); ``details["scores"]``
        holds each statistic's binned scores on the first
        :data:`FIGURE_OUTPUTS` confirm outputs (:func:`score_summary`).
    """
    candidates = [Candidate(pair, swapped, name) for swapped in (False, True) for name in target.classes]
    train = sample(pair, sizes.train, "train", 0)
    fitted = joblib.Parallel(n_jobs=n_jobs)(
        joblib.delayed(_train_or_error)(candidate, train, target, sizes, seed) for candidate in candidates)
    del train
    kept = [i for i, attack in enumerate(fitted) if isinstance(attack, Attack)]
    first: list[Draw] = []

    def keep_first(pair: int, n: int, stage: str, index: int) -> Draw:
        samples = sample(pair, n, stage, index)
        if index == 0:
            first.append(Draw(samples.d[:FIGURE_OUTPUTS].copy(), samples.d_prime[:FIGURE_OUTPUTS].copy(),
                              samples.coupled))
        return samples

    totals = _accumulate(keep_first, [candidates[i] for i in kept], [fitted[i] for i in kept], sizes.confirm,
                         "confirm", target, chunk, n_jobs)
    results: list[tuple[Candidate, DivergenceEstimate | str]] = [
        (candidate, attack) for candidate, attack in zip(candidates, fitted) if isinstance(attack, str)]
    for position, i in enumerate(kept):
        candidate, attack = candidates[i], fitted[i]
        weights = None if attack.cuts is None else np.eye(attack.cuts.size)[attack.fitted]
        total, coupled = totals[position]
        evidence = _statistic(total, candidate, target, coupled, weights)
        scores = score_summary(attack, *candidate.laws(first[0]), weights, first[0].coupled)
        results.append((candidate, replace(evidence, details={**evidence.details, "scores": scores})))
    return sorted(results, key=lambda item: candidates.index(item[0]))


def _train_or_error(candidate: Candidate, train: Draw, target: Target, sizes: StageSizes, seed: int) -> Attack | str:
    """A candidate fitted on its pair's train sample (a ``dp`` attack: its own set alone, ungraded), or the message
    of the fit's failure (an attack that fails costs its candidate only)."""
    p, q = candidate.laws(train)
    try:
        attack = fit_attack(candidate, p, q, target, sizes.confirm, train.coupled, fit_seed(seed, "train", candidate))
    except Exception as error:
        return f"attack {candidate.function_class}/{target.divergence} failed: " + " ".join(
            f"{type(error).__name__}: {error}".split())
    if divergence_of(target).weighted and not attack.counted:  # chosen on the training sample
        return event_attack(attack, WitnessMoments.from_values(attack.adversary.witness(p), attack.adversary.witness(q),
                                                               target.divergence, target.alpha))
    if not isinstance(divergence_of(target), DP):
        return attack
    adversary = attack.adversary
    return Attack(adversary, np.array([adversary.side_ * adversary.threshold_]))


def later_outputs(sizes: StageSizes, pairs: int) -> int:
    """Outputs per dataset the train, check and confirm stages draw when the finalists lie on ``pairs`` pairs
    (train and check on each, confirm on the winner's)."""
    return pairs * (sizes.train + sizes.check) + sizes.confirm


def promise(estimate: float, error: float, check: int, confirm: int, family_size: int) -> float:
    """The confirm bound a statistic is expected to reach from its check estimate and standard error.

    The estimate less z(1 - 0.05 / family_size) check errors (the best of a
    family was likely lucky) and z(SELECTION_LEVEL) errors of the confirm
    estimate, sqrt(check / confirm) times the check error (DP-Sniper's check
    stage, Bichsel et al. 2021, with a Bonferroni allowance for the choice).
    """
    selection = norm.ppf(1.0 - (1.0 - SELECTION_LEVEL) / family_size)
    return estimate - (selection + norm.ppf(SELECTION_LEVEL) * np.sqrt(check / confirm)) * error


def set_promise(evidence: DivergenceEstimate, confirm: int, family_size: int) -> float:
    """The confirm bound one ``dp`` set is expected to reach from its check counts.

    The count bound projected to ``confirm`` outputs
    (:func:`attacks.binomial_ratio.projected_lower_bound` or its paired twin:
    the delta-method spread at the check *and* the confirm size, or the
    Clopper-Pearson split of the projected counts where they are too few
    for the score bound, as the confirm bound will be) at the selection
    level z(1 - 0.05 / family_size).  Unlike :func:`promise` it does not
    read the smoothed log-ratio's standard error, which a set with no
    output of Q inflates by its half count: a set holding 3 % of P's check
    outputs and none of Q's (a float's porous support, Mironov 2012) then
    promised less than a set with a ratio of 1.1, although its confirm count
    bound is the larger.
    """
    level = 1.0 - (1.0 - SELECTION_LEVEL) / family_size
    if evidence.event:
        return float(projected_event_bound(*evidence._counts(), divergence_of(evidence), level, confirm))
    if evidence.coupled:
        return float(paired_ratio.projected_lower_bound(np.asarray(evidence.details["cells"]), evidence.delta,
                                                        level, confirm))
    return float(binomial_ratio.projected_lower_bound(*evidence._counts(), evidence.delta, level, confirm))


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
    z = float(norm.ppf(SELECTION_LEVEL))
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


def _screen_one(candidate: Candidate, samples: Draw, target: Target, sizes: StageSizes,
                seed: int) -> tuple[Candidate, float, float]:
    """A candidate fitted cheaply on the first half of its pair's screen sample, at most :data:`SCREEN_FIT` rows
    of it (a ``dp`` set chosen for the second half's size), and projected from the whole second half to the
    confirm size.  The screen only ranks: the finalists get the full fit on the train sample."""
    half = sizes.screen // 2
    fit = min(half, SCREEN_FIT)
    p, q = candidate.laws(samples)
    attack = fit_attack(candidate, p[:fit], q[:fit], target, len(p) - half, samples.coupled,
                        fit_seed(seed, "screen", candidate))
    evidence = held_out_estimate(attack, candidate, p[half:], q[half:], target, samples.coupled)
    return (candidate, *projected_bound(evidence, sizes.confirm))


def _screen(draw, n_pairs: int, target: Target, sizes: StageSizes, seed: int,
            n_jobs: int) -> list[tuple[Candidate, float, float]]:
    """(candidate, projected bound, its standard error) of every candidate whose pair could be sampled; the
    pairs drawn together in groups of up to min(n_jobs, MAX_FINALISTS) (the memory check's pairs held at once),
    each pair's candidates fitted in parallel."""
    scored = []
    group = min(MAX_FINALISTS, max(joblib.effective_n_jobs(n_jobs), 1))
    for first in range(0, n_pairs, group):
        pairs = range(first, min(first + group, n_pairs))
        for pair, samples in zip(pairs, _draw_together(draw, [(pair, sizes.screen, "screen") for pair in pairs],
                                                       n_jobs)):
            if samples is None:
                continue
            candidates = [Candidate(pair, swapped, name) for swapped in (False, True) for name in target.classes]
            scored += joblib.Parallel(n_jobs=n_jobs)(
                joblib.delayed(_screen_one)(candidate, samples, target, sizes, seed) for candidate in candidates)
    return scored


def _draw_together(draw, requests: list[tuple], n_jobs: int) -> list[Draw | None]:
    """``draw(*request)`` for every request, up to n_jobs at once: a sampler that waits on processes (a slow
    mechanism drawn in children or cluster jobs) is kept busy across pairs, not only across one pair's chunks.

    Threads only wait: the draws' numbers depend on their requests, not on the order they finish in.
    """
    threads = min(len(requests), max(joblib.effective_n_jobs(n_jobs), 1))
    if threads <= 1:
        return [draw(*request) for request in requests]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda request: draw(*request), requests))


def _finalists(scored: list[tuple[Candidate, float, float]]) -> list[Candidate]:
    """The best class of each (pair, direction) whose projected bound is within two standard errors of the best
    one's, at most MAX_FINALISTS: classes on the same pair mostly find the same set."""
    ranked = sorted(scored, key=lambda item: -item[1])
    _, best, best_error = ranked[0]
    kept: dict[tuple[int, bool], Candidate] = {}
    for candidate, projected, error in ranked:
        close = not np.isfinite(best) or projected >= best - 2 * np.hypot(best_error, error)
        if close:
            kept.setdefault((candidate.pair, candidate.swapped), candidate)
    return list(kept.values())[:MAX_FINALISTS]


def _train_one(candidate: Candidate, train: Draw, target: Target, sizes: StageSizes, seed: int) -> Attack:
    """A finalist fitted on its pair's train sample; a ``dp`` attack graded into nested sets."""
    p, q = candidate.laws(train)
    attack = fit_attack(candidate, p, q, target, sizes.confirm, train.coupled, fit_seed(seed, "train", candidate))
    return graded_attack(attack.adversary, p) if isinstance(divergence_of(target), DP) else attack


def _train(draw, finalists: list[Candidate], target: Target, sizes: StageSizes, seed: int,
           n_jobs: int) -> list[Attack | None]:
    """Each finalist's attack fitted on ``sizes.train`` fresh outputs of its pair (None where sampling failed)."""
    pairs = list(dict.fromkeys(c.pair for c in finalists))
    samples = dict(zip(pairs, _draw_together(draw, [(pair, sizes.train, "train") for pair in pairs], n_jobs)))
    fitted = iter(joblib.Parallel(n_jobs=n_jobs)(
        joblib.delayed(_train_one)(c, samples[c.pair], target, sizes, seed)
        for c in finalists if samples[c.pair] is not None))
    return [None if samples[c.pair] is None else next(fitted) for c in finalists]


def _chunks(n: int, chunk: int) -> list[int]:
    return [min(chunk, n - begin) for begin in range(0, n, chunk)]


def _accumulate(draw, candidates: list[Candidate], attacks: list[Attack], n: int, stage: str, target: Target,
                chunk: int, n_jobs: int) -> dict[int, tuple[object, bool]]:
    """Each candidate's statistic summed over chunks of ``n`` fresh outputs of its pair (a pair drawn once per
    chunk): nested-set moments (``dp``), cells (``ipm``) or witness moments (``kl``, ``renyi``: keeping the
    ``tail_count(n) + 1`` largest log weights of Q that the tail index of all n needs); and whether every chunk
    was coupled.  Each chunk is summarised in blocks of SUMMARY_BLOCK outputs on ``n_jobs`` workers, added in
    block order (the blocks do not depend on n_jobs, so neither do the sums, rounding included).  Candidates
    whose pair failed are left out."""
    tail = tail_count(n) + 1
    totals: dict[int, tuple[object, bool]] = {}
    failed = set()
    for index, size in enumerate(_chunks(n, chunk)):
        pairs = list(dict.fromkeys(c.pair for c in candidates))
        draws = dict(zip(pairs, _draw_together(draw, [(pair, size, stage, index) for pair in pairs], n_jobs)))
        failed.update(i for i, candidate in enumerate(candidates) if draws[candidate.pair] is None)
        blocks = [(i, begin) for i, candidate in enumerate(candidates) if draws[candidate.pair] is not None
                  for begin in range(0, size, SUMMARY_BLOCK)]
        parts = joblib.Parallel(n_jobs=n_jobs)(
            joblib.delayed(_summary)(attacks[i], *(x[begin:begin + SUMMARY_BLOCK]
                                                   for x in candidates[i].laws(draws[candidates[i].pair])),
                                     target, tail)
            for i, begin in blocks)
        for (i, _), part in zip(blocks, parts):
            coupled = draws[candidates[i].pair].coupled
            totals[i] = (totals[i][0] + part, totals[i][1] and coupled) if i in totals else (part, coupled)
    return {i: value for i, value in totals.items() if i not in failed}


def _summary(attack: Attack, p: np.ndarray, q: np.ndarray, target: Target, tail: int):
    """What the statistic keeps of one block, summed with ``+``: nested-set moments (``dp``), one set's cells
    (``ipm``, and ``kl`` or ``renyi`` counted on an event), or the witness moments with the ``tail`` largest log
    weights of Q (``kl``, ``renyi``)."""
    if isinstance(divergence_of(target), DP):
        return attack.moments(p, q)
    if attack.counted:
        return paired_ratio.paired_counts(attack.in_set(p), attack.in_set(q))
    return WitnessMoments.from_values(attack.adversary.witness(p), attack.adversary.witness(q), target.divergence,
                                      target.alpha, tail, attack.adversary.supremum_)


def _statistic(total, candidate: Candidate, target: Target, coupled: bool,
               weights: np.ndarray | None = None) -> DivergenceEstimate | PooledEstimate:
    """The evidence of a summed statistic (:func:`_accumulate`): a set's, a witness's, or a pool's."""
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


def _check(draw, finalists: list[Candidate], attacks: list[Attack], target: Target, sizes: StageSizes,
           chunk: int, n_jobs: int) -> list[Option]:
    """The statistics the check stage offers, with their check estimates and standard errors.

    ``kl``, ``renyi``, ``ipm``: each finalist's witness (one family).  ``dp``:
    two families, the minimum-variance pools of every usable set S_j with its
    subsets S_{j+1}, ... (a score that orders the likelihood ratio gives them
    at least S_j's log-ratio), and the fitted set of every attack that no pool
    starts from; each is corrected for its own family's size (:func:`promise`).
    """
    totals = _accumulate(draw, finalists, attacks, sizes.check, "check", target, chunk, n_jobs)
    if not isinstance(divergence_of(target), DP):
        z = float(norm.ppf(SELECTION_LEVEL))
        options = []
        for i, (total, coupled) in totals.items():
            evidence = _statistic(total, finalists[i], target, coupled)
            event = total.separating_event() if isinstance(total, WitnessMoments) else None
            if event is not None:  # no spread: its separating event's counts (event_attack)
                evidence = count_estimate(np.array([0, total.n_p, 0, 0]), target, finalists[i].function_class, coupled)
            if evidence.event:
                options.append(Option(i, None, evidence.estimate, np.nan, len(totals), evidence, event))
                continue
            width = evidence.estimate - evidence.lower_bound(SELECTION_LEVEL)
            usable = not evidence.caveat and np.isfinite(width)
            options.append(Option(i, None, evidence.estimate if usable else -np.inf,
                                  width / z if usable else np.inf, len(totals)))
        return options
    fitted, pools = [], []
    for i, (moments, coupled) in totals.items():
        starts = _pools(moments, target.delta, coupled)
        for weights in starts.values():
            pools.append(_dp_option(i, weights, _statistic(moments, finalists[i], target, coupled, weights)))
        if attacks[i].fitted not in starts:
            weights = np.eye(attacks[i].cuts.size)[attacks[i].fitted]
            fitted.append(_dp_option(i, weights, _statistic(moments, finalists[i], target, coupled, weights)))
    return [replace(option, family_size=len(family)) for family in (fitted, pools) for option in family]


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

    totals = _accumulate(keep_first, [winner], [attack], sizes.confirm, "confirm", target, chunk, n_jobs)
    if 0 not in totals:
        return None
    total, coupled = totals[0]
    evidence = _statistic(total, winner, target, coupled, weights)
    return replace(evidence, details={**evidence.details, "scores": score_summary(attack, *first, weights,
                                                                                        coupled_first[0])})


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
