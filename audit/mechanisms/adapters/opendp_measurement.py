"""Any OpenDP measurement, built from its constructors in the config, audited against its own privacy map.

``[mechanism] name = "opendp.measurement"`` takes the measurement's input
space and a chain of OpenDP constructors (docs/config.md, "Claims from the
library"):

* ``input_domain``, ``input_metric``: OpenDP expressions such as
  ``"vector_domain(atom_domain(T=f64, nan=False))"`` and
  ``"symmetric_distance()"``, read by :func:`opendp_value` (calls of
  OpenDP's domain, metric and measure constructors with literal arguments,
  nothing else);
* ``chain``: tables ``{ constructor = "then_clamp", bounds = [0.0, 1.0] }``
  (a ``then_`` / ``make_`` constructor of ``opendp.transformations`` or
  ``opendp.measurements``, chained with ``>>`` from the input space) or
  ``{ combinator = "make_zCDP_to_approxDP" }`` (an ``opendp.combinators``
  constructor applied to the chain so far); other fields are the
  constructor's arguments (arrays become tuples, expression strings OpenDP
  values).

Each dataset is one call of the measurement: its records become the input
(a vector domain: one scalar per record; an atom domain: one record), and
the release is one output row.  The input distance ``d_in`` of a pair is
read in the measurement's own input metric (:meth:`OpenDPMeasurement.input_distance`)
and the claim is the measurement's privacy map at that ``d_in``, in its own
output measure (:meth:`OpenDPMeasurement.library_claim`).  Only OpenDP's own
constructors are called: the config names no user code.
"""

from __future__ import annotations

import ast
import importlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from audit.config.library_claims import PROFILE_DELTA, PROFILE_EPSILONS
from audit.mechanisms.adapters.library import LibraryClaim
from audit.mechanisms.adapters.opendp import OpenDPAdapter

EXPRESSION_MODULES = ("opendp.domains", "opendp.metrics", "opendp.measures")
"""Where the names of an OpenDP expression are looked up (domains, metrics, measures)."""
CONSTRUCTOR_MODULES = ("opendp.transformations", "opendp.measurements")
COMBINATOR_MODULE = "opendp.combinators"
BATCH = 1000
"""Releases per library call (:func:`_releases`): ~0.03 ms an output of OpenDP's noisy max against ~0.1 ms for a
call each, whose cost is the call's conversion of the input and output, not the noise."""
SET_METRICS = ("SymmetricDistance", "InsertDeleteDistance", "ChangeOneDistance", "HammingDistance")
"""Input metrics between datasets of records, for which ``[neighbours]`` generates pairs."""


def opendp_value(text: str) -> Any:
    """An OpenDP domain, metric or measure from an expression such as ``"vector_domain(atom_domain(T=i64))"``.

    Only calls of the constructors in :data:`EXPRESSION_MODULES` with literal
    arguments (numbers, strings, booleans, tuples) and type names (``f64``,
    ``i64``, ...) are evaluated; anything else raises ``ValueError``.
    """
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ValueError(f"{text!r} is not an OpenDP expression, e.g. \"symmetric_distance()\".") from None
    modules = [importlib.import_module(name) for name in EXPRESSION_MODULES]

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(value(item) for item in node.elts)
        if isinstance(node, ast.Name):  # a type name: f64, i64, bool, String ...
            return node.id
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            found = [getattr(module, node.func.id) for module in modules if hasattr(module, node.func.id)]
            if found and not node.func.id.startswith("_"):
                return found[0](*map(value, node.args), **{k.arg: value(k.value) for k in node.keywords})
        raise ValueError(f"{text!r}: only calls of OpenDP's domain, metric and measure constructors with literal "
                         f"arguments are read, e.g. \"vector_domain(atom_domain(T=f64, nan=False))\".")

    return value(tree)


def _argument(value: Any) -> Any:
    """A constructor's argument from TOML: arrays become tuples, expression strings OpenDP values."""
    if isinstance(value, list):
        return tuple(_argument(item) for item in value)
    if isinstance(value, str) and value.endswith(")") and "(" in value:
        return opendp_value(value)
    return value


