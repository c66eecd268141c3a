"""Exact Renyi divergences of two 1-D laws: over polynomials of degree K and over all functions.

Over a class closed under scaling (docs/theory.md section 4)
D_{R,alpha}^H(P, Q) = -log min_{g in H, E_P g = 1} E_Q |g|^beta with
beta = alpha / (alpha - 1), a convex problem (the closed form
log(m_P^T M_Q^{-1} m_P) at alpha = 2); the rule is rebuilt with the real
roots of the optimal g as breakpoints and the value confirmed on a rule with
twice the panels.  Over all functions log(E_Q (p / q)^alpha) / (alpha - 1),
by adaptive quadrature, inf when the tails make it diverge.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize
from scipy.special import logsumexp

from audit.theory.exact_rule import (
    Rule,
    Tail,
    adaptive_integral,
    atom_rule,
    expectation_rule,
    is_discrete,
    law_name,
    law_tails,
    polynomial_basis,
    quadrature_rule,
    support_contained,
)


def polynomial_renyi(p, q, degree: int, alpha: float) -> float:
    """(poly_K, Renyi) = -log min_{E_P g = 1} E_Q |g|^beta over polynomials g (docs/theory.md section 4).

    Starts from the alpha = 2 quadratic program (for beta > 2, i.e. alpha < 2,
    followed along a geometric path of exponents up to beta, since |g|^beta
    with a large beta punishes a poor start hard), then refines the rule at
    the real roots of the optimal g, where |g|^beta has kinks, until the
    value is stable, and accepts it only when a rule with twice as many panels
    agrees (else it re-solves on the finer rule, up to 16 sub-panels). Sums
    over the atoms of discrete laws are exact: the first solution is the value.
    On m atoms the degree is capped at m - 1 (all functions).
    """
    beta = alpha / (alpha - 1)
    q_tails, p_tails = law_tails(q), law_tails(p)
    degree = max([j for j in range(degree + 1) if all(t.has_moment(j * beta) for t in q_tails)])
    if not all(t.has_moment(degree) for t in p_tails):
        return np.inf  # E_P |g| unbounded while E_Q |g|^beta is finite
    rule = expectation_rule(p, q)
    basis = polynomial_basis(p, q, rule, min(degree, rule.x.size - 1))
    features = basis.features(rule.x)
    mean_p = rule.weights_p @ features
    if _vanishes_on_support_of_q(features, mean_p, rule):
        return np.inf
    coefficients = _quadratic_program(features, mean_p, rule)
    for exponent in np.geomspace(2.0, beta, int(np.ceil(np.log2(beta / 2))) + 1)[1:-1]:
        coefficients = _minimize_moment(features, mean_p, rule.log_weights_q, exponent, coefficients)
    if is_discrete(p):
        coefficients = _minimize_moment(features, mean_p, rule.log_weights_q, beta, coefficients)
        return max(0.0, -_log_moment(features @ coefficients, rule.log_weights_q, beta))
    for subdivisions in (1, 2, 4, 8):
        value = np.nan
        for _ in range(6):
            coefficients, previous = _minimize_moment(features, mean_p, rule.log_weights_q, beta, coefficients), value
            value = -_log_moment(features @ coefficients, rule.log_weights_q, beta)
            if beta == 2.0 or abs(value - previous) <= 1e-10 * max(1.0, abs(value)):
                break
            rule = quadrature_rule(p, q, basis.roots(coefficients), subdivisions)
            features = basis.features(rule.x)
            mean_p = rule.weights_p @ features
        # Check against a rule with twice as many panels: a large beta makes |g|^beta so
        # sharp that the optimiser can exploit the gaps between nodes.
        rule = quadrature_rule(p, q, basis.roots(coefficients), 2 * subdivisions)
        features = basis.features(rule.x)
        mean_p = rule.weights_p @ features
        coefficients = coefficients / (mean_p @ coefficients)
        checked = -_log_moment(features @ coefficients, rule.log_weights_q, beta)
        if abs(checked - value) <= 1e-9 * max(1.0, abs(value)):
            break
    return max(0.0, float(checked))  # g = 1 gives 0


def _vanishes_on_support_of_q(features: np.ndarray, mean_p: np.ndarray, rule: Rule) -> bool:
    """Whether some g = features @ b is 0 on Q's support with E_P g != 0: then E_Q |g|^beta = 0, Renyi = inf.

    A polynomial of degree < m vanishes on no m distinct points, so only a
    discrete Q with fewer atoms than features can have such a g (P then has
    atoms outside Q's support).
    """
    on_q = features[np.isfinite(rule.log_weights_q)]
    if on_q.shape[0] >= on_q.shape[1]:
        return False
    null = linalg.null_space(on_q)
    return null.shape[1] > 0 and bool(np.max(np.abs(mean_p @ null)) > 1e-9 * linalg.norm(mean_p))


def _quadratic_program(features: np.ndarray, mean_p: np.ndarray, rule: Rule) -> np.ndarray:
    """argmin E_Q g^2 subject to E_P g = 1: M_Q^{-1} m_P / (m_P^T M_Q^{-1} m_P)."""
    second_moments_q = features.T @ (np.exp(rule.log_weights_q)[:, None] * features)
    solution = linalg.solve(second_moments_q, mean_p, assume_a="pos")
    return solution / (mean_p @ solution)


def _log_moment(g: np.ndarray, log_weights_q: np.ndarray, beta: float) -> float:
    with np.errstate(divide="ignore"):
        return float(logsumexp(log_weights_q + beta * np.log(np.abs(g))))


def _minimize_moment(
    features: np.ndarray, mean_p: np.ndarray, log_weights_q: np.ndarray, beta: float, start: np.ndarray
) -> np.ndarray:
    """min (1 / beta) log E_Q |g|^beta over g = features @ b with E_P g = 1, from ``start``.

    The constraint is removed by writing b = b_0 + N y with N a basis of the
    null space of m_P; the objective is the log of the L_beta(Q) norm of g,
    a monotone transform of a convex function of y.
    """
    start = start / (mean_p @ start)
    null = linalg.null_space(mean_p[None, :])
    if null.shape[1] == 0:
        return start

    def objective(y):
        g = features @ (start + null @ y)
        with np.errstate(divide="ignore"):
            exponents = log_weights_q + beta * np.log(np.abs(g))
        log_moment = logsumexp(exponents)
        weights = np.exp(exponents - log_moment)
        ratio = np.divide(weights, g, out=np.zeros_like(g), where=weights > 0)
        return log_moment / beta, null.T @ (features.T @ ratio)

    result = optimize.minimize(
        objective, np.zeros(null.shape[1]), jac=True, method="BFGS", options={"gtol": 1e-10, "maxiter": 2000}
    )
    return start + null @ result.x


def unrestricted_renyi(p, q, alpha: float) -> float:
    """Renyi divergence log(integral p^alpha q^(1 - alpha)) / (alpha - 1), in log space.

    The integrand is shifted by its largest log value (grid search refined by
    Brent's method), whose location is also a breakpoint (for large alpha the mass of p^alpha
    q^(1 - alpha) sits far from both laws); for discrete laws, a log-sum-exp
    over the atoms. Divergence is decided from the supports and the tails of
    both log densities (or log pmfs).
    """
    if not support_contained(p, q):
        return np.inf
    for p_tail, q_tail in zip(law_tails(p), law_tails(q)):
        if np.isfinite(p_tail.exponent) and not _renyi_tail_finite(p_tail, q_tail, alpha):
            return np.inf
    if is_discrete(p):
        rule = atom_rule(p, q)
        on_p = np.isfinite(rule.logpdf_p)
        terms = alpha * rule.logpdf_p[on_p] + (1 - alpha) * rule.logpdf_q[on_p]
        return max(0.0, float(logsumexp(terms) / (alpha - 1)))

    def log_integrand(x):
        log_p = p.logpdf(x)
        with np.errstate(invalid="ignore"):
            return np.where(np.isneginf(log_p), -np.inf, alpha * log_p + (1 - alpha) * q.logpdf(x))

    grid = np.sort(quadrature_rule(p, q).x)
    best = int(np.argmax(log_integrand(grid)))
    # For large alpha the peak can lie beyond the grid (N(0, s) vs N(1, s): at x = 1 - alpha).
    bracket = (grid[best - 1], grid[best]) if best > 0 else (grid[1], grid[0])
    refined = optimize.minimize_scalar(lambda x: -log_integrand(x), bracket=bracket)
    peak = refined.x if -refined.fun > log_integrand(grid[best]) else grid[best]
    shift = float(log_integrand(peak))
    if not np.isfinite(shift):  # a log density that underflowed to -inf (scipy's log(pdf)) far out
        raise ValueError(
            f"the Renyi integrand of p = {law_name(p)}, q = {law_name(q)} cannot be evaluated (a log density underflows "
            "to -inf where the other is positive); no exact value."
        )

    def integrand(x):
        return float(np.exp(log_integrand(x) - shift))

    return float((shift + np.log(adaptive_integral(integrand, p, q, [peak]))) / (alpha - 1))


def _renyi_tail_finite(p_tail: Tail, q_tail: Tail, alpha: float) -> bool:
    """Whether p^alpha q^(1 - alpha) is integrable on a side where P's support is unbounded.

    Its log is -alpha u_p + (alpha - 1) u_q with u = -log density; u_p must
    win: a faster-growing tail exponent, or an equal one with a larger
    coefficient (for polynomial tails, a decay faster than 1 / |x|).
    """
    if not np.isfinite(q_tail.exponent) or p_tail.exponent < q_tail.exponent:
        return False
    if p_tail.exponent > q_tail.exponent:
        return True
    excess = alpha * p_tail.coefficient - (alpha - 1) * q_tail.coefficient
    return excess > (1.0 if p_tail.exponent == 0 else 0.0)
