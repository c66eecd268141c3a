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
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta

from attacks.binomial_ratio import clopper_pearson_bounds


def one_run_lower_bound(correct: int, guesses: int, confidence: float) -> float:
    """The largest epsilon that the one-run p-value rejects: logit of W's exact lower bound, 0 at or below 1/2.

    Examples
    --------
    >>> round(one_run_lower_bound(1000, 1000, 0.95), 3)
    5.809
    """
    if not 0 <= correct <= guesses or guesses < 1:
        raise ValueError(f"need 0 <= correct <= guesses, guesses >= 1. Found {correct!r} of {guesses!r}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Found {confidence!r}.")
    low, _ = clopper_pearson_bounds(correct, guesses, confidence)
    low = float(low)
    return 0.0 if low <= 0.5 else math.log(low / (1.0 - low))


def one_run_p_value(correct: int, guesses: int, epsilon: float) -> float:
    """P[Binomial(guesses, e^epsilon / (1 + e^epsilon)) >= correct]: the p-value of the claim epsilon-DP (SNJ
    Thm 3.1)."""
    success = 1.0 / (1.0 + math.exp(-epsilon))
    return float(beta.cdf(success, correct, guesses - correct + 1)) if correct > 0 else 1.0


def one_run_ceiling(guesses: int, confidence: float) -> float:
    """logit((1 - confidence)^(1 / guesses)): the bound when every guess is right, the most r guesses can show."""
    success = (1.0 - confidence) ** (1.0 / guesses)
    return math.log(success / (1.0 - success))


def guess_from_scores(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """Guesses from canary scores (large: included), cut-offs fixed before the run: +1 above ``high``, -1 below
    ``low``, 0 (abstain) between them (SNJ section 5: abstaining raises the rate of correct guesses)."""
    if not low <= high:
        raise ValueError(f"need low <= high. Found low={low!r}, high={high!r}.")
    scores = np.asarray(scores, dtype=float)
    return np.where(scores > high, 1, np.where(scores < low, -1, 0))
