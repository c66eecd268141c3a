"""Audits that stop when decided: the staged search in rounds, with error spending over a pre-set schedule.

An audit without ``n_samples`` runs the staged search of
:mod:`attacks.staged` in *rounds*: round r is a whole search (screen, train,
check, confirm) on fresh outputs with a budget of ``first * RATIO ** r``
outputs per dataset of a pair, so the confirm sample *and* the search
stages grow by RATIO from one round to the next (a rare event the first
screen could not see is found by a later one).  After each round (a
*look*) the claim is

* a **violation** when the round's confirm p-value, spent at the round's
  level, is at most the stopping level (:func:`decide`);
* **decided** (a pass) when the round would have detected an excess of
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
with a flat spending function over at most R looks, i.e. Bonferroni over
the looks.  The looks need not be independent.  Confidence sequences
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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.stats import norm

from attacks.evidence import Evidence
from attacks.staged import CHUNK, Draw, Sampler, StagedResult, StageSizes, Target, later_outputs, staged_search

RATIO = 4
"""Growth of the budget from one round to the next (the sum of the earlier rounds is a third of the last)."""
FIRST_BUDGET = 4_000
"""Outputs per dataset of a pair over the four stages of the first round."""
ROUND_STRIDE = 1_000_000
"""Round r's chunk k of a stage is drawn as chunk ``r * ROUND_STRIDE + k`` (fresh outputs every round; round 0's
are those of the fixed design with ``n_samples = FIRST_BUDGET``)."""
POWER = 0.8
"""The probability with which a decided pass would have detected an excess of the tolerance."""
PASS_BUDGET = 256_000
"""The smallest round budget that may decide a pass: its screen fits on 25 600 outputs per dataset and its train
stage on 51 200, so an event on 1 output in 4 000 of one dataset is seen about 6 and 13 times, enough for the
``atoms`` class (10 repeats) to be found by the train stage; smaller rounds may find a violation but not rule one
out.  A decided pass speaks for the witness the round's search kept, not for every witness, so the search must be
large enough to find what it rules out: at 64 000 (the value up to this version) report_noisy_max_4, not DP for any
epsilon, stopped "decided" in 4 of 10 seeds and an exact-answer leak of 0.2 % on grid-rounded noise in 1 of 20
(benchmarks/bench_sequential.py, bench_defaults.py); from 256 000, report_noisy_max_4 is caught in 9 of 10 seeds
and the leak in 20 of 20, and a correct Laplace passes after 680 000 outputs (4 rounds, about 3 s)."""
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


def spending_weights(looks: int) -> tuple[float, ...]:
    """The share w_r of the error spent at each of ``looks`` pre-set looks: flat, 1 / looks each (sum 1)."""
    if looks < 1:
        raise ValueError(f"looks must be a positive integer. Found {looks!r}.")
    return (1.0 / looks,) * looks


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
    return width * (1.0 + norm.ppf(power) / norm.isf(level))


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
    """``"violation"`` when the spent p-value is at most ``level``; ``"decided"`` when an excess of ``tolerance``
    would have been detected at ``level`` with probability :data:`POWER` by a round of at least
    :data:`PASS_BUDGET` outputs (``budget``: the round's); else None (look again).  A look whose interval is not
    trusted (a ``caveat``) decides nothing: the verdicts read its row inconclusive whatever its p-value."""
    if evidence.caveat:
        return None
    if evidence.p_value(claim) <= level:
        return VIOLATION
    if budget >= PASS_BUDGET and detectable_excess(evidence, level) <= tolerance:
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
                      shares: Mapping[str, float] | None = None, first: int = FIRST_BUDGET, seed: int = 0,
                      chunk: int = CHUNK, n_jobs: int = 1,
                      on_round: Callable[[StageSizes], object] = lambda sizes: None,
                      on_screened: Callable[[int], object] = lambda outputs: None,
                      on_look: Callable[[SequentialEstimate], object] = lambda evidence: None) -> StagedResult:
    """Staged searches in rounds of growing budgets until the claim is decided or a limit is reached.

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
        Stage shares of each round's budget (:meth:`attacks.staged.StageSizes.from_budget`).
    first : int
        The first round's budget (outputs per dataset of a pair).
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
    budgets = round_budgets(first, limits.max_outputs, least_outputs(n_pairs, shares))
    weights = spending_weights(len(budgets))
    drawn, looks, result = 0, [], None
    for r, budget in enumerate(budgets):
        sizes = StageSizes.from_budget(budget, shares)
        on_round(sizes)
        round_start, before = time.perf_counter(), drawn

        def round_sample(pair: int, n: int, stage: str, index: int, r=r) -> Draw:
            nonlocal drawn
            drawn += 2 * n  # a failed pair's outputs count as drawn
            return sample(pair, n, stage, r * ROUND_STRIDE + index)

        round_seed = seed if r == 0 else int(np.random.SeedSequence([seed, r]).generate_state(1)[0] >> 1)
        result = staged_search(round_sample, n_pairs, target, sizes, seed=round_seed, chunk=chunk, n_jobs=n_jobs,
                               on_screened=on_screened)
        if result.evidence is None:
            return replace(result, rounds=r + 1, stop=None)
        looks.append(dict(round=r, outputs=drawn, estimate=float(result.evidence.estimate)))
        evidence = SequentialEstimate(result.evidence, weights[r], tuple(looks))
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
