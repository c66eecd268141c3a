"""One table: (output law, function class, divergence) -> the published closed form or upper bound.

A mechanism describes the output laws of its default pair, as far as a
closed form knows them, by one of the frozen *law* records below (its
``theory_law``: e.g. :class:`LaplaceShift` for Lap(0, b)^d against
Lap(v, b)^d); :func:`theory_bound` looks the (law, class, divergence) up in
:data:`TABLE`.  Every entry cites the theorem it implements
(docs/theory.md sections 5-6; the formulas themselves are
:mod:`audit.theory.bounds`).

Lookup goes from the most specific key to the least: the law's own type,
then the types it refines (:class:`FloatLaplace` is a :class:`LaplaceShift`),
and for each the class itself (``linear``: :data:`attacks.classes.LINEAR`),
its type (:class:`attacks.classes.Atoms`: every class of that kind) and :data:`ANY` (every class: the unrestricted value, an upper
bound for any class).  An entry that is not *stated* for the law and order
(CBDP Corollary 2 states the (lin, Renyi) bounds for alpha > 2 only;
Thm 9's (lin, KL) is 1-D) is passed over for the next, more general one; an
entry whose value is None stops the lookup: no closed form is known.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attacks.classes import LINEAR, All, Atoms, FloatBits, FunctionClass, parse_function_class
from attacks.vocabulary import DP, IPM, KL, Divergence, Renyi, divergence_kind
from audit.theory import bounds

ANY = "any"
"""The class key of an entry that bounds every class (the unrestricted value)."""


# --------------------------------------------------------------------------- laws


class _NoiseShift:
    """A law of i.i.d. noise shifted by the default pair: its own noisy release (see :attr:`MatrixLaplace.release`)."""

    @property
    def release(self) -> _NoiseShift:
        """The noisy release before any post-processing: the law itself."""
        return self


@dataclass(frozen=True)
class LaplaceShift(_NoiseShift):
    """Lap(0, b) against Lap(v, b), i.i.d. per coordinate: scale b, shift v (docs/theory.md section 6)."""

    scale: float
    shift: tuple[float, ...]

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon ||v||_1 / b of the pair."""
        return float(np.sum(np.abs(self.shift))) / self.scale

    @property
    def noise_scale(self) -> float:
        """b, the scale of the noise on each coordinate."""
        return self.scale


@dataclass(frozen=True)
class FloatLaplace(LaplaceShift):
    """A :class:`LaplaceShift` sampled in float64 by the textbook method (Mironov, CCS 2012).

    Its real-valued closed forms hold for the value-based classes; the
    representation classes (``atoms``, ``floatbits``) see the float law.
    """


@dataclass(frozen=True)
class GaussianShift(_NoiseShift):
    """N(0, sigma^2 I) against N(v, sigma^2 I) (docs/theory.md section 6)."""

    sigma: float
    shift: tuple[float, ...]

    @property
    def noise_scale(self) -> float:
        """sigma, the standard deviation of the noise on each coordinate."""
        return self.sigma


@dataclass(frozen=True)
class MatrixLaplace:
    """W A^+ (A x + ||A||_1 Lap_s(0, 1/epsilon)) on count vectors that differ in one count (CBDP Thm 5).

    ``A``: the s x m strategy matrix as a tuple of rows.
    """

    epsilon: float
    A: tuple[tuple[float, ...], ...]

    @property
    def release(self) -> LaplaceShift:
        """The release A x + ||A||_1 Lap_s(0, 1/epsilon) before the post-processing W A^+, on the default pair
        (the moved count is the one of A's largest column L1 norm): Lap(0, b) against Lap(A e_j, b),
        b = ||A||_1 / epsilon."""
        A = np.asarray(self.A, dtype=float)
        norms = np.abs(A).sum(axis=0)
        return LaplaceShift(float(norms.max()) / self.epsilon, tuple(A[:, int(np.argmax(norms))].tolist()))


@dataclass(frozen=True)
class SubsampledGaussianSteps:
    """The final parameters of T DP-SGD steps at Poisson rate q, noise multiplier z, over add/remove neighbours.

    ``delta``: the delta at which its (epsilon, delta) values are read (an audit reads them at its task's delta,
    :func:`theory_bound`).  The linear class has the last-iterate heuristic
    (:mod:`audit.theory.last_iterate`), every class the composition of the T steps (dp_accounting's PLD).
    """

    steps: int
    sampling_rate: float
    noise_multiplier: float
    delta: float


