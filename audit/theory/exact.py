"""Exact restricted divergences of two 1-D laws, by quadrature or sums and convex optimisation.

For laws P, Q with densities (frozen ``scipy.stats`` continuous laws, or the
Laplace and Gaussian laws of :mod:`audit.theory.laws`), or two discrete laws
(frozen ``scipy.stats`` discrete laws, e.g. randomized response or the
two-sided geometric / discrete Laplace), this module computes the
H-restricted divergences of CBDP eq. 2 / eq. 3 and Def. 4 with the
conventions of docs/theory.md section 2 (CBDP's |t| convention for the
alpha-divergence), through the reductions of docs/theory.md section 4:

* KL over a linear-in-features class (CBDP appendix Lemma 1, Donsker-Varadhan)::

      KL^H(P, Q) = sup_a  a . E_P[phi] - log E_Q[exp(a . phi)],   concave in a.

  E_Q[exp(h)] is finite only when h(x) grows slower than -log q(x) at both
  ends of Q's support. The admissible coefficients are read off the tail of
  Q's log density (:func:`audit.theory.exact_rule.law_tails`), never obtained by truncating the
  integration domain: under Laplace or Gaussian tails a polynomial witness
  with an odd leading term of degree >= 3 has E_Q[exp h] = inf, so
  (poly3, KL) = (poly2, KL) (docs/theory.md section 4, "Trap").
* Renyi over a class closed under scaling::

      D_{R,alpha}^H(P, Q) = -log min_{g in H, E_P g = 1} E_Q |g|^beta,   beta = alpha / (alpha - 1),

  a convex problem; at alpha = 2 the closed form log(m_P^T M_Q^{-1} m_P).
* IPM (CBDP Def. 4): over thresholds, sup_t 2 |P(X > t) - Q(X > t)|; over all
  functions with range [-1, 1], 2 TV(P, Q).
* The unrestricted class ``all``: KL = E_P log(p / q) and
  Renyi = log(E_Q (p / q)^alpha) / (alpha - 1), by adaptive quadrature.

Integrals of the optimisation steps use one fixed rule per (P, Q): composite
Gauss-Legendre on panels between quantiles of both laws (and their medians,
where e.g. a Laplace density has its kink), plus Gauss-Legendre after the
substitution x = x_0 +- s t / (1 - t) on the two infinite tails; each
objective evaluation is then a vectorised sum (tests check the rule against
scipy.integrate.quad). For Renyi the rule is rebuilt with the real roots of
the optimal g as extra breakpoints, because |g|^beta has kinks there, and
the value is confirmed on a rule with twice as many panels. KL optima are
found by Newton's method with the exact Hessian (a log barrier keeps the
leading coefficient in its admissible interval).

Discrete laws (docs/theory.md section 2 with sums for integrals): every
expectation is a weighted sum over the atoms, i.e. a "rule" whose nodes are
the atoms of P and Q and whose weights are 1, so the same objectives and
solvers serve both kinds (:func:`audit.theory.exact_rule.atom_rule`). On m atoms the polynomials of
degree m - 1 are all functions, so higher degrees are capped there (on two
points, ``linear`` is already ``all``). An infinite side of the support is
cut at the outermost atom whose mass is at least exp(-600) ~ 1e-261
(:mod:`audit.theory.exact_rule`). Under a geometric tail of ratio r per atom the mass left
out is below 1e-261 / (1 - r) < 1e-258 for any law that can be summed
(r <= 1 - 600 / 2^18: at most 2^18 atoms per side). A KL witness that tilts
the tail by exp(c x), c a fraction f < 1 of the tail's rate, changes the
tilted sums by about exp(-600 (1 - f)) relative (< 1e-13 for f <= 0.95), so
the values are those of the untruncated laws to float precision. Whether
tilted or powered sums (E_Q exp h, p^alpha q^(1 - alpha)) converge at all is
decided from the tails of the log pmf, exactly as for densities: a truncated
support never turns an infinite value into a finite one, and the KL trap of
section 4 holds for discrete Laplace tails too. The threshold IPM takes the
events {x > t} with t at the atoms.

Unbounded values are returned as ``inf``.

This module checks the inputs and dispatches on (class, divergence); the
laws, tails, supports and quadrature rule are :mod:`audit.theory.exact_rule`'s,
each divergence's solver its own module: :mod:`audit.theory.exact_kl`,
:mod:`audit.theory.exact_renyi`, :mod:`audit.theory.exact_ipm`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attacks.classes import All, FunctionClass, Polynomials, Thresholds, parse_function_class
from attacks.vocabulary import IPM, KL, Divergence, Renyi, parse_divergence
from audit.theory.exact_ipm import threshold_ipm, total_variation_ipm
from audit.theory.exact_kl import polynomial_kl, unrestricted_kl
from audit.theory.exact_renyi import polynomial_renyi, unrestricted_renyi
from audit.theory.exact_rule import in_support, is_discrete, law_kind, law_name
from audit.theory.laws import LocationScaleLaw

if TYPE_CHECKING:
    from scipy import stats

DIVERGENCES = (KL.name, Renyi.name, IPM.name)
MAX_DEGREE = 10
_CLASSES = "'linear', 'polyK' (1 <= K <= 10), 'threshold' (ipm only) or 'all'"

_MAX_SPAN = 1e100
"""Largest extent of the two laws' bulks: the polynomial features and squares must stay finite."""
_MIN_RELATIVE_WIDTH = 1e-12
"""Smallest width of a continuous law's bulk relative to the laws' extent and location: narrower
laws fall between the nodes of a float64 grid (spacing 2.2e-16 of the location)."""
_MAX_SEPARATION = 30.0
"""Largest distance between the medians of two continuous laws, in interquartile widths of the
narrower: the quadrature is verified up to it (Laplace laws one unit apart at epsilon = 40 agree
with the closed forms; at epsilon = 50 the unrestricted KL came out inf and poly3 KL above it)."""


