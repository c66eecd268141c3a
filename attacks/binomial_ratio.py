"""Confidence bounds for the privacy loss of one event, log((P(S) - delta) / Q(S)), and for P(S) - Q(S).

An (epsilon, delta)-DP claim says P(S) <= e^epsilon Q(S) + delta for every
event S (docs/theory.md section 7).  With k_p of n_p outputs on D and k_q of n_q
outputs on D' in S (two independent binomial counts) the bound on
psi = log((p - delta) / q) inverts the score test of H0: p = delta + theta q,

    Z(theta) = (p_hat - delta - theta q_hat)
               / sqrt(p0 (1 - p0) / n_p + theta^2 q0 (1 - q0) / n_q),

with (p0, q0) = (delta + theta q0, q0) the maximum-likelihood estimate under
H0: the Farrington-Manning (1990) / Miettinen-Nurminen (1985) score
statistic for a ratio of two proportions, shifted by delta.  Z falls as
theta grows; the lower bound at confidence ``level`` is the log of the theta
where Z = Phi^{-1}(level).  One joint statistic for the ratio is about 1.7
times tighter than two exact Clopper-Pearson bounds at Bonferroni-split
levels (1.645 sqrt(2) against 2 x 1.96 standard errors when both counts are
large).

The score bound is asymptotic: from a zero or tiny count of Q it can promise
a ratio the data do not support (at k_q = 0 the old plug-in read infinity;
k_q = 0 of n_q only bounds Q(S) above by 1 - (alpha / 2)^(1 / n_q), about
3.7 / n_q at 95%, so the bound grows like log n).  :func:`log_ratio_bound`
therefore uses it only where :func:`score_applies` (k_q, k_p - delta n_p,
n_p - k_p and n_q - k_q all at least ``MIN_SCORE_COUNT``), and elsewhere the
exact Clopper-Pearson (1934) bounds on P(S) and Q(S), each at confidence
1 - (1 - level) / 2, combined by the union bound
(:func:`clopper_pearson_log_ratio_bound`; docs/theory.md section 7, the standard
black-box audit).  The split rests on nothing but each count being binomial,
so it also holds for coupled samples.  The switch depends on the counts, so
the coverage of the combined procedure is computed exactly by enumerating
the binomial outcomes in ``tests/test_binomial_ratio.py``: at least 0.9493
at nominal 0.95 and 0.9894 at 0.99 over n = 50 to 3000, Q(S) from 1e-10 to
0.6, ratios up to e^20, delta 0 and 0.01 (the dip below nominal is the score
bound's own at moderate counts, not the switch).  :func:`p_value` follows the same switch, so
p_value(c) <= 1 - level exactly when log_ratio_bound(level) >= c.

The same test at theta = 1 with the shift free, H0: p - q = d, bounds the
difference P(S) - Q(S) of an IPM attack set (:func:`difference_bound`; the
Miettinen-Nurminen / Farrington-Manning score interval for a difference),
again with the Clopper-Pearson split where a count or a count outside S is
below ``MIN_SCORE_COUNT``, as on separable samples (measured coverage at
least 0.9487 at nominal 0.95 and 0.9895 at 0.99).  All bounds assume the outputs are
independent draws from the two laws; none is +inf as a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

# log(theta) is searched in [-_LOG_RANGE, _LOG_RANGE]: beyond it the bound is reported as -inf / inf.
_LOG_RANGE = 50.0
# The difference d = P(S) - Q(S) is searched in [-DIFFERENCE_END, DIFFERENCE_END] (at +-1 the
# restricted likelihood has no room); a bound at an end is reported as -1 / 1.
DIFFERENCE_END = 1.0 - 1e-9
# The score bounds apply when every count they rest on reaches this (score_applies, difference_score_applies);
# below it the Clopper-Pearson split takes over (the combined rule's exact coverage is enumerated in
# tests/test_binomial_ratio.py: with k_q and k_p - delta n_p at 5 or more the ratio bound's coverage dipped
# to 0.946 at nominal 0.95, where few outputs of P fell outside S; with all four counts at 10, to 0.948).
MIN_SCORE_COUNT = 10
# split_p_value bisects log alpha over [log 1e-300, 0]; 64 halvings resolve it to 4e-17.
_LOG_SMALLEST_ALPHA = np.log(1e-300)
_P_VALUE_STEPS = 64


def restricted_mle(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, theta: float) -> float:
    """The q maximising the binomial likelihood of (k_p, k_q) subject to p = delta + theta q.

    The log-likelihood is concave in q on the interval where p and q are
    probabilities, (max(0, -delta / theta), min(1, (1 - delta) / theta));
    its derivative is decreasing there and its root (or the end it tends to)
    is the maximiser.  For delta = 0 this is the closed-form root of
    Farrington and Manning's quadratic; one bracketed root search serves
    every case, a negative delta (a difference p - q = delta < 0, theta = 1)
    included.
    """
    start, end = max(0.0, -delta / theta), min(1.0, (1.0 - delta) / theta)

    def slope(q: float) -> float:
        p = delta + theta * q
        return (
            theta * (_ratio(k_p, p) - _ratio(n_p - k_p, 1.0 - p)) + _ratio(k_q, q) - _ratio(n_q - k_q, 1.0 - q)
        )

    tiny = 1e-15 * (end - start)
    low, high = _strictly_inside(start + tiny, end, delta, theta), _strictly_inside(end - tiny, start, delta, theta)
    if slope(low) <= 0.0:
        return start
    if slope(high) >= 0.0:
        return end
    return brentq(slope, low, high, xtol=1e-300, rtol=4 * np.finfo(float).eps)


def score_statistic(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, theta: float) -> float:
    """Z(theta) of the module docstring: large when P(S) - delta exceeds theta Q(S)."""
    q0 = restricted_mle(k_p, n_p, k_q, n_q, delta, theta)
    p0 = delta + theta * q0
    numerator = k_p / n_p - delta - theta * k_q / n_q
    variance = p0 * (1.0 - p0) / n_p + theta**2 * q0 * (1.0 - q0) / n_q
    if variance <= 0.0:
        return float(np.sign(numerator) * np.inf) if numerator else 0.0
    return float(numerator / np.sqrt(variance))


def log_ratio_bound(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, level: float, lower: bool) -> float:
    """One-sided confidence bound on log((P(S) - delta) / Q(S)) at confidence ``level``.

    The score bound (:func:`score_log_ratio_bound`) where
    :func:`score_applies` to the counts, else the Clopper-Pearson split
    (:func:`clopper_pearson_log_ratio_bound`); module docstring.  Never +inf
    as a lower bound (finite counts never prove an infinite ratio); -inf
    when P(S) may not exceed delta.
    """
    if score_applies(k_p, n_p, k_q, n_q, delta):
        return score_log_ratio_bound(k_p, n_p, k_q, n_q, delta, level, lower)
    return clopper_pearson_log_ratio_bound(k_p, n_p, k_q, n_q, delta, level, lower)


def p_value(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, claim: float) -> float:
    """One-sided p-value of H0: log((P(S) - delta) / Q(S)) <= claim, consistent with :func:`log_ratio_bound`.

    p_value(claim) <= 1 - level exactly when log_ratio_bound(level) >= claim:
    the same rule (:func:`score_applies`) picks the score test or the
    Clopper-Pearson split.
    """
    if score_applies(k_p, n_p, k_q, n_q, delta):
        return float(ndtr(-score_statistic(k_p, n_p, k_q, n_q, delta, float(np.exp(claim)))))
    return split_p_value(lambda level: clopper_pearson_log_ratio_bound(k_p, n_p, k_q, n_q, delta, level, True), claim)


def score_applies(k_p, n_p, k_q, n_q, delta: float):
    """Whether the counts are large enough for the score bound on the ratio.

    k_q, k_p - delta n_p, n_p - k_p and n_q - k_q must each reach
    ``MIN_SCORE_COUNT``.  Below that the score bound can promise too much
    (from a zero or tiny count of Q, or from few outputs of P outside S);
    ``tests/test_binomial_ratio.py`` enumerates the coverage of the combined
    rule.  Vectorised over counts.
    """
    return _smallest(k_q, np.subtract(k_p, delta * np.asarray(n_p)), np.subtract(n_p, k_p), np.subtract(n_q, k_q)) >= MIN_SCORE_COUNT


def score_log_ratio_bound(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, level: float, lower: bool) -> float:
    """The score bound: the smallest psi with Z(e^psi) <= Phi^{-1}(level) (lower), the largest with
    Z(e^psi) >= -Phi^{-1}(level) (upper); -inf / inf when no such psi lies in [-50, 50].
    """
    return bound_from_score(lambda theta: score_statistic(k_p, n_p, k_q, n_q, delta, theta), level, lower)


def clopper_pearson_bounds(k, n, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson (1934) bounds (low, high) on a binomial proportion, each at confidence ``level``.

    low is the (1 - level) quantile of Beta(k, n - k + 1) (0 when k = 0) and
    high the level quantile of Beta(k + 1, n - k) (1 when k = n): the exact
    tail inversion, P(low > p) <= 1 - level and P(high < p) <= 1 - level
    for every p (``scipy.stats.binomtest(...).proportion_ci(method="exact")``
    one-sided).  At k = 0, high = 1 - (1 - level)^(1/n).  Vectorised.
    """
    from scipy.stats import beta  # loaded by exact bounds only: a kl or renyi audit never imports scipy.stats

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    low = np.where(k > 0, beta.ppf(1.0 - level, np.maximum(k, 1.0), n - k + 1.0), 0.0)
    high = np.where(k < n, beta.ppf(level, k + 1.0, np.maximum(n - k, 1.0)), 1.0)
    return low, high


