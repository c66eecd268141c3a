"""Score confidence bounds for the privacy loss of one event, log((P(S) - delta) / Q(S)).

An (epsilon, delta)-DP claim says P(S) <= e^epsilon Q(S) + delta for every
event S (THEORY.md section 7).  With k_p of n_p outputs on D and k_q of n_q
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
large).  The bound is asymptotic; its exact coverage is computed by
enumerating the binomial outcomes in ``tests/test_binomial_ratio.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

# log(theta) is searched in [-_LOG_RANGE, _LOG_RANGE]: beyond it the bound is reported as -inf / inf.
_LOG_RANGE = 50.0


def restricted_mle(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, theta: float) -> float:
    """The q maximising the binomial likelihood of (k_p, k_q) subject to p = delta + theta q.

    The log-likelihood is concave in q on (0, min(1, (1 - delta) / theta)); its
    derivative is decreasing there and its root (or the boundary it tends to)
    is the maximiser.  For delta = 0 this is the closed-form root of
    Farrington and Manning's quadratic; one bracketed root search serves both.
    """
    upper = min(1.0, (1.0 - delta) / theta)

    def slope(q: float) -> float:
        p = delta + theta * q
        return (
            theta * (_ratio(k_p, p) - _ratio(n_p - k_p, 1.0 - p)) + _ratio(k_q, q) - _ratio(n_q - k_q, 1.0 - q)
        )

    tiny = 1e-15 * upper
    low, high = tiny, upper - tiny
    if slope(low) <= 0.0:
        return 0.0
    if slope(high) >= 0.0:
        return upper
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

    Lower bound: the smallest psi with Z(e^psi) <= Phi^{-1}(level); upper
    bound: the largest psi with Z(e^psi) >= -Phi^{-1}(level).  -inf / inf
    when no such psi lies in [-50, 50] (e.g. P(S) not above delta, or no
    output of D' in S and too few of D to bound the ratio).
    """
    return bound_from_score(lambda theta: score_statistic(k_p, n_p, k_q, n_q, delta, theta), level, lower)


def bound_from_score(statistic: Callable[[float], float], level: float, lower: bool) -> float:
    """Invert a score statistic Z(theta) that falls as theta grows into a bound on psi = log(theta).

    Lower bound at confidence ``level``: the psi where Z(e^psi) = Phi^{-1}(level);
    upper bound: where Z(e^psi) = -Phi^{-1}(level).  -inf / inf when the root
    lies beyond [-50, 50].
    """
    target = norm.ppf(level) if lower else -norm.ppf(level)

    def excess(psi: float) -> float:
        return statistic(float(np.exp(psi))) - target

    if excess(-_LOG_RANGE) <= 0.0:
        return -np.inf
    if excess(_LOG_RANGE) >= 0.0:
        return np.inf
    return brentq(excess, -_LOG_RANGE, _LOG_RANGE, xtol=1e-12)


def p_value(k_p: int, n_p: int, k_q: int, n_q: int, delta: float, claim: float) -> float:
    """One-sided p-value of H0: log((P(S) - delta) / Q(S)) <= claim, consistent with the lower bound."""
    return float(norm.sf(score_statistic(k_p, n_p, k_q, n_q, delta, float(np.exp(claim)))))


def smoothed_log_ratio(k_p, n_p, k_q, n_q, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log((p - delta) / q) of proportions smoothed by a half count, and its delta-method variances.

    Vectorised over arrays of counts.  The smoothing keeps an empty count from
    promising an infinite ratio.  Returns (psi, v_p, v_q): the log-ratio, -inf
    where p <= delta, and the variances of its two terms for one sample per
    law, p (1 - p) / (p - delta)^2 and (1 - q) / q; at n_p and n_q samples
    the variance of psi is v_p / n_p + v_q / n_q.
    """
    p = (np.asarray(k_p, dtype=float) + 0.5) / (n_p + 1.0)
    q = (np.asarray(k_q, dtype=float) + 0.5) / (n_q + 1.0)
    excess = p - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.where(excess > 0, np.log(excess / q), -np.inf)
        return psi, p * (1.0 - p) / excess**2, (1.0 - q) / q


def projected_lower_bound(k_p, n_p, k_q, n_q, delta: float, level: float, n_eval: int) -> np.ndarray:
    """A lower bound to choose an attack set by, before it is scored on ``n_eval`` fresh samples per law.

    Vectorised over arrays of counts (the candidate attack sets of one
    score).  It is the delta-method form of the score bound on the smoothed
    log-ratio (:func:`smoothed_log_ratio`), psi - z_level sd, with the
    variance of psi at the observed sizes *plus* at ``n_eval``: the ratio
    seen on these counts is itself uncertain, and without that term the
    choice chases tails whose few counts inflate the ratio (a winner's
    curse); with it, a rare event with a large ratio wins only when both the
    observed and the evaluation counts pin its ratio down.  -inf where
    p <= delta.
    """
    psi, variance_p, variance_q = smoothed_log_ratio(k_p, n_p, k_q, n_q, delta)
    with np.errstate(invalid="ignore"):
        spread = np.sqrt(variance_p * (1.0 / n_p + 1.0 / n_eval) + variance_q * (1.0 / n_q + 1.0 / n_eval))
        return np.where(np.isfinite(psi), psi - norm.ppf(level) * spread, -np.inf)


def _ratio(count: float, mass: float) -> float:
    """count / mass, with 0 / 0 = 0 (a term whose count is zero does not constrain the likelihood)."""
    return 0.0 if count == 0 else count / mass
