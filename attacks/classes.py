"""Function classes of capacity-bounded adversaries, as types: the one place a class's name becomes behaviour.

A class is written as text (``function_class = "poly2"`` in a config, the
``function_class`` column of results.json) and read as a type here:

* :class:`Polynomials` (``linear`` = ``poly1``, ``polyK``, K >= 1): standardised
  monomials of total degree <= K;
* :class:`Kernels` (``kernel``): random Fourier features of an RBF kernel;
* :class:`Networks` (``mlp``): one-hidden-layer ReLU networks;
* :class:`Trees` (``treeK``, K >= 1): indicator functions of the cells of a
  depth-K decision tree;
* :class:`Thresholds` (``threshold``): 1-D thresholds of one output
  coordinate;
* :class:`Canary` (``canary``): the inner product of the output with one
  direction declared before the data (the white-box canary statistic), a
  member of ``linear``: :mod:`attacks.declared`;
* :class:`Atoms` and :class:`FloatBits` (``atoms``, ``floatbits``): sets of
  exact output values and of IEEE-754 representation features
  (:mod:`attacks.representation`);
* :class:`All` (``all``): the unrestricted class, for claims only.

Each type carries what the rest of the code asks of a class: its name, the
:class:`attacks.Adversary` parameters it takes (:data:`PARAMETERS`, checked
here for the estimator and the config alike), the divergences its witnesses
estimate, how its witness is fitted (:class:`FitRule`), its feature map
(:meth:`FunctionClass.feature_map`, built by :mod:`attacks.features`), the
width of that map for the memory model, whether it reads the outputs' values
or how they are stored (its ``layer``), and its closure properties.

Containment (docs/theory.md section 3; CBDP section 3): canary in lin in poly_k in
poly_{k+1}; lin in mlp (one hidden ReLU layer of width >= 2d represents
x = relu(x) - relu(-x)); tree_k in tree_{k+1}; every class in ``all``
(``atoms`` and ``floatbits`` in ``all`` only). An attack of class A refutes a
claim about class C only when A is contained in C; other attacks are
informative.

Layers (:attr:`FunctionClass.layer`): a class reads either the released
*values* (``value``: every class but ``floatbits``; ``atoms`` reads which
values occur) or how a value is *stored* (``representation``: ``floatbits``,
the IEEE-754 features behind Mironov's 2012 attack on floating-point
samplers).  An audit searches each layer on its own and gives every claim a
verdict per layer (:mod:`audit.engine.run`, :mod:`audit.results.verdicts`), so a
representation finding never hides what the values say.

Code that needs a class's behaviour asks these types (their attributes,
``isinstance`` or one ``match``), never the name.  This module imports the
standard library and :mod:`attacks.vocabulary` only; the feature maps load
scikit-learn when first built.
"""

from __future__ import annotations

import difflib
import enum
import math
import numbers
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

from attacks.vocabulary import DIVERGENCES, Renyi

if TYPE_CHECKING:
    import numpy as np
    from sklearn.pipeline import Pipeline

VALUE, REPRESENTATION = "value", "representation"
LAYERS = (VALUE, REPRESENTATION)
"""The layers of findings: what a mechanism computes, and how it stores it (:attr:`FunctionClass.layer`)."""
MAX_POLY_DEGREE = 10
"""Largest K of ``polyK``: a degree-K polynomial of d coordinates has C(d + K, K)
features (already 3003 at d = 5, K = 10), beyond which the fit is neither
feasible nor stable."""
MAX_TREE_DEPTH = 20
"""Largest K of ``treeK``: up to 2^K leaves (about a million at 20), more than any
audit's sample can populate."""
MAX_UNITS = 10_000
"""Largest ``n_components`` (kernel) or ``width`` (mlp)."""
DV_MAX_DEGREE = 2
"""The Donsker-Varadhan (and set) fits of ``polyK`` use monomials of degree <= 2: a
polynomial witness with an odd leading term of degree >= 3 has E_Q exp(h) =
infinity under Laplace or Gaussian tails (the heavy-tail trap, docs/theory.md
section 4; :mod:`attacks.adversary`)."""
ACCEPTED_NAMES = (
    f"'linear', 'polyK' (K = 1..{MAX_POLY_DEGREE}), 'kernel', 'mlp', 'treeK' (K = 1..{MAX_TREE_DEPTH}), "
    "'threshold', 'canary', 'atoms', 'floatbits', 'all'"
)