def clopper_pearson_log_ratio_bound(k_p, n_p: int, k_q, n_q: int, delta: float, level: float, lower: bool):
    """Bound on log((P(S) - delta) / Q(S)) from Clopper-Pearson bounds on P(S) and Q(S) at Bonferroni-split levels.

    Lower: log((low_P - delta) / high_Q), each one-sided bound at confidence
    1 - (1 - level) / 2 (:func:`clopper_pearson_bounds`), so that both hold
    together with probability at least ``level`` (the union bound) for any
    joint law of the two counts: exactly valid at any count, for coupled
    samples too (it uses the marginal counts only).  Upper:
    log((high_P - delta) / low_Q).  The lower bound is finite, since
    high_Q > 0, or -inf when low_P <= delta; the upper one is +inf when
    k_q = 0 and -inf when high_P <= delta.  Vectorised over counts.
    """
    split = 1.0 - (1.0 - level) / 2.0
    low_p, high_p = clopper_pearson_bounds(k_p, n_p, split)
    low_q, high_q = clopper_pearson_bounds(k_q, n_q, split)
    excess, mass_q = (low_p - delta, high_q) if lower else (high_p - delta, low_q)
    with np.errstate(divide="ignore"):
        bound = np.where(excess > 0.0, np.log(np.where(excess > 0.0, excess, 1.0)) - np.log(mass_q), -np.inf)
    return float(bound) if bound.ndim == 0 else bound


