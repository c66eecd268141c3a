"""Exact restricted divergences of two 1-D laws, by quadrature or sums and convex optimisation.

For laws P, Q with densities (frozen ``scipy.stats`` continuous laws), or two
discrete laws (frozen ``scipy.stats`` discrete laws, e.g. randomized response
or the two-sided geometric / discrete Laplace), this module computes the
H-restricted divergences of CBDP eq. 2 / eq. 3 and Def. 4 with the
conventions of docs/theory.md section 2 (CBDP's |t| convention for the
alpha-divergence), through the reductions of docs/theory.md section 4:

* KL over a linear-in-features class (CBDP appendix Lemma 1, Donsker-Varadhan)::

      KL^H(P, Q) = sup_a  a . E_P[phi] - log E_Q[exp(a . phi)],   concave in a.

  E_Q[exp(h)] is finite only when h(x) grows slower than -log q(x) at both
  ends of Q's support. The admissible coefficients are read off the tail of
  Q's log density (:func:`_tail`), never obtained by truncating the
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
solvers serve both kinds (:func:`_atom_rule`). On m atoms the polynomials of
degree m - 1 are all functions, so higher degrees are capped there (on two
points, ``linear`` is already ``all``). An infinite side of the support is
cut at the outermost atom whose mass is at least exp(-600) ~ 1e-261
(:func:`_atoms`). Under a geometric tail of ratio r per atom the mass left
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import polynomial
from scipy import integrate, linalg, optimize, stats
from scipy.special import logsumexp

from attacks.classes import All, FunctionClass, Polynomials, Thresholds, parse_function_class
from attacks.vocabulary import IPM, KL, Divergence, Renyi, parse_divergence

DIVERGENCES = (KL.name, Renyi.name, IPM.name)
MAX_DEGREE = 10
_CLASSES = "'linear', 'polyK' (1 <= K <= 10), 'threshold' (ipm only) or 'all'"

# Panels: decades of tail probability of each law, then its bulk.
_TAIL_LEVELS = 10.0 ** -np.arange(12, 1, -1)
_BULK_LEVELS = np.array([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98])
_PANEL_NODES = np.polynomial.legendre.leggauss(16)
_TAIL_NODES = np.polynomial.legendre.leggauss(48)
_QUAD_OPTIONS = {"epsabs": 0.0, "epsrel": 1e-10, "limit": 500}
# Discrete laws: atoms out to a pmf of exp(-600) ~ 1e-261, at most 2^18 lattice steps from the median.
_MAX_SPAN = 1e100
"""Largest extent of the two laws' bulks: the polynomial features and squares must stay finite."""
_MIN_RELATIVE_WIDTH = 1e-12
"""Smallest width of a continuous law's bulk relative to the laws' extent and location: narrower
laws fall between the nodes of a float64 grid (spacing 2.2e-16 of the location)."""
_MAX_SEPARATION = 30.0
"""Largest distance between the medians of two continuous laws, in interquartile widths of the
narrower: the quadrature is verified up to it (Laplace laws one unit apart at epsilon = 40 agree
with the closed forms; at epsilon = 50 the unrestricted KL came out inf and poly3 KL above it)."""
_LOG_ATOM_CUT = -600.0
_MAX_REACH = 2.0**18