def _constructor(name: Any, modules: Sequence[str], where: str) -> Any:
    """An OpenDP constructor by name (``then_x``, ``make_x``, optionally prefixed by its module)."""
    if not isinstance(name, str) or not name.isidentifier() and "." not in name:
        raise ValueError(f"{where} must be the name of an OpenDP constructor, e.g. \"then_laplace\". Found {name!r}.")
    short = name.rsplit(".", 1)[-1]
    for module in map(importlib.import_module, modules):
        for candidate in (short.replace("make_", "then_", 1), short) if where.endswith("constructor") else (short,):
            if not candidate.startswith("_") and callable(getattr(module, candidate, None)):
                return getattr(module, candidate)
    raise ValueError(f"{where}: OpenDP has no constructor {name!r} in {', '.join(modules)}.")


class OpenDPMeasurement(OpenDPAdapter):
    """An OpenDP measurement built from constructors named in the config; its claim is its own privacy map.

    Parameters
    ----------
    input_domain : str
        OpenDP expression of the input domain, e.g. ``"vector_domain(atom_domain(T=f64, nan=False))"``.
    input_metric : str
        OpenDP expression of the input metric, e.g. ``"symmetric_distance()"``: the distance ``d_in``
        between the audited datasets is read in it.
    chain : list of tables
        The constructors chained from the input space (module docstring).
    """

    name = "opendp.measurement"
    description = "any OpenDP measurement built from its constructors (input space and a chain of constructors)"
    privacy_claim = "the measurement's privacy map at each pair's d_in (max-divergence, zCDP or (epsilon, delta))"
    float_safe = None  # depends on the chain

    def __init__(self, input_domain: str, input_metric: str, chain: Sequence[Mapping[str, Any]] = ()) -> None:
        if not isinstance(chain, Sequence) or isinstance(chain, str) or not chain:
            raise ValueError("chain must be a non-empty list of tables, e.g. [{ constructor = \"then_laplace\", "
                             f"scale = 1.0 }}]. Found {chain!r}.")
        super().__init__(input_domain=input_domain, input_metric=input_metric, chain=list(chain))
        measurement = self.measurement()
        self.measure = str(measurement.output_measure)
        self.metric = str(measurement.input_metric).split("(")[0]
        self.carrier = str(measurement.input_domain.carrier_type)

    def measurement(self) -> Any:
        """The OpenDP measurement (built anew: library objects are not kept, so the adapter pickles)."""
        dp = self._import()
        dp.enable_features("contrib")
        try:
            built: Any = (opendp_value(self.params["input_domain"]), opendp_value(self.params["input_metric"]))
            for i, stage in enumerate(self.params["chain"]):
                where = f"chain[{i}]"
                if not isinstance(stage, Mapping) or len({"constructor", "combinator"} & set(stage)) != 1:
                    raise ValueError(f"{where} must be a table with constructor = \"then_...\" or combinator = "
                                     f"\"make_...\" and its arguments. Found {stage!r}.")
                key = "constructor" if "constructor" in stage else "combinator"
                modules = CONSTRUCTOR_MODULES if key == "constructor" else (COMBINATOR_MODULE,)
                function = _constructor(stage[key], modules, f"{where}.{key}")
                args = {name: _argument(value) for name, value in stage.items() if name != key}
                built = built >> function(**args) if key == "constructor" else function(built, **args)
        except ValueError:
            raise
        except Exception as error:  # OpenDPException, TypeError: the library refused the chain
            raise ValueError(f"OpenDP refused the measurement: {type(error).__name__}: {error}") from None
        if not isinstance(built, dp.Measurement):
            raise ValueError(f"the chain must end in a measurement (a then_ constructor of opendp.measurements); "
                             f"it ends in a {type(built).__name__}.")
        return built

    def _input(self, dataset: np.ndarray) -> Any:
        """The dataset as the measurement's input: a list of scalars (vector domain) or one scalar (atom domain)."""
        records = np.asarray(dataset, dtype=float)
        records = records[:, 0] if records.ndim == 2 and records.shape[1] == 1 else records
        if records.ndim != 1:
            raise ValueError(f"{self.name}: records must be scalars (shape (m,) or (m, 1)). Found shape {records.shape}.")
        atom = self.carrier.removeprefix("Vec<").removesuffix(">")
        cast = {"bool": bool, "String": lambda x: str(int(x)) if float(x).is_integer() else str(x)}.get(
            atom, float if atom.startswith("f") else int)
        values = [cast(x) for x in records]
        if self.carrier.startswith("Vec<"):
            return values
        if len(values) != 1:
            raise ValueError(f"{self.name}: the input domain is one {atom}; a dataset must hold one record. "
                             f"Found {len(values)}.")
        return values[0]

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        measurement, data = self.measurement(), self._input(dataset)
        draws = [draw for start in range(0, n, BATCH) for draw in _releases(measurement, data, min(BATCH, n - start))]
        return np.array([np.asarray(draw, dtype=float).ravel() for draw in draws])

    def input_distance(self, d: Any, d_prime: Any) -> float | int:
        """``d_in`` of two datasets in the measurement's input metric.

        Symmetric distance: the size of the multiset symmetric difference;
        insert-delete: the fewest insertions and deletions (ordered data);
        change-one: records to change, half the symmetric difference (equal sizes);
        Hamming: positions that differ (equal sizes); L1, L2, LInf and
        absolute distances: the norm of the difference of the inputs;
        discrete distance: 0 or 1.
        """
        a, b = self._input(d), self._input(d_prime)
        if self.metric in SET_METRICS:  # records compared bit for bit: NaN equals NaN, -0.0 differs from 0.0
            a, b = ([x.hex() if isinstance(x, float) else x for x in values] for values in (a, b))
        if self.metric in ("SymmetricDistance", "ChangeOneDistance"):
            count_a, count_b = Counter(a), Counter(b)
            symmetric = sum((count_a - count_b).values()) + sum((count_b - count_a).values())
            if self.metric == "SymmetricDistance":
                return symmetric
            self._same_size(a, b)
            return symmetric // 2
        if self.metric == "InsertDeleteDistance":
            return len(a) + len(b) - 2 * _common_subsequence(a, b)
        if self.metric == "DiscreteDistance":
            return int(a != b)
        if self.metric == "HammingDistance":
            self._same_size(a, b)
            return sum(x != y for x, y in zip(a, b))
        difference = np.abs(np.subtract(np.atleast_1d(a), np.atleast_1d(b)))
        norms = {"AbsoluteDistance": np.max, "LInfDistance": np.max, "L1Distance": np.sum,
                 "L2Distance": lambda x: math.sqrt(float(np.sum(x**2)))}
        if self.metric not in norms:
            raise ValueError(f"{self.name}: capaudit does not read distances in {self.metric}; use one of "
                             f"{', '.join([*SET_METRICS, 'DiscreteDistance', *norms])}.")
        self._same_size(np.atleast_1d(a), np.atleast_1d(b))
        value = norms[self.metric](difference)
        return int(value) if self.carrier.removeprefix("Vec<")[:1] in "iu" else float(value)

    def _same_size(self, a: Sequence[Any], b: Sequence[Any]) -> None:
        if len(a) != len(b):
            raise ValueError(f"{self.name}: {self.metric} compares datasets of one size. Found {len(a)} and {len(b)}.")

    def relation_distance(self, relation: str, distance: int) -> int:
        """``d_in`` of generated pairs: ``distance`` records added or removed (add-remove) or replaced (replace-one).

        Symmetric and insert-delete distance: k added records are at distance
        k, k replaced records at 2k; change-one and Hamming distance: k
        replaced records are at k, and adding records is no neighbour.
        """
        if self.metric not in SET_METRICS:
            raise ValueError(f"{self.name}: the input metric {self.metric} is not a distance between datasets of "
                             "records; give explicit [[pairs]] (their d_in is read in that metric).")
        if relation == "add-remove":
            if self.metric in ("ChangeOneDistance", "HammingDistance"):
                raise ValueError(f"{self.name}: under {self.metric} datasets keep their size; use relation = "
                                 "\"replace-one\" or a symmetric_distance() input metric.")
            return distance
        return 2 * distance if self.metric in ("SymmetricDistance", "InsertDeleteDistance") else distance

    def library_claim(self, d_in: float | int, epsilons: Sequence[float] | None = None,
                      delta: float | None = None) -> LibraryClaim:
        """The privacy map at ``d_in`` as a claim table, in the measurement's own output measure.

        max-divergence: pure ``dp`` with epsilon = map(d_in); zero-concentrated
        divergence: ``zcdp`` with rho = map(d_in); approximate max-divergence:
        ``dp`` with (epsilon, delta) = map(d_in); smoothed max-divergence: a
        ``profile`` table, delta(epsilon) of the map's privacy profile at
        ``epsilons`` (default :data:`~audit.config.library_claims.PROFILE_EPSILONS` times its epsilon at
        :data:`~audit.config.library_claims.PROFILE_DELTA`).  The map states its own delta: a ``delta`` given is
        compared with it by :func:`audit.config.library_claims.library_claim_table`, not read here.
        """
        measurement = self.measurement()
        try:
            loss = measurement.map(d_in)
        except Exception as error:
            raise ValueError(f"OpenDP's privacy map refused d_in = {d_in!r}: {error}") from None
        where = f"opendp {self.library_version}'s privacy map of {self.measure} at d_in = {d_in}"
        if self.measure == "MaxDivergence":
            return LibraryClaim({"divergence": "dp", "epsilon": float(loss)}, f"{where}: epsilon = {float(loss):.6g}")
        if self.measure == "ZeroConcentratedDivergence":
            return LibraryClaim({"divergence": "zcdp", "epsilon": float(loss)}, f"{where}: rho = {float(loss):.6g}")
        if self.measure == "Approximate(MaxDivergence)":
            epsilon, delta = map(float, loss)
            return LibraryClaim({"divergence": "dp", "epsilon": epsilon, "delta": delta},
                                f"{where}: (epsilon, delta) = ({epsilon:.6g}, {delta:.6g})")
        if self.measure == "SmoothedMaxDivergence":
            grid = list(epsilons) if epsilons else [x * loss.epsilon(PROFILE_DELTA) for x in PROFILE_EPSILONS]
            deltas = [min(float(loss.delta(epsilon)), 0.999) for epsilon in grid]
            points = ", ".join(f"({e:.4g}, {d:.3g})" for e, d in zip(grid, deltas))
            return LibraryClaim({"divergence": "profile", "epsilons": grid, "deltas": deltas},
                                f"{where}: the privacy profile (epsilon, delta) at {points}")
        raise ValueError(f"capaudit reads claims in MaxDivergence, ZeroConcentratedDivergence, "
                         f"Approximate(MaxDivergence) and SmoothedMaxDivergence; this measurement's is {self.measure}.")

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """None: the records a measurement reads are the config's (give ``[[pairs]]`` or ``[neighbours]``)."""
        return []

    @property
    def true_privacy(self) -> str:
        return f"OpenDP's claim: its privacy map in {self.measure} over {self.metric} (the audited d_in in the claim)"


def _common_subsequence(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common subsequence of a and b (dynamic programming, O(len(a) len(b)))."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


ADAPTERS = (OpenDPMeasurement,)


def _releases(measurement: Any, data: Any, size: int) -> list[Any]:
    """``size`` independent releases of ``measurement`` on ``data``: one call of OpenDP's composition of ``size``
    copies of it (``make_composition``, or ``make_basic_composition`` before 0.13: each component is the
    measurement, run on the same input with its own noise), or ``size`` calls where OpenDP does not compose the
    measurement's output measure."""
    combinators = importlib.import_module(COMBINATOR_MODULE)
    compose = getattr(combinators, "make_composition", None) or combinators.make_basic_composition
    try:
        composed = compose([measurement] * size)
    except Exception:  # OpenDPException: a measure without composition (e.g. a privacy profile)
        return [measurement(data) for _ in range(size)]
    return list(composed(data))