def split_p_value(lower_bound: Callable[[float], float], claim: float) -> float:
    """The p-value of H0: psi <= claim that matches a lower bound which falls as its level grows.

    The smallest alpha with lower_bound(1 - alpha) >= claim (1 when even
    alpha = 1 falls short), so that p <= 1 - level exactly when
    lower_bound(level) >= claim (to a relative 1e-16 in alpha); found by
    bisection on log alpha over [1e-300, 1].
    """
    if not lower_bound(0.0) >= claim:
        return 1.0
    low, high = _LOG_SMALLEST_ALPHA, 0.0
    if lower_bound(1.0 - np.exp(low)) >= claim:
        return float(np.exp(low))
    for _ in range(_P_VALUE_STEPS):  # invariant: lower_bound(1 - e^low) < claim <= lower_bound(1 - e^high)
        middle = (low + high) / 2
        if lower_bound(1.0 - np.exp(middle)) >= claim:
            high = middle
        else:
            low = middle
    return float(np.exp(high))


def bound_from_score(statistic: Callable[[float], float], level: float, lower: bool) -> float:
    """Invert a score statistic Z(theta) that falls as theta grows into a bound on psi = log(theta).

    Lower bound at confidence ``level``: the psi where Z(e^psi) = Phi^{-1}(level);
    upper bound: where Z(e^psi) = -Phi^{-1}(level).  -inf / inf when the root
    lies beyond [-50, 50].
    """
    psi = invert_score(lambda psi: statistic(float(np.exp(psi))), level, lower, -_LOG_RANGE, _LOG_RANGE)
    return -np.inf if psi == -_LOG_RANGE else np.inf if psi == _LOG_RANGE else psi


