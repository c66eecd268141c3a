"""The laws, their tails and supports, and the one quadrature rule of :mod:`audit.theory.exact`.

A 1-D law, continuous or discrete: a frozen ``scipy.stats`` law, or one of
:mod:`audit.theory.laws` (the built-in mechanisms' Laplace and Gaussian laws,
which need no ``scipy.stats``, so this module imports it only when a scipy
law comes in); the shape of each
tail of its log density (:func:`law_tails`: which witnesses have a finite
E_Q[exp h] or moment); the support (a discrete law's atoms, cut where the pmf
falls below exp(-600)); and the rule every objective is a weighted sum over
(:func:`quadrature_rule`: composite Gauss-Legendre between quantiles of both laws and on
the two infinite tails after x = x_0 +- s t / (1 - t); :func:`atom_rule`:
the atoms, weights 1), with the polynomial basis evaluated on it
(:func:`polynomial_basis`).  The module docstring of :mod:`audit.theory.exact` states
the accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import polynomial
from scipy import linalg

from audit.theory.laws import LocationScaleLaw, family_name

# Panels: decades of tail probability of each law, then its bulk.
_TAIL_LEVELS = 10.0 ** -np.arange(12, 1, -1)
_BULK_LEVELS = np.array([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98])
_PANEL_NODES = np.polynomial.legendre.leggauss(16)
_TAIL_NODES = np.polynomial.legendre.leggauss(48)
_QUAD_OPTIONS = {"epsabs": 0.0, "epsrel": 1e-10, "limit": 500}
# Discrete laws: atoms out to a pmf of exp(-600) ~ 1e-261, at most 2^18 lattice steps from the median.
_LOG_ATOM_CUT = -600.0
_MAX_REACH = 2.0**18


def is_discrete(law) -> bool:
    if isinstance(law, LocationScaleLaw):
        return False
    from scipy import stats  # loaded already: the law is a scipy.stats one

    return isinstance(law.dist, stats.rv_discrete)


def law_kind(law) -> str:
    return "discrete" if is_discrete(law) else "continuous"


def law_name(law) -> str:
    """A law as it would be written, e.g. ``dlaplace(1.0, loc=1)``, for error messages."""
    if isinstance(law, LocationScaleLaw):
        return repr(law)
    arguments = [repr(arg) for arg in law.args] + [f"{key}={value!r}" for key, value in law.kwds.items()]
    return f"{family_name(law)}({', '.join(arguments)})"


def _log_density(law, x: np.ndarray) -> np.ndarray:
    """log of the density, or of the pmf for a discrete law (the density for the counting measure)."""
    return law.logpmf(x) if is_discrete(law) else law.logpdf(x)


@dataclass(frozen=True)
class Tail:
    """Shape of one tail of a log density: -log f(x) ~ coefficient |x|^exponent.

    ``exponent == 0`` stands for a polynomial tail, -log f(x) ~ coefficient log|x|;
    ``exponent == inf`` for a side on which the support is bounded.
    """

    exponent: float
    coefficient: float

    def has_moment(self, order: float) -> bool:
        """Whether E|X|^order restricted to this side is finite."""
        return self.exponent > 0 or order < self.coefficient - 1.0


def _tail(law, side: int) -> Tail:
    """Read the tail of ``law`` on ``side`` (-1 left, +1 right) off its log density.

    With u = -log f at distances D, 2D, 4D from the median, the ratio of
    successive differences of u is 2^exponent for u = c |x|^exponent + const,
    and 1 for u = c log|x| + const; differences cancel the normalising constant.
    For a discrete law u = -log pmf, read at atoms: the median is one and the
    spread a whole number of lattice steps.
    """
    lower, upper = law.support()
    if np.isfinite(lower if side < 0 else upper):
        return Tail(np.inf, np.inf)
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
        return Tail(0.0, step_far / np.log(2.0))
    if abs(exponent - round(exponent)) < 0.02:
        exponent = float(round(exponent))
    far = spread * 2.0 ** (power + 2)
    return Tail(exponent, step_far / (far**exponent - (far / 2) ** exponent))


def law_tails(law) -> tuple[Tail, Tail]:
    return _tail(law, -1), _tail(law, +1)


def support_contained(p, q) -> bool:
    """Whether P's support lies in Q's: as intervals, or atom by atom for discrete laws."""
    if is_discrete(p):
        return bool(np.all(in_support(q, _atoms(p))))
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
                    f"steps of its median for its sums to be computed. Found {law_name(law)} with pmf "
                    f"{law.pmf(center + side * distance):.3g} at {center + side * distance:g}."
                )
            distance *= 2
    atoms = np.arange(ends[0], ends[1] + 1.0)
    log_pmf = law.logpmf(atoms)
    above_cut = np.flatnonzero(log_pmf >= _LOG_ATOM_CUT)
    low = 0 if np.isfinite(law.support()[0]) else above_cut[0]
    high = atoms.size if np.isfinite(law.support()[1]) else above_cut[-1] + 1
    return atoms[low:high][np.isfinite(log_pmf[low:high])]


def in_support(law, x: np.ndarray) -> np.ndarray:
    """Whether the points x are atoms of a discrete law, read off its support (its pmf can underflow)."""
    if is_discrete(law) and getattr(law.dist, "xk", None) is not None:
        return law.pmf(x) > 0
    low, high = law.support()
    return (low <= x) & (x <= high) & (np.mod(x - law.median(), 1.0) == 0)


@dataclass(frozen=True)
class Rule:
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


def quadrature_rule(p, q, extra_points: np.ndarray = np.empty(0), subdivisions: int = 1) -> Rule:
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
    return Rule(x, w, p.logpdf(x), q.logpdf(x))


def atom_rule(p, q) -> Rule:
    """Sums over the atoms of two discrete laws as a rule: nodes the atoms of P or Q, weights 1.

    E_P[f] = sum_x p(x) f(x) is then ``rule.weights_p @ f(rule.x)``, exactly as
    for a quadrature rule, which lets the discrete problems use the solvers of
    the continuous ones.
    """
    x = np.union1d(_atoms(p), _atoms(q))
    rule = Rule(x, np.ones_like(x), p.logpmf(x), q.logpmf(x))
    underflow = np.isfinite(rule.logpdf_p) & np.isneginf(rule.logpdf_q) & in_support(q, x)
    if np.any(underflow):
        raise ValueError(
            f"q's pmf must be positive in floating point at the atoms of p inside q's support for sums to be "
            f"computed. Found q = {law_name(q)} with pmf 0 at {x[underflow][:3].tolist()} where p = {law_name(p)} "
            "has mass."
        )
    return rule


def expectation_rule(p, q) -> Rule:
    """The rule integrating (or summing) expectations under P and Q."""
    return atom_rule(p, q) if is_discrete(p) else quadrature_rule(p, q)


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


def polynomial_basis(p, q, rule: Rule, degree: int) -> _Basis:
    center = (p.median() + q.median()) / 2
    # Discrete laws can have a zero interquartile range: then the spread of the atoms.
    scale = max(p.ppf(0.75) - p.ppf(0.25), q.ppf(0.75) - q.ppf(0.25)) / 1.349 or float(np.ptp(rule.x)) or 1.0
    powers = np.vander((rule.x - center) / scale, degree + 1, increasing=True)
    mixture = rule.weights * (np.exp(rule.logpdf_p) + np.exp(rule.logpdf_q)) / 2
    triangle = linalg.qr(np.sqrt(mixture)[:, None] * powers, mode="r")[0][: degree + 1]
    triangle *= np.sign(np.diag(triangle))[:, None]
    return _Basis(center, scale, linalg.solve_triangular(triangle, np.eye(degree + 1)))


def adaptive_integral(integrand, p, q, extra_points: list[float]) -> float:
    """scipy.integrate.quad over P's support, split at medians, Q's support ends and ``extra_points``."""
    from scipy import integrate  # the unrestricted values only: a restricted class's audit never loads it

    low, high = p.support()
    inner = [x for x in [p.median(), q.median(), *extra_points, *q.support()] if low < x < high]
    edges = np.unique(np.concatenate([[low], inner, [high]]))
    return sum(integrate.quad(integrand, a, b, **_QUAD_OPTIONS)[0] for a, b in zip(edges[:-1], edges[1:]))