def restricted_divergence(
    p: stats.rv_continuous | stats.rv_discrete,
    q: stats.rv_continuous | stats.rv_discrete,
    function_class: str,
    divergence: str,
    alpha: float | None = None,
) -> float:
    """Exact H-restricted divergence of P from Q (CBDP eq. 2, eq. 3, Def. 4).

    Parameters
    ----------
    p, q : frozen 1-D scipy.stats laws, both continuous or both discrete
        Laws with a density, e.g. ``scipy.stats.laplace(0, 1)``, or with a
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
    if _is_discrete(p) != _is_discrete(q):
        raise ValueError(
            "p and q must both be continuous or both be discrete laws (a density and a pmf have no common "
            f"dominating measure here). Found {_kind(p)} p = {_name(p)} and {_kind(q)} q = {_name(q)}."
        )
    _check_scale(p, q)
    match hclass, kind:
        case Thresholds(), _:
            return _threshold_ipm(p, q)
        case All(), KL():
            return _kl(p, q)
        case All(), Renyi(alpha=alpha):
            return _renyi(p, q, alpha)
        case All(), IPM():
            return _total_variation_ipm(p, q)
        case Polynomials(degree=degree), KL():
            return _polynomial_kl(p, q, degree)
    return _polynomial_renyi(p, q, hclass.degree, kind.alpha)


# --------------------------------------------------------------------------- input checks



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
    narrow = not _is_discrete(p) and bool(
        np.any(widths < _MIN_RELATIVE_WIDTH * reach) or abs(p.median() - q.median()) > _MAX_SEPARATION * np.min(widths)
    )
    if not extent <= _MAX_SPAN or narrow:
        raise ValueError(
            f"p and q must lie on a scale float64 quadrature resolves (bulks within {_MAX_SPAN:g} of each other, "
            f"each continuous law wider than {_MIN_RELATIVE_WIDTH:g} of that extent and of its location, medians "
            f"at most {_MAX_SEPARATION:g} interquartile widths apart); "
            f"no exact value for p = {_name(p)}, q = {_name(q)}."
        )
    for law, other, bulk in ((p, q, quantiles[1]), (q, p, quantiles[0])):
        inside = bulk[_in_support(law, bulk)]
        with np.errstate(all="ignore"):
            underflows = not _is_discrete(p) and not np.all(np.isfinite(law.logpdf(inside)))
        if underflows:  # scipy computes some log densities as log(pdf), -inf where pdf underflows
            raise ValueError(
                f"the log density of {_name(law)} underflows to -inf within the bulk of {_name(other)} "
                "(the laws are too far apart for scipy.stats to evaluate); no exact value."
            )


def _is_discrete(law) -> bool:
    return isinstance(law.dist, stats.rv_discrete)


def _kind(law) -> str:
    return "discrete" if _is_discrete(law) else "continuous"


def _name(law) -> str:
    """A frozen law as it would be written, e.g. ``dlaplace(1.0, loc=1)``, for error messages."""
    arguments = [repr(arg) for arg in law.args] + [f"{key}={value!r}" for key, value in law.kwds.items()]
    return f"{law.dist.name}({', '.join(arguments)})"


def _log_density(law, x: np.ndarray) -> np.ndarray:
    """log of the density, or of the pmf for a discrete law (the density for the counting measure)."""
    return law.logpmf(x) if _is_discrete(law) else law.logpdf(x)


# --------------------------------------------------------------------------- tails and supports


@dataclass(frozen=True)
class _Tail:
    """Shape of one tail of a log density: -log f(x) ~ coefficient |x|^exponent.

    ``exponent == 0`` stands for a polynomial tail, -log f(x) ~ coefficient log|x|;
    ``exponent == inf`` for a side on which the support is bounded.
    """

    exponent: float
    coefficient: float

    def has_moment(self, order: float) -> bool:
        """Whether E|X|^order restricted to this side is finite."""
        return self.exponent > 0 or order < self.coefficient - 1.0


def _tail(law, side: int) -> _Tail:
    """Read the tail of ``law`` on ``side`` (-1 left, +1 right) off its log density.

    With u = -log f at distances D, 2D, 4D from the median, the ratio of
    successive differences of u is 2^exponent for u = c |x|^exponent + const,
    and 1 for u = c log|x| + const; differences cancel the normalising constant.
    For a discrete law u = -log pmf, read at atoms: the median is one and the
    spread a whole number of lattice steps.
    """
    lower, upper = law.support()
    if np.isfinite(lower if side < 0 else upper):
        return _Tail(np.inf, np.inf)
    center = law.median()
    spread = law.ppf(0.75) - law.ppf(0.25) or 1.0  # a discrete law may hold its middle half on one atom
    for power in (10, 6, 3):
        u = -_log_density(law, center + side * spread * 2.0 ** np.array([power, power + 1, power + 2]))
        with np.errstate(invalid="ignore"):
            step_near, step_far = np.diff(u)
        if np.all(np.isfinite(u)) and step_near > 0 and step_far > 0:
            break
    exponent = np.log2(step_far / step_near)
    if abs(exponent) < 0.02:
        return _Tail(0.0, step_far / np.log(2.0))
    if abs(exponent - round(exponent)) < 0.02:
        exponent = float(round(exponent))
    far = spread * 2.0 ** (power + 2)
    return _Tail(exponent, step_far / (far**exponent - (far / 2) ** exponent))


def _tails(law) -> tuple[_Tail, _Tail]:
    return _tail(law, -1), _tail(law, +1)


def _support_contained(p, q) -> bool:
    """Whether P's support lies in Q's: as intervals, or atom by atom for discrete laws."""
    if _is_discrete(p):
        return bool(np.all(_in_support(q, _atoms(p))))
    (p_low, p_high), (q_low, q_high) = p.support(), q.support()
    return q_low <= p_low and p_high <= q_high


def _atoms(law) -> np.ndarray:
    """The atoms of a discrete law; an infinite side of its support is cut where the pmf is below exp(-600).

    ``rv_discrete(values=...)`` lists its atoms; other scipy discrete laws live
    on the lattice loc + Z, walked out from the median by doubling distances
    (a median is an atom, so every point visited is one), then trimmed back
    to the outermost atoms with pmf >= exp(-600).
    """
    listed = getattr(law.dist, "xk", None)
    if listed is not None:
        atoms = np.asarray(listed, dtype=float) + (law.support()[0] - listed[0])  # shifted by loc
        return atoms[law.pmf(atoms) > 0]
    ends = list(law.support())
    center = law.median()
    for index, side in enumerate((-1, 1)):
        distance = 1.0
        while not np.isfinite(ends[index]):
            if law.logpmf(center + side * distance) < _LOG_ATOM_CUT:
                ends[index] = center + side * distance
            elif distance >= _MAX_REACH:
                raise ValueError(
                    f"a discrete law's pmf must fall below exp({_LOG_ATOM_CUT:g}) within {_MAX_REACH:g} lattice "
                    f"steps of its median for its sums to be computed. Found {_name(law)} with pmf "
                    f"{law.pmf(center + side * distance):.3g} at {center + side * distance:g}."
                )
            distance *= 2
    atoms = np.arange(ends[0], ends[1] + 1.0)
    log_pmf = law.logpmf(atoms)
    above_cut = np.flatnonzero(log_pmf >= _LOG_ATOM_CUT)
    low = 0 if np.isfinite(law.support()[0]) else above_cut[0]
    high = atoms.size if np.isfinite(law.support()[1]) else above_cut[-1] + 1
    return atoms[low:high][np.isfinite(log_pmf[low:high])]


def _in_support(law, x: np.ndarray) -> np.ndarray:
    """Whether the points x are atoms of a discrete law, read off its support (its pmf can underflow)."""
    if getattr(law.dist, "xk", None) is not None:
        return law.pmf(x) > 0
    low, high = law.support()
    return (low <= x) & (x <= high) & (np.mod(x - law.median(), 1.0) == 0)


# --------------------------------------------------------------------------- the quadrature rule


@dataclass(frozen=True)
class _Rule:
    """A fixed quadrature rule on the real line with both log densities at its nodes."""

    x: np.ndarray
    weights: np.ndarray
    logpdf_p: np.ndarray
    logpdf_q: np.ndarray

    @property
    def weights_p(self) -> np.ndarray:
        """Weights of E_P[f] = sum weights_p * f(x)."""
        return self.weights * np.exp(self.logpdf_p)

    @property
    def log_weights_q(self) -> np.ndarray:
        """log of the weights of E_Q (for sums in log space)."""
        with np.errstate(divide="ignore"):
            return np.log(self.weights) + self.logpdf_q


def _breakpoints(p, q) -> np.ndarray:
    """Quantiles of both laws (decades of tail mass, then the bulk), medians, support ends."""
    points = []
    for law in (p, q):
        points += [law.ppf(_TAIL_LEVELS), law.ppf(_BULK_LEVELS), law.isf(_TAIL_LEVELS), [law.median()]]
        points.append([end for end in law.support() if np.isfinite(end)])
    return np.concatenate(points)


def _rule(p, q, extra_points: np.ndarray = np.empty(0), subdivisions: int = 1) -> _Rule:
    """Composite Gauss-Legendre between breakpoints, plus the two infinite tails.

    Each panel between breakpoints is split into ``subdivisions`` equal ones.
    A tail [b, inf) is mapped by x = b + s t / (1 - t), t in [0, 1), with s the
    width of the outermost panel, so the rule follows exponential and
    polynomial decay alike.
    """
    low = min(p.support()[0], q.support()[0])
    high = max(p.support()[1], q.support()[1])
    points = np.concatenate([_breakpoints(p, q), extra_points])
    points = np.unique(np.clip(points[np.isfinite(points)], low, high))
    gaps = np.diff(points)
    points = np.concatenate([points[:1], points[1:][gaps > 1e-12 * (np.ptp(points) + 1.0)]])
    fractions = np.arange(subdivisions) / subdivisions
    points = np.append((points[:-1, None] + np.diff(points)[:, None] * fractions).ravel(), points[-1])
    nodes, weights = _PANEL_NODES
    half = np.diff(points)[:, None] / 2
    xs = [((points[:-1] + points[1:])[:, None] / 2 + half * nodes).ravel()]
    ws = [(half * weights).ravel()]
    tail_t, tail_w = (_TAIL_NODES[0] + 1) / 2, _TAIL_NODES[1] / 2
    for side, end, bounded in ((-1, points[0], np.isfinite(low)), (+1, points[-1], np.isfinite(high))):
        if bounded:
            continue
        width = points[1] - points[0] if side < 0 else points[-1] - points[-2]
        xs.append(end + side * width * tail_t / (1 - tail_t))
        ws.append(width * tail_w / (1 - tail_t) ** 2)
    x, w = np.concatenate(xs), np.concatenate(ws)
    return _Rule(x, w, p.logpdf(x), q.logpdf(x))


def _atom_rule(p, q) -> _Rule:
    """Sums over the atoms of two discrete laws as a rule: nodes the atoms of P or Q, weights 1.

    E_P[f] = sum_x p(x) f(x) is then ``rule.weights_p @ f(rule.x)``, exactly as
    for a quadrature rule, which lets the discrete problems use the solvers of
    the continuous ones.
    """
    x = np.union1d(_atoms(p), _atoms(q))
    rule = _Rule(x, np.ones_like(x), p.logpmf(x), q.logpmf(x))
    underflow = np.isfinite(rule.logpdf_p) & np.isneginf(rule.logpdf_q) & _in_support(q, x)
    if np.any(underflow):
        raise ValueError(
            f"q's pmf must be positive in floating point at the atoms of p inside q's support for sums to be "
            f"computed. Found q = {_name(q)} with pmf 0 at {x[underflow][:3].tolist()} where p = {_name(p)} "
            "has mass."
        )
    return rule


def _expectation_rule(p, q) -> _Rule:
    """The rule integrating (or summing) expectations under P and Q."""
    return _atom_rule(p, q) if _is_discrete(p) else _rule(p, q)


# --------------------------------------------------------------------------- polynomial basis


@dataclass(frozen=True)
class _Basis:
    """Polynomials of degree <= K, orthonormal under (P + Q) / 2 as integrated by a rule.

    Column j of :meth:`features` has degree j and a positive leading
    coefficient; raw powers x^j would make the optimisation ill-conditioned.
    """

    center: float
    scale: float
    to_powers: np.ndarray  # upper triangular: coefficients of standardized powers z^i in column j

    def features(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.center) / self.scale
        return np.vander(z, self.to_powers.shape[0], increasing=True) @ self.to_powers

    def leading_coefficient(self, degree: int) -> float:
        """Coefficient of x^degree in the feature of that degree (> 0)."""
        return self.to_powers[degree, degree] / self.scale**degree

    def roots(self, coefficients: np.ndarray) -> np.ndarray:
        """Real roots of the polynomial sum_j coefficients[j] * feature_j."""
        powers = np.trim_zeros(self.to_powers[:, : coefficients.size] @ coefficients, "b")
        if powers.size < 2:
            return np.empty(0)
        z = polynomial.polyroots(powers)
        return self.center + self.scale * z[np.abs(z.imag) <= 1e-9 * (1 + np.abs(z.real))].real


def _basis(p, q, rule: _Rule, degree: int) -> _Basis:
    center = (p.median() + q.median()) / 2
    # Discrete laws can have a zero interquartile range: then the spread of the atoms.
    scale = max(p.ppf(0.75) - p.ppf(0.25), q.ppf(0.75) - q.ppf(0.25)) / 1.349 or float(np.ptp(rule.x)) or 1.0
    powers = np.vander((rule.x - center) / scale, degree + 1, increasing=True)
    mixture = rule.weights * (np.exp(rule.logpdf_p) + np.exp(rule.logpdf_q)) / 2
    triangle = linalg.qr(np.sqrt(mixture)[:, None] * powers, mode="r")[0][: degree + 1]
    triangle *= np.sign(np.diag(triangle))[:, None]
    return _Basis(center, scale, linalg.solve_triangular(triangle, np.eye(degree + 1)))


# --------------------------------------------------------------------------- KL


def _admissible_leading(degree: int, tails: tuple[_Tail, _Tail]) -> tuple[float, float]:
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


def _polynomial_kl(p, q, degree: int) -> float:
    """(poly_K, KL) by Donsker-Varadhan over the admissible polynomials (CBDP appendix Lemma 1).

    The domain {h : E_Q exp h < inf} is the union of strata "exact degree j
    with an admissible leading coefficient" (:func:`_admissible_leading`).
    On a stratum only the leading coefficient is constrained, to an open
    interval; by concavity the supremum over the domain is the largest of the
    strata's suprema. Solving each stratum on its own keeps the optimiser away
    from limits such as c_4 -> 0- with c_3 != 0, where E_Q exp h explodes.
    On m atoms the degree is capped at m - 1 (all functions).
    """
    rule = _expectation_rule(p, q)
    degree = min(degree, rule.x.size - 1)
    q_tails, p_tails = _tails(q), _tails(p)
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
    basis = _basis(p, q, rule, strata[-1][0])
    features = basis.features(rule.x)[:, 1:]  # DV is invariant to constants
    mean_p = rule.weights_p @ features
    log_weights_q = rule.log_weights_q
    bounded_q = _is_discrete(q) and np.all(np.isfinite(q.support()))
    if bounded_q and not _support_contained(p, q) and _escapes_support(features, mean_p, log_weights_q):
        return np.inf
    best, start = 0.0, np.zeros(0)
    for j, low, high in strata:
        scale = basis.leading_coefficient(j)
        start = np.concatenate([start, np.zeros(j - start.size)])
        a, value = _donsker_varadhan_stratum(features[:, :j], mean_p[:j], log_weights_q, low / scale, high / scale, start)
        if not _support_contained(p, q) and _increases_along_ray(features[:, :j], mean_p[:j], log_weights_q, a):
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
    """Damped Newton ascent with Armijo backtracking for a smooth concave objective."""
    value, gradient, hessian = objective(a)
    for _ in range(200):
        step = linalg.lstsq(-hessian, gradient, cond=1e-13)[0]
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
        a = a + length * step
        value, gradient, hessian = trial
    return a


def _increases_along_ray(features, mean_p, log_weights_q, a) -> bool:
    """Whether the concave DV objective keeps growing along a -> t a (an unbounded supremum)."""
    values = [_donsker_varadhan(features, mean_p, log_weights_q, t * a)[0] for t in (1.0, 2.0, 4.0, 8.0)]
    return bool(np.all(np.diff(values) > 1e-6))


# --------------------------------------------------------------------------- Renyi


def _polynomial_renyi(p, q, degree: int, alpha: float) -> float:
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
    q_tails, p_tails = _tails(q), _tails(p)
    degree = max([j for j in range(degree + 1) if all(t.has_moment(j * beta) for t in q_tails)])
    if not all(t.has_moment(degree) for t in p_tails):
        return np.inf  # E_P |g| unbounded while E_Q |g|^beta is finite
    rule = _expectation_rule(p, q)
    basis = _basis(p, q, rule, min(degree, rule.x.size - 1))
    features = basis.features(rule.x)
    mean_p = rule.weights_p @ features
    if _vanishes_on_support_of_q(features, mean_p, rule):
        return np.inf
    coefficients = _quadratic_program(features, mean_p, rule)
    for exponent in np.geomspace(2.0, beta, int(np.ceil(np.log2(beta / 2))) + 1)[1:-1]:
        coefficients = _minimize_moment(features, mean_p, rule.log_weights_q, exponent, coefficients)
    if _is_discrete(p):
        coefficients = _minimize_moment(features, mean_p, rule.log_weights_q, beta, coefficients)
        return max(0.0, -_log_moment(features @ coefficients, rule.log_weights_q, beta))
    for subdivisions in (1, 2, 4, 8):
        value = np.nan
        for _ in range(6):
            coefficients, previous = _minimize_moment(features, mean_p, rule.log_weights_q, beta, coefficients), value
            value = -_log_moment(features @ coefficients, rule.log_weights_q, beta)
            if beta == 2.0 or abs(value - previous) <= 1e-10 * max(1.0, abs(value)):
                break
            rule = _rule(p, q, basis.roots(coefficients), subdivisions)
            features = basis.features(rule.x)
            mean_p = rule.weights_p @ features
        # Check against a rule with twice as many panels: a large beta makes |g|^beta so
        # sharp that the optimiser can exploit the gaps between nodes.
        rule = _rule(p, q, basis.roots(coefficients), 2 * subdivisions)
        features = basis.features(rule.x)
        mean_p = rule.weights_p @ features
        coefficients = coefficients / (mean_p @ coefficients)
        checked = -_log_moment(features @ coefficients, rule.log_weights_q, beta)
        if abs(checked - value) <= 1e-9 * max(1.0, abs(value)):
            break
    return max(0.0, float(checked))  # g = 1 gives 0


def _vanishes_on_support_of_q(features: np.ndarray, mean_p: np.ndarray, rule: _Rule) -> bool:
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


def _quadratic_program(features: np.ndarray, mean_p: np.ndarray, rule: _Rule) -> np.ndarray:
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


# --------------------------------------------------------------------------- IPM


def _threshold_ipm(p, q) -> float:
    """sup_t 2 |P(X > t) - Q(X > t)| (CBDP Def. 4 with h = +-sign(x - t)).

    The best node of the quadrature rule's grid, refined by a bounded scalar
    search between its neighbours; for discrete laws the events change only
    at atoms, so the best atom is exact.
    """
    if _is_discrete(p):
        atoms = _atom_rule(p, q).x
        return 2.0 * float(np.max(np.abs(q.cdf(atoms) - p.cdf(atoms))))
    grid = np.unique(_rule(p, q).x)
    gap = np.abs(q.cdf(grid) - p.cdf(grid))
    best = int(np.argmax(gap))
    left, right = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    refined = optimize.minimize_scalar(
        lambda t: -abs(q.cdf(t) - p.cdf(t)), bounds=(left, right), method="bounded", options={"xatol": 1e-12}
    )
    return 2.0 * max(gap[best], -refined.fun)


def _total_variation_ipm(p, q, alpha=None) -> float:
    """IPM over all witnesses with range [-1, 1]: 2 TV = sum over {p > q} of 2 (P - Q).

    The crossings of the densities are found on the grid and refined by root
    finding; each piece's probabilities come from the CDFs. For discrete laws,
    the sum over the atoms of 2 (p - q)^+.
    """
    if _is_discrete(p):
        rule = _atom_rule(p, q)
        return float(2.0 * np.sum(np.clip(np.exp(rule.logpdf_p) - np.exp(rule.logpdf_q), 0.0, None)))
    grid = np.unique(_rule(p, q).x)
    with np.errstate(invalid="ignore"):
        difference = np.nan_to_num(p.logpdf(grid) - q.logpdf(grid), nan=0.0)
    crossings = []
    for i in np.flatnonzero(np.sign(difference[:-1]) * np.sign(difference[1:]) < 0):
        finite = np.isfinite(difference[i]) and np.isfinite(difference[i + 1])
        crossings.append(
            optimize.brentq(lambda x: p.logpdf(x) - q.logpdf(x), grid[i], grid[i + 1], xtol=1e-13)
            if finite
            else (grid[i] + grid[i + 1]) / 2
        )
    edges = np.concatenate([[-np.inf], crossings, [np.inf]])
    mass = np.diff(p.cdf(edges)) - np.diff(q.cdf(edges))
    return float(2.0 * np.sum(np.clip(mass, 0.0, None)))


# --------------------------------------------------------------------------- unrestricted


def _kl(p, q, alpha=None) -> float:
    """KL(P, Q) = E_P[log p - log q], by adaptive quadrature or a sum over atoms; inf when it diverges.

    Divergence is decided from the supports and tails: it needs supp P in
    supp Q and E_P[-log q] finite, i.e. E_P |X|^r finite where -log q ~ |x|^r.
    """
    if not _support_contained(p, q):
        return np.inf
    for p_tail, q_tail in zip(_tails(p), _tails(q)):
        if np.isfinite(p_tail.exponent) and q_tail.exponent > 0 and not p_tail.has_moment(q_tail.exponent):
            return np.inf
    if _is_discrete(p):
        rule = _atom_rule(p, q)
        on_p = np.isfinite(rule.logpdf_p)
        log_ratio = rule.logpdf_p[on_p] - rule.logpdf_q[on_p]
        return max(0.0, float(np.exp(rule.logpdf_p[on_p]) @ log_ratio))

    def integrand(x):
        log_p = p.logpdf(x)
        return 0.0 if np.isneginf(log_p) else np.exp(log_p) * (log_p - q.logpdf(x))

    return max(0.0, _adaptive_integral(integrand, p, q, []))


def _renyi(p, q, alpha: float) -> float:
    """Renyi divergence log(integral p^alpha q^(1 - alpha)) / (alpha - 1), in log space.

    The integrand is shifted by its largest log value (grid search refined by
    Brent's method), whose location is also a breakpoint (for large alpha the mass of p^alpha
    q^(1 - alpha) sits far from both laws); for discrete laws, a log-sum-exp
    over the atoms. Divergence is decided from the supports and the tails of
    both log densities (or log pmfs).
    """
    if not _support_contained(p, q):
        return np.inf
    for p_tail, q_tail in zip(_tails(p), _tails(q)):
        if np.isfinite(p_tail.exponent) and not _renyi_tail_finite(p_tail, q_tail, alpha):
            return np.inf
    if _is_discrete(p):
        rule = _atom_rule(p, q)
        on_p = np.isfinite(rule.logpdf_p)
        terms = alpha * rule.logpdf_p[on_p] + (1 - alpha) * rule.logpdf_q[on_p]
        return max(0.0, float(logsumexp(terms) / (alpha - 1)))

    def log_integrand(x):
        log_p = p.logpdf(x)
        with np.errstate(invalid="ignore"):
            return np.where(np.isneginf(log_p), -np.inf, alpha * log_p + (1 - alpha) * q.logpdf(x))

    grid = np.sort(_rule(p, q).x)
    best = int(np.argmax(log_integrand(grid)))
    # For large alpha the peak can lie beyond the grid (N(0, s) vs N(1, s): at x = 1 - alpha).
    bracket = (grid[best - 1], grid[best]) if best > 0 else (grid[1], grid[0])
    refined = optimize.minimize_scalar(lambda x: -log_integrand(x), bracket=bracket)
    peak = refined.x if -refined.fun > log_integrand(grid[best]) else grid[best]
    shift = float(log_integrand(peak))
    if not np.isfinite(shift):  # a log density that underflowed to -inf (scipy's log(pdf)) far out
        raise ValueError(
            f"the Renyi integrand of p = {_name(p)}, q = {_name(q)} cannot be evaluated (a log density underflows "
            "to -inf where the other is positive); no exact value."
        )

    def integrand(x):
        return float(np.exp(log_integrand(x) - shift))

    return float((shift + np.log(_adaptive_integral(integrand, p, q, [peak]))) / (alpha - 1))


def _renyi_tail_finite(p_tail: _Tail, q_tail: _Tail, alpha: float) -> bool:
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


def _adaptive_integral(integrand, p, q, extra_points: list[float]) -> float:
    """scipy.integrate.quad over P's support, split at medians, Q's support ends and ``extra_points``."""
    low, high = p.support()
    inner = [x for x in [p.median(), q.median(), *extra_points, *q.support()] if low < x < high]
    edges = np.unique(np.concatenate([[low], inner, [high]]))
    return sum(integrate.quad(integrand, a, b, **_QUAD_OPTIONS)[0] for a, b in zip(edges[:-1], edges[1:]))
