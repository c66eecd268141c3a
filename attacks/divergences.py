"""f-divergences in variational form, with CBDP's conventions.

Every divergence here is written as the supremum of a variational objective
(Nguyen, Wainwright and Jordan; CBDP eq. 1)::

    D_f(P, Q) = sup_h  E_P[h(x)] - E_Q[f*(h(x))],

and restricting the supremum to a function class H gives the H-restricted
divergence of CBDP eq. 2.  Any fixed witness h gives a lower bound on the
restricted divergence of every class that contains it, which is what makes a
held-out score an honest lower bound.

Conventions (docs/theory.md section 2):

* ``kl``: f(t) = t log t, f*(s) = exp(s - 1).
* ``alpha`` (order alpha > 1): f(t) = (|t|^alpha - 1) / (alpha^2 - alpha) on all
  of R -- CBDP's |t| convention, under which f* is even --, so
  f*(s) = C_alpha |s|^beta + 1 / (alpha^2 - alpha), beta = alpha / (alpha - 1),
  C_alpha = (alpha - 1)^beta / alpha (CBDP appendix Lemma 3).
* ``tv``: f(t) = |t - 1| / 2, f*(s) = s on |s| <= 1/2 and +inf outside.

Restricted Renyi divergence (CBDP eq. 3)::

    D_{R,alpha}^H = log(1 + alpha (alpha - 1) D_alpha^H) / (alpha - 1).

Held-out intervals of the sample objectives rest on the delta method: to first
order each is a difference of means of per-sample influence terms
(:func:`donsker_varadhan_influence`, :func:`renyi_influence`).  Two
diagnostics say when a few terms carry a mean, so that its interval cannot be
trusted: :func:`effective_sample_size` (Kish) and :func:`tail_index` (Hill).

The functions of this module are pure and vectorised; they validate their
arguments at the door.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from attacks.vocabulary import F_DIVERGENCES, KL, AlphaDivergence, TotalVariation, check_alpha, parse_f_divergence

DIVERGENCES = tuple(F_DIVERGENCES)
# Share of the error rate of :func:`variational_bound` spent on the mass of Q
# above its largest sample weight; the rest goes to the delta-method step.
UNSEEN_SHARE = 0.1


def conjugate_exponent(alpha: float) -> float:
    """beta = alpha / (alpha - 1), the exponent of f* for the alpha-divergence."""
    alpha = check_alpha(alpha)
    return alpha / (alpha - 1.0)


def alpha_conjugate_constant(alpha: float) -> float:
    """C_alpha = (alpha - 1)^beta / alpha of CBDP appendix Lemma 3."""
    alpha = check_alpha(alpha)
    return (alpha - 1.0) ** conjugate_exponent(alpha) / alpha


def f_generator(t: ArrayLike, divergence: str, alpha: float | None = None) -> np.ndarray:
    """The convex generator f(t) of ``divergence`` (docs/theory.md section 2 table)."""
    t = np.asarray(t, dtype=float)
    match parse_f_divergence(divergence, alpha):
        case KL():
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), np.where(t == 0, 0.0, np.inf))
        case AlphaDivergence(alpha=alpha):
            return (np.abs(t) ** alpha - 1.0) / (alpha**2 - alpha)
        case TotalVariation():
            return 0.5 * np.abs(t - 1.0)


def f_conjugate(s: ArrayLike, divergence: str, alpha: float | None = None) -> np.ndarray:
    """The convex conjugate f*(s) = sup_t s t - f(t) (docs/theory.md section 2 table)."""
    s = np.asarray(s, dtype=float)
    match parse_f_divergence(divergence, alpha):
        case KL():
            return np.exp(s - 1.0)
        case AlphaDivergence(alpha=alpha):
            beta = conjugate_exponent(alpha)
            return alpha_conjugate_constant(alpha) * np.abs(s) ** beta + 1.0 / (alpha**2 - alpha)
        case TotalVariation():
            return np.where(np.abs(s) <= 0.5, s, np.inf)


def variational_objective(
    h_p: ArrayLike, h_q: ArrayLike, divergence: str, alpha: float | None = None
) -> float:
    """E_P[h] - E_Q[f*(h)] for witness values on samples of P and Q (CBDP eq. 1).

    Parameters
    ----------
    h_p : array of shape (n_p,)
        The witness evaluated on samples of P.
    h_q : array of shape (n_q,)
        The witness evaluated on samples of Q.
    divergence : {"kl", "alpha", "tv"}
    alpha : float, optional
        The order, for ``divergence="alpha"``.

    Returns
    -------
    float
        The plug-in value of the objective; for a witness fitted on other
        samples it estimates a lower bound on the restricted divergence.
    """
    h_p, h_q = _as_witness_values(h_p, h_q)
    return float(np.mean(h_p) - np.mean(f_conjugate(h_q, divergence, alpha)))


def log_mean_exp(values: np.ndarray) -> float:
    """log mean exp(values), shifted by the maximum so that it cannot overflow (-inf for all -inf)."""
    largest = np.max(values)
    if not np.isfinite(largest):
        return float(largest)
    return float(largest + np.log(np.mean(np.exp(values - largest))))


def donsker_varadhan(h_p: ArrayLike, h_q: ArrayLike) -> float:
    """E_P[h] - log E_Q[exp h]: the KL objective with the best shift of h.

    For a class closed under adding constants, maximising the KL objective of
    CBDP eq. 1 over the shift h + b gives this Donsker-Varadhan form (CBDP
    appendix Lemma 1). Computed in log space, so a witness with large values
    on Q returns a finite number or -inf, never an overflow.
    """
    h_p, h_q = _as_witness_values(h_p, h_q)
    return float(np.mean(h_p) - log_mean_exp(h_q))


def renyi_scale_optimized(g_p: ArrayLike, g_q: ArrayLike, alpha: float) -> float:
    """Restricted Renyi value of a witness direction g, with its scale optimised.

    For a class closed under scaling, maximising the alpha-divergence
    objective over c * g and applying CBDP eq. 3 gives (docs/theory.md section 4)::

        D_{R,alpha} = beta log |E_P g| - log E_Q |g|^beta,   beta = alpha / (alpha - 1),

    i.e. -log E_Q |g|^beta once g is normalised to E_P g = 1. Computed in log
    space. Returns -inf when E_P g = 0.
    """
    alpha = check_alpha(alpha)
    beta = conjugate_exponent(alpha)
    g_p, g_q = _as_witness_values(g_p, g_q)
    mean_p = abs(float(np.mean(g_p)))
    if mean_p == 0.0:
        return -np.inf
    scale = np.max(np.abs(g_q))
    if scale == 0.0:
        return np.inf
    log_moment = beta * np.log(scale) + np.log(np.mean((np.abs(g_q) / scale) ** beta))
    return float(beta * np.log(mean_p) - log_moment)


def donsker_varadhan_influence(h_p: ArrayLike, h_q: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample influence terms (h_P, exp(h_Q) / mean exp(h_Q)) of :func:`donsker_varadhan`.

    The delta method linearises mean(h_P) - log mean(exp h_Q) as
    mean(infl_P) - mean(infl_Q) + const, so its variance is that of this
    difference of means (CBDP appendix Lemma 1).  The Q terms are scaled by
    their maximum before the exponential (the ratio to their mean is
    unchanged), so they cannot overflow.
    """
    h_p, h_q = _as_witness_values(h_p, h_q)
    weights = np.exp(h_q - np.max(h_q))
    return h_p, weights / np.mean(weights)


