"""Audits that stop when decided: the staged search in rounds, with error spending over a pre-set schedule.

An audit without ``n_samples`` runs the staged search of
:mod:`attacks.staged` in *rounds*: round r is a whole search (screen, train,
check, confirm) with a budget of ``first * RATIO ** r`` outputs per dataset
of a pair, so the confirm sample *and* the search stages grow by RATIO from
one round to the next (a rare event the first screen could not see is found
by a later one).  Its check and confirm samples are fresh; its screen and
train stages take the earlier rounds' outputs of their pair first
(:class:`EarlierOutputs`), so the rounds before the last cost a bug they miss
few outputs: with one pair, a search whose last round has budget B draws B
outputs per dataset in all, as a fixed design of ``n_samples`` B would.  After
each round (a *look*) the claim is

* a **violation** when the round's confirm p-value, spent at the round's
  level, is at most the stopping level (:func:`decide`);
* **decided** (a pass) when the round's estimate is at or below the claim and
  the round would have detected an excess of
  ``tolerance`` over the claim with probability :data:`POWER`
  (:func:`detectable_excess` at the round's level), from a round of at
  least :data:`PASS_BUDGET` outputs (a smaller search may miss a rare
  event);
* else the next round runs, unless it would pass the output limit
  (``"output limit"``) or, when one is set, the time limit (``"time limit"``:
  the numbers then depend on the machine and its load; without one they
  depend on the config and seed only).

Validity whatever the stopping time (theory.md section 7, "Sequential audits").
The schedule -- the rounds' budgets and the spending weights w_r with
sum_r w_r <= 1 -- is fixed by the config before any output is drawn
(:func:`round_budgets`, :func:`spending_weights`).  Round r's confirm
statistic E_r is a held-out estimate of a witness chosen without its
confirm sample, so its p-value p_r(claim) is valid at any fixed level
(the assumptions of the bound it is: exact for ``dp`` / ``ipm`` counts,
the delta method for ``kl`` / ``renyi`` witnesses and pooled sets).  By
the union bound, P(p_r <= a w_r for some r) <= sum_r a w_r <= a for every
a, so ``p_r / w_r`` at the look where the audit stopped is a p-value and the
bounds of E_r at confidence 1 - (1 - c) w_r hold at confidence c, for any
data-dependent stopping rule: this is error spending (Lan and DeMets 1983)
with a spending function fixed in advance over at most R looks, i.e.
Bonferroni over the looks (the last round, where a subtle bug is caught,
spends half of what the pilots leave: :data:`LAST_SHARE`).  The looks need not be independent.  Confidence sequences
(Howard et al. 2021; Waudby-Smith and Ramdas 2024) would spend less per
look, but need bounds of their own for every statistic; spending reuses
the exact count bounds and the witness bounds unchanged.

References
----------
K. K. G. Lan and D. L. DeMets, "Discrete sequential boundaries for clinical
trials", Biometrika 70(3):659-663, 1983.
S. R. Howard, A. Ramdas, J. McAuliffe and J. Sekhon, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2), 2021.
I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables
by betting", J. R. Stat. Soc. B 86(1), 2024.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.special import ndtri

from attacks.evidence import Evidence
from attacks import paired_ratio
from attacks.anytime_sets import AnytimeSetEstimate
from attacks.clipped_witness import ClippedWitnessEstimate
from attacks.betting import BernoulliBetting
from attacks.estimate import DivergenceEstimate
from attacks.budget import DEFAULT_SHARES, StageSizes
from attacks.candidates import Candidate, Draw, Sampler, Target
from attacks.confirm_looks import FirstOutputs, confirm_batches, witness_looks
from attacks.held_out import Attack, CHUNK, PooledEstimate, confirm_statistic, count_estimate
from attacks.staged import StagedResult, later_outputs, staged_search
from attacks.vocabulary import DP, IPM, divergence_of

RATIO = 4
"""Growth of the budget from one round to the next (the sum of the earlier rounds is a third of the last)."""
FIRST_BUDGET = 250
"""Outputs per dataset of a pair over the four stages of the first round (smaller when ``max_outputs`` cannot hold
its round, :func:`first_budget`): the schedule 250, 1 000, 4 000, 16 000 ... holds the budgets 4 000 x 4^k of the
versions before the pilot rounds, so that a pass is decided at the same budgets."""
PILOT_BELOW = 4_000
"""Rounds of a smaller budget are *pilots*: cheap looks that stop a gross violation within a few hundred outputs
(their confirm a confidence sequence read after every batch, :func:`anytime_confirm`), each spending
:data:`PILOT_WEIGHT` of the error."""
ANYTIME_BELOW = 16_000
"""Rounds of a smaller budget (250, 1 000, 4 000) confirm a ``dp`` / ``ipm`` set, or a ``kl`` / ``renyi`` witness with
a clipped bound, by confidence sequences read after every batch (:func:`anytime_confirm`); the larger ones at their end, at their whole weight.  With looks in every
round below :data:`PASS_BUDGET`, a correct Laplace's pass took 17 s in place of 6 on the shared machine (the
capital on the grid, a sampler call per look); with looks in the pilots only, svt_5 and numpy's textbook Laplace,
caught in the 4 000 round, drew 38 250 and 10 500 outputs in place of 35 764 and 8 770
(benchmarks/bench_anytime.py)."""
PILOT_WEIGHT = 0.05
"""The share of the error each pilot round spends when larger rounds follow (:func:`spending_weights`)."""
LAST_SHARE = 0.5
"""The share of the non-pilot rounds' error that the last round of the schedule spends, when two or more share it
(:func:`spending_weights`): a subtle bug is caught only in the largest round that fits, a gross or mid one in an
earlier round at a level to spare.  Shared flat over four non-pilot rounds, the largest would spend 0.225 of the
error where a fixed audit of its budget spends all of it."""
ANYTIME_SHARE = 0.5
"""The share of a round's error spent by the looks of its confirm confidence sequence; the rest is spent by the
exact count bound of its whole confirm sample (:func:`anytime_confirm`)."""
ROUND_STRIDE = 1_000_000
"""Round r's chunk k of a stage is drawn as chunk ``r * ROUND_STRIDE + k`` (fresh outputs every round)."""
REUSED_STAGES = ("screen", "train")
"""The stages of a round that take the earlier rounds' outputs of their pair before fresh ones
(:class:`EarlierOutputs`): an earlier round's outputs are not lost to a bug it missed.  The earlier rounds of a
schedule hold a third of the last one's budget (RATIO 4), less than its screen and train stages (two fifths), so
with one pair every output is served again and a search that stops at a round of budget B has drawn B outputs per
dataset in all (a pair screened only, its screen's fifth of B)."""
EARLIER_BYTES = 2**28
"""The most bytes of earlier rounds' outputs a search holds for its later rounds (:class:`EarlierOutputs`), shared
evenly by its pairs: one-dimensional outputs are all kept up to 2^24 (16.8 M) outputs per dataset over the
pairs, wide ones (a model's parameters) fewer, the rest drawn fresh as the stage needs them; the
memory check counts it (:mod:`audit.engine.memory`)."""
POWER = 0.8
"""The probability with which a decided pass would have detected an excess of the tolerance."""
PASS_BUDGET = 256_000
"""The smallest round budget that may decide a pass: its screen fits on 25 600 outputs per dataset and its train
stage on 51 200, so an event on 1 output in 4 000 of one dataset is seen about 6 and 13 times, enough for the
``atoms`` class (10 repeats) to be found by the train stage; smaller rounds may find a violation but not rule one
out.  A decided pass speaks for the witness the round's search kept, not for every witness, so the search must be
large enough to find what it rules out: at 64 000, report_noisy_max_4 (not DP for any epsilon) and an
exact-answer leak of 0.2 % on grid-rounded noise were decided passes in some seeds (benchmarks/bench_sequential.py
and bench_defaults.py record both budgets)."""
SEQUENTIAL = "sequential"
"""The ``kind`` of a :class:`SequentialEstimate`'s plain record."""
VIOLATION, DECIDED, OUTPUT_LIMIT, TIME_LIMIT, FIXED = "violation", "decided", "output limit", "time limit", "fixed"
STOPS = (VIOLATION, DECIDED, OUTPUT_LIMIT, TIME_LIMIT, FIXED)
"""Why a search stopped; ``"fixed"``: the fixed design of ``n_samples`` (one round, no look)."""