def invert_score(statistic: Callable[[float], float], level: float, lower: bool, start: float, end: float) -> float:
    """The x in [start, end] where a falling statistic Z(x) = Phi^{-1}(level) (lower) or -Phi^{-1}(level) (upper).

    ``start`` when Z stays at or below the target, ``end`` when it stays at
    or above it.
    """
    target = ndtri(level) if lower else -ndtri(level)

    def excess(x: float) -> float:
        return statistic(x) - target

    if excess(start) <= 0.0:
        return start
    if excess(end) >= 0.0:
        return end
    return brentq(excess, start, end, xtol=1e-12)


def difference_bound(k_p: int, n_p: int, k_q: int, n_q: int, level: float, lower: bool) -> float:
    """One-sided confidence bound on P(S) - Q(S) at confidence ``level``, in [-1, 1].

    The score bound for a difference of two proportions (Miettinen and
    Nurminen 1985, without their n / (n - 1) factor; Farrington and Manning
    1990): the test of H0: p = d + q is the shifted-ratio score test of the
    module docstring at theta = 1, delta = d, inverted in d; where
    :func:`difference_score_applies` to the counts.  Else the Clopper-Pearson
    split: low_P - high_Q (lower) or high_P - low_Q (upper), each one-sided
    bound at confidence 1 - (1 - level) / 2, exactly valid at any count and
    for any joint law of the counts (coupled samples too).
    """
    if difference_score_applies(k_p, n_p, k_q, n_q):
        d = invert_score(lambda d: score_statistic(k_p, n_p, k_q, n_q, d, 1.0), level, lower, -DIFFERENCE_END, DIFFERENCE_END)
        return float(np.sign(d)) if abs(d) == DIFFERENCE_END else d
    return clopper_pearson_difference_bound(k_p, n_p, k_q, n_q, level, lower)


def difference_p_value(k_p: int, n_p: int, k_q: int, n_q: int, claim: float) -> float:
    """One-sided p-value of H0: P(S) - Q(S) <= claim, consistent with :func:`difference_bound`."""
    if claim <= -1.0 or claim >= 1.0:
        return float(claim >= 1.0)  # P(S) - Q(S) <= 1 always holds; <= -1 is below every lower bound
    if difference_score_applies(k_p, n_p, k_q, n_q):
        return float(ndtr(-score_statistic(k_p, n_p, k_q, n_q, claim, 1.0)))
    return split_p_value(lambda level: clopper_pearson_difference_bound(k_p, n_p, k_q, n_q, level, True), claim)


def difference_score_applies(k_p, n_p, k_q, n_q):
    """Whether the score bound on P(S) - Q(S) applies: each count, and each count of outputs
    outside S, at least ``MIN_SCORE_COUNT`` (separable samples, with counts 0 or n, get the
    Clopper-Pearson split; ``tests/test_binomial_ratio.py`` enumerates the coverage).  Vectorised."""
    return _smallest(k_p, np.subtract(n_p, k_p), k_q, np.subtract(n_q, k_q)) >= MIN_SCORE_COUNT


def clopper_pearson_difference_bound(k_p, n_p: int, k_q, n_q: int, level: float, lower: bool):
    """low_P - high_Q (lower) or high_P - low_Q (upper) at Bonferroni-split levels (:func:`difference_bound`).

    Vectorised over counts.
    """
    split = 1.0 - (1.0 - level) / 2.0
    low_p, high_p = clopper_pearson_bounds(k_p, n_p, split)
    low_q, high_q = clopper_pearson_bounds(k_q, n_q, split)
    bound = low_p - high_q if lower else high_p - low_q
    return float(bound) if bound.ndim == 0 else bound


