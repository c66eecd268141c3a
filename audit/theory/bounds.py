"""Closed forms of capacity bounded DP: exact values, published bounds, properties.

One small pure function per formula of docs/theory.md sections 5 and 6. Exact
values (``laplace_kl``, ``gaussian_kl``, ``laplace_linear_kl``,
``gaussian_linear_kl``, ``laplace_renyi``, ``gaussian_renyi``) hold for every
parameter. The ``*_linear_renyi_bound`` functions are the *upper bounds* of
CBDP Table 1 / Corollary 2 / Theorem 5, implemented exactly as published:
they are claims to be audited, not facts (docs/theory.md section 6 notes that the
proof of appendix Theorem 13 drops a 2^{-d} factor). Corollary 2 states them
for alpha > 2 only (:func:`linear_renyi_bound_stated`): below, the functions
still evaluate the formula (for plots) but no caller applies it as a bound.
``laplace_renyi_lower_bound`` is Table 1's *lower* bound on the unrestricted
Laplace Renyi divergence.

Conventions: P is the mechanism's output law on D, Q on D'. A Laplace
mechanism adds Lap(0, b) noise to a query of sensitivity Delta and
``epsilon = Delta / b``; a Gaussian mechanism adds N(0, sigma^2) noise to a
query of sensitivity 1. The sensitivity ``v`` is a scalar (d = 1) or a vector
of per-coordinate sensitivities (v_1, ..., v_d), in units of that Delta.
Renyi orders follow CBDP's |t| convention (docs/theory.md section 2).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from attacks.divergences import check_alpha
from audit.config.validation import as_numbers, check_positive, is_number


def laplace_kl(epsilon: float, v: ArrayLike = 1.0) -> float:
    """Unrestricted KL divergence of the Laplace mechanism.

    sum_i (epsilon |v_i| - 1 + exp(-epsilon |v_i|)) (docs/theory.md section 6; the
    alpha -> 1 limit of CBDP appendix Theorem 11).
    """
    x = check_positive(epsilon, "epsilon") * _check_sensitivity(v)
    return float(np.sum(x + np.expm1(-x)))


def laplace_linear_kl(epsilon: float) -> float:
    """Exact (lin, KL) divergence of the 1-D Laplace mechanism (CBDP appendix Theorem 9).

    sqrt(1 + epsilon^2) - 1 + log(1 - r^2) with r = (sqrt(1 + epsilon^2) - 1) / epsilon
    = epsilon / (sqrt(1 + epsilon^2) + 1), so that sqrt(1 + epsilon^2) - 1 =
    epsilon r does not cancel at small epsilon. For r >= 1/2 the logarithm is
    log(1 - r) + log1p(r) with 1 - r = (1 + 1 / (sqrt(1 + epsilon^2) + epsilon))
    / (sqrt(1 + epsilon^2) + 1) (from (sqrt(1 + e^2) - e)(sqrt(1 + e^2) + e) = 1),
    which stays finite where r^2 rounds to 1 (epsilon up to the largest float).
    """
    epsilon = check_positive(epsilon, "epsilon")
    root = float(np.hypot(1.0, epsilon))
    r = epsilon / (root + 1.0)
    if r < 0.5:
        log_gap = float(np.log1p(-r * r))
    else:
        log_gap = float(np.log1p(1.0 / (root + epsilon)) - np.log1p(root) + np.log1p(r))
    return epsilon * r + log_gap


def gaussian_kl(sigma: float, v: ArrayLike = 1.0) -> float:
    """Unrestricted KL divergence of the Gaussian mechanism: ||v||_2^2 / (2 sigma^2).

    The alpha -> 1 limit of CBDP appendix Theorem 12.
    """
    sigma = check_positive(sigma, "sigma")
    return float(np.sum(_check_sensitivity(v) ** 2) / (2.0 * sigma**2))


def gaussian_linear_kl(sigma: float, v: ArrayLike = 1.0) -> float:
    """Exact (lin, KL) divergence of the Gaussian mechanism (CBDP appendix Theorem 10).

    The log-likelihood ratio of two Gaussians with equal covariance is linear,
    so the linear class attains the unrestricted value ||v||_2^2 / (2 sigma^2).
    """
    return gaussian_kl(sigma, v)


def laplace_renyi(epsilon: float, alpha: float, v: ArrayLike = 1.0) -> float:
    """Unrestricted Renyi divergence of the Laplace mechanism (CBDP appendix Theorem 11).

    (1 / (alpha - 1)) sum_i log[(1/2 + 1/(4 alpha - 2)) e^{(alpha - 1) epsilon |v_i|}
    + (1/2 - 1/(4 alpha - 2)) e^{-alpha epsilon |v_i|}], in log space: the two
    weights are alpha / (2 alpha - 1) and (alpha - 1) / (2 alpha - 1).
    """
    alpha = check_alpha(alpha)
    x = check_positive(epsilon, "epsilon") * _check_sensitivity(v)
    exponents = np.stack([(alpha - 1.0) * x, -alpha * x])
    weights = np.array([[alpha], [alpha - 1.0]]) / (2.0 * alpha - 1.0)
    return float(np.sum(logsumexp(exponents, b=weights, axis=0)) / (alpha - 1.0))


def gaussian_renyi(sigma: float, alpha: float, v: ArrayLike = 1.0) -> float:
    """Unrestricted Renyi divergence of the Gaussian mechanism (CBDP appendix Theorem 12).

    alpha ||v||_2^2 / (2 sigma^2).
    """
    return check_alpha(alpha) * gaussian_kl(sigma, v)


COROLLARY2_MIN_ALPHA = 2.0
"""CBDP Corollary 2 (hence Table 1 and Theorem 5) states the (lin, Renyi) bounds "for all alpha > 2"."""


def linear_renyi_bound_stated(alpha: float) -> bool:
    """Whether CBDP states its (lin, Renyi) upper bounds at this order: alpha > 2 (Corollary 2).

    The proof bounds E|Y|^{alpha/(alpha-1)} below by its value at exponent 1,
    which needs alpha / (alpha - 1) in [1, 2], i.e. alpha >= 2; the corollary
    is stated for alpha > 2. Outside, the bound is "not stated" and is not applied.
    """
    return check_alpha(alpha) > COROLLARY2_MIN_ALPHA


def laplace_renyi_lower_bound(epsilon: float, alpha: float, v: ArrayLike = 1.0) -> float:
    """CBDP Table 1's lower bound on the unrestricted Laplace Renyi divergence.

    epsilon ||v||_1 - d log(2) / (alpha - 1) (d = 1: epsilon - log(2) / (alpha - 1)).
    True for every alpha > 1: each coordinate's Renyi divergence (appendix
    Thm 11) is at least (1/(alpha-1)) log(alpha/(2 alpha - 1) e^{(alpha-1) epsilon |v_i|})
    >= epsilon |v_i| - log(2) / (alpha - 1), and Renyi divergences of product
    laws add. A lower bound on Renyi DP, so on nothing restricted: a sanity
    check of :func:`laplace_renyi` and of exact unrestricted values.
    """
    alpha = check_alpha(alpha)
    v = _check_sensitivity(v)
    return float(check_positive(epsilon, "epsilon") * np.sum(v) - v.size * np.log(2.0) / (alpha - 1.0))


def laplace_linear_renyi_bound(epsilon: float, alpha: float, v: ArrayLike = 1.0) -> float:
    """CBDP's claimed upper bound on (lin, Renyi) for the Laplace mechanism.

    CBDP Table 1 / Corollary 2 (d = 1: (1/(alpha-1)) log(1 + 2^{alpha-1} epsilon^alpha))
    and Theorem 5 / appendix Theorem 13 (d-dim)::

        (1 / (alpha - 1)) log(1 + 2^{d (alpha - 1)} (epsilon ||v||_alpha)^alpha).

    A published claim, implemented as published; computed in log space.
    """
    alpha = check_alpha(alpha)
    epsilon = check_positive(epsilon, "epsilon")
    v = _check_sensitivity(v)
    log_term = v.size * (alpha - 1.0) * np.log(2.0) + alpha * np.log(epsilon * _alpha_norm(v, alpha))
    return float(np.logaddexp(0.0, log_term) / (alpha - 1.0))


def gaussian_linear_renyi_bound(sigma: float, alpha: float, v: ArrayLike = 1.0) -> float:
    """CBDP's claimed upper bound on (lin, Renyi) for the Gaussian mechanism.

    CBDP Table 1 / Corollary 2 (d = 1: (1/(alpha-1)) log(1 + sqrt(2 pi)^{alpha-1} / sigma^alpha))
    and Theorem 5 / appendix Theorem 13 (d-dim)::

        (1 / (alpha - 1)) log(1 + 2^{d (alpha - 1)} sqrt(pi / 2)^{alpha - 1} ||v||_alpha^alpha / sigma^alpha).

    A published claim, implemented as published; computed in log space.
    """
    alpha = check_alpha(alpha)
    sigma = check_positive(sigma, "sigma")
    v = _check_sensitivity(v)
    log_term = (
        v.size * (alpha - 1.0) * np.log(2.0)
        + 0.5 * (alpha - 1.0) * np.log(np.pi / 2.0)
        + alpha * np.log(_alpha_norm(v, alpha) / sigma)
    )
    return float(np.logaddexp(0.0, log_term) / (alpha - 1.0))


def matrix_linear_renyi_bound(epsilon: float, alpha: float, s: int) -> float:
    """CBDP's claimed (lin, Renyi) upper bound for the matrix mechanism (CBDP Corollary 2).

    For W A^+ (A x + ||A||_1 Lap_s(0, 1/epsilon)) with A in R^{s x n}::

        (1 / (alpha - 1)) log(1 + 2^{s (alpha - 1)} epsilon^alpha).

    A published claim, implemented as published; computed in log space.
    """
    alpha = check_alpha(alpha)
    epsilon = check_positive(epsilon, "epsilon")
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
        raise ValueError(f"s (the number of rows of the strategy matrix A) must be an integer >= 1. Found {s!r}.")
    log_term = s * (alpha - 1.0) * np.log(2.0) + alpha * np.log(epsilon)
    return float(np.logaddexp(0.0, log_term) / (alpha - 1.0))


def non_private_release() -> float:
    """Restricted divergence of a non-private release: ``inf`` (CBDP Lemma 2).

    Releasing f(D) itself gives a point mass per dataset; for any class
    containing lin and any divergence the value is unbounded, so this returns
    ``inf`` (to be reported as "unbounded", never as a large number).
    """
    return np.inf


def sequential_composition(*epsilons: float) -> float:
    """Non-adaptive sequential composition: epsilon_1 + ... + epsilon_k (CBDP Theorem 4)."""
    return float(np.sum(_check_epsilons(epsilons)))


def parallel_composition(*epsilons: float) -> float:
    """Parallel composition on disjoint data: max(epsilon_1, ..., epsilon_k) (CBDP Theorem 3).

    The guarantee holds for the sum class H_1 + H_2 = {h_1 + h_2}.
    """
    return float(np.max(_check_epsilons(epsilons)))


def pinsker_ipm_bound(kl: float) -> float:
    """Pinsker-like bound IPM^H <= 8 sqrt(KL^H) (CBDP Theorem 7).

    Valid only for classes H that are convex, have range [-1, 1], are
    translation invariant and closed under negation (docs/theory.md section 5).
    """
    return 8.0 * float(np.sqrt(_check_nonnegative(kl, "kl")))


def generalization_bound(epsilon: float) -> float:
    """Expected generalization gap <= 8 sqrt(epsilon) (CBDP Theorem 6).

    For an (H, KL)-capacity bounded private mechanism with parameter epsilon,
    when H contains the loss evaluations q -> q(x).
    """
    return 8.0 * float(np.sqrt(_check_nonnegative(epsilon, "epsilon")))


def _alpha_norm(v: np.ndarray, alpha: float) -> float:
    """||v||_alpha, scaled by its largest entry so that large alpha does not overflow."""
    top = np.max(v)
    if top == 0.0:
        return 0.0
    return float(top * np.sum((v / top) ** alpha) ** (1.0 / alpha))



def _check_nonnegative(value: float, name: str) -> float:
    if not is_number(value) or np.isnan(value) or value < 0:
        raise ValueError(f"{name} must be a number >= 0 (inf allowed). Found {value!r}.")
    return float(value)


def _check_sensitivity(v: ArrayLike) -> np.ndarray:
    """|v| as a 1-D float array; a scalar is d = 1."""
    try:
        array = np.abs(np.atleast_1d(as_numbers(v, "v (the sensitivity)")))
    except ValueError:
        raise ValueError(f"v (the sensitivity) must be a finite scalar or 1-D vector. Found {v!r}.") from None
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"v (the sensitivity) must be a finite scalar or 1-D vector. Found {v!r}.")
    return array


def _check_epsilons(epsilons: tuple) -> np.ndarray:
    if not epsilons:
        raise ValueError("composition needs at least one epsilon. Found none.")
    return np.array([_check_nonnegative(e, "epsilon") for e in epsilons])
