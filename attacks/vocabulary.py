"""The divergences capaudit audits, as types: the one place a divergence's name becomes behaviour.

A claim's divergence is written as text (``divergence = "renyi"`` in a
config, the ``divergence`` column of results.json) and read as a type here:

* :class:`KL`: the Kullback-Leibler divergence (Donsker-Varadhan witness).
* :class:`Renyi` (``alpha`` > 1): the Renyi divergence of order alpha, the
  logarithm of its alpha-divergence (CBDP eq. 3).
* :class:`IPM`: E_P h - E_Q h over witnesses h = +-1 of an attack set.
* :class:`DP` (``delta`` in [0, 1)): the log-ratio log((P(S) - delta) / Q(S))
  of an attack set S.

``kl`` and ``renyi`` are scored by a real-valued witness whose objective is a
mean of weights over Q (``weighted``: exp(h), |g|^beta), with delta-method
intervals and an unseen-mass term; ``ipm`` and ``dp`` by the counts of an
attack set, with exact binomial bounds.  Curve claims (:class:`GDP`,
:class:`ZCDP`, :class:`Profile`, docs/theory.md section 9) are families of
``dp`` or ``renyi`` members (``member``; expanded by :mod:`audit.config.families`).
The f-divergences of :mod:`attacks.divergences` (``kl``, ``alpha``, ``tv``)
are :class:`KL`, :class:`AlphaDivergence` and :class:`TotalVariation`.

:func:`parse_divergence` turns a name (with its ``alpha`` and ``delta``) into a
type; ``str()`` and ``.name`` give the name back for rows and results files.
Code that needs a divergence's behaviour switches on these types (their
attributes, ``isinstance`` or one ``match``), never on the name.
This module imports the standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar


def check_alpha(alpha: Any) -> float:
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
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(
            f"alpha must be a finite Renyi order greater than 1 (alpha = 1 is KL: use "
            f"divergence 'kl'). Found {alpha!r}."
        )
    return value


def check_delta(delta: Any) -> float:
    """Return ``delta`` as a float, or raise if it is not in [0, 1)."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be a number in [0, 1). Found {delta!r}.")
    return float(delta)


class Divergence:
    """A member divergence: what one row of an audit estimates.

    Attributes (of the class)
    -------------------------
    name : str
        The name in configs, rows and results files.
    label : str
        Its name in report.md (``"KL"``, ``"Renyi"``, ...).
    words : str
        Its name in figure titles.
    weighted : bool
        Scored by a real-valued witness whose objective is a mean of weights
        over Q (``kl``, ``renyi``: witness moments, delta-method intervals,
        unseen-mass term); else by an attack set's counts (``ipm``, ``dp``).
    weights : str or None
        The weights' formula, for caveats.
    has_order : bool
        Takes a Renyi order ``alpha``.
    alpha, delta : float or None
        The Renyi order (:class:`Renyi`) and delta (:class:`DP`); None for the others.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    words: ClassVar[str]
    weighted: ClassVar[bool] = False
    weights: ClassVar[str | None] = None
    has_order: ClassVar[bool] = False
    # Plain class attributes: the dataclass fields of Renyi (alpha) and DP (delta) replace them.
    alpha = None
    delta = None

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class KL(Divergence):
    """The KL divergence; also the f-divergence with f(t) = t log t."""

    name: ClassVar[str] = "kl"
    label: ClassVar[str] = "KL"
    words: ClassVar[str] = "KL divergence"
    weighted: ClassVar[bool] = True
    weights: ClassVar[str] = "exp(h)"


@dataclass(frozen=True)
class Renyi(Divergence):
    """The Renyi divergence of order ``alpha`` > 1 (restricted: CBDP eq. 3, through :class:`AlphaDivergence`)."""

    alpha: float
    name: ClassVar[str] = "renyi"
    label: ClassVar[str] = "Renyi"
    words: ClassVar[str] = "Rényi divergence"
    weighted: ClassVar[bool] = True
    weights: ClassVar[str] = "|g|^beta"
    has_order: ClassVar[bool] = True

    def __post_init__(self):
        object.__setattr__(self, "alpha", check_alpha(self.alpha))

    @property
    def f_divergence(self) -> AlphaDivergence:
        return AlphaDivergence(self.alpha)


@dataclass(frozen=True)
class IPM(Divergence):
    """The class's integral probability metric over attack sets: E_P h - E_Q h with h = +1 on S, -1 off it."""

    name: ClassVar[str] = "ipm"
    label: ClassVar[str] = "IPM"
    words: ClassVar[str] = "IPM (total variation of the class)"


@dataclass(frozen=True)
class DP(Divergence):
    """The DP epsilon of an attack set: log((P(S) - delta) / Q(S)), ``delta`` in [0, 1)."""

    delta: float = 0.0
    name: ClassVar[str] = "dp"
    label: ClassVar[str] = "DP epsilon"
    words: ClassVar[str] = "DP epsilon (log-ratio of an attack set)"

    def __post_init__(self):
        object.__setattr__(self, "delta", check_delta(self.delta))


@dataclass(frozen=True)
class AlphaDivergence:
    """The f-divergence of order ``alpha`` > 1 with f(t) = (|t|^alpha - 1) / (alpha^2 - alpha) (CBDP's |t|)."""

    alpha: float
    name: ClassVar[str] = "alpha"

    def __post_init__(self):
        object.__setattr__(self, "alpha", check_alpha(self.alpha))


@dataclass(frozen=True)
class TotalVariation:
    """The f-divergence with f(t) = |t - 1| / 2."""

    name: ClassVar[str] = "tv"


