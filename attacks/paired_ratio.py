"""Confidence bounds on log((P(S) - delta) / Q(S)) and on P(S) - Q(S) from coupled samples.

When the auditor holds the mechanism's random generator it can draw the
outputs on D and D' from the same random numbers (common random numbers):
pair i is (X_i, Y_i) = (M(D; u_i), M(D'; u_i)), the pairs independent across
i.  Each coordinate keeps the mechanism's output law, so P(S) and Q(S) are
those of independent sampling, but 1{X_i in S} and 1{Y_i in S} agree on most
pairs and the log-ratio is pinned down by the few discordant ones.

With counts (n11, n10, n01, n00) of the pairs with both outputs in S, only
X, only Y and neither, p = pi11 + pi10 and q = pi11 + pi01.  The hypothesis
H0: p - delta = theta q is the linear constraint sum_k a_k pi_k = 0 on the
cell probabilities, with contrast a = (1 - theta - delta, 1 - delta,
-theta - delta, -delta) (using sum_k pi_k = 1), and its score statistic is

    Z(theta) = a_bar / sqrt(sum_k pi~_k a_k^2 / n),
    a_bar = sum_k n_k a_k / n = p_hat - delta - theta q_hat,

with pi~ the multinomial maximum-likelihood estimate under H0 (the score
test for a ratio of paired proportions of Nam and Blackwelder 2002 and
Tang, Tang and Chan 2003, shifted by delta as in
:mod:`attacks.binomial_ratio`).  Z falls as theta grows; the lower bound at
confidence ``level`` is the log of the theta where Z = Phi^{-1}(level).

The score bound is asymptotic and too liberal when few pairs are discordant
(0.93 to 0.944 coverage at nominal 0.95 with 3 to 20).  It is used only where
:func:`score_applies`: the marginal counts pass
:func:`attacks.binomial_ratio.score_applies` and at least ``MIN_DISCORDANT``
pairs are discordant.  Elsewhere the bound is the Clopper-Pearson split on
the marginal counts k_p = n11 + n10 and k_q = n11 + n01
(:func:`attacks.binomial_ratio.clopper_pearson_log_ratio_bound`), exact for
any coupling since each marginal count is binomial.  The same test at
theta = 1 with delta = d free bounds P(S) - Q(S) (:func:`difference_bound`:
Tango's 1998 score interval for a paired difference, with the same
fallback).  The coverage of the combined procedures is computed exactly by
enumerating the multinomial outcomes in ``tests/test_paired_ratio.py``
(ratio at least 0.9495 and 0.9902, difference 0.9470 and 0.9876, at
nominal 0.95 and 0.99).  It is valid however
the pairs are coupled (independent pairs too), provided the pairs are
independent of one another: a sampler must spend the same random numbers on
row i of its output whatever the input.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

from attacks import binomial_ratio

# The Lagrange multiplier's distance to the end of its interval is searched on a log scale down to
# e^-700 of the interval (smaller distances, a root beyond the end, are the boundary); 80 halvings of
# that log range resolve the distance to a relative 1e-21.
_LOG_R_RANGE = -700.0
_BISECTION_STEPS = 80
# The paired score bounds apply from this many discordant pairs (only X or only Y in S): with 10 to 20 the
# coverage of the ratio bound dips to 0.944 at nominal 0.95, with 30 it stays at 0.9497 or above
# (enumerated in tests/test_paired_ratio.py).
MIN_DISCORDANT = 30


def contrast(theta: float, delta: float) -> np.ndarray:
    """The a_k of H0 (module docstring), cells ordered (both, only X, only Y, neither)."""
    return np.array([1.0 - theta - delta, 1.0 - delta, -theta - delta, -delta])


def restricted_mle(counts, delta: float, theta: float) -> np.ndarray:
    """Cell probabilities maximising the multinomial likelihood of ``counts`` subject to p - delta = theta q.

    Vectorised over leading axes of ``counts`` (last axis: the four cells).
    Lagrange's condition gives pi_k = n_k / (n (1 + lambda a_k)), with lambda
    the root of g(lambda) = sum_k n_k a_k / (1 + lambda a_k), which falls with
    lambda, in the interval where every 1 + lambda a_k > 0 (an empty cell
    included: its Karush-Kuhn-Tucker condition).  The root has the sign of
    g(0) = n a_bar, so it lies between 0 and the end where 1 + lambda a_k
    vanishes for the only-Y cell (smallest a_k, when a_bar > 0) or the only-X
    cell (largest a_k, when a_bar < 0).  It is found by bisection on the log
    of its distance r to that end, so that a root next to the end (an empty
    or nearly empty boundary cell) keeps full relative precision: the
    boundary cell's 1 + lambda a_k is |a_k| r, computed without cancellation.
    When the root lies beyond the end (that cell empty and g not changing
    sign), lambda stops there and the mass left over goes to that cell.
    """
    counts = np.asarray(counts, dtype=float)
    a = contrast(theta, delta)
    n = counts.sum(axis=-1)
    sign = np.sign(counts @ a)
    # g overflows to inf next to the end of the interval when the boundary cell is observed: its sign is what counts.
    with np.errstate(over="ignore"):
        boundary = np.where(sign > 0, 2, 1)
        end = -1.0 / a[boundary]  # lambda where the boundary cell's 1 + lambda a_k is 0; r runs over (0, |end|]
        far = np.log(np.abs(end))
        near = np.maximum(far + _LOG_R_RANGE, _LOG_R_RANGE)  # e^-700 is still a normal double
        at_end = sign * _lagrange_slope(counts, a, boundary, end, np.exp(near), theta)
        beyond = at_end > 0.0  # g keeps the sign of a_bar up to the end: the boundary cell is empty
        for _ in range(_BISECTION_STEPS):
            middle = (near + far) / 2
            toward_end = sign * _lagrange_slope(counts, a, boundary, end, np.exp(middle), theta) > 0.0
            near, far = np.where(toward_end, near, middle), np.where(toward_end, middle, far)
        r = np.where(beyond, np.exp(near), np.exp((near + far) / 2))
        cells = np.where(counts > 0, counts / (n[..., None] * _denominators(a, boundary, end, r, theta)), 0.0)
        # The observed cells hold 1 - lambda g(lambda) / n (sum_k n_k (1 + lambda a_k - lambda a_k) / (1 + lambda a_k));
        # the rest, lambda g / n, goes to the boundary cell (computed so, not as 1 - sum, to keep its digits).
        leftover = np.where(beyond, (end - np.sign(end) * r) * sign * at_end / n, 0.0)
        np.put_along_axis(cells, boundary[..., None], np.take_along_axis(cells, boundary[..., None], -1)
                          + leftover[..., None], axis=-1)
    return cells


def score_statistic(counts, delta: float, theta: float) -> np.ndarray:
    """Z(theta) of the module docstring, vectorised over leading axes of ``counts``."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=-1)
    a = contrast(theta, delta)
    excess = counts @ a / n
    variance = restricted_mle(counts, delta, theta) @ (a * a) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(variance > 0.0, excess / np.sqrt(variance), np.sign(excess) * np.inf)


