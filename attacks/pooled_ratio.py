"""Lower bounds on epsilon pooled over several attack sets: a weighted mean of their log-ratios.

An (epsilon, delta)-DP claim bounds the privacy loss of every event,
psi(S) = log((P(S) - delta) / Q(S)) <= epsilon (docs/theory.md section 7), so it
bounds every weighted mean sum_k w_k psi(S_k) with weights w_k >= 0 summing
to one.  A lower confidence bound on such a mean, its sets and weights fixed
before the samples that estimate it are drawn, is therefore a lower
confidence bound on epsilon.

The mean helps when several sets share (nearly) the largest log-ratio and
their estimates are not perfectly correlated.  The case in point is a
mechanism whose outputs on D' are those on D shifted, e.g. report-noisy-max
releasing the noisy maximum (Y = X + 1 on coupled pairs): every set
{x <= t} in the lower tail has the same ratio e^epsilon, and with
t_k = -k the mean over k < K telescopes to (log N(X <= 0) - log N(X <= -K)) / K,
whose variance at K = 6 and epsilon = 1/4 is a third of that of the best single set
(:mod:`attacks.paired_ratio`: (e^epsilon - 1) / P(S) per pair).

Estimator and interval (the delta method).  With a_ik = 1{X_i in S_k},
b_ik = 1{Y_i in S_k}, p_k = P(S_k), q_k = Q(S_k), the estimate
psi_hat_k = log((p_hat_k - delta) / q_hat_k) has influence
a_ik / (p_k - delta) - b_ik / q_k, and

    Var(sum_k w_k psi_hat_k) = w' Sigma w / n,

where Sigma is the covariance of the influence vector of one coupled pair
(:func:`influence_covariance`), or, for two independent samples of n
outputs each, the covariance of a / (p - delta) under P plus that of b / q
under Q.  The lower bound at confidence ``level`` is

    w' psi_hat - Phi^{-1}(level) sqrt(w' Sigma_hat w / n)

(Wald).  It is asymptotic and needs every weighted set to hold many
samples of both laws; with one set and few counts the score bounds of
:mod:`attacks.binomial_ratio` and :mod:`attacks.paired_ratio` are more
accurate.  Its coverage is measured in ``tests/test_pooled_ratio.py``.

All the statistics are functions of the counts held by :class:`EventMoments`
(memberships summed, and their cross-products), which add up over chunks of
samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import nnls
from scipy.special import ndtri

_BLOCK_ROWS = 2**18  # rows per float32 product: exact (float32 counts every integer up to 2^24), and small in memory


@dataclass(frozen=True)
class EventMoments:
    """Counts of K attack sets on n coupled pairs (X_i, Y_i), or on n outputs of each law.

    ``in_p[k]`` = #{i: X_i in S_k}, ``in_q[k]`` = #{i: Y_i in S_k};
    ``pp[j, k]`` = #{i: X_i in S_j and S_k}, ``qq[j, k]`` likewise for Y;
    ``pq[j, k]`` = #{i: X_i in S_j and Y_i in S_k}, which only means
    something for coupled pairs.
    """

    n: int
    in_p: np.ndarray
    in_q: np.ndarray
    pp: np.ndarray
    qq: np.ndarray
    pq: np.ndarray

    @classmethod
    def from_memberships(cls, in_x, in_y) -> EventMoments:
        """Counts from boolean memberships of shape (n, K): row i of ``in_x`` and ``in_y`` is pair i."""
        in_x, in_y = np.asarray(in_x, dtype=bool), np.asarray(in_y, dtype=bool)
        if in_x.ndim != 2 or in_x.shape != in_y.shape:
            raise ValueError(
                "in_x and in_y must be boolean arrays of the same shape (n_samples, n_sets). "
                f"Found shapes {in_x.shape} and {in_y.shape}."
            )
        return cls(in_x.shape[0], in_x.sum(axis=0), in_y.sum(axis=0),
                   _co_occurrences(in_x, in_x), _co_occurrences(in_y, in_y), _co_occurrences(in_x, in_y))

    @classmethod
    def from_levels(cls, level_x, level_y, n_sets: int) -> EventMoments:
        """Counts of nested sets S_0 ⊇ S_1 ⊇ ... ⊇ S_{K-1} from levels: an output lies in S_k iff its level > k.

        For sets {g > c_0} ⊇ {g > c_1} ⊇ ... of one score g, the level of an
        output is the number of cuts c_k below its score.  Nesting makes every
        count a tail sum of the (K + 1) x (K + 1) histogram H of the levels of
        the pairs (or of the i-th outputs of the two samples):
        pq[j, k] = sum_{a > j, b > k} H[a, b] and pp[j, k] =
        in_p[max(j, k)], so the cost is O(n + K^2), not the O(n K^2) of
        :meth:`from_memberships`.
        """
        level_x, level_y = np.asarray(level_x), np.asarray(level_y)
        if level_x.ndim != 1 or level_x.shape != level_y.shape or not (
                np.issubdtype(level_x.dtype, np.integer) and np.issubdtype(level_y.dtype, np.integer)):
            raise ValueError(
                "level_x and level_y must be integer arrays of the same shape (n_samples,). "
                f"Found {level_x.dtype} {level_x.shape} and {level_y.dtype} {level_y.shape}."
            )
        if level_x.size and (min(level_x.min(), level_y.min()) < 0 or max(level_x.max(), level_y.max()) > n_sets):
            raise ValueError(f"levels must lie in 0..n_sets={n_sets} (the number of sets an output lies in).")
        width = n_sets + 1
        histogram = np.bincount(level_x * width + level_y, minlength=width * width).reshape(width, width)
        at_least = histogram[::-1, ::-1].cumsum(axis=0).cumsum(axis=1)[::-1, ::-1]  # [a, b]: #{level_x >= a, level_y >= b}
        in_p, in_q, pq = at_least[1:, 0], at_least[0, 1:], at_least[1:, 1:]
        deeper = np.maximum.outer(np.arange(n_sets), np.arange(n_sets))
        return cls(level_x.size, in_p, in_q, in_p[deeper], in_q[deeper], pq)

    def __add__(self, other: EventMoments) -> EventMoments:
        if other.in_p.shape != self.in_p.shape:
            raise ValueError(f"other must count the same {self.in_p.size} sets. Found {other.in_p.size} sets.")
        return EventMoments(self.n + other.n, self.in_p + other.in_p, self.in_q + other.in_q,
                            self.pp + other.pp, self.qq + other.qq, self.pq + other.pq)

    def cells(self, k: int) -> np.ndarray:
        """(both, only X, only Y, neither) of set k on coupled pairs, for :mod:`attacks.paired_ratio`."""
        both = self.pq[k, k]
        only_x, only_y = self.in_p[k] - both, self.in_q[k] - both
        return np.array([both, only_x, only_y, self.n - both - only_x - only_y], dtype=np.int64)


def log_ratios(moments: EventMoments, delta: float) -> np.ndarray:
    """psi_hat_k = log((p_hat_k - delta) / q_hat_k) of every set; -inf where p_hat_k <= delta, inf where q_hat_k = 0."""
    p, q = moments.in_p / moments.n, moments.in_q / moments.n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p > delta, np.log(p - delta) - np.log(q), -np.inf)


def influence_covariance(moments: EventMoments, delta: float, coupled: bool) -> np.ndarray:
    """Sigma_hat of the module docstring: covariance of the influence vector of one pair (or one sample of each law).

    Entry (j, k) is Cov(a_j, a_k) / ((p_j - delta)(p_k - delta)) + Cov(b_j, b_k) / (q_j q_k),
    minus, for coupled pairs, Cov(a_j, b_k) / ((p_j - delta) q_k) + Cov(a_k, b_j) / ((p_k - delta) q_j).
    Sets with p_hat <= delta or q_hat = 0 have no finite influence; their rows are nan.
    """
    n = moments.n
    p, q = moments.in_p / n, moments.in_q / n
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(p > delta, 1.0 / (p - delta), np.nan)
        v = np.where(q > 0, 1.0 / q, np.nan)
    covariance = (moments.pp / n - np.outer(p, p)) * np.outer(u, u) + (moments.qq / n - np.outer(q, q)) * np.outer(v, v)
    if coupled:
        cross = (moments.pq / n - np.outer(p, q)) * np.outer(u, v)
        covariance = covariance - cross - cross.T
    return covariance


def pooled_log_ratio(moments: EventMoments, weights, delta: float, coupled: bool) -> tuple[float, float]:
    """sum_k w_k psi_hat_k and its delta-method standard error sqrt(w' Sigma_hat w / n)."""
    weights = _check_weights(weights, moments.in_p.size)
    used = weights > 0
    psi = log_ratios(moments, delta)
    if not np.all(np.isfinite(psi[used])):
        bad = np.flatnonzero(used & ~np.isfinite(psi)).tolist()
        raise ValueError(
            f"weights put mass on sets {bad} whose estimate log((p_hat - delta) / q_hat) is infinite (p_hat <= delta "
            "or q_hat = 0); the delta method needs counts of both laws in every weighted set. Give them weight 0, "
            "or bound such a set alone with attacks.paired_ratio / attacks.binomial_ratio."
        )
    covariance = influence_covariance(moments, delta, coupled)[np.ix_(used, used)]
    w = weights[used]
    return float(w @ psi[used]), float(np.sqrt(max(w @ covariance @ w, 0.0) / moments.n))


def pooled_lower_bound(moments: EventMoments, weights, delta: float, level: float, coupled: bool) -> float:
    """Lower confidence bound at ``level`` on sum_k w_k log((P(S_k) - delta) / Q(S_k)), hence on epsilon."""
    estimate, error = pooled_log_ratio(moments, weights, delta, coupled)
    return estimate - float(ndtri(level)) * error


def usable_sets(moments: EventMoments, delta: float, coupled: bool, min_count: int) -> np.ndarray:
    """Mask of the sets holding ``min_count`` samples of each law (and, coupled, of separated pairs) with a finite
    log-ratio estimate: those :func:`min_variance_weights` may weigh."""
    counts = [moments.in_p, moments.in_q]
    if coupled:
        counts.append(moments.in_p + moments.in_q - 2 * np.diag(moments.pq))
    return np.all(np.array(counts) >= min_count, axis=0) & np.isfinite(log_ratios(moments, delta))


def min_variance_weights(moments: EventMoments, delta: float, coupled: bool, min_count: int = 100,
                         among=None) -> np.ndarray:
    """Weights on the simplex minimising the pooled variance w' Sigma_hat w (a convex quadratic program).

    The weights do not look at the estimates psi_hat: weights that maximise
    the projected bound on the same counts chase their noise (on
    report-noisy-max 3 with 10^6 pairs they went to the deepest, noisiest
    sets, a variance per pair 40 times the minimum).  So pool only sets whose
    log-ratio is expected to be at least that of the best one, e.g. subsets
    {g > t'}, t' > t, of an attack set {g > t} whose score g orders the
    likelihood ratio; ``among`` (a boolean mask) restricts the sets weighed.

    Only sets with ``min_count`` samples of each law in them (and, for
    coupled pairs, as many pairs that the set separates, which carry the
    noise) get weight: the variance of a set with a handful of counts is
    itself too noisy to weigh it by (a set with no separated pair would look
    free of noise).

    Solved as non-negative least squares: if v >= 0 minimises
    v' Sigma v - 2 1'v = |L'v - L^{-1} 1|^2 - 1' Sigma^{-1} 1 (Sigma = L L',
    Cholesky), then w = v / 1'v minimises w' Sigma w on the simplex (the two
    problems have the same KKT conditions up to that scaling).  Nested sets
    are nearly collinear, so Sigma gets a ridge of 1e-9 of its mean diagonal.
    """
    usable = usable_sets(moments, delta, coupled, min_count)
    if among is not None:
        usable &= np.asarray(among, dtype=bool)
    if not usable.any():
        raise ValueError(
            f"no set{' among those allowed' if among is not None else ''} holds min_count={min_count} samples of "
            f"each law{' and separated pairs' if coupled else ''} with a finite log-ratio estimate. Found "
            f"in_p={moments.in_p!r}, in_q={moments.in_q!r} on n={moments.n}; lower min_count or draw more samples."
        )
    covariance = influence_covariance(moments, delta, coupled)[np.ix_(usable, usable)]
    scale = np.mean(np.diag(covariance)) or 1.0  # every set holding all of both samples: no variance at all
    covariance = covariance + 1e-9 * scale * np.eye(covariance.shape[0])
    factor = cholesky(covariance, lower=True)
    v, _ = nnls(factor.T, solve_triangular(factor, np.ones(covariance.shape[0]), lower=True))
    weights = np.zeros(usable.size)
    weights[usable] = v / v.sum()
    return weights


def _check_weights(weights, size: int) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (size,) or not np.all(np.isfinite(weights)) or np.any(weights < 0) \
            or not np.isclose(weights.sum(), 1.0):
        raise ValueError(
            f"weights must be {size} non-negative finite numbers summing to 1 (one per set), fixed before the "
            f"counts were drawn. Found {weights!r}."
        )
    return weights


def _co_occurrences(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """left' right of boolean matrices as int64 counts, through float32 products of row blocks.

    A float32 sum of at most 2^24 ones is exact, and BLAS computes it where
    NumPy's integer product has no BLAS kernel.
    """
    total = np.zeros((left.shape[1], right.shape[1]), dtype=np.int64)
    for begin in range(0, left.shape[0], _BLOCK_ROWS):
        block = slice(begin, begin + _BLOCK_ROWS)
        total += (left[block].T.astype(np.float32) @ right[block].astype(np.float32)).astype(np.int64)
    return total
