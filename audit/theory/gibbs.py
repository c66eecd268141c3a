"""Closed forms of on-average KL privacy for posterior-sampling (Gibbs) mechanisms (docs/theory.md section 8).

OAKL is Wang, Lei and Fienberg, "On-Average KL-Privacy and its equivalence to
Generalization for Max-Entropy Mechanisms" (2016).  A Gibbs mechanism at
temperature gamma samples h with density proportional to
exp(-gamma sum_i l(z_i, h) - r(h)); its on-average KL privacy is
E_{Z ~ D^n, z ~ D} KL(M(Z) || M([Z_-1, z])) (OAKL Def. 2).

Every function here is pure: numbers in, numbers out.  The mechanisms that
these formulas describe are in :mod:`audit.mechanisms.gibbs`; the
measurements they are compared with in :mod:`audit.engine.generalization`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from attacks.classes import ALL, LINEAR, parse_function_class
from audit.theory import bounds
from audit.theory.laws import Normal
from audit.config.validation import check_positive


def gaussian_mean_posterior(
    data_sum: ArrayLike, n: int, *, noise_scale: float, prior_mean: float, prior_scale: float, temperature: float
) -> tuple[np.ndarray, float]:
    """Mean and variance of the tempered posterior of a Gaussian mean (conjugate normal model).

    Model z | h ~ N(h, s^2), prior h ~ N(mu0, tau^2), likelihood raised to the
    power gamma: the density of h is proportional to
    exp(-gamma sum_i (z_i - h)^2 / (2 s^2)) N(h; mu0, tau^2), a Gaussian of
    precision lambda = 1/tau^2 + gamma n / s^2 and mean
    (mu0 / tau^2 + gamma sum_i z_i / s^2) / lambda (OAKL Thm 4 with
    l(z, h) = (z - h)^2 / (2 s^2) and Remark 2's dispersion gamma).

    Returns
    -------
    mean : numpy.ndarray
        One mean per entry of ``data_sum``.
    variance : float
        1 / lambda, the same for every dataset of n records.
    """
    precision = _gaussian_mean_precision(n, noise_scale, prior_scale, temperature)
    mean = (prior_mean / prior_scale**2 + temperature * np.asarray(data_sum, dtype=float) / noise_scale**2) / precision
    return mean, 1.0 / precision


def gaussian_mean_on_average_kl(
    n: int, data_variance: float, *, noise_scale: float = 1.0, prior_scale: float = 1.0,
    temperature: float = 1.0, replaced: int = 1,
) -> float:
    """On-average KL privacy of the Gaussian-mean posterior with ``replaced`` records redrawn from D.

    Two posteriors of one variance 1/lambda differ in their means by
    gamma sum_{j <= k} (z_j - z'_j) / (s^2 lambda), so
    KL = gamma^2 (sum_j (z_j - z'_j))^2 / (2 s^4 lambda); its expectation over
    independent records of variance sigma_D^2 is
    k gamma^2 sigma_D^2 / (s^4 lambda) (OAKL Def. 2; linear in k as OAKL
    Lemma 6 states for every posterior-sampling mechanism).  Only the
    variance of D enters.
    """
    precision = _gaussian_mean_precision(n, noise_scale, prior_scale, temperature)
    _check_replaced(replaced, n)
    return replaced * temperature**2 * check_positive(data_variance, "data_variance") / (noise_scale**4 * precision)


def adaptive_gaussian_means_on_average_kl(
    n: int, data_variance: float, *, first: dict, second: dict
) -> float:
    """OAKL Lemma 7 for two Gaussian-mean posteriors, the second's prior centred on the first's output.

    M1(Z) = h1 from :func:`gaussian_mean_posterior` with the parameters
    ``first`` (noise_scale, prior_scale, temperature); M2(Z, h1) the same
    with ``second``'s and prior mean h1.  Between neighbours M2's mean moves
    by gamma_2 sum_j (z_j - z'_j) / (s_2^2 lambda_2) whatever h1, so by the
    chain rule of KL the composition's on-average KL is epsilon_1 + epsilon_2
    (each :func:`gaussian_mean_on_average_kl`): Lemma 7's bound, met with
    equality.
    """
    return (gaussian_mean_on_average_kl(n, data_variance, **first)
            + gaussian_mean_on_average_kl(n, data_variance, **second))


def adaptive_gaussian_means_law(data_sum: ArrayLike, n: int, *, first: dict, second: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean (shape (..., 2)) and covariance (2 x 2, the same for every dataset) of (h1, h2) of
    :func:`adaptive_gaussian_means_on_average_kl`'s composition: h2 = (h1 / tau_2^2 + gamma_2 S / s_2^2) / lambda_2
    + N(0, 1 / lambda_2), S the data sum."""
    mean_1, variance_1 = gaussian_mean_posterior(data_sum, n, prior_mean=0.0, **first)
    slope = 1.0 / (second["prior_scale"] ** 2 * _gaussian_mean_precision(n, **second))
    offset, variance_2 = gaussian_mean_posterior(data_sum, n, prior_mean=0.0, **second)
    covariance = np.array([[variance_1, slope * variance_1], [slope * variance_1, slope**2 * variance_1 + variance_2]])
    return np.stack([mean_1, slope * mean_1 + offset], axis=-1), covariance


def shared_covariance_normal_kl(mean_p: ArrayLike, mean_q: ArrayLike, covariance: ArrayLike) -> np.ndarray:
    """KL of two normals of one covariance Sigma: (mu_p - mu_q)' Sigma^{-1} (mu_p - mu_q) / 2 (last axis)."""
    shift = np.asarray(mean_p, dtype=float) - np.asarray(mean_q, dtype=float)
    return 0.5 * np.einsum("...i,...i->...", shift, np.linalg.solve(covariance, shift[..., None])[..., 0])


def thresholded_normal_kl(mean_p: ArrayLike, mean_q: ArrayLike, scale: float, threshold: float = 0.0) -> np.ndarray:
    """KL of the releases 1{h > t} of h ~ N(m_p, s^2) and N(m_q, s^2): the binary KL of their tail
    probabilities, a post-processing of the Gaussian release (OAKL Lemma 5: never above its KL)."""
    z_p, z_q = ((threshold - np.asarray(mean, dtype=float)) / scale for mean in (mean_p, mean_q))
    above_p, above_q, below_p, below_q = special.ndtr(-z_p), special.ndtr(-z_q), special.ndtr(z_p), special.ndtr(z_q)
    return special.rel_entr(above_p, above_q) + special.rel_entr(below_p, below_q)


def gaussian_mean_worst_case_kl(
    n: int, width: float, *, noise_scale: float = 1.0, prior_scale: float = 1.0, temperature: float = 1.0
) -> float:
    """Largest KL between the posteriors of two neighbouring datasets whose records lie in an interval of ``width``.

    gamma^2 width^2 / (2 s^4 lambda): the KL of the mean shift of
    :func:`gaussian_mean_on_average_kl` at |z_1 - z'_1| = width.  The
    mechanism is not epsilon-DP for any finite epsilon (Gaussian outputs), so
    this worst-case KL (Barber and Duchi's KL-privacy, OAKL section 2) is the
    worst-case counterpart of the on-average value.
    """
    precision = _gaussian_mean_precision(n, noise_scale, prior_scale, temperature)
    return temperature**2 * check_positive(width, "width") ** 2 / (2.0 * noise_scale**4 * precision)


def gibbs_generalization_gap(on_average_kl: float, temperature: float = 1.0) -> float:
    """On-average generalization error of a Gibbs mechanism in the untempered loss l.

    OAKL Thm 4: for h ~ exp(-sum_i l(z_i, h) - r(h)), on-average KL privacy
    epsilon equals E R(h) - E R_hat(h, Z).  With dispersion gamma (OAKL
    Remark 2) the theorem holds for the loss gamma l, so the gap in l is
    epsilon / gamma.  The proof uses only that the normalising constants of
    M(Z) and M([Z_-1, z]) have one expectation, so l need not be a
    log-likelihood.
    """
    return float(on_average_kl) / check_positive(temperature, "temperature")


def laplace_mean_worst_case_epsilon(n: int, truncation: float, temperature: float) -> float:
    """Pure-DP epsilon of h ~ exp(-gamma |mean(Z) - h|) over records in [-c, c].

    The mean of n records in [-c, c] moves by at most 2c / n when one record
    changes, and Laplace noise of scale 1/gamma makes that (2 c gamma / n)-DP.
    OAKL section 6 states 4 gamma for c = 2: the sensitivity of one record, n = 1.
    """
    return 2.0 * check_positive(truncation, "truncation") * check_positive(temperature, "temperature") / _check_n(n)


_PER_PAIR_KL = {ALL: bounds.laplace_kl, LINEAR: bounds.laplace_linear_kl}
"""KL of one pair of Laplace laws t units of scale apart, unrestricted and linear (CBDP appendix Thm 9)."""


def laplace_mean_on_average_kl(n: int, truncation: float, temperature: float, function_class: str = "all") -> float:
    """On-average KL (``all``) or (lin, KL) (``linear``) of the Laplace mean of records from N(0, 1) truncated to [-c, c].

    A replaced record shifts the Laplace location by |z_1 - z| / n; in units
    of the scale 1/gamma that is t = gamma |z_1 - z| / n, whose KL is
    t + exp(-t) - 1 (``audit.theory.bounds.laplace_kl``) and (lin, KL) CBDP appendix
    Thm 9 (``audit.theory.bounds.laplace_linear_kl``).  The expectation over two
    independent records is :func:`truncated_normal_difference_mean`.
    """
    hclass = parse_function_class(function_class)
    if hclass not in _PER_PAIR_KL:
        raise ValueError(f"function_class must be 'all' or 'linear'. Found {function_class!r}.")
    per_pair = _PER_PAIR_KL[hclass]
    scale = check_positive(temperature, "temperature") / _check_n(n)
    return truncated_normal_difference_mean(lambda u: per_pair(scale * u) if u > 0 else 0.0, truncation)


def laplace_of_means_on_average_kl(temperature: float, mean_of: int, truncation: float) -> float:
    """On-average KL of OAKL Figure 2's Laplace mean: the record is the mean of ``mean_of`` N(0, 1) draws truncated to [-c, c].

    h ~ exp(-gamma |Z - h|) with one record Z; a replaced record Z' gives the
    KL t + exp(-t) - 1 of two Laplace laws, t = gamma |D|, D = Z - Z'.  D is
    a sum of 2m symmetric terms T / m, so its characteristic function is
    phi_T(s / m)^(2m) with phi_T(v) = e^{-v^2/2} Re erf((c - i v) / sqrt2) / erf(c / sqrt2)
    (:func:`truncated_normal_characteristic`).  With the Fourier pairs
    E|D| = (2/pi) int_0^inf (1 - phi_D(s)) / s^2 ds and
    E e^{-gamma|D|} = (2/pi) int_0^inf phi_D(s) gamma / (gamma^2 + s^2) ds,
    E[t + e^{-t} - 1] = (2/pi) int_0^inf (1 - phi_D(s)) gamma^3 / (s^2 (gamma^2 + s^2)) ds,
    one integral without cancellation at small gamma (exact: no normal
    approximation of D).
    """
    gamma = check_positive(temperature, "temperature")
    m = _check_n(mean_of)
    c = check_positive(truncation, "truncation")
    # 1 - phi_D(s) for s beyond this is 1 to double precision (phi_D(s) <= e^{-s^2 var / m} roughly)
    edge = 40.0 * np.sqrt(m / truncated_normal_variance(c))

    def integrand(s: float) -> float:
        if s == 0.0:  # the limit: 1 - phi_D(s) ~ Var(D) s^2 / 2, Var(D) = 2 Var(T) / m
            return gamma * truncated_normal_variance(c) / m
        # phi_D = phi_T^(2m) (an even power); log1p and expm1 keep 1 - phi_D exact where phi_D is near 1
        one_minus_t = _truncated_normal_one_minus_characteristic(s / m, c)
        log_phi = np.log1p(-one_minus_t) if one_minus_t < 0.5 else np.log(abs(1.0 - one_minus_t))
        one_minus = -np.expm1(2 * m * log_phi)
        return one_minus * gamma**3 / (s * s * (gamma * gamma + s * s))

    from scipy import integrate  # loaded where a quadrature runs: not on an audit's import (docs/speed.md)

    inner, _ = integrate.quad(integrand, 0.0, edge, points=sorted({min(gamma, edge / 2), edge / 40}), limit=400,
                              epsabs=0.0, epsrel=1e-8)
    tail = gamma / edge - np.pi / 2 + np.arctan(edge / gamma)  # int_edge^inf gamma^3 / (s^2 (gamma^2 + s^2)) ds
    return float(2.0 / np.pi * (inner + tail))


def truncated_normal_characteristic(v: ArrayLike, truncation: float) -> np.ndarray:
    """E cos(v T) for T ~ N(0, 1) truncated to [-c, c]: e^{-v^2/2} Re erf((c - i v) / sqrt2) / erf(c / sqrt2).

    Computed through the Faddeeva function w (``scipy.special.wofz``),
    e^{-v^2/2} erf((c - i v) / sqrt2) = e^{-v^2/2} - e^{-c^2/2 + i c v} w((v + i c) / sqrt2),
    which neither overflows nor cancels at large v.
    """
    c = check_positive(truncation, "truncation")
    v = np.asarray(v, dtype=float)
    tail = np.real(np.exp(-c * c / 2 + 1j * c * v) * special.wofz((v + 1j * c) / np.sqrt(2)))
    return (np.exp(-(v**2) / 2) - tail) / special.erf(c / np.sqrt(2))


def _truncated_normal_one_minus_characteristic(v: float, c: float) -> float:
    """1 - phi_T(v), by its even-moment series E[T^2] v^2 / 2 - E[T^4] v^4 / 24 + E[T^6] v^6 / 720 below
    v = 1e-2 (the closed form loses digits to cancellation there; the series' next term is 1e-13 of the first)."""
    if abs(v) >= 1e-2:
        return float(1.0 - truncated_normal_characteristic(v, c))
    second, fourth, sixth = _truncated_normal_even_moments(c)
    return second * v**2 / 2 - fourth * v**4 / 24 + sixth * v**6 / 720


@functools.cache
def _truncated_normal_even_moments(c: float) -> tuple[float, float, float]:
    """E[T^2], E[T^4], E[T^6] of N(0, 1) truncated to [-c, c]."""
    from scipy import stats  # here, not at the top: an audit's import never loads scipy.stats (docs/speed.md)

    return tuple(float(stats.truncnorm.moment(k, -c, c)) for k in (2, 4, 6))


def truncated_normal_difference_density(u: ArrayLike, truncation: float) -> np.ndarray:
    """Density of z_1 - z for two independent N(0, 1) records truncated to [-c, c], at u in [-2c, 2c].

    g(u) = e^{-u^2/4} (Phi(sqrt2 (c - |u|/2)) - Phi(sqrt2 (|u|/2 - c))) / (2 sqrt(pi) Z^2),
    Z = Phi(c) - Phi(-c): the integral of phi(x) phi(x + u) over
    x in [-c, c - |u|] (completing the square in x).
    """
    c = check_positive(truncation, "truncation")
    u = np.abs(np.asarray(u, dtype=float))
    mass = special.ndtr(c) - special.ndtr(-c)
    inner = special.ndtr(np.sqrt(2) * (c - u / 2)) - special.ndtr(np.sqrt(2) * (u / 2 - c))
    return np.where(u <= 2 * c, np.exp(-(u**2) / 4) * inner / (2 * np.sqrt(np.pi) * mass**2), 0.0)


def truncated_normal_difference_mean(function: Callable[[float], float], truncation: float) -> float:
    """E f(|z_1 - z|) for two independent N(0, 1) records truncated to [-c, c], by adaptive quadrature."""
    from scipy import integrate  # loaded where a quadrature runs: not on an audit's import (docs/speed.md)

    c = check_positive(truncation, "truncation")
    value, _ = integrate.quad(
        lambda u: function(u) * float(truncated_normal_difference_density(u, c)), 0.0, 2 * c, epsabs=1e-13, epsrel=1e-10
    )
    return 2.0 * value


def truncated_normal_variance(truncation: float) -> float:
    """Variance of N(0, 1) truncated to [-c, c]: 1 - 2 c phi(c) / (Phi(c) - Phi(-c))."""
    c = check_positive(truncation, "truncation")
    return float(1.0 - 2.0 * c * Normal().pdf(c) / (special.ndtr(c) - special.ndtr(-c)))


def regression_posterior(
    x: ArrayLike, y: ArrayLike, *, temperature: float, prior_scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of 1-D linear regression posterior sampling at temperature gamma (OAKL section 6).

    h ~ exp(-gamma sum_i (y_i - x_i h)^2) N(h; 0, tau^2): Gaussian with
    precision lambda = 1/tau^2 + 2 gamma sum_i x_i^2 and mean
    2 gamma sum_i x_i y_i / lambda.  ``x``, ``y``: arrays of shape (..., n),
    one dataset per leading index.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    precision = 1.0 / prior_scale**2 + 2.0 * temperature * np.sum(x * x, axis=-1)
    return 2.0 * temperature * np.sum(x * y, axis=-1) / precision, 1.0 / precision


def normal_kl(mean_p: ArrayLike, var_p: ArrayLike, mean_q: ArrayLike, var_q: ArrayLike) -> np.ndarray:
    """KL(N(m_p, v_p) || N(m_q, v_q)) = (v_p / v_q - 1 - log(v_p / v_q) + (m_p - m_q)^2 / v_q) / 2."""
    ratio = np.asarray(var_p, dtype=float) / np.asarray(var_q, dtype=float)
    return 0.5 * (ratio - 1.0 - np.log(ratio) + (np.asarray(mean_p) - np.asarray(mean_q)) ** 2 / np.asarray(var_q))


def _gaussian_mean_precision(n: int, noise_scale: float, prior_scale: float, temperature: float) -> float:
    return (1.0 / check_positive(prior_scale, "prior_scale") ** 2
            + check_positive(temperature, "temperature") * _check_n(n) / check_positive(noise_scale, "noise_scale") ** 2)


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (records per dataset) must be a positive integer. Found {n!r}.")
    return int(n)


def _check_replaced(replaced: int, n: int) -> int:
    if isinstance(replaced, bool) or not isinstance(replaced, (int, np.integer)) or not 1 <= replaced <= n:
        raise ValueError(f"replaced (records redrawn) must be an integer in [1, n = {n}]. Found {replaced!r}.")
    return int(replaced)