def log_ratio_bound(counts, delta: float, level: float, lower: bool) -> float:
    """One-sided confidence bound on log((P(S) - delta) / Q(S)) from the paired ``counts`` at ``level``.

    The score bound (:func:`score_log_ratio_bound`) where :func:`score_applies`
    to the counts, else the Clopper-Pearson split on the marginal counts
    (:func:`attacks.binomial_ratio.clopper_pearson_log_ratio_bound`, valid
    for any coupling); module docstring.  Never +inf as a lower bound.
    """
    counts = _check_counts(counts)
    if score_applies(counts, delta):
        return score_log_ratio_bound(counts, delta, level, lower)
    return binomial_ratio.clopper_pearson_log_ratio_bound(*_marginal_counts(counts), delta, level, lower)


def p_value(counts, delta: float, claim: float) -> float:
    """One-sided p-value of H0: log((P(S) - delta) / Q(S)) <= claim, consistent with :func:`log_ratio_bound`."""
    counts = _check_counts(counts)
    if score_applies(counts, delta):
        return float(ndtr(-score_statistic(counts, delta, float(np.exp(claim)))))
    marginals = _marginal_counts(counts)
    return binomial_ratio.split_p_value(
        lambda level: binomial_ratio.clopper_pearson_log_ratio_bound(*marginals, delta, level, True), claim
    )