def restricted_divergence(
    p: stats.rv_continuous | stats.rv_discrete | LocationScaleLaw,
    q: stats.rv_continuous | stats.rv_discrete | LocationScaleLaw,
    function_class: str,
    divergence: str,
    alpha: float | None = None,
) -> float:
    """Exact H-restricted divergence of P from Q (CBDP eq. 2, eq. 3, Def. 4).

    Parameters
    ----------
    p, q : frozen 1-D scipy.stats laws, both continuous or both discrete
        Laws with a density, e.g. ``scipy.stats.laplace(0, 1)`` or
        ``audit.theory.laws.Laplace(0, 1)``, or with a
        pmf, e.g. ``scipy.stats.bernoulli(0.7)``, ``scipy.stats.dlaplace(1.0)``
        or ``scipy.stats.rv_discrete(values=(xk, pk))`` (frozen or not: it has
        no parameters). Discrete supports that are infinite are cut where the
        pmf falls below ~1e-261 (module docstring).
    function_class : {"linear", "polyK", "threshold", "all"}
        The witness class H: polynomials of degree <= K (``linear`` = ``poly1``,
        K <= 10), thresholds ``h = +-sign(x - t)`` (``ipm`` only), or all
        functions.
    divergence : {"kl", "renyi", "ipm"}
    alpha : float, optional
        Renyi order > 1, required for ``divergence="renyi"`` (CBDP's |t|
        convention, docs/theory.md section 2); ignored otherwise.

    Returns
    -------
    float
        The divergence, ``inf`` when unbounded. IPM values are on CBDP's scale
        (witness range [-1, 1]): over ``all`` it is 2 TV.

    Raises
    ------
    ValueError
        For an unknown class or divergence, a Renyi order that is missing or
        <= 1, a class that has no exact value for the divergence (threshold
        witnesses are for ipm only; polynomials bounded on the real line are
        constants, so polynomial IPM is not computed), a law that is not a
        frozen 1-D scipy.stats law, one continuous and one discrete law, or a
        discrete law whose pmf stays above ~1e-261 too far out to be summed.

    Examples
    --------
    >>> from scipy import stats
    >>> p, q = stats.norm(0, 1), stats.norm(1, 1)
    >>> round(restricted_divergence(p, q, "linear", "renyi", alpha=2.0), 4)
    0.6931
    >>> round(restricted_divergence(stats.bernoulli(0.7), stats.bernoulli(0.3), "linear", "kl"), 4)
    0.3389
    """
    kind = parse_divergence(divergence, alpha)
    if kind.name not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}. Found {kind.name!r}.")
    hclass = _check_class(function_class, kind)
    p, q = _check_law(p, "p"), _check_law(q, "q")
    if is_discrete(p) != is_discrete(q):
        raise ValueError(
            "p and q must both be continuous or both be discrete laws (a density and a pmf have no common "
            f"dominating measure here). Found {law_kind(p)} p = {law_name(p)} and {law_kind(q)} q = {law_name(q)}."
        )
    _check_scale(p, q)
    match hclass, kind:
        case Thresholds(), _:
            return threshold_ipm(p, q)
        case All(), KL():
            return unrestricted_kl(p, q)
        case All(), Renyi(alpha=alpha):
            return unrestricted_renyi(p, q, alpha)
        case All(), IPM():
            return total_variation_ipm(p, q)
        case Polynomials(degree=degree), KL():
            return polynomial_kl(p, q, degree)
    return polynomial_renyi(p, q, hclass.degree, kind.alpha)


