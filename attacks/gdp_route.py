"""The Gaussian-DP route: a lower confidence bound on mu from the error rates of threshold tests.

Under the assumption that the trade-off curve of P = M(D) against Q = M(D')
is a Gaussian one, G_mu(a) = Phi(Phi^-1(1 - a) - mu) (Dong, Roth and Su,
"Gaussian differential privacy", J. R. Stat. Soc. B 84 (2022), Def. 2.6;
"DRS"), one test with type-I error a and type-II error b fixes
mu = Phi^-1(1 - a) - Phi^-1(b), and upper bounds a+ >= a and b+ >= b give

    mu_low = Phi^-1(1 - a+) - Phi^-1(b+) <= mu

(both terms decrease in their bound).  This is the route of the DP-SGD
auditing papers (e.g. Nasr et al., USENIX Security 2023; Annamalai and De
Cristofaro, NeurIPS 2024) to bounds past the ln n ceiling of count bounds:
it is valid only if the curve is Gaussian, so it is *never* a verdict on its
own (docs/theory.md, "The Gaussian-DP route").

The tests.  A score is large on P; the test rejects P when score <= t, with
a(t) = P(score <= t) and b(t) = Q(score > t) (a score that is not finite
counts as +inf).  The threshold t_j is the j-th smallest of the n_Q scores of
Q, for ranks j fixed before the data (:data:`GDP_FRACTIONS` of n_Q):

* b(t_j) = 1 - F_Q(Q_(j)) is at most in distribution 1 - U_(j) ~ Beta(n_Q - j + 1, j)
  (the probability integral transform; equality for a continuous F_Q), so
  its upper bound at level l is that law's 1 - l quantile, the
  Clopper-Pearson bound of the n_Q - j scores of Q above t_j;
* given t_j, the count of the independent scores of P at or below t_j is
  Binomial(n_P, a(t_j)): its exact Clopper-Pearson upper bound.

With J tests, each error is bounded at level (1 - confidence) / (2 J)
(Bonferroni over the 2 J bounds), so the largest mu_low over the tests holds
with probability at least ``confidence``.  The samples of P and Q must be
independent (not coupled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

GDP_FRACTIONS = (0.02, 0.05, 0.1, 0.16, 0.25, 0.35)
"""Type-II errors b targeted by the stored tests: rank j = round((1 - b) n_Q).  They span the symmetric point
Phi(-mu / 2) of G_mu for mu in about [0.8, 4] and the low-b tests that suit larger mu."""
ASSUMPTION = "assumes a Gaussian trade-off curve"
"""The label every reading of this route carries."""


def clopper_pearson_upper(count: int | np.ndarray, n: int, level: float) -> np.ndarray:
    """The exact upper confidence bound at level ``level`` on a binomial proportion from ``count`` of ``n``.

    The 1 - level quantile of Beta(count + 1, n - count); 1 at count = n (Clopper and Pearson, Biometrika 1934).
    """
    from scipy.stats import beta  # when a bound is read: an audit's import never loads scipy.stats

    count = np.asarray(count)
    with np.errstate(invalid="ignore"):
        bound = beta.ppf(1.0 - level, count + 1, np.maximum(n - count, 1))
    return np.where(count >= n, 1.0, bound)


def threshold_tests(scores_p: np.ndarray, scores_q: np.ndarray,
                    fractions: Sequence[float] = GDP_FRACTIONS) -> dict[str, Any]:
    """The tests {score <= t_j} at order statistics of Q's scores: what :func:`mu_lower_bound` needs.

    Parameters
    ----------
    scores_p, scores_q : arrays
        Independent scores of P and Q, large on P.
    fractions : sequence of float in (0, 1)
        Targeted type-II errors, fixed before the data; rank j = round((1 - b) n_Q), clipped to [1, n_Q].

    Returns
    -------
    dict
        ``n_p``, ``n_q`` (ints), ``ranks`` (j per test) and ``p_counts`` (scores of P at or below t_j).
    """
    p = np.nan_to_num(np.asarray(scores_p, dtype=float).ravel(), nan=np.inf)
    q = np.sort(np.nan_to_num(np.asarray(scores_q, dtype=float).ravel(), nan=np.inf))
    if p.size < 1 or q.size < 1:
        raise ValueError(f"threshold tests need scores of both P and Q. Found {p.size} and {q.size}.")
    if not all(0.0 < b < 1.0 for b in fractions):
        raise ValueError(f"fractions must lie in (0, 1). Found {list(fractions)!r}.")
    ranks = sorted({min(max(int(round((1.0 - b) * q.size)), 1), q.size) for b in fractions})
    counts = [int(np.count_nonzero(p <= q[j - 1])) for j in ranks]
    return {"n_p": int(p.size), "n_q": int(q.size), "ranks": ranks, "p_counts": counts}


@dataclass(frozen=True)
class GdpBound:
    """A lower confidence bound on mu through the Gaussian-DP route (module docstring).

    Attributes
    ----------
    mu_low : float
        max(0, the largest mu_low over the tests).
    type_one_upper, type_two_upper : float
        a+ and b+ of the test that gives it.
    n_p, n_q : int
        Scores of P and Q of that test.
    tests : int
        J, the tests the error was split over.
    confidence : float
        The joint confidence.
    """

    mu_low: float
    type_one_upper: float
    type_two_upper: float
    n_p: int
    n_q: int
    tests: int
    confidence: float


def mu_lower_bound(tests: Sequence[Mapping[str, Any]], confidence: float) -> GdpBound:
    """The largest mu_low over every test of ``tests`` (:func:`threshold_tests` dicts), error split over all.

    Each a and b is bounded at level (1 - confidence) / (2 J), J the total number of tests.

    Examples
    --------
    >>> tests = [{"n_p": 200, "n_q": 200, "ranks": [168], "p_counts": [32]}]
    >>> round(mu_lower_bound(tests, 0.95).mu_low, 3)
    1.556
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Found {confidence!r}.")
    total = sum(len(test["ranks"]) for test in tests)
    if total < 1:
        raise ValueError("the Gaussian-DP route needs at least one threshold test.")
    level = (1.0 - confidence) / (2.0 * total)
    best = GdpBound(0.0, 1.0, 1.0, 0, 0, total, confidence)
    for test in tests:
        n_p, n_q = int(test["n_p"]), int(test["n_q"])
        ranks, counts = np.asarray(test["ranks"]), np.asarray(test["p_counts"])
        type_one = clopper_pearson_upper(counts, n_p, level)
        type_two = clopper_pearson_upper(n_q - ranks, n_q, level)
        with np.errstate(divide="ignore"):
            mu = ndtri(1.0 - type_one) - ndtri(type_two)
        if mu.size and np.nanmax(mu) > best.mu_low:
            i = int(np.nanargmax(mu))
            best = GdpBound(float(mu[i]), float(type_one[i]), float(type_two[i]), n_p, n_q, total, confidence)
    return best