def smoothed_log_ratio(k_p, n_p, k_q, n_q, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log((p - delta) / q) of proportions smoothed by a half count, and its delta-method variances.

    Vectorised over arrays of counts.  The smoothing keeps an empty count from
    promising an infinite ratio.  Returns (psi, v_p, v_q): the log-ratio, -inf
    where p <= delta, and the variances of its two terms for one sample per
    law, p (1 - p) / (p - delta)^2 and (1 - q) / q; at n_p and n_q samples
    the variance of psi is v_p / n_p + v_q / n_q.
    """
    p, q = smoothed_proportion(k_p, n_p), smoothed_proportion(k_q, n_q)
    excess = p - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.where(excess > 0, np.log(excess / q), -np.inf)
        return psi, p * (1.0 - p) / excess**2, (1.0 - q) / q


def projected_lower_bound(k_p, n_p, k_q, n_q, delta: float, level: float, n_eval: int,
                          observed: bool = True) -> np.ndarray:
    """A lower bound to choose an attack set by, before it is scored on ``n_eval`` fresh samples per law.

    Vectorised over arrays of counts (the candidate attack sets of one
    score).  It is the delta-method form of the score bound on the smoothed
    log-ratio (:func:`smoothed_log_ratio`), psi - z_level sd, with the
    variance of psi at the observed sizes *plus* at ``n_eval``: the ratio
    seen on these counts is itself uncertain, and without that term the
    choice chases tails whose few counts inflate the ratio (a winner's
    curse); with it, a rare event with a large ratio wins only when both the
    observed and the evaluation counts pin its ratio down.  ``observed=False``
    leaves that term out (the check stage's choice among a few fitted
    statistics, :func:`attacks.selection.set_promise`).  Where the counts
    expected on the evaluation samples are too few for the score bound
    (:func:`score_applies`), the final bound will be the Clopper-Pearson
    split, and so is the projection (:func:`projected_split_bound`): else
    the choice would trade a zero count of Q for a few, which the split
    scores lower.  -inf where p <= delta.
    """
    psi, variance_p, variance_q = smoothed_log_ratio(k_p, n_p, k_q, n_q, delta)
    with np.errstate(invalid="ignore"):
        spread = np.sqrt(variance_p * (observed / n_p + 1.0 / n_eval) + variance_q * (observed / n_q + 1.0 / n_eval))
        bound = np.where(np.isfinite(psi), psi - ndtri(level) * spread, -np.inf)
    mass_p, mass_q = smoothed_proportion(k_p, n_p), smoothed_proportion(k_q, n_q)
    score = score_applies(mass_p * n_eval, n_eval, mass_q * n_eval, n_eval, delta)
    return np.where(score, bound, projected_split_bound(mass_p, mass_q, delta, level, n_eval))


def projected_split_bound(mass_p, mass_q, delta: float, level: float, n_eval: int) -> np.ndarray:
    """The Clopper-Pearson split (:func:`clopper_pearson_log_ratio_bound`) at the counts that smoothed
    proportions ``mass_p`` and ``mass_q`` project to ``n_eval`` samples per law (real-valued counts)."""
    return np.asarray(clopper_pearson_log_ratio_bound(mass_p * n_eval, n_eval, mass_q * n_eval, n_eval, delta, level, True))


def smoothed_proportion(k, n) -> np.ndarray:
    """(k + 1/2) / (n + 1): a proportion smoothed by a half count (Krichevsky-Trofimov), never 0 or 1."""
    return (np.asarray(k, dtype=float) + 0.5) / (np.asarray(n, dtype=float) + 1.0)


def _smallest(*counts):
    """Elementwise minimum of counts (a Python bool for scalars)."""
    smallest = np.minimum.reduce(np.broadcast_arrays(*counts))
    return smallest.item() if smallest.ndim == 0 else smallest


def _strictly_inside(q: float, toward: float, delta: float, theta: float) -> float:
    """q moved toward ``toward`` by doubling steps from one ulp until q and p = delta + theta q lie in (0, 1).

    Next to an end of the interval p or 1 - p can round to 0 while q does
    not: the likelihood's slope is then taken where it is finite.
    """
    step = abs(float(np.nextafter(q, toward)) - q)
    while not (0.0 < q < 1.0 and 0.0 < delta + theta * q < 1.0):
        q = q + step if toward > q else q - step
        step *= 2.0
    return q


def _ratio(count: float, mass: float) -> float:
    """count / mass, with 0 / 0 = 0 (a term whose count is zero does not constrain the likelihood)."""
    return 0.0 if count == 0 else count / mass