def known_laws(mechanism: object, d: np.ndarray, d_prime: np.ndarray) -> tuple[object, object] | None:
    """The mechanism's exact output laws (P, Q) on (d, d'), or None when it has none or cannot compute them."""
    try:
        return mechanism.output_laws(d, d_prime)
    except (AttributeError, ArithmeticError, ValueError, IndexError):
        return None


def exact_value(laws: tuple[object, object] | None, function_class: str, divergence: str,
                alpha: float | None = None) -> float | None:
    """:func:`restricted_divergence` of 1-D laws (P, Q), or None when the laws are unknown, the class or
    divergence has no exact value here, or quadrature cannot resolve the laws."""
    if laws is None:
        return None
    try:
        return float(restricted_divergence(*laws, function_class=function_class, divergence=divergence, alpha=alpha))
    except (ArithmeticError, ValueError, IndexError):
        return None


def _check_class(function_class: str, divergence: Divergence) -> FunctionClass:
    try:
        hclass = parse_function_class(function_class)
    except ValueError:
        raise ValueError(f"function_class must be {_CLASSES} for exact values. Found {function_class!r}.") from None
    too_high = isinstance(hclass, Polynomials) and hclass.degree > MAX_DEGREE
    if not isinstance(hclass, (Polynomials, Thresholds, All)) or too_high:
        raise ValueError(f"function_class must be {_CLASSES} for exact values. Found {function_class!r}.")
    if isinstance(hclass, Thresholds) and not isinstance(divergence, IPM):
        raise ValueError(
            f"function_class 'threshold' has exact values for divergence 'ipm' only. Found {divergence.name!r}."
        )
    if isinstance(hclass, Polynomials) and isinstance(divergence, IPM):
        raise ValueError(
            "divergence 'ipm' has exact values for function_class 'threshold' or 'all' only (a polynomial "
            f"with range [-1, 1] on the real line is constant). Found {function_class!r}."
        )
    return hclass


def _check_law(law: object, name: str):
    """The law, frozen: a parameter-free ``rv_discrete(values=...)`` is accepted unfrozen."""
    if isinstance(law, LocationScaleLaw):
        return law
    from scipy import stats  # for laws other than audit.theory.laws': an audit of the built-ins never loads it

    if isinstance(law, stats.rv_discrete) and law.numargs == 0:
        law = law()
    if not isinstance(getattr(law, "dist", None), (stats.rv_continuous, stats.rv_discrete)):
        raise ValueError(
            f"{name} must be a frozen 1-D scipy.stats law, continuous such as scipy.stats.laplace(0, 1) or "
            f"discrete such as scipy.stats.dlaplace(1.0) (multivariate laws have no exact values here). "
            f"Found {law!r}."
        )
    return law


def _check_scale(p, q) -> None:
    """Raise unless both laws lie on a scale float64 quadrature resolves.

    The bulks (quantiles 0.001 to 0.999) must be finite and within an extent of
    ``_MAX_SPAN``; a continuous law's interquartile width must be at least
    ``_MIN_RELATIVE_WIDTH`` of that extent and of its distance from 0.
    Outside, the rule's nodes overflow or collapse (e.g. Laplace laws at
    +-1e308, or of scale 1e-300 one unit apart) and no value would be exact.
    """
    levels = np.array([0.001, 0.25, 0.75, 0.999])
    with np.errstate(all="ignore"):
        quantiles = np.array([law.ppf(levels) for law in (p, q)], dtype=float)
        extent = np.ptp(quantiles) if np.all(np.isfinite(quantiles)) else np.inf
        reach = max(extent, float(np.max(np.abs(quantiles))))
        widths = quantiles[:, 2] - quantiles[:, 1]
    narrow = not is_discrete(p) and bool(
        np.any(widths < _MIN_RELATIVE_WIDTH * reach) or abs(p.median() - q.median()) > _MAX_SEPARATION * np.min(widths)
    )
    if not extent <= _MAX_SPAN or narrow:
        raise ValueError(
            f"p and q must lie on a scale float64 quadrature resolves (bulks within {_MAX_SPAN:g} of each other, "
            f"each continuous law wider than {_MIN_RELATIVE_WIDTH:g} of that extent and of its location, medians "
            f"at most {_MAX_SEPARATION:g} interquartile widths apart); "
            f"no exact value for p = {law_name(p)}, q = {law_name(q)}."
        )
    for law, other, bulk in ((p, q, quantiles[1]), (q, p, quantiles[0])):
        inside = bulk[in_support(law, bulk)]
        with np.errstate(all="ignore"):
            underflows = not is_discrete(p) and not np.all(np.isfinite(law.logpdf(inside)))
        if underflows:  # scipy computes some log densities as log(pdf), -inf where pdf underflows
            raise ValueError(
                f"the log density of {law_name(law)} underflows to -inf within the bulk of {law_name(other)} "
                "(the laws are too far apart for scipy.stats to evaluate); no exact value."
            )