@dataclass(frozen=True)
class PointMasses:
    """A non-private release: a point mass per dataset, at two different points (CBDP Lemma 2)."""


@dataclass(frozen=True)
class LeakedValue:
    """A release that is f(D) itself with probability ``probability``: an atom P has and Q lacks."""

    probability: float


@dataclass(frozen=True)
class PureDP:
    """Nothing known but a pure-DP epsilon (``inf``: not epsilon-DP for any epsilon)."""

    epsilon: float


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Entry:
    """One cell of the table.

    Attributes
    ----------
    value : callable (law, alpha) -> float or None
    kind : {"closed form", "upper bound", "heuristic"}
        An exact value of the (class, divergence), a published upper bound on it, or a published heuristic
        (exact under a stated model, not a bound in general: a lower bound above it refutes the heuristic).
    source : str
        The theorem, as the reports print it.
    stated : callable (law, alpha) -> bool
        Whether the source states the value for this law and order.
    """

    value: Callable[..., float | None]
    kind: str
    source: str
    stated: Callable[..., bool] = lambda law, alpha: True


def _one_dimensional(law, alpha) -> bool:
    return len(law.shift) == 1


def _corollary2(law, alpha) -> bool:
    return bounds.linear_renyi_bound_stated(alpha)


def _matrix_columns(law: MatrixLaplace) -> tuple[float, list[np.ndarray]]:
    """(eps_b, the non-zero |entries| of every non-zero column of A): one count moves A x by a column."""
    A = np.asarray(law.A, dtype=float)
    eps_b = law.epsilon / float(np.abs(A).sum(axis=0).max())
    return eps_b, [np.abs(column[column != 0]) for column in A.T if np.any(column)]


def _laplace_ipm(law: LaplaceShift, alpha=None) -> float | None:
    """2 TV of Lap(0, b) and Lap(v, b) in 1-D: 2 (1 - exp(-|v| / (2 b)))."""
    return 2.0 * -np.expm1(-abs(law.shift[0]) / (2.0 * law.scale)) if len(law.shift) == 1 else None


def _gaussian_ipm(law: GaussianShift, alpha=None) -> float | None:
    """2 TV of N(0, sigma^2) and N(v, sigma^2) in 1-D: 2 (2 Phi(|v| / (2 sigma)) - 1) = 2 erf(|v| / (2 sqrt(2) sigma))."""
    return 2.0 * math.erf(abs(law.shift[0]) / (2.0 * math.sqrt(2.0) * law.sigma)) if len(law.shift) == 1 else None


def _last_iterate(law: SubsampledGaussianSteps, alpha=None) -> float:
    from audit.theory.last_iterate import last_iterate_epsilon

    return last_iterate_epsilon(law.steps, law.sampling_rate, law.noise_multiplier, law.delta)


def _composition(law: SubsampledGaussianSteps, alpha=None) -> float | None:
    """dp_accounting's PLD epsilon of the T steps at ``law.delta``; None without dp_accounting."""
    from audit.theory.accountants import accountant_epsilon  # the optional extra, read only for this law

    try:
        return accountant_epsilon("pld", law.noise_multiplier, law.sampling_rate, law.steps, law.delta)
    except ImportError:
        return None


def _infinite(law, alpha=None) -> float:
    return bounds.non_private_release()


