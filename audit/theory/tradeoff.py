"""Trade-off functions, Gaussian DP, zero-concentrated DP and privacy profiles: the closed forms.

One small pure function per formula (docs/theory.md section 9).  The
hypothesis-testing view of privacy (Wasserman and Zhou 2010; Kairouz, Oh and
Viswanath 2015) reads two output laws P = M(D) and Q = M(D') as the two
hypotheses of a test: a test phi (the probability of rejecting P) has type-I
error a = E_P[phi] and type-II error b = 1 - E_Q[phi], and the trade-off
function T(P, Q)(a) is the smallest b of a test with type-I error at most a
(Dong, Roth and Su, "Gaussian differential privacy", J. R. Stat. Soc. B 84
(2022), Definition 2.1; "DRS" below).  A mechanism is f-DP when T(M(D),
M(D')) >= f for every neighbouring pair, mu-GDP when f = G_mu (DRS Def. 2.6),
and (epsilon, delta)-DP exactly when f = f_{epsilon, delta} (DRS Prop. 2.5).
rho-zCDP bounds every Renyi divergence: D_alpha <= rho alpha for all alpha > 1
(Bun and Steinke, "Concentrated differential privacy", TCC 2016, Def. 1.1;
"BS" below).  The privacy profile delta(epsilon) is the hockey-stick
divergence E_{e^epsilon}(P || Q) = sup_S P(S) - e^epsilon Q(S).

A restricted class H of tests (the attack classes of capaudit) gives the
restricted trade-off curve T_H(P, Q)(a) = inf {1 - E_Q[phi] : phi in H,
E_P[phi] <= a} >= T(P, Q)(a); :func:`linear_tradeoff` is the one of 1-D
threshold tests (the linear class on one output coordinate).

Conventions: P = M(D) and Q = M(D'); a Gaussian mechanism adds N(0, sigma^2)
to a query of sensitivity ``sensitivity``; a Laplace mechanism with parameter
``epsilon`` is Lap(0, 1) against Lap(epsilon, 1) after rescaling.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, logsumexp, ndtr, ndtri

from audit.config.validation import check_positive
from audit.theory.laws import family_name


def gaussian_tradeoff(a: ArrayLike, mu: float) -> np.ndarray:
    """G_mu(a) = Phi(Phi^-1(1 - a) - mu): the trade-off function of N(0, 1) against N(mu, 1).

    DRS Definition 2.6 (equation (2.3)); mu >= 0, a in [0, 1].
    """
    mu = _non_negative(mu, "mu")
    return ndtr(-ndtri(_levels(a)) - mu)  # Phi(Phi^-1(1 - a) - mu)


def laplace_tradeoff(a: ArrayLike, epsilon: float) -> np.ndarray:
    """The trade-off function of Lap(0, 1) against Lap(epsilon, 1) (a Laplace mechanism, epsilon = Delta / b).

    Piecewise (DRS Appendix A, the Laplace mechanism example; the likelihood
    ratio test at the ratio's three regimes): 1 - e^epsilon a for
    a < e^-epsilon / 2, e^-epsilon / (4 a) for e^-epsilon / 2 <= a < 1/2 and
    e^-epsilon (1 - a) for a >= 1/2.
    """
    epsilon = _non_negative(epsilon, "epsilon")
    a = _levels(a)
    small = np.exp(-epsilon) / 2.0
    with np.errstate(divide="ignore"):
        middle = np.exp(-epsilon) / (4.0 * a)
    return np.where(a < small, 1.0 - np.exp(epsilon) * a, np.where(a < 0.5, middle, np.exp(-epsilon) * (1.0 - a)))


def dp_tradeoff(a: ArrayLike, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """f_{epsilon, delta}(a) = max(0, 1 - delta - e^epsilon a, e^-epsilon (1 - delta - a)).

    (epsilon, delta)-DP is f_{epsilon, delta}-DP (DRS Proposition 2.5,
    equation (2.2); Kairouz, Oh and Viswanath 2015, Theorem 2.1).
    """
    epsilon = _non_negative(epsilon, "epsilon")
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must be in [0, 1]. Found {delta!r}.")
    a = _levels(a)
    return np.maximum(0.0, np.maximum(1.0 - delta - np.exp(epsilon) * a, np.exp(-epsilon) * (1.0 - delta - a)))


def profile_tradeoff(a: ArrayLike, epsilons: ArrayLike, deltas: ArrayLike) -> np.ndarray:
    """The trade-off function implied by (epsilon_i, delta_i)-DP for every i: max_i f_{epsilon_i, delta_i}(a).

    DRS Proposition 2.12 (the primal side): a mechanism that is
    (epsilon_i, delta_i)-DP for each i is f-DP with f the pointwise maximum.
    """
    epsilons, deltas = np.atleast_1d(np.asarray(epsilons, float)), np.atleast_1d(np.asarray(deltas, float))
    if epsilons.shape != deltas.shape or epsilons.size == 0:
        raise ValueError(f"epsilons and deltas must be equal-length non-empty lists. Found {epsilons}, {deltas}.")
    return np.max([dp_tradeoff(a, e, d) for e, d in zip(epsilons, deltas)], axis=0)


def gaussian_profile(epsilon: ArrayLike, mu: float) -> np.ndarray:
    """delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2): mu-GDP's privacy profile.

    DRS Corollary 2.13: mu-GDP holds if and only if (epsilon, delta(epsilon))-DP
    holds for every epsilon >= 0 (Balle and Wang 2018, Theorem 8, for the
    Gaussian mechanism).  The second term is computed in log space.
    """
    mu = check_positive(mu, "mu")
    epsilon = np.asarray(epsilon, dtype=float)
    if np.any(epsilon < 0) or not np.all(np.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and >= 0. Found {epsilon!r}.")
    second = np.exp(epsilon + log_ndtr(-epsilon / mu - mu / 2.0))
    return np.maximum(ndtr(-epsilon / mu + mu / 2.0) - second, 0.0)


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon >= 0 with delta_mu(epsilon) <= delta: mu-GDP read as (epsilon, delta)-DP.

    DRS Corollary 2.13 (mu-GDP holds exactly when (epsilon, delta_mu(epsilon))-DP
    holds for all epsilon); delta_mu (:func:`audit.theory.tradeoff.gaussian_profile`)
    decreases in epsilon, so the root is found by Brent's method.

    Examples
    --------
    >>> round(gdp_epsilon(1.0, 1e-5), 3)
    4.377
    """
    mu, delta = check_positive(mu, "mu"), check_positive(delta, "delta")
    if delta >= 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    if gaussian_profile(0.0, mu) <= delta:
        return 0.0
    high = mu * mu / 2.0 + mu * (1.0 + math.sqrt(2.0 * math.log(1.0 / delta)))
    while gaussian_profile(high, mu) > delta:
        high *= 2.0
    from scipy import optimize  # loaded by the conversions only: the config reads this module

    return float(optimize.brentq(lambda epsilon: float(gaussian_profile(epsilon, mu)) - delta, 0.0, high,
                                 xtol=1e-12))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu whose Gaussian-DP profile passes through (epsilon, delta): delta_mu(epsilon) = delta.

    delta_mu(epsilon) increases with mu (G_mu decreases in mu, DRS Def. 2.6), from 0 to 1, so the
    root is found by Brent's method; the inverse of :func:`gdp_epsilon` in mu.

    Examples
    --------
    >>> round(gdp_mu(gdp_epsilon(2.0, 1e-5), 1e-5), 6)
    2.0
    """
    epsilon, delta = _non_negative(epsilon, "epsilon"), check_positive(delta, "delta")
    if delta >= 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    high = 1.0
    while gaussian_profile(epsilon, high) < delta:
        high *= 2.0
    from scipy import optimize

    return float(optimize.brentq(lambda mu: float(gaussian_profile(epsilon, mu)) - delta, 1e-12, high, xtol=1e-12))


def laplace_profile(epsilon: ArrayLike, epsilon0: float) -> np.ndarray:
    """delta(epsilon) = max(0, 1 - exp((epsilon - epsilon0) / 2)): the privacy profile of Lap(0, 1) vs Lap(epsilon0, 1).

    The hockey-stick divergence E_{e^epsilon}(P || Q) of the Laplace
    mechanism (Balle, Barthe and Gaboardi, "Privacy amplification by
    subsampling", NeurIPS 2018, Section 5; zero at epsilon >= epsilon0, pure DP).
    """
    epsilon0 = _non_negative(epsilon0, "epsilon0")
    epsilon = np.asarray(epsilon, dtype=float)
    if np.any(epsilon < 0) or not np.all(np.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and >= 0. Found {epsilon!r}.")
    return np.maximum(-np.expm1((epsilon - epsilon0) / 2.0), 0.0)


def gaussian_gdp(sigma: float, sensitivity: float = 1.0) -> float:
    """mu = Delta / sigma: the Gaussian mechanism is mu-GDP (DRS Theorem 2.7)."""
    return abs(float(sensitivity)) / check_positive(sigma, "sigma")


def gaussian_zcdp(sigma: float, sensitivity: float = 1.0) -> float:
    """rho = Delta^2 / (2 sigma^2): the Gaussian mechanism is rho-zCDP, with equality at every order (BS Prop. 1.6)."""
    return float(sensitivity) ** 2 / (2.0 * check_positive(sigma, "sigma") ** 2)


def zcdp_renyi_bound(rho: float, alpha: float) -> float:
    """rho alpha: the bound rho-zCDP puts on D_alpha (BS Definition 1.1), alpha > 1."""
    if not alpha > 1.0:
        raise ValueError(f"alpha must be > 1. Found {alpha!r}.")
    return _non_negative(rho, "rho") * float(alpha)


def zcdp_to_dp(rho: float, delta: float) -> float:
    """epsilon = rho + 2 sqrt(rho log(1 / delta)): rho-zCDP implies (epsilon, delta)-DP (BS Proposition 1.3)."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    rho = _non_negative(rho, "rho")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_tradeoff(a: ArrayLike, rho: float, alphas: ArrayLike | None = None) -> np.ndarray:
    """The trade-off function rho-zCDP implies: the smallest b of a test (a, b) that the Renyi bounds allow.

    A test turns P and Q into the two-point laws (a, 1 - a) and (1 - b, b);
    by data processing D_alpha of those is at most D_alpha(P || Q) <= rho alpha,
    and the same with P and Q swapped (Balle, Barthe, Gaboardi, Hsu and Sato,
    "Hypothesis testing interpretations and Renyi differential privacy",
    AISTATS 2020, Theorem 21).  For each a the smallest b in [0, 1 - a]
    meeting every order of ``alphas`` (default 80 orders from 1.01 to 1000)
    is found by bisection (each constraint is monotone in b there).  Tighter
    than the (epsilon, delta) conversion of Bun and Steinke's Prop. 1.3.
    """
    rho = _non_negative(rho, "rho")
    a = _levels(a)
    alphas = np.logspace(np.log10(1.01), 3, 80) if alphas is None else np.asarray(alphas, dtype=float)
    low, high = np.zeros_like(a), 1.0 - a
    orders = alphas[:, None]
    for _ in range(45):  # 2^-45: below any drawn or compared precision
        middle = (low + high) / 2.0
        allowed = np.all(_two_point_renyi(a, middle, orders) <= rho * orders, axis=0)
        high, low = np.where(allowed, middle, high), np.where(allowed, low, middle)
    return high


def _two_point_renyi(a: np.ndarray, b: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """max of D_alpha((a, 1 - a) || (1 - b, b)) and D_alpha((1 - b, b) || (a, 1 - a)) (orders down axis 0), in log space."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p, q = np.stack([a, 1.0 - a])[:, None], np.stack([1.0 - b, b])[:, None]
        forward = logsumexp(alpha * np.log(p) + (1.0 - alpha) * np.log(q), axis=0) / (alpha - 1.0)
        backward = logsumexp(alpha * np.log(q) + (1.0 - alpha) * np.log(p), axis=0) / (alpha - 1.0)
    return np.maximum(np.nan_to_num(forward, nan=np.inf), np.nan_to_num(backward, nan=np.inf))


def gdp_to_zcdp(mu: float) -> float:
    """rho = mu^2 / 2: mu-GDP implies rho-zCDP.

    T(P, Q) >= G_mu makes (P, Q) a post-processing of (N(0, 1), N(mu, 1))
    (DRS Proposition 2.10, Blackwell), so D_alpha(P || Q) <= D_alpha(N(0, 1)
    || N(mu, 1)) = alpha mu^2 / 2 (BS Lemma 2.5) by data processing.
    """
    return _non_negative(mu, "mu") ** 2 / 2.0


def linear_tradeoff(a: ArrayLike, p, q) -> np.ndarray:
    """The restricted trade-off curve of 1-D threshold tests (the linear class on a 1-D output) of P against Q.

    The tests reject P on {x > t} or on {x < t}: at type-I error a the first
    has type-II error Q(X <= P.isf(a)), the second Q(X >= P.ppf(a)); the curve
    is the smaller of the two (no randomisation between tests).  ``p``, ``q``:
    frozen continuous ``scipy.stats`` laws or :mod:`audit.theory.laws`' laws.  Equal to T(P, Q) when the
    likelihood ratio is monotone (Gaussian, Laplace: Neyman-Pearson).
    """
    a = _levels(a)
    return np.minimum(q.cdf(p.isf(a)), q.sf(p.ppf(a)))


def exact_tradeoff(a: ArrayLike, p, q) -> np.ndarray | None:
    """T(P, Q)(a) for two Gaussian laws of one scale (:func:`gaussian_tradeoff`) or two Laplace laws of one scale
    (:func:`laplace_tradeoff`), None for other laws and for a shift that is not finite (a law centred at an
    infinite record has no finite closed form).  ``p``, ``q``: frozen 1-D ``scipy.stats`` laws or
    :mod:`audit.theory.laws`' laws."""
    names = {family_name(law) for law in (p, q)}
    if len(names) != 1 or names - {"norm", "laplace"}:
        return None
    if not math.isclose(float(p.std()), float(q.std())):
        return None
    scale = float(p.std()) / (1.0 if names == {"norm"} else math.sqrt(2.0))  # Laplace: sd = sqrt(2) b
    shift = abs(float(p.mean()) - float(q.mean())) / scale
    if not math.isfinite(shift):
        return None
    return gaussian_tradeoff(a, shift) if names == {"norm"} else laplace_tradeoff(a, shift)


def _levels(a: ArrayLike) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if np.any((a < 0) | (a > 1)) or np.any(np.isnan(a)):
        raise ValueError(f"type-I error levels must lie in [0, 1]. Found {a!r}.")
    return a


def _non_negative(value: float, name: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0. Found {value!r}.")
    return value
