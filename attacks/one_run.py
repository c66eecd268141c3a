"""One-run auditing (pure DP): a lower bound on epsilon from guesses about canaries included at random in one run.

Steinke, Nasr and Jagielski, "Privacy auditing with one (1) training run",
NeurIPS 2023 ("SNJ"): m canaries are each included in the training data
independently with probability 1/2; after one run the auditor guesses, for
r of them, whether each was included.  If the training is epsilon-DP, the
number W of correct guesses is stochastically dominated by
Binomial(r, e^epsilon / (1 + e^epsilon)) (SNJ Theorem 3.1 at delta = 0,
whatever the guesses' order and dependence).  So

    p(epsilon) = P[Binomial(r, e^epsilon / (1 + e^epsilon)) >= W]

is a valid p-value for the claim epsilon, and the largest epsilon it rejects
at level 1 - confidence is logit of the exact (Clopper-Pearson) lower bound
on the proportion W / r (:func:`one_run_lower_bound`).  Even r correct
guesses out of r give at most the ceiling logit((1 - confidence)^(1 / r))
(:func:`one_run_ceiling`: 5.81 at r = 1000 and confidence 0.95), so a bound
near it says nothing about the mechanism's epsilon beyond it.

With delta > 0 (SNJ Theorem 3.1 in full, the form their section 5 computes),
for an (epsilon, delta)-DP run with m randomized canaries and f(v) =
P[Binomial(r, e^epsilon / (1 + e^epsilon)) >= v],

    P[W >= v] <= f(v) + 2 m delta max_{1 <= i <= v} (f(v - i) - f(v)) / i,

a valid p-value that no longer depends on r alone (:func:`one_run_p_value`
with ``delta`` and ``canaries``), inverted by bisection in epsilon.

A ``gdp`` claim is read by the f-DP test of :mod:`attacks.one_run_fdp`;
:func:`one_run_bound` gives either claim's bound with its ceiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import beta, binom

from attacks.one_run_fdp import one_run_gdp_lower_bound
from attacks.vocabulary import GDP, divergence_kind


@dataclass(frozen=True)
class OneRunBound:
    """A claim's reading of one run's guesses: ``bound``, the largest parameter (epsilon, or mu for ``gdp``) the
    guesses reject at level 1 - confidence, and ``ceiling``, the bound with every held-out guess right (the most
    the run could show: a claim at or above it cannot be refuted by it)."""

    bound: float
    ceiling: float


def one_run_bound(divergence: str, correct: int, guesses: int, canaries: int, confidence: float,
                  delta: float = 0.0) -> OneRunBound:
    """The bound and ceiling of a ``dp`` claim at ``delta`` (:func:`one_run_lower_bound`, :func:`one_run_ceiling`,
    SNJ Thm 3.1) or of a ``gdp`` claim (:func:`attacks.one_run_fdp.one_run_gdp_lower_bound`, MMC) from ``correct``
    right guesses of ``guesses`` about ``canaries`` randomized canaries."""
    if divergence_kind(divergence) is GDP:
        return OneRunBound(one_run_gdp_lower_bound(correct, guesses, canaries, confidence),
                           one_run_gdp_lower_bound(canaries, canaries, canaries, confidence))
    return OneRunBound(one_run_lower_bound(correct, guesses, confidence, delta, canaries),
                       one_run_ceiling(canaries, confidence, delta, canaries))


def one_run_lower_bound(correct: int, guesses: int, confidence: float, delta: float = 0.0,
                        canaries: int | None = None) -> float:
    """The largest epsilon that the one-run p-value rejects at level 1 - ``confidence`` (0 when none).

    At ``delta`` = 0: logit of W's exact (Clopper-Pearson) lower bound, the success rate at which the Beta tail of
    :func:`one_run_p_value` is 1 - ``confidence``; 0 at or below 1/2.  At ``delta`` > 0:
    the root in epsilon of :func:`one_run_p_value` = 1 - ``confidence`` (SNJ Thm 3.1 with delta; ``canaries``,
    the number m of randomized canaries, is then required).

    Examples
    --------
    >>> round(one_run_lower_bound(1000, 1000, 0.95), 3)
    5.809
    """
    _check_counts(correct, guesses, canaries)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Found {confidence!r}.")
    if delta == 0.0:
        low = float(beta.ppf(1.0 - confidence, correct, guesses - correct + 1)) if correct > 0 else 0.0
        return 0.0 if low <= 0.5 else math.log(low / (1.0 - low))
    if canaries is None:
        raise ValueError("a bound at delta > 0 needs canaries, the number m of randomized canaries. Found None.")
    level = 1.0 - confidence

    def excess(epsilon: float) -> float:  # increasing in epsilon: the claim epsilon is rejected where it is <= 0
        return one_run_p_value(correct, guesses, epsilon, delta, canaries) - level

    if excess(0.0) > 0.0:
        return 0.0
    high = 1.0
    while excess(high) <= 0.0:  # p -> 1 as epsilon grows (every guess right is then likely): this ends
        high *= 2.0
    return float(brentq(excess, 0.0, high, xtol=1e-10))


def one_run_p_value(correct: int, guesses: int, epsilon: float, delta: float = 0.0,
                    canaries: int | None = None) -> float:
    """The p-value of the claim (epsilon, delta)-DP from ``correct`` right guesses of ``guesses`` (SNJ Thm 3.1).

    With f(v) = P[Binomial(guesses, e^epsilon / (1 + e^epsilon)) >= v]: f(correct) at delta = 0, and
    f(v) + 2 m delta max_{1 <= i <= v} (f(v - i) - f(v)) / i (v = ``correct``, m = ``canaries``) above it,
    capped at 1.
    """
    _check_counts(correct, guesses, canaries)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1). Found {delta!r}.")
    success = 1.0 / (1.0 + math.exp(-epsilon))
    if correct == 0:
        return 1.0
    tail = float(beta.cdf(success, correct, guesses - correct + 1))  # P[Binomial(r, q) >= correct], exactly
    if delta == 0.0:
        return tail
    if canaries is None:
        raise ValueError("a p-value at delta > 0 needs canaries, the number m of randomized canaries. Found None.")
    steps = np.arange(0, correct + 1)
    tails = binom.sf(correct - steps - 1, guesses, success)  # f(v - i) = P[Binomial >= v - i], i = 0..v
    spread = float(np.max((tails[1:] - tails[0]) / steps[1:]))
    return min(1.0, float(tails[0]) + 2.0 * canaries * delta * spread)


def _check_counts(correct: int, guesses: int, canaries: int | None) -> None:
    if not 0 <= correct <= guesses or guesses < 1:
        raise ValueError(f"need 0 <= correct <= guesses, guesses >= 1. Found {correct!r} of {guesses!r}.")
    if canaries is not None and canaries < guesses:
        raise ValueError(f"canaries (m) must be at least the guesses. Found m={canaries!r}, guesses={guesses!r}.")


def one_run_ceiling(guesses: int, confidence: float, delta: float = 0.0, canaries: int | None = None) -> float:
    """The bound when every guess is right, the most ``guesses`` guesses can show: logit((1 - confidence)^(1 /
    guesses)) at delta = 0 (5.81 at 1000 guesses and confidence 0.95)."""
    if delta == 0.0:
        success = (1.0 - confidence) ** (1.0 / guesses)
        return math.log(success / (1.0 - success))
    return one_run_lower_bound(guesses, guesses, confidence, delta, canaries)


def guess_from_scores(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """Guesses from canary scores (large: included), cut-offs fixed before the run: +1 above ``high``, -1 below
    ``low``, 0 (abstain) between them (SNJ section 5: abstaining raises the rate of correct guesses)."""
    if not low <= high:
        raise ValueError(f"need low <= high. Found low={low!r}, high={high!r}.")
    scores = np.asarray(scores, dtype=float)
    return np.where(scores > high, 1, np.where(scores < low, -1, 0))
