"""One-run auditing of a Gaussian-DP claim: a lower bound on mu from guesses about canaries included at random.

Mahloujifar, Melis and Chaudhuri, "Auditing f-differential privacy in one
run", ICML 2025 (arXiv:2410.22235; "MMC"): as in Steinke, Nasr and
Jagielski (:mod:`attacks.one_run`), m canaries are each included
independently with probability 1/2 in one run and an adversary guesses
c' of them (abstaining on the rest), c correctly.  MMC bound the
probability of c or more correct guesses under an f-DP mechanism through
the trade-off curve itself instead of its (epsilon, delta) corners, which is
what makes the bound tight for Gaussian mechanisms.  Their test of a
guessing game with two choices per canary (membership), for a level tau:
with s = c' / m,

    r_c = tau s c / c',    h_c = tau s (c' - c) / c',
    for i = c - 1, ..., 0:
        h_i = max(h_{i+1}, f_inv(r_{i+1})),
        r_i = r_{i+1} + i / (c' - i) (h_i - h_{i+1}),

where f_inv is the inverse of the curve's blow-up x -> 1 - f(x) (for mu-GDP,
1 - G_mu(x) = Phi(Phi^-1(x) + mu), so f_inv(x) = Phi(Phi^-1(x) - mu)); if
r_0 + h_0 > s, then c or more correct guesses have probability below tau
under f-DP, so the claim is rejected at level tau (MMC's auditing theorem
for guessing games with abstention, the recursion of their empirical-privacy
algorithm; the theorem's number in the ICML version was not checked here).

At m = c' = c = 1 the test reads Phi(mu / 2) < tau: one guess is right with
probability at most Phi(mu / 2) under mu-GDP (the best test's accuracy at
equal priors, Dong, Roth and Su 2022), the closed form tests/test_one_run.py
checks.  With the epsilon-DP curve (f_inv(y) = max(e^-epsilon y, 1 -
e^epsilon (1 - y))) and every guess right it gives SNJ's ceiling
logit(tau^(1 / c')) exactly, and within 1.5 % below SNJ's binomial bound
on the other cases the tests compute: the two analyses agree where both
apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

MU_MAX = 64.0
"""The largest parameter searched: far beyond any bound m <= 10^6 guesses can show."""


def gaussian_inverse_blow_up(mu: float) -> Callable[[float], float]:
    """y -> Phi(Phi^-1(y) - mu): the inverse of mu-GDP's blow-up x -> 1 - G_mu(x) = Phi(Phi^-1(x) + mu)."""
    return lambda y: float(ndtr(ndtri(y) - mu))


def pure_dp_inverse_blow_up(epsilon: float) -> Callable[[float], float]:
    """y -> max(e^-epsilon y, 1 - e^epsilon (1 - y)): the inverse of epsilon-DP's blow-up
    x -> min(e^epsilon x, 1 - e^-epsilon (1 - x))."""
    return lambda y: max(math.exp(-epsilon) * y, 1.0 - math.exp(epsilon) * (1.0 - y))


def fdp_rejected(correct: int, guesses: int, canaries: int, inverse_blow_up: Callable[[float], float],
                 level: float) -> bool:
    """Whether ``correct`` right guesses of ``guesses`` about ``canaries`` canaries reject f-DP at ``level``, f
    given by the inverse of its blow-up (MMC's recursion, module docstring)."""
    if not 0 <= correct <= guesses <= canaries or guesses < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= canaries, guesses >= 1. Found {correct!r}, "
                         f"{guesses!r}, {canaries!r}.")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Found {level!r}.")
    share = guesses / canaries
    right, wrong = level * share * correct / guesses, level * share * (guesses - correct) / guesses
    for i in range(correct - 1, -1, -1):
        raised = max(wrong, inverse_blow_up(min(right, 1.0)))
        right += i / (guesses - i) * (raised - wrong)
        wrong = raised
    return right + wrong > share


def fdp_lower_bound(correct: int, guesses: int, canaries: int, confidence: float,
                    inverse_blow_up: Callable[[float], Callable[[float], float]]) -> float:
    """The largest parameter (mu, epsilon) of a family of curves, weaker as it grows, that the guesses reject at
    level 1 - ``confidence`` (0 when none is); ``inverse_blow_up(parameter)`` is the curve's inverse blow-up."""
    level = 1.0 - confidence

    def margin(parameter: float) -> float:  # > 0 where rejected; rejection gets harder as the parameter grows
        return 0.5 if fdp_rejected(correct, guesses, canaries, inverse_blow_up(parameter), level) else -0.5

    if margin(1e-9) < 0:
        return 0.0
    high = 1.0
    while margin(high) > 0 and high < MU_MAX:
        high *= 2.0
    if margin(high) > 0:
        return high
    return float(brentq(margin, 1e-9, high, xtol=1e-7))


def gdp_rejected(correct: int, guesses: int, canaries: int, mu: float, level: float) -> bool:
    """Whether the guesses reject mu-GDP at ``level`` (:func:`fdp_rejected` with the Gaussian curve)."""
    return fdp_rejected(correct, guesses, canaries, gaussian_inverse_blow_up(mu), level)


def one_run_gdp_lower_bound(correct: int, guesses: int, canaries: int, confidence: float) -> float:
    """The largest mu whose mu-GDP claim ``correct`` right guesses of ``guesses`` reject at level 1 -
    ``confidence`` (0 when none is): the one-run lower bound on mu (MMC, module docstring).

    Examples
    --------
    >>> one_run_gdp_lower_bound(1, 1, 1, 0.95)  # one right guess rejects nothing
    0.0
    """
    return fdp_lower_bound(correct, guesses, canaries, confidence, gaussian_inverse_blow_up)