class Curve:
    """A curve claim: a family of member claims of divergence ``member`` (docs/theory.md section 9).

    Reports name a curve claim by its name (``label`` and ``words``); it has no order of its own.
    """

    name: ClassVar[str]
    member: ClassVar[type[Divergence]]
    label: ClassVar[str]
    words: ClassVar[str]
    has_order: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.label = cls.words = cls.name

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class GDP(Curve):
    """mu-GDP: the dp claims (epsilon, delta_mu(epsilon)) at a grid of epsilons."""

    name: ClassVar[str] = "gdp"
    member: ClassVar[type[Divergence]] = DP


@dataclass(frozen=True)
class ZCDP(Curve):
    """rho-zCDP: the renyi claims rho alpha at a grid of orders."""

    name: ClassVar[str] = "zcdp"
    member: ClassVar[type[Divergence]] = Renyi


@dataclass(frozen=True)
class Profile(Curve):
    """A privacy profile: the dp claims (epsilon_i, delta_i) of a table or a named law."""

    name: ClassVar[str] = "profile"
    member: ClassVar[type[Divergence]] = DP


MEMBERS: dict[str, type[Divergence]] = {kind.name: kind for kind in (KL, Renyi, IPM, DP)}
CURVES: dict[str, type[Curve]] = {kind.name: kind for kind in (GDP, ZCDP, Profile)}
F_DIVERGENCES = {kind.name: kind for kind in (KL, AlphaDivergence, TotalVariation)}
DIVERGENCES = tuple(MEMBERS)
"""The member divergences' names: ``("kl", "renyi", "ipm", "dp")``."""
WEIGHTED = tuple(name for name, kind in MEMBERS.items() if kind.weighted)
"""Names of the divergences scored by a witness with weights: ``("kl", "renyi")``."""
FAMILIES = tuple(CURVES)
"""Curve claims' names: ``("gdp", "zcdp", "profile")``."""


def divergence_kind(name: Any) -> type[Divergence] | type[Curve]:
    """The type (not an instance) named ``name``, a member divergence or a curve claim, for what needs no order.

    Raises
    ------
    ValueError
        If ``name`` names neither.
    """
    if isinstance(name, (Divergence, Curve)):
        return type(name)
    kind = {**MEMBERS, **CURVES}.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"divergence must be one of {DIVERGENCES + FAMILIES}. Found {name!r}.")
    return kind


def parse_divergence(name: Any, alpha: Any = None, delta: Any = None) -> Divergence:
    """The member divergence of a name and its parameters; a :class:`Divergence` is returned as it is.

    Parameters
    ----------
    name : {"kl", "renyi", "ipm", "dp"} or Divergence
    alpha : float, optional
        The Renyi order: required by ``renyi`` (> 1), refused by the others.
        None and NaN (an empty cell of a results table) read as absent.
    delta : float, optional
        ``dp``'s delta in [0, 1), default 0; the others accept only None,
        NaN or 0.

    Raises
    ------
    ValueError
        Naming the field (``divergence``, ``alpha``, ``delta``), what it
        accepts and what was found.
    """
    if isinstance(name, Divergence):
        return name
    kind = MEMBERS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"divergence must be one of {DIVERGENCES}. Found {name!r}.")
    if kind is Renyi:
        if _absent(alpha) is None:
            raise ValueError(f"alpha: divergence 'renyi' needs a Renyi order alpha > 1; set alpha (e.g. 2). "
                             f"Found {alpha!r}.")
        parameters = {"alpha": alpha}
    elif _absent(alpha) is not None:
        raise ValueError(f"alpha applies to divergence 'renyi' only; leave it None for {name!r}. "
                         f"Found alpha={alpha!r}.")
    else:
        parameters = {}
    delta = _absent(delta)
    if kind is DP:
        parameters["delta"] = 0.0 if delta is None else delta
    elif delta not in (None, 0, 0.0):
        raise ValueError(f"delta applies to divergence 'dp' only; leave it 0 for {name!r}. Found delta={delta!r}.")
    return kind(**parameters)


def divergence_of(record: Any) -> Divergence:
    """The divergence of anything with ``divergence``, ``alpha`` and ``delta`` attributes (a target, an estimate,
    a results row; missing ones read as absent) through :func:`parse_divergence`."""
    return parse_divergence(record.divergence, getattr(record, "alpha", None), getattr(record, "delta", None))


def parse_curve(name: Any) -> Curve:
    """The curve claim named ``name`` (``gdp``, ``zcdp``, ``profile``); raises ``ValueError`` naming them."""
    if isinstance(name, Curve):
        return name
    kind = CURVES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"divergence of a curve claim must be one of {FAMILIES}. Found {name!r}.")
    return kind()


def parse_f_divergence(name: Any, alpha: Any = None) -> KL | AlphaDivergence | TotalVariation:
    """The f-divergence named ``name`` (``kl``, ``alpha`` with its order, ``tv``) of :mod:`attacks.divergences`."""
    if isinstance(name, (KL, AlphaDivergence, TotalVariation)):
        return name
    kind = F_DIVERGENCES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"divergence must be one of {tuple(F_DIVERGENCES)}. Found {name!r}.")
    return kind(alpha) if kind is AlphaDivergence else kind()


def _absent(value: Any) -> Any:
    """None for None and NaN (how results tables write a missing order or delta), else the value."""
    if value is None:
        return None
    try:
        return None if math.isnan(value) else value
    except TypeError:
        return value