def round_budgets(first: int, max_outputs: int, least_outputs: Callable[[int], int]) -> list[int]:
    """The pre-set schedule: budgets ``first * RATIO ** r`` while the rounds so far fit ``max_outputs``.

    ``least_outputs(budget)`` is the fewest outputs a round of that budget
    draws (known before sampling, e.g. the screen on every pair and the
    later stages on one); rounds are added while their sum stays within
    ``max_outputs``.  The first round is always scheduled.
    """
    if first < 1 or max_outputs < 1:
        raise ValueError(f"first and max_outputs must be positive. Found first={first!r}, max_outputs={max_outputs!r}.")
    budgets, total = [first], least_outputs(first)
    while total + least_outputs(budgets[-1] * RATIO) <= max_outputs:
        budgets.append(budgets[-1] * RATIO)
        total += least_outputs(budgets[-1])
    return budgets


def smallest_budget(shares: Mapping[str, float] | None = None) -> int:
    """The smallest budget whose stages all get 20 outputs per dataset (:meth:`StageSizes.from_budget`)."""
    StageSizes.from_budget(10**6, shares)  # checks the shares
    shares = dict(DEFAULT_SHARES if shares is None else shares)
    budget = max(math.ceil(20 / share) for share in shares.values())
    while min(int(share * budget) for share in shares.values()) < 20:  # rounding down
        budget += 1
    return budget