def renyi_influence(g_p: ArrayLike, g_q: ArrayLike, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample influence terms (beta g_P / mean g_P, |g_Q|^beta / mean |g_Q|^beta) of :func:`renyi_scale_optimized`.

    The delta method linearises beta log|mean g_P| - log mean |g_Q|^beta as
    mean(infl_P) - mean(infl_Q) + const (docs/theory.md section 4); the Q terms are
    scaled by their maximum before the power.
    """
    beta = conjugate_exponent(alpha)
    g_p, g_q = _as_witness_values(g_p, g_q)
    scale = np.max(np.abs(g_q))
    moment = (np.abs(g_q) / scale) ** beta if scale > 0 else np.ones_like(g_q)
    return beta * g_p / np.mean(g_p), moment / np.mean(moment)


def effective_sample_size(weights: ArrayLike) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 of non-negative weights.

    It equals the number of weights when they are all equal and 1 when one
    weight carries the sum: a mean of the weights is no better determined
    than a mean of that many equal terms.  Scale-free.
    """
    weights = np.asarray(weights, dtype=float).ravel()
    weights = weights / np.max(weights) if np.max(weights) > 0 else np.ones_like(weights)
    return float(np.sum(weights) ** 2 / np.sum(weights**2))


def tail_count(n: int) -> int:
    """Number of largest values a tail index is estimated from: min(n / 5, 3 sqrt(n)), at least 2.

    The choice of Pareto-smoothed importance sampling (Vehtari, Simpson, Gelman,
    Yao and Gabry 2024, section 3).
    """
    return max(2, int(min(n / 5, 3 * np.sqrt(n))))


def tail_index(log_weights: ArrayLike, n: int | None = None) -> float:
    """Hill's estimate of the tail index k of weights w = exp(log_weights).

    k = mean of the ``tail_count(n)`` largest log w minus the next largest
    (Hill 1975): for a Pareto tail P(w > t) ~ t^(-1/k) the moments E w^r are
    finite exactly for r < 1/k, so k < 1/2 means a finite variance (the
    delta method's assumption) and k >= 1 an infinite mean.  For w = exp(c h)
    it is c times the mean excess of the upper tail of h, i.e. c / lambda for
    an exponential tail of rate lambda.  0 when the largest values tie (a
    bounded or discrete witness: no tail).  ``n``: the size of the sample
    when ``log_weights`` holds only its largest values (at least
    ``tail_count(n) + 1`` of them: :class:`attacks.witness_moments.WitnessMoments`);
    default their number.
    """
    log_weights = np.sort(np.asarray(log_weights, dtype=float).ravel())[::-1]
    n = log_weights.size if n is None else n
    count = min(tail_count(n), n - 1)
    if count < 1:
        return 0.0
    return float(np.mean(log_weights[:count]) - log_weights[count])


def unseen_mass_bound(n: int, error: float) -> float:
    """Upper confidence bound 1 - error^(1/n) on the mass a law puts above the maximum of n draws.

    For n independent draws of a continuous law, the probability that all
    fall below its (1 - u)-quantile is (1 - u)^n, so with probability
    1 - error the law puts at most u = 1 - error^(1/n) ~ log(1/error) / n
    above their maximum (the "rule of three" at error = 0.05).  For a law with
    atoms the mass strictly above the maximum is smaller still.
    """
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n must be a positive integer. Found {n!r}.")
    if not 0.0 < error < 1.0:
        raise ValueError(f"error must be in (0, 1). Found {error!r}.")
    return float(-np.expm1(np.log(error) / n))


def log_unseen_ratio(log_weights_p: ArrayLike, log_weights_q: ArrayLike) -> float:
    """log r: the largest weight on the samples of P or Q over the mean weight on those of Q.

    The weights are exp(h) for :func:`donsker_varadhan`, |g|^beta for
    :func:`renyi_scale_optimized`; r >= 1.  Where Q puts mass that its
    sample did not show (above its largest weight), the weight is taken to be
    at most the largest one seen, on P's sample or Q's: a witness is largest
    where P puts its mass.  :func:`variational_bound` then bounds E_Q w by
    (1 + u r) times its sample mean, u = :func:`unseen_mass_bound`.
    """
    log_p, log_q = _as_witness_values(log_weights_p, log_weights_q)
    largest = max(np.max(log_p), np.max(log_q))
    return float(largest - log_mean_exp(log_q))


def variational_bound(
    estimate: float, standard_error: float, log_ratio: float, n_q: int, level: float, lower: bool = True
) -> float:
    """One-sided confidence bound at ``level`` on the estimand of a Donsker-Varadhan or Renyi estimate.

    Both objectives are a term in P minus log E_Q w (weights w = exp(h) or
    |g|^beta).  Lower bound::

        estimate - log(1 + u r) - z se,

    with u = :func:`unseen_mass_bound` (n_q, 0.1 (1 - level)) the mass Q may
    put above its largest held-out weight, r = exp(``log_ratio``)
    (:func:`log_unseen_ratio`), and z = Phi^-1(1 - 0.9 (1 - level)) the
    delta-method step (a union bound over the two errors).  It assumes that
    the weights have a finite variance under Q (the delta method; see
    :func:`tail_index`) and that Q's unseen weights are at most the largest
    seen.  Upper bound: estimate + Phi^-1(level) se (unseen mass of Q can
    only lower the objective).
    """
    if not lower:
        return float(estimate + ndtri(level) * standard_error)
    error = 1.0 - level
    log_u = np.log(unseen_mass_bound(n_q, UNSEEN_SHARE * error))
    step = ndtri(1.0 - (1.0 - UNSEEN_SHARE) * error) * standard_error
    return float(estimate - np.logaddexp(0.0, log_u + log_ratio) - step)


def renyi_from_alpha_divergence(value: ArrayLike, alpha: float) -> np.ndarray | float:
    """D_R = log(1 + alpha (alpha - 1) D_alpha) / (alpha - 1) (CBDP eq. 3)."""
    alpha = check_alpha(alpha)
    value = np.asarray(value, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.log1p(alpha * (alpha - 1.0) * value) / (alpha - 1.0)
    return float(out) if out.ndim == 0 else out


def alpha_divergence_from_renyi(value: ArrayLike, alpha: float) -> np.ndarray | float:
    """The inverse of :func:`renyi_from_alpha_divergence`."""
    alpha = check_alpha(alpha)
    value = np.asarray(value, dtype=float)
    out = np.expm1((alpha - 1.0) * value) / (alpha * (alpha - 1.0))
    return float(out) if out.ndim == 0 else out


def _as_witness_values(h_p: ArrayLike, h_q: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    h_p = np.asarray(h_p, dtype=float).ravel()
    h_q = np.asarray(h_q, dtype=float).ravel()
    if h_p.size == 0 or h_q.size == 0:
        raise ValueError(
            f"witness values on both samples are needed. Found {h_p.size} on P and {h_q.size} on Q."
        )
    return h_p, h_q
