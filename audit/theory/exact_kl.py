"""Exact KL divergences of two 1-D laws: over polynomials of degree K (CBDP appendix Lemma 1,
Donsker-Varadhan) and over all functions.

KL^H(P, Q) = sup_a  a . E_P[phi] - log E_Q[exp(a . phi)], concave in a,
maximised by Newton's method with the exact Hessian; the admissible leading
coefficients are read off the tails of Q's log density (a log barrier keeps
the coefficient inside), so an odd leading term of degree >= 3 under Laplace
or Gaussian tails is excluded (docs/theory.md section 4, "Trap").  Over all
functions KL = E_P log(p / q), by adaptive quadrature.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize
from scipy.special import logsumexp

from audit.theory.exact_rule import (
    Tail,
    adaptive_integral,
    atom_rule,
    expectation_rule,
    is_discrete,
    law_tails,
    polynomial_basis,
    support_contained,
)


def _admissible_leading(degree: int, tails: tuple[Tail, Tail]) -> tuple[float, float]:
    """Open interval of leading coefficients c of c x^degree + ... with E_Q exp(h) < inf.

    On a side s in {-1, +1} with -log q ~ kappa |x|^r, the leading term has
    sign e = c s^degree there, and needs: nothing if degree < r; e < kappa if
    degree == r; e < 0 if degree > r (h must go to -inf faster than nothing).
    Polynomial tails (r = 0) need e < 0 for every degree >= 1.
    """
    low, high = -np.inf, np.inf
    for side, tail in zip((-1, 1), tails):
        if degree < tail.exponent:
            continue
        limit = tail.coefficient if degree == tail.exponent else 0.0
        if side**degree > 0:
            high = min(high, limit)
        else:
            low = max(low, -limit)
    return low, high


def polynomial_kl(p, q, degree: int) -> float:
    """(poly_K, KL) by Donsker-Varadhan over the admissible polynomials (CBDP appendix Lemma 1).

    The domain {h : E_Q exp h < inf} is the union of strata "exact degree j
    with an admissible leading coefficient" (:func:`_admissible_leading`).
    On a stratum only the leading coefficient is constrained, to an open
    interval; by concavity the supremum over the domain is the largest of the
    strata's suprema. Solving each stratum on its own keeps the optimiser away
    from limits such as c_4 -> 0- with c_3 != 0, where E_Q exp h explodes.
    On m atoms the degree is capped at m - 1 (all functions).
    """
    rule = expectation_rule(p, q)
    degree = min(degree, rule.x.size - 1)
    q_tails, p_tails = law_tails(q), law_tails(p)
    strata = []
    for j in range(1, degree + 1):
        low, high = _admissible_leading(j, q_tails)
        if not low < high:
            continue
        if not all(t.has_moment(j) for t in p_tails):
            if j % 2 == 0 and high > 0:  # E_P x^j = +inf and a positive leading coefficient is allowed
                return np.inf
            break
        strata.append((j, low, high))
    if not strata:
        return 0.0
    basis = polynomial_basis(p, q, rule, strata[-1][0])
    features = basis.features(rule.x)[:, 1:]  # DV is invariant to constants
    mean_p = rule.weights_p @ features
    log_weights_q = rule.log_weights_q
    bounded_q = is_discrete(q) and np.all(np.isfinite(q.support()))
    if bounded_q and not support_contained(p, q) and _escapes_support(features, mean_p, log_weights_q):
        return np.inf
    best, start = 0.0, np.zeros(0)
    for j, low, high in strata:
        scale = basis.leading_coefficient(j)
        start = np.concatenate([start, np.zeros(j - start.size)])
        a, value = _donsker_varadhan_stratum(features[:, :j], mean_p[:j], log_weights_q, low / scale, high / scale, start)
        if not support_contained(p, q) and _increases_along_ray(features[:, :j], mean_p[:j], log_weights_q, a):
            return np.inf
        best, start = max(best, value), a
    return float(best)


def _escapes_support(features: np.ndarray, mean_p: np.ndarray, log_weights_q: np.ndarray) -> bool:
    """Whether some h = features @ b is at most c on Q's atoms with E_P h > c: then DV(t h) >= t (E_P h - c) -> inf.

    P then puts mass where h exceeds every value it takes on Q's support
    (CBDP Lemma 2 for point masses: h(x) = c - x separates 0 from 1).  A
    linear program over (b, c) with |b_j| <= 1: its optimum max E_P h - c
    is positive exactly when such an h exists.  Only for a Q with finitely
    many atoms, where "at most c on Q's atoms" is checked everywhere Q lives.
    """
    on_q = features[np.isfinite(log_weights_q)]
    objective = np.append(-mean_p, 1.0)  # minimise c - E_P h
    constraints = np.hstack([on_q, -np.ones((on_q.shape[0], 1))])  # h(x) - c <= 0 on Q's atoms
    box = [(-1.0, 1.0)] * features.shape[1] + [(None, None)]
    solution = optimize.linprog(objective, A_ub=constraints, b_ub=np.zeros(on_q.shape[0]), bounds=box)
    return bool(solution.status == 0 and -solution.fun > 1e-9 * max(1.0, float(np.max(np.abs(mean_p)))))


def _donsker_varadhan(features, mean_p, log_weights_q, a):
    """DV objective a . m_P - log E_Q exp(a . phi), its gradient and Hessian (minus the tilted covariance)."""
    exponents = log_weights_q + features @ a
    log_partition = logsumexp(exponents)
    tilted = np.exp(exponents - log_partition)
    tilted_mean = tilted @ features
    centered = features - tilted_mean
    return a @ mean_p - log_partition, mean_p - tilted_mean, -(centered.T * tilted) @ centered


def _donsker_varadhan_stratum(features, mean_p, log_weights_q, low, high, start):
    """Maximise DV over a with the last coefficient in the open interval (low, high).

    A log-barrier method: Newton's method with the exact Hessian on
    DV(a) + mu log(distance of a_j to the finite ends), for mu -> 0. The
    problem is concave but badly conditioned where the leading coefficient
    nears the edge of its interval (e.g. c_4 -> 0- under Laplace tails);
    first-order methods stall there, and plain Newton steps cut at the edge
    crawl along it.
    """
    ends = [(end, sign) for end, sign in ((high, 1.0), (low, -1.0)) if np.isfinite(end)]
    a = start.astype(float)
    width = high - low if np.isfinite(high - low) else 1.0
    a[-1] = np.clip(a[-1], low + 1e-3 * width, high - 1e-3 * width)  # strictly inside

    def barrier_objective(a, mu):
        value, gradient, hessian = _donsker_varadhan(features, mean_p, log_weights_q, a)
        for end, sign in ends:
            distance = sign * (end - a[-1])
            if distance <= 0:
                return -np.inf, gradient, hessian
            value += mu * np.log(distance)
            gradient[-1] -= sign * mu / distance
            hessian[-1, -1] -= mu / distance**2
        return value, gradient, hessian

    for mu in 10.0 ** -np.arange(2, 13, 2) if ends else [0.0]:
        a = _newton_maximize(lambda b: barrier_objective(b, mu), a)
    return a, _donsker_varadhan(features, mean_p, log_weights_q, a)[0]


def _newton_maximize(objective, a: np.ndarray) -> np.ndarray:
    """Damped Newton ascent with Armijo backtracking for a smooth concave objective, in a trust region.

    A step may change no coefficient by more than the trust radius (the
    features are standardised, so in units of the exponent): a doubling
    radius, starting at 1.  Without it a step from a flat start overshoots
    into a region where the objective is nearly linear (its Hessian
    underflows to 0), which Armijo's test still accepts and from which no
    Newton step leads back (two-point laws far apart, e.g. randomized
    response at a large epsilon).  Where the Hessian underflows but the
    gradient does not, the step is the gradient's direction.
    """
    value, gradient, hessian = objective(a)
    radius = 1.0
    for _ in range(400):
        step = linalg.lstsq(-hessian, gradient, cond=1e-13)[0]
        if not np.max(np.abs(hessian)) > 1e-200 and np.max(np.abs(gradient)) > 0:
            step = gradient / np.max(np.abs(gradient)) * radius  # a Hessian that underflowed: climb its slope
        if np.max(np.abs(step)) > radius:
            step = step * (radius / np.max(np.abs(step)))
        decrement = gradient @ step
        if not decrement > 1e-15 * max(1.0, abs(value)):
            break
        length = 1.0
        for _ in range(60):
            trial = objective(a + length * step)
            if trial[0] >= value + 1e-4 * length * decrement:
                break
            length /= 2
        else:
            break
        radius = 2.0 * radius if length == 1.0 else max(length * np.max(np.abs(step)), 1e-3)
        a = a + length * step
        value, gradient, hessian = trial
    return a


def _increases_along_ray(features, mean_p, log_weights_q, a) -> bool:
    """Whether the concave DV objective keeps growing along a -> t a (an unbounded supremum)."""
    values = [_donsker_varadhan(features, mean_p, log_weights_q, t * a)[0] for t in (1.0, 2.0, 4.0, 8.0)]
    return bool(np.all(np.diff(values) > 1e-6))


def unrestricted_kl(p, q, alpha=None) -> float:
    """KL(P, Q) = E_P[log p - log q], by adaptive quadrature or a sum over atoms; inf when it diverges.

    Divergence is decided from the supports and tails: it needs supp P in
    supp Q and E_P[-log q] finite, i.e. E_P |X|^r finite where -log q ~ |x|^r.
    """
    if not support_contained(p, q):
        return np.inf
    for p_tail, q_tail in zip(law_tails(p), law_tails(q)):
        if np.isfinite(p_tail.exponent) and q_tail.exponent > 0 and not p_tail.has_moment(q_tail.exponent):
            return np.inf
    if is_discrete(p):
        rule = atom_rule(p, q)
        on_p = np.isfinite(rule.logpdf_p)
        log_ratio = rule.logpdf_p[on_p] - rule.logpdf_q[on_p]
        return max(0.0, float(np.exp(rule.logpdf_p[on_p]) @ log_ratio))

    def integrand(x):
        log_p = p.logpdf(x)
        return 0.0 if np.isneginf(log_p) else np.exp(log_p) * (log_p - q.logpdf(x))

    return max(0.0, adaptive_integral(integrand, p, q, []))