def first_budget(max_outputs: int, least_outputs: Callable[[int], int],
                 shares: Mapping[str, float] | None = None) -> int:
    """The first round's budget: :data:`FIRST_BUDGET` (at least :func:`smallest_budget`), or, when its round
    would draw more than ``max_outputs``, the largest smaller budget whose round fits, down to the smallest
    budget (whose round then runs whatever ``max_outputs``: a search needs one round)."""
    smallest = smallest_budget(shares)
    budget = max(FIRST_BUDGET, smallest)
    while budget > smallest and least_outputs(budget) > max_outputs:
        budget = max(smallest, budget * 9 // 10)
    return budget


def schedule(max_outputs: int, n_pairs: int, shares: Mapping[str, float] | None = None) -> list[int]:
    """The rounds' budgets of a search on ``n_pairs`` pairs limited to ``max_outputs`` outputs: from
    :func:`first_budget`, by :func:`round_budgets`."""
    cost = least_outputs(n_pairs, shares)
    return round_budgets(first_budget(max_outputs, cost, shares), max_outputs, cost)


def spending_weights(looks: int, pilots: int = 0) -> tuple[float, ...]:
    """The share w_r of the error spent at each of ``looks`` pre-set looks (sum 1): the first ``pilots`` of them
    (the pilot rounds, :data:`PILOT_BELOW`) :data:`PILOT_WEIGHT` each when larger rounds follow; of the rest, the
    last look :data:`LAST_SHARE` and the others equal shares of what remains, when two or more looks share it
    (theory.md section 7, "Validity": any weights fixed by the config are valid); flat, 1 / looks each, when every
    look is a pilot."""
    if looks < 1 or not 0 <= pilots <= looks:
        raise ValueError(f"looks must be a positive integer and pilots in 0..looks. Found {looks!r}, {pilots!r}.")
    if pilots == looks:
        return (1.0 / looks,) * looks
    rest, shared = 1.0 - pilots * PILOT_WEIGHT, looks - pilots
    if shared == 1:
        return (PILOT_WEIGHT,) * pilots + (rest,)
    last = max(LAST_SHARE, 1.0 / shared) * rest
    return (PILOT_WEIGHT,) * pilots + ((rest - last) / (shared - 1),) * (shared - 1) + (last,)


def detectable_excess(evidence: Evidence, level: float, power: float = POWER) -> float:
    """Smallest excess of the estimand over the claim that a one-sided test at ``level`` detects with ``power``.

    A normal estimate with standard error s is rejected at one-sided level a
    when it exceeds the claim by ``z(1 - a) s``; if the estimand exceeds the
    claim by ``(z(1 - a) + z(power)) s`` that happens with probability
    ``power``.  The standard error is read off the interval, so that the
    same formula serves every kind of evidence: ``s = (estimate - lower) /
    z(1 - a)`` with ``lower`` the one-sided lower bound at confidence
    ``1 - a``, giving ``(estimate - lower) (1 + z(power) / z(1 - a))``.

    Approximations: the standard error under the alternative is the one
    observed; for ``dp`` rows the width of the exact or score bound on a
    log-ratio of counts stands for ``z(1 - a) s`` (it grows as the counts
    shrink, so an alternative with rarer events in Q needs more); the
    estimand is the fitted witness's objective, itself a lower bound on the
    restricted divergence.

    Parameters
    ----------
    evidence : Evidence
        An estimate (:class:`attacks.evidence.Evidence`: its ``estimate`` and ``confidence_interval(confidence)``);
        a :class:`SequentialEstimate` is its look's at the spent level ``level * weight``.
    level : float
        One-sided level of the test, in (0, 1).
    power : float, default=POWER
        The probability of detection, in (0, 1).

    Returns
    -------
    float
        The excess, +inf when the interval is not finite (nothing is detectable).
    """
    if not (0.0 < level < 1.0 and 0.0 < power < 1.0):
        raise ValueError(f"level and power must be in (0, 1). Found level={level!r}, power={power!r}.")
    if isinstance(evidence, SequentialEstimate):  # its look, tested at the spent level
        evidence, level = evidence.evidence, level * evidence.weight
    lower, _ = evidence.confidence_interval(1.0 - 2.0 * level)
    width = float(evidence.estimate) - float(lower)
    if not (math.isfinite(width) and width >= 0.0):
        return math.inf
    return width * (1.0 + ndtri(power) / -ndtri(level))


@dataclass(frozen=True)
class SequentialEstimate:
    """The confirm statistic of the look where a sequential search stopped, its error spent at weight ``weight``.

    ``p_value(claim)`` is the look's p-value divided by ``weight`` (at most
    1); ``lower_bound(c)`` and ``confidence_interval(c)`` are the look's at
    confidence ``1 - (1 - c) weight``: valid at confidence c whatever the
    stopping rule (module docstring).  Every other attribute (``estimate``,
    ``standard_error``, ``caveat``, ``n``, ``details``, ``coupled`` ...) is the look's: evidence
    (:class:`attacks.evidence.Evidence`) like the look's own.
    ``looks``: one plain dict per round (``round``, ``outputs`` drawn so
    far, ``estimate``, ``ci_low`` at the audit's confidence) for the report.
    """

    evidence: Evidence
    weight: float
    looks: tuple[Mapping, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if not 0.0 < self.weight <= 1.0:
            raise ValueError(f"weight must be in (0, 1]. Found {self.weight!r}.")

    def __getattr__(self, name: str):
        if name == "evidence":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.evidence, name)

    def spent(self, confidence: float) -> float:
        """The look's confidence that gives ``confidence`` over every look: 1 - (1 - confidence) weight."""
        return 1.0 - (1.0 - confidence) * self.weight

    def lower_bound(self, level: float = 0.95) -> float:
        return self.evidence.lower_bound(self.spent(level))

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        return self.evidence.confidence_interval(self.spent(confidence))

    def p_value(self, claim: float) -> float:
        return min(1.0, float(self.evidence.p_value(claim)) / self.weight)

    def ceiling(self, level: float = 0.95) -> float:
        """The look's ceiling (:meth:`attacks.estimate.DivergenceEstimate.ceiling`) at its spent confidence."""
        return self.evidence.ceiling(self.spent(level))

    def to_record(self) -> dict:
        """Plain JSON: ``kind = "sequential"``, the look's own record, the weight and the looks."""
        return dict(kind=SEQUENTIAL, evidence=self.evidence.to_record(), weight=float(self.weight),
                    looks=[dict(look) for look in self.looks])

    @classmethod
    def from_record(cls, record: Mapping, evidence_from_record: Callable[[Mapping], Any]) -> SequentialEstimate:
        """The estimate of :meth:`to_record`'s record; ``evidence_from_record`` rebuilds the look's evidence."""
        return cls(evidence_from_record(record["evidence"]), float(record["weight"]),
                   tuple(dict(look) for look in record.get("looks", ())))


def decide(evidence: SequentialEstimate, claim: float, level: float, tolerance: float,
           budget: int = PASS_BUDGET) -> str | None:
    """``"violation"`` when the spent p-value is at most ``level``; ``"decided"`` (a pass) when the look's estimate is
    at or below the claim, an excess of ``tolerance`` would have been detected at ``level`` with probability
    :data:`POWER` by a round of at least :data:`PASS_BUDGET` outputs (``budget``: the round's) and the claim is below
    the look's ceiling at ``level`` (:mod:`attacks.ceilings`: a claim at or above it no data of the look's sizes
    refute, so no excess over it is detectable); else None (look again).  An estimate above the claim by less than
    the tolerance is evidence of an excess the round could not confirm, not of its absence: the next round, whose
    confirm sample is four times larger, may confirm it, so such a look stops only at a limit (and its row reads
    inconclusive, as it would have decided): "decided" always means a pass.  A look whose interval is not trusted (a ``caveat``) decides nothing: the
    verdicts read its row inconclusive whatever its p-value."""
    if evidence.caveat:
        return None
    if evidence.p_value(claim) <= level:
        return VIOLATION
    below_ceiling = not claim >= evidence.ceiling(1.0 - level)  # NaN: no ceiling known
    if (budget >= PASS_BUDGET and float(evidence.estimate) <= claim and below_ceiling
            and detectable_excess(evidence, level) <= tolerance):
        return DECIDED
    return None


@dataclass(frozen=True)
class Limits:
    """When a sequential search stops undecided: ``max_outputs`` outputs drawn (every pair, dataset, stage and
    round; the schedule's) or ``max_seconds`` of wall time (None: no wall-clock limit, the reproducible default);
    ``tolerance`` and ``level`` decide a look."""

    max_outputs: int
    max_seconds: float | None
    tolerance: float
    level: float


def least_outputs(n_pairs: int, shares: Mapping[str, float] | None = None) -> Callable[[int], int]:
    """The fewest outputs (both datasets) a round of a budget draws: the screen on every pair, the later stages on
    one (:func:`attacks.staged.later_outputs`)."""

    def outputs(budget: int) -> int:
        sizes = StageSizes.from_budget(budget, shares)
        return 2 * (n_pairs * sizes.screen + later_outputs(sizes, 1))

    return outputs


def sequential_search(sample: Sampler, n_pairs: int, target: Target, claim: float, limits: Limits, *,
                      shares: Mapping[str, float] | None = None, first: int | None = None, seed: int = 0,
                      chunk: int = CHUNK, n_jobs: int = 1,
                      on_round: Callable[[StageSizes], object] = lambda sizes: None,
                      on_screened: Callable[[int], object] = lambda outputs: None,
                      on_look: Callable[[SequentialEstimate], object] = lambda evidence: None) -> StagedResult:
    """Staged searches in rounds of growing budgets until the claim is decided or a limit is reached.

    A round of a budget below :data:`ANYTIME_BELOW` whose chosen statistic
    is one ``dp`` or ``ipm`` set, or a ``kl`` or ``renyi`` witness with a
    clipped bound, confirms it by :func:`anytime_confirm`: looks after every
    batch of its confirm sample, stopping at the first that decides.  The larger rounds confirm at their end, at their whole weight.

    Parameters
    ----------
    sample : Sampler
        As for :func:`attacks.staged.staged_search`; round r's chunk k is
        asked for as chunk ``r * ROUND_STRIDE + k``.
    n_pairs : int
    target : Target
    claim : float
        The claimed value the looks test.
    limits : Limits
    shares : mapping, optional
        Stage shares of each round's budget (:meth:`attacks.budget.StageSizes.from_budget`).
    first : int, optional
        The first round's budget (outputs per dataset of a pair); default :func:`first_budget`.
    seed : int
        Seeds the fits; round r > 0 from ``(seed, r)``.
    chunk, n_jobs, on_screened
        As for :func:`attacks.staged.staged_search`.
    on_round : callable, optional
        Called with a round's stage sizes before it starts.
    on_look : callable, optional
        Called with each round's :class:`SequentialEstimate`.

    Returns
    -------
    StagedResult
        The last round's search, its evidence a :class:`SequentialEstimate`,
        ``stop`` why it stopped and ``rounds`` the rounds run.
    """
    start = time.perf_counter()
    cost = least_outputs(n_pairs, shares)
    budgets = round_budgets(first_budget(limits.max_outputs, cost, shares) if first is None else first,
                            limits.max_outputs, cost)
    weights = spending_weights(len(budgets), sum(budget < PILOT_BELOW for budget in budgets))
    drawn, looks, result, earlier = 0, [], None, EarlierOutputs(EARLIER_BYTES // n_pairs)
    for r, budget in enumerate(budgets):
        sizes = StageSizes.from_budget(budget, shares)
        on_round(sizes)
        round_start, before = time.perf_counter(), drawn
        earlier.next_round()

        def round_sample(pair: int, n: int, stage: str, index: int, r=r, later=r + 1 < len(budgets)) -> Draw:
            nonlocal drawn
            kept = earlier.take(pair, n) if stage in REUSED_STAGES else None
            fresh = n - (0 if kept is None else len(kept.d))
            if fresh == 0:
                return kept
            drawn += 2 * fresh  # a failed pair's outputs count as drawn
            samples = sample(pair, fresh, stage, r * ROUND_STRIDE + index)
            if later:  # the last round's outputs serve no round
                earlier.keep(pair, samples)
            return samples if kept is None else joined(kept, samples)

        def decides(evidence: Evidence, weight: float, budget=budget) -> bool:
            return decide(SequentialEstimate(evidence, weight), claim, limits.level, limits.tolerance,
                          budget) is not None

        round_seed = seed if r == 0 else int(np.random.SeedSequence([seed, r]).generate_state(1)[0] >> 1)
        confirm = anytime_confirm(weights[r], decides, limits.level) if budget < ANYTIME_BELOW else None
        result = staged_search(round_sample, n_pairs, target, sizes, seed=round_seed, chunk=chunk, n_jobs=n_jobs,
                               on_screened=on_screened, confirm=confirm)
        if result.evidence is None:
            return replace(result, rounds=r + 1, stop=None)
        weight = result.evidence.details.get("weight", weights[r])
        looks.append(dict(round=r, outputs=drawn, estimate=float(result.evidence.estimate),
                          interval=interval_of(result.evidence)))
        evidence = SequentialEstimate(result.evidence, weight, tuple(looks))
        looks[-1]["ci_low"] = float(evidence.lower_bound(1.0 - limits.level))
        evidence = replace(evidence, looks=tuple(looks))
        on_look(evidence)
        stop = decide(evidence, claim, limits.level, limits.tolerance, budget)
        result = replace(result, evidence=evidence, rounds=r + 1, stop=stop)
        if stop is not None:
            return result
        # the next round draws and lasts about RATIO times this one's
        if r + 1 == len(budgets) or drawn + RATIO * (drawn - before) > limits.max_outputs:
            return replace(result, stop=OUTPUT_LIMIT)
        if limits.max_seconds is not None:
            elapsed = time.perf_counter() - start
            if elapsed + RATIO * (time.perf_counter() - round_start) > limits.max_seconds:
                return replace(result, stop=TIME_LIMIT)
    return result


class EarlierOutputs:
    """The outputs the earlier rounds drew fresh, per pair, every stage, served again to the screen and train stages
    (:data:`REUSED_STAGES`) of every later round, from the first kept output of its pair each round.

    A round's search stages choose its witness and may use any outputs independent of its confirm sample, which is
    always fresh; an earlier round's outputs, its confirm sample included, are.  So each round's confirm p-value is
    valid at a fixed level as before, and the union bound over the rounds (module docstring) needs no independence
    between them.  A round takes the earlier rounds' outputs, and keeps its own fresh ones for the rounds after it.

    They are held until the search stops, at most ``pair_bytes`` a pair (:data:`EARLIER_BYTES` over the search's
    pairs): a pair keeps its draws while they fit and none after the first that does not, so wide outputs fall back
    to fresh draws, and what is kept depends on the config only.  Thread-safe: the screen and train stages draw
    their pairs in threads (each pair's outputs are in the order its stages drew them, so the numbers do not depend
    on the threads).
    """

    def __init__(self, pair_bytes: int):
        self.pair_bytes = pair_bytes
        self.kept: dict[int, list[Draw]] = {}
        self.new: dict[int, list[Draw]] = {}
        self.served: dict[int, int] = {}
        self.held: dict[int, int] = {}
        """Bytes kept per pair."""
        self.full: set[int] = set()
        """Pairs one of whose draws did not fit: they keep nothing more."""
        self.lock = threading.Lock()

    def next_round(self) -> None:
        """A new round: the outputs kept in the last one join the others, and every one may be served again."""
        for pair, draws in self.new.items():
            self.kept.setdefault(pair, []).extend(draws)
        self.new, self.served = {}, {}

    def keep(self, pair: int, samples: Draw) -> None:
        """Keep a round's fresh outputs for the rounds after it (never served in their own round), while the pair's
        kept outputs fit ``pair_bytes``."""
        with self.lock:
            held = self.held.get(pair, 0) + samples.d.nbytes + samples.d_prime.nbytes
            if pair in self.full or held > self.pair_bytes:
                self.full.add(pair)
                return
            self.held[pair] = held
            self.new.setdefault(pair, []).append(samples)

    def take(self, pair: int, n: int) -> Draw | None:
        """Up to ``n`` kept outputs of the pair not served yet in this round (None when there are none)."""
        with self.lock:
            kept = self.kept.get(pair, [])
            if not kept:
                return None
            start = self.served.get(pair, 0)
            whole = kept[0] if len(kept) == 1 else joined(*kept)
            self.kept[pair] = [whole]
            stop = min(start + n, len(whole.d))
            if stop == start:
                return None
            self.served[pair] = stop
            return Draw(whole.d[start:stop], whole.d_prime[start:stop], whole.coupled)


def joined(*draws: Draw) -> Draw:
    """The outputs of ``draws`` one after another (coupled when each is)."""
    return Draw(np.concatenate([draw.d for draw in draws]), np.concatenate([draw.d_prime for draw in draws]),
                all(draw.coupled for draw in draws))


def anytime_confirm(weight: float, decides: Callable[[Evidence, float], bool], level: float) -> Callable:
    """A confirm stage (:func:`attacks.staged.staged_search`'s ``confirm``) that looks after every batch.

    The confirm sample is drawn in batches (:func:`attacks.confirm_looks.confirm_batches`: ``LOOK`` outputs
    per dataset, then half of those drawn so far) and read after each, stopping at the first look where
    ``decides(evidence, its weight)``, where the chosen statistic is

    * one ``dp`` or ``ipm`` set: its betting confidence sequences
      (:class:`attacks.anytime_sets.AnytimeSetEstimate`) are read at ``ANYTIME_SHARE * weight`` of the error.
      If none decides, the whole confirm sample's exact count bound (:func:`attacks.held_out.count_estimate`)
      is the round's statistic at the rest of its weight, ``(1 - ANYTIME_SHARE) * weight``, a union bound
      over the two;
    * a ``kl`` or ``renyi`` witness with a clipped bound (``attack.betting``,
      :func:`attacks.clipped_witness.clipped_serves`): its betting half, at half the round's weight, is read at
      every look; if none decides, the whole sample's delta method and betting bound, each at half the
      weight, are the round's statistic at its whole weight (:func:`attacks.confirm_looks.witness_looks`: the
      looks and the end share the betting half's error, time-uniform, so the round spends ``weight`` in all).

    Valid at any look, the sequences being time-uniform: the looks need no spending of their own.  Other
    statistics (a ``dp`` pool, a ``kl`` or ``renyi`` witness without a clipped bound or an event) take the fixed
    confirm (:func:`attacks.held_out.confirm_statistic`) at the round's whole weight.  The rule is fixed before
    the confirm sample (by the statistic the check stage chose), never by which bound came out tighter.  The
    statistic's ``details``: ``weight`` (the share of the round's error it spends) and ``looks`` (the looks read).
    """
    anytime, exact = ANYTIME_SHARE * weight, (1.0 - ANYTIME_SHARE) * weight

    def confirm(draw, winner: Candidate, attack: Attack, weights: np.ndarray | None, target: Target,
                sizes: StageSizes, chunk: int, n_jobs: int):
        divergence = divergence_of(target)
        if divergence.weighted and attack.betting is not None and not attack.counted:
            return witness_looks(draw, winner, attack, target, sizes.confirm, weight, decides)
        one_set = isinstance(divergence, IPM) or (isinstance(divergence, DP) and weights is not None
                                                  and np.count_nonzero(weights) == 1)
        if not one_set:
            return confirm_statistic(draw, winner, attack, weights, target, sizes, chunk, n_jobs)
        if isinstance(divergence, DP):
            index = int(np.argmax(weights))

            def in_set(x: np.ndarray) -> np.ndarray:
                return attack.levels(x) > index  # the nested set S_index
        else:
            in_set = attack.in_set
        # the bets are tuned for the one-sided level each probability gets at this round (fixed before the data)
        in_p = in_q = BernoulliBetting.start(min(level * anytime / 2.0, 0.5))
        cells, coupled, looks, first = np.zeros(4, dtype=np.int64), True, 0, FirstOutputs()
        for batch in confirm_batches(draw, winner, sizes.confirm):
            if batch is None:
                return None
            p, q, batch_coupled = batch
            first.keep(p, q)
            p_in, q_in = in_set(p), in_set(q)
            cells += paired_ratio.paired_counts(p_in, q_in)
            coupled, looks = coupled and batch_coupled, looks + 1
            in_p, in_q = in_p.update(p_in), in_q.update(q_in)
            evidence = AnytimeSetEstimate(count_estimate(cells, target, winner.function_class, coupled), in_p, in_q)
            if decides(evidence, anytime):
                return evidence.with_details(weight=anytime, looks=looks, scores=first.scores(attack, weights, coupled))
        counts = count_estimate(cells, target, winner.function_class, coupled)
        return replace(counts, details={**counts.details, "weight": exact, "looks": looks,
                                        "scores": first.scores(attack, weights, coupled)})

    return confirm


def interval_of(evidence: Evidence, level: float = 0.95) -> str:
    """Which interval an estimate's lower bound at ``level`` is (report.md and results.json ``interval``):
    ``"betting CS"`` (a set's confidence sequences, or the clipped witness's betting bound where it is the larger
    half of :class:`attacks.clipped_witness.ClippedWitnessEstimate`), ``"binomial counts"`` (a set's score or
    Clopper-Pearson bounds, exact where the counts are small), ``"event counts"`` (``kl`` / ``renyi`` from an
    event's count bounds), ``"delta method"`` (a witness's moments, a pool of nested sets), or ``"normal"``."""
    if isinstance(evidence, SequentialEstimate):
        return interval_of(evidence.evidence, 1.0 - (1.0 - level) * evidence.weight)
    if isinstance(evidence, ClippedWitnessEstimate):
        return evidence.interval(level)
    if isinstance(evidence, AnytimeSetEstimate):
        return "betting CS"
    if isinstance(evidence, DivergenceEstimate):
        if evidence.event:
            return "event counts"
        return "binomial counts" if isinstance(divergence_of(evidence), DP | IPM) else "delta method"
    return "delta method" if isinstance(evidence, PooledEstimate) else "normal"