def _units(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and 1 <= value <= MAX_UNITS


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _direction(value: Any) -> bool:
    """A list of finite numbers, not all 0 (or None: the mechanism's own, :mod:`attacks.declared`)."""
    if value is None:
        return True
    entries = list(value) if isinstance(value, (list, tuple)) else None
    return bool(entries) and all(_real(v) for v in entries) and any(v != 0 for v in entries)


@dataclass(frozen=True)
class Parameter:
    """An :class:`attacks.Adversary` parameter that shapes a class (a ``class_params`` entry).

    Attributes
    ----------
    name : str
    default : object
        The estimator's default.
    what : str
        What a value must be, for error messages.
    accepts : callable
        Whether a value is one.
    """

    name: str
    default: Any
    what: str
    accepts: Callable[[Any], bool]

    def check(self, value: Any) -> Any:
        """``value`` unchanged, or a ``ValueError`` naming the parameter, the rule and the value."""
        if not self.accepts(value):
            raise ValueError(f"{self.name} must be {self.what}. Found {value!r}.")
        return value


PARAMETERS = {parameter.name: parameter for parameter in (
    Parameter("n_components", 100, f"an integer from 1 to {MAX_UNITS}", _units),
    Parameter("bandwidth", None, "a finite number > 0 (None: the median heuristic)",
              lambda value: value is None or _real(value) and value > 0),
    Parameter("width", 32, f"an integer from 1 to {MAX_UNITS}", _units),
    Parameter("ridge", 1e-3, "a finite number >= 0", lambda value: _real(value) and value >= 0),
    Parameter("direction", None, "a list of finite numbers, not all 0, one per output coordinate (None: the "
              "mechanism's canary direction)", _direction),
)}
"""The rule of each class parameter, for :class:`attacks.Adversary` and ``attacks.class_params`` alike."""


class FitRule(enum.Enum):
    """How a class's witness is fitted on its features phi (:mod:`attacks.adversary`)."""

    CONVEX = "the variational objective maximised over the coefficients of phi (concave KL, convex Renyi moment)"
    CELLS = "the closed-form optimum per cell of a partition (histogram divergence, docs/theory.md section 4)"
    FIXED = "phi itself: the class's one feature is the score"


class FunctionClass:
    """A function class H of witnesses h: R^d -> R.

    Attributes (of the class)
    -------------------------
    kind : str
        The family (``poly``, ``kernel``, ``mlp``, ``tree``, ...): the name
        without its degree.
    parameters : tuple of str
        The :data:`PARAMETERS` an attack of this class uses (its ``class_params``).
    fit_rule : FitRule
    events : bool
        Its witnesses are indicators of sets (``threshold``, ``atoms``,
        ``floatbits``): every divergence is read from one set's counts, ``kl``
        and ``renyi`` by the binary divergence of those counts, a lower bound
        on the divergence of every class containing the set's indicator (the
        data processing inequality, :mod:`attacks.event_divergence`).
    declared : bool
        Its witness is fixed before the data (``canary``): no output trains
        it, so an audit of a ``dp`` claim scores it on every output
        (:mod:`attacks.declared`).
    layer : {"value", "representation"}
        Whether its witnesses are functions of the outputs' values
        (:data:`VALUE`; ``all`` too: a claim class holds both) or of how they
        are stored (:data:`REPRESENTATION`: ``floatbits``, IEEE-754 bits, so a
        finding is a property of the floating-point sampler, Mironov 2012).
    closed_under_linear_maps : bool
        i o g is in H for every linear map i and g in H (post-processing,
        CBDP Thm 1).
    convex_translation_invariant : bool
        Convex and closed under adding constants (Thm 7's hypotheses, the
        restricted Pinsker inequality).
    rank : int
        The family's place in tables (linear and polynomials first, ``all`` last).
    words : str
        The class in words, e.g. ``"polynomials of degree 2"``.
    degree : int or None
        K of ``polyK`` (1 for ``linear``) and the depth K of ``treeK``; None for
        the other kinds.
    """

    kind: ClassVar[str]
    parameters: ClassVar[tuple[str, ...]] = ()
    fit_rule: ClassVar[FitRule] = FitRule.CONVEX
    events: ClassVar[bool] = False
    declared: ClassVar[bool] = False
    layer: ClassVar[str] = VALUE
    closed_under_linear_maps: ClassVar[bool] = False
    convex_translation_invariant: ClassVar[bool] = False
    rank: ClassVar[int]
    words: ClassVar[str]
    degree = None  # a dataclass field of Polynomials and Trees

    @property
    def name(self) -> str:
        """The canonical string name (``poly1`` is written ``linear``)."""
        return self.kind

    @property
    def divergences(self) -> tuple[str, ...]:
        """The divergences an attack of this class can estimate: all four (``all``, a claim class only: none).

        The set classes (:attr:`events`) estimate ``kl`` and ``renyi`` from
        one set's counts (:mod:`attacks.event_divergence`).
        """
        return DIVERGENCES

    def is_contained_in(self, other: FunctionClass) -> bool:
        """Whether this class is a subset of ``other`` (docs/theory.md section 3).

        Examples
        --------
        >>> parse_function_class("linear").is_contained_in(parse_function_class("poly3"))
        True
        >>> parse_function_class("poly3").is_contained_in(parse_function_class("poly2"))
        False
        """
        return isinstance(other, All) or self == other

    def feature_count(self, dim: int, params: Mapping[str, Any]) -> int:
        """Width of the feature map on d = ``dim`` coordinates with these ``class_params`` (the memory model)."""
        return dim

    def feature_map(self, X: np.ndarray, adversary: Any, seed: int, random_state: np.random.RandomState) -> Pipeline:
        """The unfitted feature map phi of an attack of this class (:mod:`attacks.features`).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The training outputs (a bandwidth or scale is read from them).
        adversary : Adversary
            Its parameters (``n_components``, ``bandwidth``, ``width``,
            ``ridge``) and fitted ``divergence_``.
        seed : int
            Seeds the map's own randomness.
        random_state : RandomState
            For draws the map needs while it is built (the kernel's bandwidth).
        """
        raise ValueError(f"function_class {self.name!r} is for claims only: no attack fits it.")

    def check_parameters(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` unless every entry of ``params`` is a parameter of this class with a valid value.

        Messages name the class and parameter, suggest a near name, and list
        the accepted ones.
        """
        for key, value in params.items():
            if key not in self.parameters:
                close = difflib.get_close_matches(str(key), self.parameters, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(
                    f"{self.name!r} attacks take no parameter {key!r}; {hint}"
                    f"accepted: {', '.join(self.parameters) or 'none'}. Found {key} = {value!r}."
                )
            PARAMETERS[key].check(value)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Polynomials(FunctionClass):
    """``polyK``: polynomials of total degree <= K of the standardised outputs (``linear`` is K = 1)."""

    degree: int
    kind: ClassVar[str] = "poly"
    parameters: ClassVar[tuple[str, ...]] = ("ridge",)
    closed_under_linear_maps: ClassVar[bool] = True
    convex_translation_invariant: ClassVar[bool] = True
    rank: ClassVar[int] = 0

    @property
    def name(self) -> str:
        return "linear" if self.degree == 1 else f"poly{self.degree}"

    @property
    def words(self) -> str:
        return "linear functions" if self.degree == 1 else f"polynomials of degree {self.degree}"

    def is_contained_in(self, other: FunctionClass) -> bool:
        if isinstance(other, Polynomials):
            return self.degree <= other.degree
        return super().is_contained_in(other) or self.degree == 1 and isinstance(other, Networks)

    def feature_count(self, dim: int, params: Mapping[str, Any]) -> int:
        return math.comb(dim + self.degree, self.degree)

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        degree = self.degree if isinstance(adversary.divergence_, Renyi) else min(self.degree, DV_MAX_DEGREE)
        return features.polynomials(X, degree)


@dataclass(frozen=True)
class Kernels(FunctionClass):
    """``kernel``: linear combinations of random Fourier features of an RBF kernel."""

    kind: ClassVar[str] = "kernel"
    parameters: ClassVar[tuple[str, ...]] = ("n_components", "bandwidth", "ridge")
    convex_translation_invariant: ClassVar[bool] = True
    rank: ClassVar[int] = 1
    words: ClassVar[str] = "random-feature kernel functions"

    def feature_count(self, dim: int, params: Mapping[str, Any]) -> int:
        return int(params.get("n_components", PARAMETERS["n_components"].default))

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.random_fourier(X, adversary.n_components, adversary.bandwidth, seed, random_state)


@dataclass(frozen=True)
class Networks(FunctionClass):
    """``mlp``: one-hidden-layer ReLU networks of ``width`` units."""

    kind: ClassVar[str] = "mlp"
    parameters: ClassVar[tuple[str, ...]] = ("width", "ridge")
    closed_under_linear_maps: ClassVar[bool] = True
    rank: ClassVar[int] = 2
    words: ClassVar[str] = "one-hidden-layer ReLU networks"

    def feature_count(self, dim: int, params: Mapping[str, Any]) -> int:
        return 2 * int(params.get("width", PARAMETERS["width"].default))  # the hidden activations

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.network(X, adversary.width, adversary.divergence_, adversary.alpha, adversary.ridge, seed)


@dataclass(frozen=True)
class Trees(FunctionClass):
    """``treeK``: functions constant on the cells of a depth-K axis-aligned decision tree."""

    degree: int
    kind: ClassVar[str] = "tree"
    parameters: ClassVar[tuple[str, ...]] = ("ridge",)
    fit_rule: ClassVar[FitRule] = FitRule.CELLS
    rank: ClassVar[int] = 3

    @property
    def name(self) -> str:
        return f"tree{self.degree}"

    @property
    def words(self) -> str:
        return f"trees of depth {self.degree}"

    def is_contained_in(self, other: FunctionClass) -> bool:
        if isinstance(other, Trees):
            return self.degree <= other.degree
        return super().is_contained_in(other)

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.tree_cells(X, self.degree, seed)


@dataclass(frozen=True)
class Thresholds(FunctionClass):
    """``threshold``: 1-D thresholds {x_j > t} of one output coordinate (the one with the largest training IPM)."""

    kind: ClassVar[str] = "threshold"
    fit_rule: ClassVar[FitRule] = FitRule.FIXED
    events: ClassVar[bool] = True
    rank: ClassVar[int] = 4
    words: ClassVar[str] = "1-D thresholds"

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.best_coordinate(X)


@dataclass(frozen=True)
class Canary(FunctionClass):
    """``canary``: s(x) = x . v / |v| for one direction v declared before the data (``direction``, or the
    mechanism's canary direction): the white-box canary statistic, one member of ``linear``."""

    kind: ClassVar[str] = "canary"
    parameters: ClassVar[tuple[str, ...]] = ("direction",)
    fit_rule: ClassVar[FitRule] = FitRule.FIXED
    declared: ClassVar[bool] = True
    rank: ClassVar[int] = 0
    words: ClassVar[str] = "the declared canary statistic"

    def is_contained_in(self, other: FunctionClass) -> bool:
        return self == other or LINEAR.is_contained_in(other)  # a member of linear

    def feature_count(self, dim: int, params: Mapping[str, Any]) -> int:
        return 1

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.declared_direction(adversary.direction)


@dataclass(frozen=True)
class Atoms(FunctionClass):
    """``atoms``: sets of exact output values, scored by how often each occurs (:class:`attacks.representation.AtomTable`)."""

    kind: ClassVar[str] = "atoms"
    fit_rule: ClassVar[FitRule] = FitRule.FIXED
    events: ClassVar[bool] = True
    rank: ClassVar[int] = 5
    words: ClassVar[str] = "sets of exact output values"

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.atoms()


@dataclass(frozen=True)
class FloatBits(FunctionClass):
    """``floatbits``: cells of a shallow tree on the IEEE-754 features of the outputs (:mod:`attacks.representation`)."""

    kind: ClassVar[str] = "floatbits"
    fit_rule: ClassVar[FitRule] = FitRule.CELLS
    events: ClassVar[bool] = True
    layer: ClassVar[str] = REPRESENTATION
    rank: ClassVar[int] = 6
    words: ClassVar[str] = "IEEE-754 bit features"

    def feature_map(self, X, adversary, seed, random_state):
        from attacks import features

        return features.float_bits(seed)


@dataclass(frozen=True)
class All(FunctionClass):
    """``all``: every measurable function, the unrestricted class of a claim (no attack fits it)."""

    kind: ClassVar[str] = "all"
    rank: ClassVar[int] = 7
    words: ClassVar[str] = "all functions"

    @property
    def divergences(self) -> tuple[str, ...]:
        return ()


LINEAR = Polynomials(1)
"""The linear class, ``linear`` = ``poly1``."""
ALL = All()
"""The unrestricted class."""

# ASCII digits without a leading zero: "poly00", "poly02" and non-ASCII digits ("poly\u0968") are not names.
_PATTERN = re.compile(r"(linear|poly([1-9][0-9]*)|kernel|mlp|tree([1-9][0-9]*)|threshold|canary|atoms|floatbits|all)",
                      re.ASCII)
_PLAIN = {"linear": LINEAR, "kernel": Kernels(), "mlp": Networks(), "threshold": Thresholds(), "canary": Canary(),
          "atoms": Atoms(), "floatbits": FloatBits(), "all": ALL}


def parse_function_class(name: str | FunctionClass) -> FunctionClass:
    """The :class:`FunctionClass` named by ``name``.

    Parameters
    ----------
    name : str or FunctionClass
        One of ``linear``, ``polyK`` (1 <= K <= ``MAX_POLY_DEGREE``),
        ``kernel``, ``mlp``, ``treeK`` (1 <= K <= ``MAX_TREE_DEPTH``),
        ``threshold``, ``canary``, ``atoms``, ``floatbits``, ``all`` (case-insensitive; K in ASCII digits without a
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
    if poly is not None:
        return Polynomials(_bounded_degree(int(poly), MAX_POLY_DEGREE, name))
    if tree is not None:
        return Trees(_bounded_degree(int(tree), MAX_TREE_DEPTH, name))
    return _PLAIN[word]


def _bounded_degree(degree: int, maximum: int, name: str) -> int:
    if degree > maximum:
        raise ValueError(f"function_class must be one of {ACCEPTED_NAMES}: K is at most {maximum}. Found {name!r}.")
    return degree