TABLE: dict[tuple[type, FunctionClass | type[FunctionClass] | str, type[Divergence]], Entry] = {
    # Laplace (CBDP appendix Thms 9, 11; Table 1 / Corollary 2 / Thm 5).
    (LaplaceShift, LINEAR, KL): Entry(
        lambda law, alpha: bounds.laplace_linear_kl(law.epsilon), "closed form", "CBDP Thm 9", _one_dimensional),
    (LaplaceShift, ANY, KL): Entry(
        lambda law, alpha: bounds.laplace_kl(1.0 / law.scale, law.shift), "closed form", "KL of the output laws"),
    (LaplaceShift, LINEAR, Renyi): Entry(
        lambda law, alpha: bounds.laplace_linear_renyi_bound(1.0 / law.scale, alpha, law.shift),
        "upper bound", "CBDP Table 1", _corollary2),
    (LaplaceShift, ANY, Renyi): Entry(
        lambda law, alpha: bounds.laplace_renyi(1.0 / law.scale, alpha, law.shift), "closed form",
        "Renyi DP, CBDP Thm 11"),
    (LaplaceShift, ANY, IPM): Entry(_laplace_ipm, "closed form", "2 TV of the output laws"),
    (LaplaceShift, ANY, DP): Entry(lambda law, alpha: law.epsilon, "closed form", "pure DP: ||v||_1 / b"),
    # In float64 a single output (lowest set bit below 2^-53) has mass under D = 0 and none under D' = 1.
    (FloatLaplace, Atoms, DP): Entry(_infinite, "closed form", "Mironov 2012: porous float support"),
    (FloatLaplace, FloatBits, DP): Entry(_infinite, "closed form", "Mironov 2012: porous float support"),
    (FloatLaplace, Atoms, IPM): Entry(lambda law, alpha: None, "closed form", "unknown for the float law"),
    (FloatLaplace, FloatBits, IPM): Entry(lambda law, alpha: None, "closed form", "unknown for the float law"),
    # Gaussian (CBDP appendix Thms 10, 12; Table 1 / Corollary 2 / Thm 5).
    (GaussianShift, LINEAR, KL): Entry(
        lambda law, alpha: bounds.gaussian_linear_kl(law.sigma, law.shift), "closed form", "CBDP Thm 10"),
    (GaussianShift, ANY, KL): Entry(
        lambda law, alpha: bounds.gaussian_kl(law.sigma, law.shift), "closed form", "KL of the output laws"),
    (GaussianShift, LINEAR, Renyi): Entry(
        lambda law, alpha: bounds.gaussian_linear_renyi_bound(law.sigma, alpha, law.shift),
        "upper bound", "CBDP Table 1", _corollary2),
    (GaussianShift, ANY, Renyi): Entry(
        lambda law, alpha: bounds.gaussian_renyi(law.sigma, alpha, law.shift), "closed form",
        "Renyi DP, CBDP Thm 12"),
    (GaussianShift, ANY, IPM): Entry(_gaussian_ipm, "closed form", "2 TV of the output laws"),
    # Matrix mechanism: Corollary 2 for (lin, Renyi); otherwise the noisy A x's unrestricted value
    # (an upper bound by post-processing, Thm 1), largest over the column that changes.
    (MatrixLaplace, LINEAR, Renyi): Entry(
        lambda law, alpha: bounds.matrix_linear_renyi_bound(law.epsilon, alpha, len(law.A)),
        "upper bound", "CBDP Corollary 2", _corollary2),
    (MatrixLaplace, ANY, Renyi): Entry(
        lambda law, alpha: max(bounds.laplace_renyi(_matrix_columns(law)[0], alpha, column)
                               for column in _matrix_columns(law)[1]),
        "upper bound", "Renyi DP of A x + noise, CBDP Thms 1, 11"),
    (MatrixLaplace, ANY, KL): Entry(
        lambda law, alpha: max(bounds.laplace_kl(_matrix_columns(law)[0], column) for column in _matrix_columns(law)[1]),
        "upper bound", "KL of A x + noise, CBDP Thm 1"),
    (MatrixLaplace, ANY, DP): Entry(lambda law, alpha: law.epsilon, "closed form", "pure DP: epsilon"),
    # DP-SGD's last iterate: the linear class by the last-iterate heuristic (exact for linear losses), every
    # class by the composition of all T steps.
    (SubsampledGaussianSteps, LINEAR, DP): Entry(
        _last_iterate, "heuristic", "last-iterate heuristic (Steinke et al. 2025; exact for linear losses)"),
    (SubsampledGaussianSteps, ANY, DP): Entry(
        _composition, "upper bound", "composition of the T subsampled Gaussian steps (dp_accounting PLD)"),
    # Point masses (CBDP Lemma 2): unbounded for every class that separates two points; the IPM is 2.
    (PointMasses, ANY, KL): Entry(_infinite, "closed form", "CBDP Lemma 2"),
    (PointMasses, ANY, Renyi): Entry(_infinite, "closed form", "CBDP Lemma 2"),
    (PointMasses, ANY, DP): Entry(_infinite, "closed form", "CBDP Lemma 2"),
    (PointMasses, ANY, IPM): Entry(lambda law, alpha: 2.0, "closed form", "2 TV of disjoint laws"),
    # A leaked value is an atom of P outside Q's support.
    (LeakedValue, ANY, KL): Entry(_infinite, "upper bound", "an atom of P that Q lacks"),
    (LeakedValue, ANY, Renyi): Entry(_infinite, "upper bound", "an atom of P that Q lacks"),
    (LeakedValue, ANY, DP): Entry(_infinite, "closed form", "an atom of P that Q lacks"),
    # A pure-DP epsilon bounds the DP divergence of every class.
    (PureDP, ANY, DP): Entry(lambda law, alpha: law.epsilon, "upper bound", "pure DP"),
}
"""(law type, class key, divergence type) -> :class:`Entry`; class keys are canonical names, kinds or :data:`ANY`;
divergences the types of :mod:`attacks.vocabulary` (a name is looked up as its type)."""


