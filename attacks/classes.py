"""Function classes of capacity-bounded adversaries: names, parameters, containment.

A class is named by a string (config files, results rows): ``linear``,
``polyK`` (K >= 1; ``poly1`` is ``linear``), ``kernel``, ``mlp``, ``treeK``
(K >= 1), ``threshold`` (1-D thresholds of one output coordinate; IPM and DP
only), ``atoms`` and ``floatbits`` (sets of exact output values and of
IEEE-754 representation features, :mod:`attacks.representation`; IPM and DP
only) and ``all`` (the unrestricted class, for claims only).

Containment (docs/theory.md section 3; CBDP section 3): lin in poly_k in
poly_{k+1}; lin in mlp (one hidden ReLU layer of width >= 2d represents
x = relu(x) - relu(-x)); tree_k in tree_{k+1}; every class in ``all``
(``atoms`` and ``floatbits`` in ``all`` only). An
attack of class A refutes a claim about class C only when A is contained in C;
other attacks are informative.

Layers (:attr:`FunctionClass.layer`): a class reads either the released
*values* (``value``: every class but ``floatbits``; ``atoms`` reads which
values occur) or how a value is *stored* (``representation``: ``floatbits``,
the IEEE-754 features behind Mironov's 2012 attack on floating-point
samplers).  An audit searches each layer on its own and gives every claim a
verdict per layer (:mod:`audit.engine`, :mod:`audit.verdicts`), so a
representation finding never hides what the values say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attacks.vocabulary import DIVERGENCES, MEMBERS

VALUE, REPRESENTATION = "value", "representation"
LAYERS = (VALUE, REPRESENTATION)
"""The layers of findings: what a mechanism computes, and how it stores it (:attr:`FunctionClass.layer`)."""
REPRESENTATION_KINDS = frozenset({"floatbits"})
"""The kinds whose witnesses read a value's storage rather than the value."""
KINDS = ("poly", "kernel", "mlp", "tree", "threshold", "atoms", "floatbits", "all")
MAX_POLY_DEGREE = 10
"""Largest K of ``polyK``: a degree-K polynomial of d coordinates has C(d + K, K)
features (already 3003 at d = 5, K = 10), beyond which the fit is neither
feasible nor stable."""
MAX_TREE_DEPTH = 20
"""Largest K of ``treeK``: up to 2^K leaves (about a million at 20), more than any
audit's sample can populate."""
ACCEPTED_NAMES = (
    f"'linear', 'polyK' (K = 1..{MAX_POLY_DEGREE}), 'kernel', 'mlp', 'treeK' (K = 1..{MAX_TREE_DEPTH}), "
    "'threshold', 'atoms', 'floatbits', 'all'"
)
PARAMETERS = {
    "poly": ("ridge",),
    "kernel": ("n_components", "bandwidth", "ridge"),
    "mlp": ("width", "ridge"),
    "tree": ("ridge",),
    "threshold": (),
    "atoms": (),
    "floatbits": (),
    "all": (),
}
"""The :class:`attacks.Adversary` parameters that apply to each kind (``class_params``)."""

# ASCII digits without a leading zero: "poly00", "poly02" and non-ASCII digits ("poly\u0968") are not names.
_PATTERN = re.compile(r"(linear|poly([1-9][0-9]*)|kernel|mlp|tree([1-9][0-9]*)|threshold|atoms|floatbits|all)", re.ASCII)


