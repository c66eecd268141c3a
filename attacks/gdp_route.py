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

The exact test (:func:`exact_p_value`, :func:`exact_mu_lower_bound`), for a
score fixed before the data (a declared class, :mod:`attacks.declared`):
one test of H0(mu0): T(P, Q) >= G_mu0 at the whole level, no split between a
and b.  With S = {score > t_j}, k_P = n_P - (P's count at or below t_j) and
k_Q = n_Q - j, G_mu0 bounds P(S) = 1 - a by P(S) <= h(Q(S)),
h(u) = Phi(Phi^-1(u) + mu0) (b >= Phi(Phi^-1(1 - a) - mu0) solved for
1 - a), and the p-value is

    p(mu0) = E[g(V)],  g(u) = P(Binomial(n_P, h(u)) >= k_P),  V ~ Beta(k_Q + 1, n_Q - k_Q).

Validity: g is increasing (h is, and a binomial tail increases in its
success probability).  Given t_j, P's count in S is Binomial(n_P, P(S)) with
P(S) <= h(Q(S)) under H0, so P(K_P >= k | t_j) <= g_k(Q(S)); and Q(S) <= V
in distribution (the probability integral transform, as above), so
P(K_P >= k) <= E[g_k(V)] = P(K' >= k) for the count K' of the model where
Q(S) = V and P(S) = h(V).  p(mu0) is K''s survival function at the observed
count, and decreasing in it, so P(p(mu0) <= alpha) <= P(K' >= k*) <= alpha
(k* the least count with p <= alpha): a valid p-value at every n.  The
expectation is bounded above by the upper Riemann sum over the quantiles of V
(g increasing: g at the quantile (i + 1) / m bounds g on the i-th slice), so
the computed p-value is at least the exact one (conservative), by at most 1 / m.
p(mu0) increases in mu0 (h does), so the set of mu0 not rejected at level
alpha is an interval (mu_low, inf): bisection returns its lower end,
from below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

GDP_FRACTIONS = (0.02, 0.05, 0.1, 0.16, 0.25, 0.35)
"""Type-II errors b targeted by the stored tests: rank j = round((1 - b) n_Q).  They span the symmetric point
Phi(-mu / 2) of G_mu for mu in about [0.8, 4] and the low-b tests that suit larger mu."""
ASSUMPTION = "assumes a Gaussian trade-off curve"
"""The label every reading of this route carries."""
QUADRATURE_NODES = 4096
"""m, the quantiles of Q(S)'s law the exact p-value's upper Riemann sum reads (its excess is at most 1 / m)."""
MU_TOLERANCE = 1e-4
"""The width at which the bisection of :func:`exact_mu_lower_bound` stops (it returns the bracket's lower end)."""


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
    exact : bool
        Whether that test is the exact one (:func:`exact_mu_lower_bound`); its a+ and b+ are then NaN.
    """

    mu_low: float
    type_one_upper: float
    type_two_upper: float
    n_p: int
    n_q: int
    tests: int
    confidence: float
    exact: bool = False


def exact_p_value(mu0: float, k_p: int, n_p: int, k_q: int, n_q: int, nodes: int = QUADRATURE_NODES) -> float:
    """p(mu0) of the exact test of H0: T(P, Q) >= G_mu0 from k_p of n_p scores of P and k_q of n_q of Q in
    S = {score > t_j}, k_q = n_q - j fixed before the data (module docstring): E[P(Binomial(n_p,
    Phi(Phi^-1(V) + mu0)) >= k_p)], V ~ Beta(k_q + 1, n_q - k_q), as an upper Riemann sum over ``nodes``
    quantiles of V (at least the exact value, by at most 1 / nodes).

    Examples
    --------
    >>> round(exact_p_value(0.0, 100, 200, 100, 200), 3)  # mu0 = 0: P = Q, both counts of the same law
    0.54
    """
    return _p_value_curve(k_p, n_p, k_q, n_q, nodes)(mu0)


def _p_value_curve(k_p: int, n_p: int, k_q: int, n_q: int, nodes: int) -> Callable[[float], float]:
    """mu0 -> :func:`exact_p_value` for these counts: V's ``nodes`` quantiles, which do not depend on mu0, drawn
    once (a bisection reads the curve some twenty times)."""
    if k_p <= 0:
        return lambda mu0: 1.0
    from scipy.stats import beta, binom  # when a bound is read (see clopper_pearson_upper)

    v = beta.ppf(np.arange(1, nodes + 1) / nodes, k_q + 1, max(n_q - k_q, 1)) if k_q < n_q else np.ones(nodes)
    normal_v = ndtri(v)
    return lambda mu0: float(np.mean(binom.sf(k_p - 1, n_p, ndtr(normal_v + mu0))))


def exact_mu_lower_bound(k_p: int, n_p: int, k_q: int, n_q: int, level: float, upper: float = 40.0) -> float:
    """mu_low: the infimum of the mu0 >= 0 that :func:`exact_p_value` does not reject at ``level`` (0 when mu0 = 0
    is not rejected), by bisection of the increasing p(mu0), from below (module docstring).

    Examples
    --------
    >>> round(exact_mu_lower_bound(168, 200, 32, 200, 0.05), 3)  # 1.556 from the Bonferroni pair
    1.721
    """
    p_value = _p_value_curve(k_p, n_p, k_q, n_q, QUADRATURE_NODES)
    if p_value(0.0) > level:
        return 0.0
    low, high = 0.0, upper
    if p_value(high) <= level:
        return high
    while high - low > MU_TOLERANCE:
        middle = (low + high) / 2.0
        low, high = (middle, high) if p_value(middle) <= level else (low, middle)
    return low


def mu_lower_bound(tests: Sequence[Mapping[str, Any]], confidence: float) -> GdpBound:
    """The largest mu_low over every test of ``tests`` (:func:`threshold_tests` dicts), error split over all.

    With J tests in all, a test whose dict has ``exact`` true (a score fixed before the data) is the exact test
    at level (1 - confidence) / J (:func:`exact_mu_lower_bound`); each a and b of another is bounded at level
    (1 - confidence) / (2 J).

    Examples
    --------
    >>> tests = [{"n_p": 200, "n_q": 200, "ranks": [168], "p_counts": [32]}]
    >>> round(mu_lower_bound(tests, 0.95).mu_low, 3)
    1.556
    >>> round(mu_lower_bound([{**tests[0], "exact": True}], 0.95).mu_low, 3)
    1.721
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
        if test.get("exact", False):
            for j, count in zip(ranks, counts):
                mu = exact_mu_lower_bound(n_p - int(count), n_p, n_q - int(j), n_q, 2.0 * level)
                if mu > best.mu_low:
                    best = GdpBound(mu, np.nan, np.nan, n_p, n_q, total, confidence, True)
            continue
        type_one = clopper_pearson_upper(counts, n_p, level)
        type_two = clopper_pearson_upper(n_q - ranks, n_q, level)
        with np.errstate(divide="ignore"):
            mu = ndtri(1.0 - type_one) - ndtri(type_two)
        if mu.size and np.nanmax(mu) > best.mu_low:
            i = int(np.nanargmax(mu))
            best = GdpBound(float(mu[i]), float(type_one[i]), float(type_two[i]), n_p, n_q, total, confidence)
    return best
