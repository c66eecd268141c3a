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
checks.
"""

from __future__ import annotations

from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

MU_MAX = 64.0
"""The largest mu searched: far beyond any bound m <= 10^6 guesses can show."""


def gdp_rejected(correct: int, guesses: int, canaries: int, mu: float, level: float) -> bool:
    """Whether ``correct`` right guesses of ``guesses`` about ``canaries`` canaries reject mu-GDP at ``level``
    (MMC's recursion, module docstring)."""
    if not 0 <= correct <= guesses <= canaries or guesses < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= canaries, guesses >= 1. Found {correct!r}, "
                         f"{guesses!r}, {canaries!r}.")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Found {level!r}.")
    share = guesses / canaries
    right, wrong = level * share * correct / guesses, level * share * (guesses - correct) / guesses
    for i in range(correct - 1, -1, -1):
        raised = max(wrong, float(ndtr(ndtri(min(right, 1.0)) - mu)))
        right += i / (guesses - i) * (raised - wrong)
        wrong = raised
    return right + wrong > share


def one_run_gdp_lower_bound(correct: int, guesses: int, canaries: int, confidence: float) -> float:
    """The largest mu whose mu-GDP claim ``correct`` right guesses of ``guesses`` reject at level 1 -
    ``confidence`` (0 when none is): the one-run lower bound on mu (MMC, module docstring).

    Examples
    --------
    >>> one_run_gdp_lower_bound(1, 1, 1, 0.95)  # one right guess rejects nothing
    0.0
    """
    level = 1.0 - confidence

    def margin(mu: float) -> float:  # > 0 where rejected; rejection gets harder as mu grows
        return 0.5 if gdp_rejected(correct, guesses, canaries, mu, level) else -0.5

    if margin(1e-9) < 0:
        return 0.0
    high = 1.0
    while margin(high) > 0 and high < MU_MAX:
        high *= 2.0
    if margin(high) > 0:
        return high
    return float(brentq(margin, 1e-9, high, xtol=1e-6))