@dataclass(frozen=True)
class FunctionClass:
    """A function class H of witnesses h: R^d -> R.

    Parameters
    ----------
    kind : {"poly", "kernel", "mlp", "tree", "threshold", "atoms", "floatbits", "all"}
        The family; ``linear`` is ``poly`` of degree 1.
    degree : int or None
        K of ``polyK`` (1 for ``linear``) and of ``treeK`` (the depth);
        None for the other kinds.
    """

    kind: str
    degree: int | None = None

    @property
    def name(self) -> str:
        """The canonical string name (``poly1`` is written ``linear``)."""
        if self.kind == "poly":
            return "linear" if self.degree == 1 else f"poly{self.degree}"
        if self.kind == "tree":
            return f"tree{self.degree}"
        return self.kind

    @property
    def divergences(self) -> tuple[str, ...]:
        """The divergences an attack of this class can estimate.

        ``threshold`` witnesses are +-1 step functions of one coordinate: they
        suit the IPM and DP set attacks, not the KL or Renyi objectives (a
        threshold class is not closed under h -> a h + b in a way that lets the
        objective's scale be optimised); nor are ``atoms`` and ``floatbits``
        (:mod:`attacks.representation`). ``all`` is a claim class only.
        """
        if self.kind in ("threshold", "atoms", "floatbits"):
            return tuple(name for name, kind in MEMBERS.items() if not kind.weighted)
        if self.kind == "all":
            return ()
        return DIVERGENCES

    @property
    def parameters(self) -> tuple[str, ...]:
        """The :class:`attacks.Adversary` parameters an attack of this class uses (its ``class_params``).

        ``ridge`` penalises the coefficients of every feature-based KL / Renyi
        fit; ``n_components`` and ``bandwidth`` shape the random Fourier
        features of ``kernel``; ``width`` is the hidden layer of ``mlp``.
        ``threshold`` and ``all`` take none.
        """
        return PARAMETERS[self.kind]

    @property
    def layer(self) -> str:
        """:data:`REPRESENTATION` for a class that reads how outputs are stored (``floatbits``: IEEE-754 bits, so a
        finding is a property of the floating-point sampler, Mironov 2012), else :data:`VALUE` (``all`` too: a
        claim class holds both)."""
        return REPRESENTATION if self.kind in REPRESENTATION_KINDS else VALUE

    def is_contained_in(self, other: FunctionClass) -> bool:
        """Whether this class is a subset of ``other`` (docs/theory.md section 3).

        Examples
        --------
        >>> parse_function_class("linear").is_contained_in(parse_function_class("poly3"))
        True
        >>> parse_function_class("poly3").is_contained_in(parse_function_class("poly2"))
        False
        """
        if other.kind == "all" or self == other:
            return True
        if self.kind == "poly" and other.kind == "poly":
            return self.degree <= other.degree
        if self.kind == "tree" and other.kind == "tree":
            return self.degree <= other.degree
        return self.name == "linear" and other.kind == "mlp"

    def __str__(self) -> str:
        return self.name


def parse_function_class(name: str | FunctionClass) -> FunctionClass:
    """The :class:`FunctionClass` named by ``name``.

    Parameters
    ----------
    name : str or FunctionClass
        One of ``linear``, ``polyK`` (1 <= K <= ``MAX_POLY_DEGREE``),
        ``kernel``, ``mlp``, ``treeK`` (1 <= K <= ``MAX_TREE_DEPTH``),
        ``threshold``, ``atoms``, ``floatbits``, ``all`` (case-insensitive; K in ASCII digits without a
        leading zero); a FunctionClass is returned unchanged.

    Raises
    ------
    ValueError
        If the name is not one of the accepted names.

    Examples
    --------
    >>> parse_function_class("poly1").name
    'linear'
    """
    if isinstance(name, FunctionClass):
        return name
    match = _PATTERN.fullmatch(name.lower()) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"function_class must be one of {ACCEPTED_NAMES}. Found {name!r}.")
    word, poly, tree = match.groups()
    if word == "linear":
        return FunctionClass("poly", 1)
    if poly is not None:
        return FunctionClass("poly", _bounded_degree(int(poly), MAX_POLY_DEGREE, name))
    if tree is not None:
        return FunctionClass("tree", _bounded_degree(int(tree), MAX_TREE_DEPTH, name))
    return FunctionClass(word)


def _bounded_degree(degree: int, maximum: int, name: str) -> int:
    if degree > maximum:
        raise ValueError(f"function_class must be one of {ACCEPTED_NAMES}: K is at most {maximum}. Found {name!r}.")
    return degree