def published(law, function_class: str | FunctionClass, divergence: str) -> Entry | None:
    """The entry of exactly this class (a class name, or ``all`` for the :data:`ANY` key), stated or not.

    Reports show a published value as published, also where its source does
    not state it (``capaudit theory``); audits use :func:`lookup`.
    """
    hclass, kind = parse_function_class(function_class), divergence_kind(divergence)
    class_key = ANY if isinstance(hclass, All) else hclass
    for law_type in type(law).__mro__:
        entry = TABLE.get((law_type, class_key, kind))
        if entry is not None:
            return entry
    return None


def lookup(law, function_class: str, divergence: str, alpha: float | None = None) -> Entry | None:
    """The most specific entry stated for (law, class, divergence) at ``alpha``, or None.

    A declared class (``canary``, one member of ``linear``) reads the linear class's entries, upper bounds of
    it by containment, before the unrestricted class's.

    Raises
    ------
    ValueError
        For an unknown class or divergence name (the accepted names are in the message).
    """
    hclass, kind = parse_function_class(function_class), divergence_kind(divergence)
    for law_type in type(law).__mro__:
        for class_key in (hclass, type(hclass), *(LINEAR,) * hclass.declared, ANY):
            entry = TABLE.get((law_type, class_key, kind))
            if entry is not None and entry.stated(law, alpha):
                return entry
    return None


def theory_bound(law, function_class: str, divergence: str, alpha: float | None = None,
                 delta: float | None = None) -> float | None:
    """The closed-form value or upper bound of (class, divergence) for ``law``; None when none is known.

    Parameters
    ----------
    law : a law record of this module, or None (nothing known)
    function_class : str
        A class name (``linear``, ``polyK``, ``atoms``, ``all``, ...).
    divergence : {"kl", "renyi", "ipm", "dp"}
    alpha : float, optional
        Renyi order, for ``renyi``.
    delta : float, optional
        The delta of a ``dp`` value, for a law that states its values at a delta (a ``delta`` field, e.g.
        :class:`SubsampledGaussianSteps`): the law is read at this one.

    Examples
    --------
    >>> round(theory_bound(LaplaceShift(1.0, (1.0,)), "linear", "kl"), 4)
    0.226
    >>> theory_bound(GaussianShift(1.0, (1.0,)), "all", "dp") is None
    True
    """
    if delta is not None and "delta" in getattr(law, "__dataclass_fields__", {}):
        law = dataclasses.replace(law, delta=delta)
    entry = None if law is None else lookup(law, function_class, divergence, alpha)
    value = None if entry is None else entry.value(law, alpha)
    return None if value is None else float(value)


def exact_closed_form(law, function_class: str, divergence: str, alpha: float | None = None) -> float | None:
    """The table's value when it is the exact (class, divergence) (kind "closed form"), else None.

    E.g. (lin, KL) of a d-dim Gaussian shift is ||v||^2 / (2 sigma^2) exactly
    (CBDP appendix Thm 10), while a (lin, Renyi) Table 1 value is only an upper bound.
    """
    entry = None if law is None else lookup(law, function_class, divergence, alpha)
    if entry is None or entry.kind != "closed form":
        return None
    value = entry.value(law, alpha)
    return None if value is None else float(value)