def score_applies(counts, delta: float):
    """Whether the paired score bound applies: the marginal counts pass
    :func:`attacks.binomial_ratio.score_applies` and at least
    ``MIN_DISCORDANT`` pairs are discordant (the score bound is pinned down by
    them; ``tests/test_paired_ratio.py`` enumerates the coverage of the
    combined rule).  Vectorised over leading axes of ``counts``."""
    counts = np.asarray(counts)
    return binomial_ratio.score_applies(*_marginal_counts(counts), delta) & (_discordant(counts) >= MIN_DISCORDANT)


def score_log_ratio_bound(counts, delta: float, level: float, lower: bool) -> float:
    """The paired score bound: the smallest psi with Z(e^psi) <= Phi^{-1}(level) (lower), the largest with
    Z(e^psi) >= -Phi^{-1}(level) (upper); -inf / inf beyond log-ratios of +-50
    (:func:`attacks.binomial_ratio.bound_from_score`).
    """
    return binomial_ratio.bound_from_score(lambda theta: float(score_statistic(counts, delta, theta)), level, lower)


def difference_bound(counts, level: float, lower: bool) -> float:
    """One-sided confidence bound on P(S) - Q(S) from the paired ``counts`` at ``level``, in [-1, 1].

    Where :func:`difference_score_applies`: the score test of H0: p - q = d for
    paired proportions (Tango 1998; the module's test at theta = 1, delta = d),
    inverted in d.  Else the Clopper-Pearson split on the marginal counts
    (:func:`attacks.binomial_ratio.clopper_pearson_difference_bound`), exactly
    valid for any coupling.
    """
    counts = _check_counts(counts)
    if difference_score_applies(counts):
        end = binomial_ratio.DIFFERENCE_END
        d = binomial_ratio.invert_score(lambda d: float(score_statistic(counts, d, 1.0)), level, lower, -end, end)
        return float(np.sign(d)) if abs(d) == end else d
    return binomial_ratio.clopper_pearson_difference_bound(*_marginal_counts(counts), level, lower)


def difference_p_value(counts, claim: float) -> float:
    """One-sided p-value of H0: P(S) - Q(S) <= claim, consistent with :func:`difference_bound`."""
    counts = _check_counts(counts)
    if claim <= -1.0 or claim >= 1.0:
        return float(claim >= 1.0)  # P(S) - Q(S) <= 1 always holds; <= -1 is below every lower bound
    if difference_score_applies(counts):
        return float(ndtr(-score_statistic(counts, claim, 1.0)))
    marginals = _marginal_counts(counts)
    return binomial_ratio.split_p_value(
        lambda level: binomial_ratio.clopper_pearson_difference_bound(*marginals, level, True), claim
    )


def difference_score_applies(counts):
    """Whether the paired score bound on P(S) - Q(S) applies: the marginal counts pass
    :func:`attacks.binomial_ratio.difference_score_applies` and at least ``MIN_DISCORDANT``
    pairs are discordant.  Vectorised over leading axes of ``counts``."""
    counts = np.asarray(counts)
    return binomial_ratio.difference_score_applies(*_marginal_counts(counts)) & (_discordant(counts) >= MIN_DISCORDANT)


def smoothed_log_ratio(counts, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """log((p - delta) / q) of cells smoothed by a quarter count each, and its delta-method variance for one pair.

    The paired twin of :func:`attacks.binomial_ratio.smoothed_log_ratio`
    (a half count for p and for q).  With influence 1{X in S} / (p - delta)
    - 1{Y in S} / q, the variance of psi for one pair is

        v = p (1 - p) / (p - delta)^2 + (1 - q) / q - 2 (pi11 - p q) / ((p - delta) q),

    and v / n at n pairs.  Vectorised over leading axes of ``counts``; psi is
    -inf where p <= delta.
    """
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=-1)
    both, only_x, only_y = ((counts[..., k] + 0.25) / (n + 1.0) for k in range(3))
    p, q = both + only_x, both + only_y
    excess = p - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.where(excess > 0, np.log(excess / q), -np.inf)
        variance = p * (1 - p) / excess**2 + (1 - q) / q - 2 * (both - p * q) / (excess * q)
    return psi, np.clip(variance, 0.0, None)


