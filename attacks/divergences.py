"""f-divergences in variational form, with CBDP's conventions.

Every divergence here is written as the supremum of a variational objective
(Nguyen, Wainwright and Jordan; CBDP eq. 1)::

    D_f(P, Q) = sup_h  E_P[h(x)] - E_Q[f*(h(x))],

and restricting the supremum to a function class H gives the H-restricted
divergence of CBDP eq. 2.  Any fixed witness h gives a lower bound on the
restricted divergence of every class that contains it, which is what makes a
held-out score an honest lower bound.

Conventions (THEORY.md section 2):

* ``kl``: f(t) = t log t, f*(s) = exp(s - 1).
* ``alpha`` (order alpha > 1): f(t) = (|t|^alpha - 1) / (alpha^2 - alpha) on all
  of R -- CBDP's |t| convention, under which f* is even --, so
  f*(s) = C_alpha |s|^beta + 1 / (alpha^2 - alpha), beta = alpha / (alpha - 1),
  C_alpha = (alpha - 1)^beta / alpha (CBDP appendix Lemma 3).
* ``tv``: f(t) = |t - 1| / 2, f*(s) = s on |s| <= 1/2 and +inf outside.

Restricted Renyi divergence (CBDP eq. 3)::

    D_{R,alpha}^H = log(1 + alpha (alpha - 1) D_alpha^H) / (alpha - 1).

The functions of this module are pure and vectorised; they validate their
arguments at the door.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

DIVERGENCES = ("kl", "alpha", "tv")


def check_alpha(alpha: float) -> float:
    """Return ``alpha`` as a float, or raise if it is not a Renyi order > 1.

    Raises
    ------
    ValueError
        If alpha is not a finite number greater than 1.
    """
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"alpha must be a number greater than 1. Found {alpha!r}.") from None
    if not np.isfinite(value) or value <= 1.0:
        raise ValueError(
            f"alpha must be a finite Renyi order greater than 1 (alpha = 1 is KL: use "
            f"divergence 'kl'). Found {alpha!r}."
        )
    return value


def conjugate_exponent(alpha: float) -> float:
    """beta = alpha / (alpha - 1), the exponent of f* for the alpha-divergence."""
    alpha = check_alpha(alpha)
    return alpha / (alpha - 1.0)


def alpha_conjugate_constant(alpha: float) -> float:
    """C_alpha = (alpha - 1)^beta / alpha of CBDP appendix Lemma 3."""
    alpha = check_alpha(alpha)
    return (alpha - 1.0) ** conjugate_exponent(alpha) / alpha


def f_generator(t: ArrayLike, divergence: str, alpha: float | None = None) -> np.ndarray:
    """The convex generator f(t) of ``divergence`` (THEORY.md section 2 table)."""
    t = np.asarray(t, dtype=float)
    if divergence == "kl":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), np.where(t == 0, 0.0, np.inf))
    if divergence == "alpha":
        alpha = check_alpha(alpha)
        return (np.abs(t) ** alpha - 1.0) / (alpha**2 - alpha)
    if divergence == "tv":
        return 0.5 * np.abs(t - 1.0)
    raise _unknown(divergence)


def f_conjugate(s: ArrayLike, divergence: str, alpha: float | None = None) -> np.ndarray:
    """The convex conjugate f*(s) = sup_t s t - f(t) (THEORY.md section 2 table)."""
    s = np.asarray(s, dtype=float)
    if divergence == "kl":
        return np.exp(s - 1.0)
    if divergence == "alpha":
        alpha = check_alpha(alpha)
        beta = conjugate_exponent(alpha)
        return alpha_conjugate_constant(alpha) * np.abs(s) ** beta + 1.0 / (alpha**2 - alpha)
    if divergence == "tv":
        return np.where(np.abs(s) <= 0.5, s, np.inf)
    raise _unknown(divergence)


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


def donsker_varadhan(h_p: ArrayLike, h_q: ArrayLike) -> float:
    """E_P[h] - log E_Q[exp h]: the KL objective with the best shift of h.

    For a class closed under adding constants, maximising the KL objective of
    CBDP eq. 1 over the shift h + b gives this Donsker-Varadhan form (CBDP
    appendix Lemma 1). Computed in log space, so a witness with large values
    on Q returns a finite number or -inf, never an overflow.
    """
    h_p, h_q = _as_witness_values(h_p, h_q)
    return float(np.mean(h_p) - (logsumexp(h_q) - np.log(h_q.size)))


def renyi_scale_optimized(g_p: ArrayLike, g_q: ArrayLike, alpha: float) -> float:
    """Restricted Renyi value of a witness direction g, with its scale optimised.

    For a class closed under scaling, maximising the alpha-divergence
    objective over c * g and applying CBDP eq. 3 gives (THEORY.md section 4)::

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


def _unknown(divergence: str) -> ValueError:
    return ValueError(f"divergence must be one of {DIVERGENCES}. Found {divergence!r}.")