def projected_lower_bound(counts, delta: float, level: float, n_eval: int, observed: bool = True) -> np.ndarray:
    """A lower bound to choose an attack set by, before it is scored on ``n_eval`` fresh pairs.

    The paired twin of :func:`attacks.binomial_ratio.projected_lower_bound`:
    psi - z_level sd on the smoothed cells (:func:`smoothed_log_ratio`), the
    variance taken at the observed number of pairs *plus* at ``n_eval`` (the
    ratio seen on these counts is itself uncertain: without that term the
    choice chases tails whose few counts inflate it; ``observed=False``
    leaves that term out, for the check stage's choice among a few fitted
    statistics, :func:`attacks.selection.set_promise`).  Where the counts
    projected to ``n_eval`` pairs are too few for the score bound
    (:func:`score_applies`), the Clopper-Pearson split of the projected
    marginals instead (:func:`attacks.binomial_ratio.projected_split_bound`),
    as the final bound will be.  Vectorised over leading axes of ``counts``;
    -inf where p <= delta.
    """
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=-1)
    psi, variance = smoothed_log_ratio(counts, delta)
    spread = np.sqrt(variance * (observed / n + 1.0 / n_eval))
    with np.errstate(invalid="ignore"):
        bound = np.where(np.isfinite(psi), psi - ndtri(level) * spread, -np.inf)
    k_p, _, k_q, _ = _marginal_counts(counts)
    mass_p, mass_q = binomial_ratio.smoothed_proportion(k_p, n), binomial_ratio.smoothed_proportion(k_q, n)
    score = score_applies(counts * (n_eval / n)[..., None], delta)
    return np.where(score, bound, binomial_ratio.projected_split_bound(mass_p, mass_q, delta, level, n_eval))


def paired_counts(in_x: np.ndarray, in_y: np.ndarray) -> np.ndarray:
    """(n11, n10, n01, n00) of boolean memberships of the coupled outputs X_i and Y_i in S."""
    in_x, in_y = np.asarray(in_x, dtype=bool), np.asarray(in_y, dtype=bool)
    if in_x.shape != in_y.shape:
        raise ValueError(f"in_x and in_y must have the same shape (one entry per pair). Found {in_x.shape} and {in_y.shape}.")
    both = int(np.count_nonzero(in_x & in_y))
    only_x, only_y = int(np.count_nonzero(in_x)) - both, int(np.count_nonzero(in_y)) - both
    return np.array([both, only_x, only_y, in_x.size - both - only_x - only_y], dtype=np.int64)


def _denominators(a: np.ndarray, boundary: np.ndarray, end: np.ndarray, r: np.ndarray, theta: float) -> np.ndarray:
    """1 + lambda a_k at lambda = end - sign(end) r, free of cancellation.

    With end = -1 / a_b (b the boundary cell), 1 + lambda a_k =
    (a_b - a_k) / a_b - sign(end) r a_k, and a_b - a_k = (u_b - u_k) - theta (v_b - v_k)
    exactly, for a_k = u_k - theta v_k - delta with u = (1, 1, 0, 0), v = (1, 0, 1, 0):
    at large theta a_11 and a_01 agree to many digits, and subtracting them
    would lose the difference.
    """
    u, v = np.array([1.0, 1.0, 0.0, 0.0]), np.array([1.0, 0.0, 1.0, 0.0])
    gap = (u[boundary][..., None] - u) - theta * (v[boundary][..., None] - v)
    return gap / a[boundary][..., None] - (np.sign(end) * r)[..., None] * a


def _lagrange_slope(counts, a, boundary, end, r, theta: float) -> np.ndarray:
    """g(lambda) = sum_k n_k a_k / (1 + lambda a_k) at distance r from the end, empty cells left out."""
    return np.sum(np.where(counts > 0, counts * a / _denominators(a, boundary, end, r, theta), 0.0), axis=-1)


def _marginal_counts(counts) -> tuple:
    """(k_p, n, k_q, n): the pairs with X in S and with Y in S, of n pairs; vectorised over leading axes."""
    counts = np.asarray(counts)
    n = counts.sum(axis=-1)
    return counts[..., 0] + counts[..., 1], n, counts[..., 0] + counts[..., 2], n


def _discordant(counts) -> np.ndarray:
    """Pairs with exactly one output in S (only X or only Y)."""
    return counts[..., 1] + counts[..., 2]


def _check_counts(counts) -> np.ndarray:
    counts = np.asarray(counts)
    if counts.shape != (4,) or np.any(counts < 0) or counts.sum() == 0:
        raise ValueError(
            f"counts must be four non-negative counts (both, only X, only Y, neither), not all zero. Found {counts!r}."
        )
    return counts
