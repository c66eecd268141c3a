"""Audit configs: a TOML file or a dict, validated into a frozen :class:`AuditConfig`.

The fields are docs/design.md's "Contract: config".  Every error is a
:class:`ConfigError` whose message names the field path (``claims[1].alpha``),
the value found and what would fix it; ``capaudit`` prints it and exits 2.

User mechanisms (``[mechanism] callable = "module:function"``) are imported
with the config file's directory and the current directory at the front of
``sys.path``, so a module next to the config (``examples/my_mechanism.py``
beside ``examples/custom.toml``) is found without installing it.  A config
runs the code it names (a trust boundary): that import happens only after the
rest of the config is valid, and only for ``callable``; built-in names and
library adapters never import from those folders.
"""

from __future__ import annotations

import copy
import difflib
import importlib.util
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attacks.vocabulary import DIVERGENCES
from audit.families import FAMILIES, PROFILES, Family
from audit.mechanisms.compose import MAPS
from audit.neighbours import (
    DEFAULT_COUNT, MAX_RECORD, RELATIONS, SPEC_FIELDS, STRATEGIES, check_neighbours, check_spec,
)
from audit.on_average import DIVERGENCES as ON_AVERAGE_DIVERGENCES
from audit.on_average import MIN_PAIRS
from audit.validation import as_numbers, is_number

if TYPE_CHECKING:
    from attacks.staged import StageSizes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

BACKENDS = {"threading": None, "loky": None, "dask": ("distributed", "dask"), "ray": ("ray", "ray")}
"""Backend name -> (module it needs, capaudit extra that installs it), None for joblib's own."""
MIN_SAMPLES = 100
"""Smallest n_samples: the held-out split must hold enough points for a confidence interval."""
MAX_SAMPLES = 100_000_000
"""Largest n_samples: outputs are held in memory (8 bytes a coordinate, both datasets of every pair)."""
MIN_HELD_OUT = 30
"""Fewest held-out outputs per dataset at any confidence: the usual floor for the normal
approximation that the delta-method intervals of kl / renyi / ipm rest on."""
RESOLVED_MASS = 0.1
"""A held-out split must bound, at the audit's confidence, the probability of a set that none of
its points falls in below this mass (see :func:`min_held_out`)."""
MIN_ALPHA = 1.1
"""Smallest Renyi order: the Renyi objective is a moment of order beta = alpha / (alpha - 1) of
the witness on Q (11 at alpha = 1.1, 101 at 1.01); beyond ~10 a handful of held-out points
carries the whole moment and the estimates are far below any divergence (docs/benchmarks.md,
"Measurements behind constants")."""
MAX_ALPHA = 1000.0
"""Largest Renyi order: beyond it the order is the max-divergence in all but name (use dp)."""
MAX_REASON = 2000
"""Longest ``[[claims]] reason`` (text shown in report.md)."""

_FIELDS = {
    "": ("mechanism", "pairs", "neighbours", "claims", "checks", "attacks", "run"),
    "mechanism": ("name", "callable", "params"),
    "pairs": ("d", "d_prime", "relation"),
    "neighbours": SPEC_FIELDS,
    "claims": ("divergence", "alpha", "function_class", "epsilon", "delta", "on_average", "epsilons", "deltas", "profile",
               "reason", "from"),
    "attacks": ("classes", "n_samples", "confidence", "train_fraction", "class_params", "coupled", "policy", "engine", "stages",
                "max_outputs", "tolerance", "representation"),
    "run": ("seed", "n_jobs", "backend", "sample_timeout", "max_seconds"),
}
DEFAULT_CLASSES = ("linear", "poly2", "poly3", "tree3", "atoms", "floatbits")


class ConfigError(ValueError):
    """An audit config is invalid; the message names the field, the value found and the fix."""


@dataclass(frozen=True)
class MechanismSpec:
    """``[mechanism]``: a registry ``name`` or a user ``callable``, with its ``params``."""

    name: str | None
    callable: str | Callable[..., Any] | None
    params: Mapping[str, Any]
    base_dir: Path

    def build(self):
        """Build the mechanism (:func:`audit.mechanisms.make_mechanism`), user modules found from ``base_dir``."""
        from audit.mechanisms import make_mechanism

        if self.callable is None:  # built-ins and adapters never import from the config's folder
            return make_mechanism(self.name, dict(self.params))
        with user_import_path(self.base_dir):
            return make_mechanism(callable=self.callable, params=dict(self.params))


@dataclass(frozen=True)
class Claim:
    """One ``[[claims]]`` entry: Gamma^H(M(D), M(D')) <= epsilon for H = ``function_class``.

    ``alpha`` is a tuple of Renyi orders for ``renyi`` and ``(None,)`` otherwise;
    ``delta`` is used by ``dp`` only.  ``on_average``: the claim bounds the
    mean over ``[neighbours] strategy = "on-average"`` pairs instead of every
    pair (:mod:`audit.on_average`; kl and renyi only).  A curve claim (``gdp``,
    ``zcdp``, ``profile``) is never a ``Claim``: :func:`load_config` expands
    it into its members, dp and renyi claims (:mod:`audit.families`).
    """

    divergence: str
    function_class: str
    epsilon: float
    alpha: tuple[float | None, ...] = (None,)
    delta: float = 0.0
    on_average: bool = False


@dataclass(frozen=True)
class AttackSpec:
    """``[attacks]``: the adversaries' classes, sample size, audit confidence and class parameters.

    ``coupled``: draw each pair's outputs on d and d' from the same random
    numbers (common random numbers) and use the paired intervals
    (:mod:`audit.sampling`, :mod:`attacks.paired_ratio`).

    ``policy``: which candidates (pair x direction x class) get a confirmed
    row (:mod:`audit.engine`): ``"best"`` (one statistic per claim from the
    staged search of :mod:`attacks.staged`, whose ``stages`` shares split
    ``n_samples``) or ``"every"`` (every candidate, ``train_fraction`` of
    ``n_samples`` training it, the rest confirming it); unset,
    :func:`default_policy`.

    ``representation``: audit the representation layer too (the classes that
    read how outputs are stored, ``floatbits``; :attr:`attacks.classes.FunctionClass.layer`);
    false for a claim about the released values only, which drops those
    classes from ``classes``.

    ``sequential``: the ``best`` policy without ``n_samples`` in the config
    (:mod:`attacks.sequential`): rounds of growing budgets until each claim
    is decided (a violation, or an excess of ``tolerance`` over the claim
    detectable with probability 0.8) or ``max_outputs`` outputs (all of a
    claim's searches, every pair, dataset and stage) or ``[run]
    max_seconds`` (unset by default: the budget is counted in outputs, so the
    numbers depend on the config and seed only) are reached.  False for a
    fixed design (``n_samples``).
    """

    classes: tuple[str, ...] = DEFAULT_CLASSES
    n_samples: int = 10_000
    confidence: float = 0.95
    train_fraction: float = 0.5
    class_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    coupled: bool = False
    policy: str = "best"
    stages: Mapping[str, float] | None = None
    sequential: bool = False
    max_outputs: int = 4_000_000
    tolerance: float = 0.1
    representation: bool = True

    @property
    def stage_sizes(self) -> StageSizes:
        """Outputs per dataset of each stage: ``stages`` of ``n_samples`` (best), or its train / held-out split
        (every: no screen, no check)."""
        from attacks.staged import StageSizes

        if self.stages is None:
            return StageSizes.from_split(self.n_samples, self.train_fraction)
        return StageSizes.from_budget(self.n_samples, self.stages)

    @property
    def held_out(self) -> int:
        """Outputs per dataset that score the final statistic: the confirm stage's."""
        return self.stage_sizes.confirm


@dataclass(frozen=True)
class RunSpec:
    """``[run]``: the audit's seed, joblib's n_jobs and backend, each pair's sampling time limit (seconds), and
    the wall time after which a sequential audit stops looking (``max_seconds``; None, the default: no wall-clock
    limit, so that the numbers do not depend on the machine or its load)."""

    seed: int = 0
    n_jobs: int = 1
    backend: str = "threading"
    sample_timeout: float = 600.0
    max_seconds: float | None = None


@dataclass(frozen=True, eq=False)
class AuditConfig:
    """A validated audit config.

    Attributes
    ----------
    mechanism : MechanismSpec
    pairs : tuple of (numpy.ndarray, numpy.ndarray)
        Explicit neighbouring datasets (d, d'); empty when ``neighbours`` is set
        or when the built-in mechanism's ``default_pairs()`` are used.
    neighbours : mapping or None
        ``[neighbours]`` options for :func:`audit.neighbours.make_pairs`.
    claims : tuple of Claim
    attacks : AttackSpec
    run : RunSpec
    raw : dict
        The config as given (after command-line overrides), for results.json.
    checks : tuple of CheckSpec
        ``[[checks]]`` entries: CBDP's theorems as audits (:mod:`audit.checks`); empty by default.
    """

    mechanism: MechanismSpec
    pairs: tuple[tuple[np.ndarray, np.ndarray], ...]
    neighbours: Mapping[str, Any] | None
    claims: tuple[Claim, ...]
    attacks: AttackSpec
    run: RunSpec
    raw: Mapping[str, Any]
    checks: tuple[CheckSpec, ...] = ()
    claim_distance: float | int | None = None
    """``d_in`` of the audited pairs when a claim is read from the library's privacy map, else None."""


def load_config(
    source: str | os.PathLike | Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> AuditConfig:
    """Read and validate an audit config.

    Parameters
    ----------
    source : path or mapping
        A TOML file (docs/design.md, "Contract: config") or the same structure as a dict.
    overrides : mapping, optional
        ``[run]`` values that replace the config's (``seed``, ``n_jobs``,
        ``backend``; None values are ignored): the command line's options.

    Returns
    -------
    AuditConfig

    Raises
    ------
    ConfigError
        Naming the field path, the value found and the fix.
    """
    try:
        raw, base_dir = _read(source)
        run = dict(_table(raw, "run", "run"))
        run.update({key: value for key, value in (overrides or {}).items() if value is not None})
        if run:
            raw["run"] = run
        return _validate(raw, base_dir)
    except RecursionError:
        raise ConfigError(
            "config: nested too deeply to read (tables or arrays within each other hundreds of levels deep); "
            "a config needs at most a few levels, e.g. [[pairs]] d = [[0.0], [1.0]]."
        ) from None


def _read(source: str | os.PathLike | Mapping[str, Any]) -> tuple[dict, Path]:
    """The raw config and the directory user mechanisms are imported from."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), Path.cwd()
    path = Path(source)
    try:
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist.") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(path)!r} is a directory; give the path of a .toml file.") from None
    except OSError as error:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {error.strerror or error}.") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {_one_line(error)}.") from None
    return raw, path.resolve().parent


def _validate(raw: dict, base_dir: Path) -> AuditConfig:
    _check_fields(raw, "", "the config")
    if "mechanism" not in raw:
        raise ConfigError(
            'config: missing required table [mechanism] (name = "laplace" or callable = "module:function").'
        )
    mechanism = _mechanism(_table(raw, "mechanism", "mechanism"), base_dir)
    if callable(mechanism.callable):  # a function object (Python API): results.json records its name
        from audit.mechanisms.registry import function_name

        raw["mechanism"] = dict(raw["mechanism"], callable=function_name(mechanism.callable))
    if "pairs" in raw and "neighbours" in raw:
        raise ConfigError("config: give either [[pairs]] or [neighbours], not both.")
    entries = _array_of_tables(raw, "pairs")
    pairs = tuple(_pair(entry, f"pairs[{i}]") for i, entry in enumerate(entries))
    if pairs:  # plain lists, so that results.json can record the config as run
        raw["pairs"] = [
            {**entry, "d": d.tolist(), "d_prime": d_prime.tolist()} for entry, (d, d_prime) in zip(entries, pairs)
        ]
    neighbours = _neighbours(_table(raw, "neighbours", "neighbours")) if "neighbours" in raw else None
    if "pairs" in raw and not pairs:
        raise ConfigError("pairs: the list is empty; give at least one [[pairs]] entry with d and d_prime.")
    if not pairs and neighbours is None and mechanism.callable is not None:
        raise ConfigError(
            "pairs: missing required field for a user mechanism (it has no default neighbours); "
            "add [[pairs]] entries with d and d_prime, or a [neighbours] table."
        )
    entries, claim_distance = _library_claims(raw, mechanism, pairs, neighbours)
    # a curve claim (gdp, zcdp, profile) is audited as its members, ordinary dp / renyi claims (audit.families)
    members = [(f"claims[{i}]", claim) for i, entry in enumerate(entries) for claim in _claims_of(entry, f"claims[{i}]")]
    claims = tuple(claim for _, claim in members)
    _check_on_average(claims, neighbours)
    attacks = _attacks(_table(raw, "attacks", "attacks"), on_average=any(claim.on_average for claim in claims))
    checks = _checks(raw, mechanism, attacks)
    if not claims and not checks:
        raise ConfigError(
            "claims: missing required field; add at least one [[claims]] entry (divergence, function_class, epsilon) "
            "or a [[checks]] entry (property = \"sequential\", ...)."
        )
    for path, claim in members:
        _check_refutable(claim, attacks, path)
    config = AuditConfig(
        mechanism=mechanism,
        pairs=pairs,
        neighbours=neighbours,
        claims=claims,
        attacks=attacks,
        run=_run(_table(raw, "run", "run")),
        raw=raw,
        checks=checks,
        claim_distance=claim_distance,
    )
    if mechanism.callable is not None:  # user code runs last, once the rest of the config is valid
        _build(mechanism)
    if isinstance((neighbours or {}).get("distribution"), str):
        _import_distribution(neighbours["distribution"], base_dir)
    return config


def _library_claims(raw: dict, mechanism: MechanismSpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                    neighbours: Mapping[str, Any] | None) -> tuple[list[dict], float | int | None]:
    """The ``[[claims]]`` tables, those with ``from = "library"`` read from the mechanism's privacy map
    (:mod:`audit.library_claims`; their source becomes the reason in ``raw``), and the pairs' ``d_in`` (None
    without such claims)."""
    from audit.library_claims import claim_distance, library_claim_table, library_reason

    entries = _array_of_tables(raw, "claims")
    if not any("from" in entry for entry in entries):
        return entries, None
    if mechanism.callable is not None:
        raise ConfigError('claims: from = "library" reads a library\'s privacy map; a callable states none. Use '
                          'name = "opendp.measurement", or give divergence and epsilon.')
    built = mechanism.build()
    try:
        d_in = claim_distance(built, pairs, neighbours)
    except ValueError as error:
        raise ConfigError(f"claims: {_one_line(error)}") from None
    resolved = []
    for i, entry in enumerate(entries):
        if "from" not in entry:
            resolved.append(entry)
            continue
        _check_fields(entry, "claims", f"claims[{i}]")
        try:
            table, source = library_claim_table(entry, f"claims[{i}]", built, d_in)
        except ValueError as error:
            raise ConfigError(_one_line(error)) from None
        raw["claims"][i] = {**entry, **table, "reason": library_reason(entry, source)}  # the claim as audited
        resolved.append(table)
    return resolved, d_in


def _check_fields(table: Mapping, section: str, where: str) -> None:
    known = _FIELDS[section]
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"accepted fields: {', '.join(known)}."
            raise ConfigError(f"{where}: unknown field {key!r}; {hint}")


def _one_line(error: Exception) -> str:
    """An error's message on one line (numpy reprs and user mechanisms' messages span several)."""
    return " ".join(str(error).split())


def _table(raw: Mapping, key: str, path: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: must be a table ([{key}] or {key} = {{...}}). Found {value!r}.")
    return dict(value)


def _array_of_tables(raw: Mapping, key: str) -> list[dict]:
    value = raw.get(key, [])
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(entry, Mapping) for entry in value):
        raise ConfigError(f"{key}: must be an array of tables ([[{key}]] entries). Found {value!r}.")
    return [dict(entry) for entry in value]


def _required(table: Mapping, key: str, path: str, hint: str) -> Any:
    if key not in table:
        raise ConfigError(f"{path}.{key}: missing required field; {hint}.")
    return table[key]


def _number(value: Any, path: str, *, integer: bool = False) -> float | int:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or (not integer and not math.isfinite(value)):
        kind = "an integer" if integer else "a finite number"
        raise ConfigError(f"{path}: must be {kind} (unquoted; true / false are not numbers). Found {value!r}.")
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{path}: must be a string. Found {value!r}.")
    return value


def _choice(value: Any, accepted: tuple[str, ...], path: str) -> str:
    value = _string(value, path)
    if value not in accepted:
        close = difflib.get_close_matches(value, accepted, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{path}: unknown value {value!r}{hint}; accepted: {', '.join(accepted)}.")
    return value


def _mechanism(table: dict, base_dir: Path) -> MechanismSpec:
    _check_fields(table, "mechanism", "mechanism")
    name, target = table.get("name"), table.get("callable")
    if (name is None) == (target is None):
        raise ConfigError(
            "mechanism: give exactly one of name (a built-in: see `capaudit mechanisms`) or "
            f"callable = \"module:function\". Found name={name!r}, callable={target!r}."
        )
    params = table.get("params", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"mechanism.params: must be a table, e.g. {{ epsilon = 1.0 }}. Found {params!r}.")
    spec = MechanismSpec(
        name=None if name is None else _string(name, "mechanism.name"),
        callable=target if target is None or callable(target) else _string(target, "mechanism.callable"),
        params=dict(params),
        base_dir=base_dir,
    )
    if spec.callable is None:  # a built-in runs no user code: check it early
        _build(spec)
    return spec


def _build(spec: MechanismSpec) -> None:
    """Build the mechanism once to check it; a ConfigError names the field."""
    try:
        spec.build()
    except (TypeError, ValueError) as error:
        raise ConfigError(f"mechanism.{'name' if spec.callable is None else 'callable'}: {_one_line(error)}") from None


def _import_distribution(target: str, base_dir: Path) -> None:
    """Import an on-average data distribution's user code once to check it; a ConfigError names the field."""
    from audit.data_distributions import make_sampler

    try:
        with user_import_path(base_dir):
            make_sampler(target)
    except ValueError as error:
        raise ConfigError(_one_line(error)) from None


@contextmanager
def user_import_path(base_dir: Path) -> Iterator[None]:
    """Put ``base_dir`` and the current directory at the front of ``sys.path`` for the duration."""
    added = [str(directory) for directory in (base_dir, Path.cwd()) if str(directory) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for directory in added:
            sys.path.remove(directory)


def _dataset(value: Any, path: str) -> np.ndarray:
    try:
        array = as_numbers(value, path)
    except ValueError:
        raise ConfigError(f"{path}: must be an array of numbers, e.g. [[0.0], [1.0]]. Found {value!r}.") from None
    if array.ndim > 2:
        raise ConfigError(
            f"{path}: must be a list of records (a list of numbers, or of lists of numbers), "
            f"not {array.ndim} levels deep. Found {value!r}."
        )
    if array.size == 0 or not np.all(np.abs(array) <= MAX_RECORD):
        raise ConfigError(
            f"{path}: must be a non-empty array of finite numbers within +-{MAX_RECORD:g} (larger values overflow "
            f"the mechanism's sums and the attacks' squares). Found {value!r}."
        )
    array.setflags(write=False)
    return array


def _pair(table: dict, path: str) -> tuple[np.ndarray, np.ndarray]:
    """A [[pairs]] entry; with ``relation`` the two datasets must be neighbours under it."""
    _check_fields(table, "pairs", path)
    hint = "each [[pairs]] entry needs d and d_prime (neighbouring datasets)"
    d = _dataset(_required(table, "d", path, hint), f"{path}.d")
    d_prime = _dataset(_required(table, "d_prime", path, hint), f"{path}.d_prime")
    if "relation" in table:
        relation = _choice(table["relation"], RELATIONS, f"{path}.relation")
        try:
            check_neighbours(d, d_prime, relation)
        except ValueError as error:
            raise ConfigError(
                f"{path}: {_one_line(error)} Give neighbouring datasets, or drop relation to audit a pair at "
                "that distance (the report states it)."
            ) from None
    return d, d_prime


def _neighbours(table: dict) -> dict:
    _check_fields(table, "neighbours", "neighbours")
    _choice(_required(table, "strategy", "neighbours", "e.g. strategy = \"random\""), STRATEGIES, "neighbours.strategy")
    try:
        check_spec(table)
    except ValueError as error:
        raise ConfigError(_one_line(error)) from None
    return table


def _claims_of(table: dict, path: str) -> list[Claim]:
    """A ``[[claims]]`` entry's claims: itself, or a curve claim's members (:mod:`audit.families`)."""
    _check_fields(table, "claims", path)
    accepted = DIVERGENCES + FAMILIES
    divergence = _choice(_required(table, "divergence", path, f"one of {', '.join(accepted)}"), accepted,
                         f"{path}.divergence")
    if divergence not in FAMILIES:
        for key in ("epsilons", "deltas", "profile"):
            if key in table:
                raise ConfigError(f'{path}.{key}: only divergence = "gdp" or "profile" takes {key}. '
                                  f"Found {table[key]!r}.")
        return [_claim(table, path)]
    family = Family.from_table(_family_table(table, divergence, path))
    return [Claim(divergence=m.divergence, function_class=family.function_class, epsilon=m.epsilon,
                  alpha=(m.alpha,), delta=m.delta) for m in family.members()]


_FAMILY_FIELDS = {
    "gdp": ("epsilon", "epsilons"),
    "zcdp": ("epsilon", "alpha"),
    "profile": ("epsilon", "epsilons", "deltas", "profile"),
}
"""Fields each curve claim takes besides divergence and function_class."""


def _family_table(table: dict, divergence: str, path: str) -> dict:
    """A curve claim's fields checked: the table as given (gdp: mu, zcdp: rho and orders, profile: a law or a table)."""
    for key in table:
        if key not in ("divergence", "function_class", "reason") + _FAMILY_FIELDS[divergence]:
            takers = [name for name, fields in _FAMILY_FIELDS.items() if key in fields]
            hint = f"it applies to {' / '.join(takers)} claims" if takers else "curve claims have no delta or on_average"
            raise ConfigError(f"{path}.{key}: a {divergence} claim takes no {key}; {hint}. Found {table[key]!r}.")
    _class_name(_required(table, "function_class", path, 'e.g. function_class = "all"'), f"{path}.function_class")
    _check_reason(table, path)
    words = {"gdp": "mu, e.g. epsilon = 1.0", "zcdp": "rho, e.g. epsilon = 0.5",
             "profile": 'the law\'s parameter, e.g. profile = "gaussian" with epsilon = 1.0 (its mu)'}
    table_form = divergence == "profile" and "profile" not in table
    if table_form:
        if "epsilon" in table or "deltas" not in table or "epsilons" not in table:
            raise ConfigError(
                f'{path}: a profile claim gives either profile = "gaussian" or "laplace" with epsilon (the law\'s '
                "parameter), or a table epsilons = [...] with deltas = [...] (no epsilon). "
                f"Found fields {', '.join(sorted(table))}."
            )
    else:
        value = float(_number(_required(table, "epsilon", path, words[divergence]), f"{path}.epsilon"))
        if value <= 0:
            raise ConfigError(f"{path}.epsilon: must be > 0 ({words[divergence].split(',')[0]}). Found {value!r}.")
    if "profile" in table:
        _choice(table["profile"], tuple(PROFILES), f"{path}.profile")
        if "deltas" in table:
            raise ConfigError(f"{path}.deltas: a named profile computes its deltas; remove deltas or profile.")
    if "alpha" in table:
        orders = table["alpha"] if isinstance(table["alpha"], list) else [table["alpha"]]
        if not orders:
            raise ConfigError(f"{path}.alpha: the list is empty; give orders > 1, e.g. alpha = [1.5, 2, 4].")
        for i, order in enumerate(orders):
            _alpha(order, f"{path}.alpha[{i}]")
    for key, low, high in (("epsilons", 0.0, math.inf), ("deltas", 0.0, 1.0)):
        if key not in table:
            continue
        values = table[key]
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}.{key}: must be a non-empty list of numbers, e.g. [0.5, 1.0, 2.0]. "
                              f"Found {values!r}.")
        for i, value in enumerate(values):
            value = float(_number(value, f"{path}.{key}[{i}]"))
            if not low <= value < high:
                raise ConfigError(f"{path}.{key}[{i}]: must be in [{low:g}, {high:g}). Found {value!r}.")
    if table_form and len(table["epsilons"]) != len(table["deltas"]):
        raise ConfigError(f"{path}.deltas: one delta per epsilon; found {len(table['deltas'])} deltas for "
                          f"{len(table['epsilons'])} epsilons.")
    return table


def _claim(table: dict, path: str) -> Claim:
    divergence = table["divergence"]
    function_class = _class_name(
        _required(table, "function_class", path, "e.g. function_class = \"linear\" (or \"all\")"),
        f"{path}.function_class",
    )
    epsilon = float(_number(_required(table, "epsilon", path, "the claimed value, e.g. epsilon = 0.5"), f"{path}.epsilon"))
    if epsilon < 0:
        raise ConfigError(f"{path}.epsilon: a divergence bound must be >= 0. Found {epsilon!r}.")
    alpha: tuple[float | None, ...] = (None,)
    if divergence == "renyi":
        values = _required(table, "alpha", path, "Renyi claims need Renyi orders, e.g. alpha = [2, 4, 8]")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{path}.alpha: the list is empty; give orders > 1, e.g. alpha = [2, 4].")
        alpha = tuple(_alpha(value, f"{path}.alpha") for value in values)
    elif "alpha" in table:
        raise ConfigError(
            f'{path}.alpha: only Renyi claims take alpha; remove it or set divergence = "renyi". '
            f"Found {table['alpha']!r}."
        )
    delta = 0.0
    if "delta" in table:
        if divergence != "dp":
            raise ConfigError(f"{path}.delta: only dp claims take delta. Found {table['delta']!r}.")
        delta = float(_number(table["delta"], f"{path}.delta"))
        if not 0.0 <= delta < 1.0:
            raise ConfigError(f"{path}.delta: must be in [0, 1). Found {delta!r}.")
    _check_reason(table, path)
    on_average = table.get("on_average", False)
    if not isinstance(on_average, bool):
        raise ConfigError(f"{path}.on_average: must be true or false. Found {on_average!r}.")
    if on_average and divergence not in ON_AVERAGE_DIVERGENCES:
        raise ConfigError(
            f"{path}.on_average: on-average claims bound an average KL or Renyi divergence (docs/theory.md "
            f'section 8); use divergence = "kl" or "renyi", or drop on_average. Found divergence {divergence!r}.'
        )
    return Claim(divergence=divergence, function_class=function_class, epsilon=epsilon, alpha=alpha, delta=delta,
                 on_average=on_average)


def _check_reason(table: Mapping[str, Any], path: str) -> None:
    """``reason``: one sentence of text (only the report reads it, off the raw config)."""
    reason = table.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ConfigError(f"{path}.reason: one sentence of text, at most {MAX_REASON} characters. "
                          f"Found {str(reason)[:80]!r}{'...' if len(str(reason)) > 80 else ''}.")


def _check_on_average(claims: Sequence[Claim], neighbours: Mapping[str, Any] | None) -> None:
    """On-average claims need iid pairs from ``[neighbours] strategy = "on-average"``, at least MIN_PAIRS of them."""
    for i, claim in enumerate(claims):
        if not claim.on_average:
            continue
        strategy = None if neighbours is None else neighbours["strategy"]
        if strategy != "on-average":
            raise ConfigError(
                f"claims[{i}].on_average: an on-average claim averages over pairs drawn from a data distribution; "
                f'add [neighbours] strategy = "on-average" with a distribution and size. Found '
                f"{'explicit or default pairs' if strategy is None else f'strategy {strategy!r}'}."
            )
        count = neighbours.get("count", DEFAULT_COUNT)
        if count < MIN_PAIRS:
            raise ConfigError(
                f"neighbours.count: an on-average claim needs at least {MIN_PAIRS} pairs for an interval over pairs "
                f"(10 or more recommended). Found {count!r}."
            )


def _alpha(value: Any, path: str) -> float:
    """A Renyi order in [MIN_ALPHA, MAX_ALPHA] (see their docstrings for why)."""
    value = float(_number(value, path))
    if value <= 1.0:
        raise ConfigError(
            f'{path}: Renyi orders must be > 1 (alpha = 1 is KL: use divergence = "kl"). Found {value!r}.'
        )
    if value < MIN_ALPHA:
        raise ConfigError(
            f"{path}: Renyi orders must be at least {MIN_ALPHA}: the estimate is a moment of order "
            f"alpha / (alpha - 1) = {value / (value - 1):.3g} of the witness, which a finite sample cannot "
            f"estimate stably (above {MIN_ALPHA / (MIN_ALPHA - 1):.3g}); use alpha >= {MIN_ALPHA}, "
            f'or divergence = "kl" for the alpha -> 1 limit. Found {value!r}.'
        )
    if value > MAX_ALPHA:
        raise ConfigError(
            f"{path}: Renyi orders must be at most {MAX_ALPHA:g}; for the alpha -> infinity limit claim "
            f'divergence = "dp". Found {value!r}.'
        )
    return value


def _class_name(value: Any, path: str) -> str:
    from attacks.classes import parse_function_class

    value = _string(value, path)
    try:
        parse_function_class(value)
    except ValueError as error:
        raise ConfigError(f"{path}: {_one_line(error)}") from None
    return value


def _layers(table: dict, classes: tuple[str, ...], default: bool) -> tuple[str, ...]:
    """``classes`` less the representation layer's when ``[attacks] representation = false`` (a claim about the
    released values only); a class list that names one beside the switch is refused."""
    from attacks.classes import REPRESENTATION, parse_function_class

    representation = table.get("representation", default)
    if not isinstance(representation, bool):
        raise ConfigError(f"attacks.representation: must be true or false (a TOML boolean, unquoted). "
                          f"Found {representation!r}.")
    if representation:
        return classes
    stored = [name for name in classes if parse_function_class(name).layer == REPRESENTATION]
    if stored and "classes" in table:
        raise ConfigError(f"attacks.representation: false leaves out the classes that read how outputs are stored, "
                          f"but attacks.classes lists {', '.join(stored)}; remove them or the switch. "
                          f"Found representation = false.")
    return tuple(name for name in classes if name not in stored)


def _attacks(table: dict, on_average: bool = False) -> AttackSpec:
    _check_fields(table, "attacks", "attacks")
    defaults = AttackSpec()
    classes = table.get("classes", list(defaults.classes))
    if not isinstance(classes, list) or not classes:
        raise ConfigError(
            f'attacks.classes: must be a non-empty list of class names, e.g. ["linear", "poly2"]. Found {classes!r}.'
        )
    classes = tuple(_class_name(name, f"attacks.classes[{i}]") for i, name in enumerate(classes))
    if "all" in classes:
        raise ConfigError("attacks.classes: \"all\" is for claims only (no attack fits every function); remove it.")
    classes = _layers(table, classes, defaults.representation)
    n_samples = _number(table.get("n_samples", defaults.n_samples), "attacks.n_samples", integer=True)
    if not MIN_SAMPLES <= n_samples <= MAX_SAMPLES:
        raise ConfigError(
            f"attacks.n_samples: must be at least {MIN_SAMPLES} per dataset (the held-out split needs enough points "
            f"for a confidence interval) and at most {MAX_SAMPLES:,} (outputs are held in memory). Found {n_samples!r}."
        )
    confidence = float(_number(table.get("confidence", defaults.confidence), "attacks.confidence"))
    if not 0.5 <= confidence < 1.0:
        raise ConfigError(f"attacks.confidence: must be in [0.5, 1), e.g. 0.95. Found {confidence!r}.")
    train_fraction = float(_number(table.get("train_fraction", defaults.train_fraction), "attacks.train_fraction"))
    if not 0.0 < train_fraction < 1.0:
        raise ConfigError(f"attacks.train_fraction: must be in (0, 1), e.g. 0.5. Found {train_fraction!r}.")
    _check_held_out(int(n_samples), train_fraction, confidence)
    class_params = table.get("class_params", {})
    if not isinstance(class_params, Mapping) or not all(isinstance(v, Mapping) for v in class_params.values()):
        raise ConfigError(
            "attacks.class_params: must map class names to tables, e.g. { mlp = { width = 16 } }. "
            f"Found {class_params!r}."
        )
    for name, params in class_params.items():
        if name not in classes:
            raise ConfigError(f"attacks.class_params: {name!r} is not in attacks.classes ({', '.join(classes)}).")
        _check_class_params(name, params)
    coupled = table.get("coupled", defaults.coupled)
    if not isinstance(coupled, bool):
        raise ConfigError(f"attacks.coupled: must be true or false (a TOML boolean, unquoted). Found {coupled!r}.")
    policy, stages = _policy(table, int(n_samples), on_average, confidence)
    sequential, max_outputs, tolerance = _sequential(table, policy, stages, defaults)
    return AttackSpec(
        classes=classes,
        n_samples=int(n_samples),
        confidence=confidence,
        train_fraction=train_fraction,
        class_params={name: dict(params) for name, params in class_params.items()},
        coupled=coupled,
        policy=policy,
        stages=stages,
        sequential=sequential,
        max_outputs=max_outputs,
        tolerance=tolerance,
        representation=table.get("representation", defaults.representation),
    )


def _sequential(table: dict, policy: str, stages: Mapping[str, float] | None,
                defaults: AttackSpec) -> tuple[bool, int, float]:
    """Whether the audit is sequential (policy ``best``, no ``n_samples``), its ``max_outputs`` and ``tolerance``."""
    from attacks.sequential import FIRST_BUDGET
    from attacks.staged import StageSizes

    sequential = policy == "best" and "n_samples" not in table
    for name in ("max_outputs", "tolerance"):
        if name in table and not sequential:
            raise ConfigError(
                f"attacks.{name}: only an audit that stops by itself has one (policy 'best' without n_samples); "
                f"remove {name} or n_samples. Found {table[name]!r}."
            )
    max_outputs = _number(table.get("max_outputs", defaults.max_outputs), "attacks.max_outputs", integer=True)
    if not 1_000 <= max_outputs <= 10**12:
        raise ConfigError(f"attacks.max_outputs: must be from 1000 to 10^12 outputs, e.g. 4000000. Found {max_outputs!r}.")
    tolerance = float(_number(table.get("tolerance", defaults.tolerance), "attacks.tolerance"))
    if not 0.0 < tolerance < math.inf:
        raise ConfigError(f"attacks.tolerance: must be a positive number (in the claim's units), e.g. 0.1. "
                          f"Found {tolerance!r}.")
    if sequential:
        try:
            StageSizes.from_budget(FIRST_BUDGET, stages)
        except ValueError as error:
            raise ConfigError(f"attacks.stages: the first round of {FIRST_BUDGET} outputs: {error}") from None
    return sequential, int(max_outputs), tolerance


POLICIES = ("best", "every")
MIN_STAGED_BUDGET = 200
"""The smallest ``n_samples`` the default stage shares split into stages of at least 20 outputs."""


def default_policy(n_samples: int, on_average: bool, train_fraction: bool) -> str:
    """The policy of a config that names none (docs/config.md, ``[attacks] policy``).

    ``"best"``, unless the config asks for what only ``"every"`` does: an
    on-average claim (every pair's estimate), a ``train_fraction`` (one
    train / held-out split per row), or a budget below
    :data:`MIN_STAGED_BUDGET` (too small for four stages).
    """
    return "every" if on_average or train_fraction or n_samples < MIN_STAGED_BUDGET else "best"


def _policy(table: dict, n_samples: int, on_average: bool, confidence: float) -> tuple[str, dict[str, float] | None]:
    """``attacks.policy`` (unset: :func:`default_policy`) and, for ``"best"``, ``attacks.stages`` (shares of
    n_samples per stage, the confirm stage at least :func:`min_held_out` outputs)."""
    from attacks.staged import DEFAULT_SHARES, StageSizes

    if "engine" in table:
        raise ConfigError(
            'attacks.engine: replaced by attacks.policy ("best" for engine = "staged", "every" for engine = "rows"); '
            f"rename the field. Found engine = {table['engine']!r}."
        )
    policy = table.get("policy", default_policy(n_samples, on_average, "train_fraction" in table))
    if policy not in POLICIES:
        raise ConfigError(f"attacks.policy: must be one of {', '.join(map(repr, POLICIES))}. Found {policy!r}.")
    if "stages" in table and policy != "best":
        raise ConfigError('attacks.stages: only policy = "best" has a screen and a check; set attacks.policy = '
                          '"best" or remove it.')
    if policy == "every":
        return policy, None
    if on_average:
        raise ConfigError(
            'attacks.policy: "best" confirms one statistic of the most distinguishable pair, a worst-case '
            'statistic; an on-average claim needs every pair\'s estimate. Use policy = "every" for on-average claims. '
            'Found "best".'
        )
    if "train_fraction" in table:
        raise ConfigError(
            'attacks.train_fraction: policy = "best" has no train / held-out split per row (attacks.stages splits '
            'n_samples, its confirm stage is the held-out sample); remove train_fraction or set policy = "every". '
            f"Found {table['train_fraction']!r}."
        )
    stages = table.get("stages", DEFAULT_SHARES)
    if not isinstance(stages, Mapping) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                              for v in stages.values()):
        raise ConfigError(
            "attacks.stages: must map screen, train, check and confirm to numbers, e.g. "
            f"{{ screen = 0.05, train = 0.15, check = 0.1, confirm = 0.7 }}. Found {stages!r}."
        )
    shares = {key: float(value) for key, value in stages.items()}
    try:
        confirm = StageSizes.from_budget(n_samples, shares).confirm
    except ValueError as error:
        raise ConfigError(f"attacks.stages: {error}") from None
    if confirm < min_held_out(confidence):
        raise ConfigError(
            f"attacks.stages: confirm = {shares['confirm']!r} of n_samples = {n_samples} leaves {confirm} confirm "
            f"outputs per dataset; an audit at confidence {confidence!r} needs at least {min_held_out(confidence)}. "
            "Raise the confirm share or n_samples."
        )
    return policy, shares


def held_out(n_samples: int, train_fraction: float) -> int:
    """Held-out outputs per dataset: n_samples minus the train split of :func:`attacks.estimate_divergence`."""
    return n_samples - min(max(int(round(train_fraction * n_samples)), 1), n_samples - 1)


def min_held_out(confidence: float) -> int:
    """Fewest held-out outputs per dataset for an audit at ``confidence``.

    max(``MIN_HELD_OUT``, ceil(log(1 - c) / log(1 - ``RESOLVED_MASS``))). The
    second term: when none of m held-out points falls in a set, the exact
    (Clopper-Pearson) upper confidence bound on its probability is
    1 - (1 - c)^(1/m), which is below 0.1 only for m >= log(1 - c) / log(0.9)
    (29 at c = 0.95, 44 at 0.99); a smaller split cannot tell a set of mass
    0.1 from an empty one, so its bounds are uninformative. The floor of 30
    is for the normal approximation behind the kl / renyi / ipm intervals
    (false violations at small splits: docs/benchmarks.md, "Measurements
    behind constants").
    """
    return max(MIN_HELD_OUT, math.ceil(math.log1p(-confidence) / math.log1p(-RESOLVED_MASS)))


def _check_held_out(n_samples: int, train_fraction: float, confidence: float) -> None:
    held, needed = held_out(n_samples, train_fraction), min_held_out(confidence)
    if held < needed:
        raise ConfigError(
            f"attacks.train_fraction: {train_fraction!r} of n_samples = {n_samples} leaves {held} held-out outputs "
            f"per dataset; an audit at confidence {confidence!r} needs at least {needed} (so that a set none of "
            f"them falls in is bounded below mass {RESOLVED_MASS} at that confidence, and at least {MIN_HELD_OUT} "
            f"for the normal approximation). Lower train_fraction to at most "
            f"{math.floor(100 * (1 - needed / n_samples)) / 100} or raise n_samples to at least "
            f"{math.ceil(needed / (1 - train_fraction))}."
        )


def _check_class_params(name: str, params: Mapping[str, Any]) -> None:
    """Each entry through its class's own rule (:meth:`attacks.classes.FunctionClass.check_parameters`)."""
    from attacks.classes import parse_function_class

    function_class = parse_function_class(name)
    for key, value in params.items():
        try:
            function_class.check_parameters({key: value})
        except ValueError as error:
            raise ConfigError(f"attacks.class_params.{name}.{key}: {error}") from None


_SUGGESTED_CLASSES = ("linear", "poly2", "kernel", "mlp", "tree3", "threshold")
"""Classes a refutability error may suggest (besides the claim's own), one of each kind."""


def _check_refutable(claim: Claim, attacks: AttackSpec, path: str) -> None:
    """Raise unless some attack class can refute ``claim`` (docs/theory.md section 3), and its delta is refutable.

    An attack of class A refutes a claim about class C with divergence D only
    when A is contained in C and A's witnesses estimate D
    (``FunctionClass.is_contained_in``, ``FunctionClass.divergences``);
    without one the claim would read "pass" on no evidence at all.
    """
    from attacks.classes import parse_function_class

    claimed = parse_function_class(claim.function_class)

    def tests(name: str) -> bool:
        attack = parse_function_class(name)
        return attack.is_contained_in(claimed) and claim.divergence in attack.divergences

    if not any(tests(name) for name in attacks.classes):
        candidates = [claimed.name] * (claimed.kind != "all") + list(_SUGGESTED_CLASSES)
        would = [name for name in dict.fromkeys(candidates) if tests(name)]  # the claim's own class at least
        fix = f"add one of {', '.join(would)} to attacks.classes"
        raise ConfigError(
            f"{path}: the claim ({claim.divergence} over {claimed.name!r} <= {claim.epsilon:g}) can be refuted by no "
            f"attack in attacks.classes ({', '.join(attacks.classes)}): an attack refutes a claim only when its class "
            f"is contained in the claim's and estimates its divergence, so the audit would pass on no evidence; {fix}."
        )
    if claim.divergence == "dp":
        held = attacks.held_out
        largest = (1.0 - attacks.confidence) ** (1.0 / held)
        if claim.delta >= largest:
            raise ConfigError(
                f"{path}.delta: {claim.delta!r} cannot be refuted by this audit: even a set holding all {held} "
                f"held-out outputs bounds P(S) from below by only {largest:.6g} at confidence {attacks.confidence}, "
                f"so P(S) - delta is never shown positive. Give delta < {largest:.6g} or raise attacks.n_samples."
            )


def load_run(table: Mapping[str, Any]) -> RunSpec:
    """A ``[run]`` table alone, validated as in a config (``capaudit oakl``'s options); ConfigError names the field."""
    return _run(dict(table))


def _run(table: dict) -> RunSpec:
    _check_fields(table, "run", "run")
    defaults = RunSpec()
    seed = _number(table.get("seed", defaults.seed), "run.seed", integer=True)
    if seed < 0:
        raise ConfigError(f"run.seed: must be a non-negative integer. Found {seed!r}.")
    n_jobs = _number(table.get("n_jobs", defaults.n_jobs), "run.n_jobs", integer=True)
    if n_jobs == 0:
        raise ConfigError("run.n_jobs: must be a positive number of workers or negative (-1: all cores). Found 0.")
    backend = _choice(table.get("backend", defaults.backend), tuple(BACKENDS), "run.backend")
    needs = BACKENDS[backend]
    if needs is not None and importlib.util.find_spec(needs[0]) is None:
        from audit.mechanisms.base import install_hint

        raise ConfigError(
            f"run.backend: {backend!r} needs the {needs[0]!r} package, which is not installed; "
            f"{install_hint(needs[1])}; or use backend = \"threading\"."
        )
    timeout = float(_number(table.get("sample_timeout", defaults.sample_timeout), "run.sample_timeout"))
    if timeout <= 0:
        raise ConfigError(f"run.sample_timeout: must be a positive number of seconds, e.g. 600. Found {timeout!r}.")
    max_seconds = table.get("max_seconds", defaults.max_seconds)
    if max_seconds is not None:
        max_seconds = float(_number(max_seconds, "run.max_seconds"))
        if not 0.0 < max_seconds < math.inf:
            raise ConfigError(f"run.max_seconds: must be a positive number of seconds, e.g. 600, or left out (no "
                              f"wall-clock limit). Found {max_seconds!r}.")
    return RunSpec(seed=int(seed), n_jobs=int(n_jobs), backend=backend, sample_timeout=timeout,
                   max_seconds=max_seconds)


# --------------------------------------------------------------------------- [[checks]]

PROPERTIES = ("sequential", "parallel", "post-processing", "convexity", "pinsker", "generalization")
"""``[[checks]] property``: CBDP Thms 4, 3, 1, 2, 7 and 6 (docs/theory.md section 5, :mod:`audit.checks`)."""
_CHECK_COMMON = ("property", "mechanisms", "function_class", "n_samples")
_CHECK_FIELDS = {
    "sequential": ("divergence", "alpha", "adaptive", "d", "d_prime"),
    "parallel": ("divergence", "alpha", "d", "d_prime"),
    "post-processing": ("divergence", "alpha", "map", "d", "d_prime"),
    "convexity": ("divergence", "weight", "d", "d_prime"),
    "pinsker": ("d", "d_prime"),
    "generalization": ("n_records",),
}
"""Fields each property takes besides :data:`_CHECK_COMMON`."""
CHECK_DIVERGENCES = {
    "sequential": ("kl", "renyi"),
    "parallel": ("kl", "renyi"),
    "post-processing": ("kl", "renyi", "ipm"),
    "convexity": ("kl", "ipm"),
    "pinsker": ("kl",),
    "generalization": ("kl",),
}
"""The divergences each theorem covers (Thms 3, 4: KL and Renyi; Thm 1: f-divergences and Renyi; Thm 2: f-divergences)."""
CHECK_MECHANISMS = {"sequential": 2, "parallel": 2, "convexity": 2}
"""Mechanisms a property combines (the others take one)."""
@dataclass(frozen=True, eq=False)
class CheckSpec:
    """One ``[[checks]]`` entry: a CBDP property to measure (docs/config.md, "[[checks]]").

    ``mechanisms`` holds one or two specs (the config's ``[mechanism]`` when
    not given); ``pair`` the neighbouring datasets (None: the first
    mechanism's first default pair); ``map`` a matrix (tuple of rows) or a
    name of :data:`MAPS`.
    """

    property: str
    mechanisms: tuple[MechanismSpec, ...]
    function_class: str = "linear"
    divergence: str = "kl"
    alpha: float | None = None
    n_samples: int = 10_000
    pair: tuple[np.ndarray, np.ndarray] | None = None
    adaptive: bool = False
    map: str | tuple[tuple[float, ...], ...] | None = None
    weight: float = 0.5
    n_records: int = 10


def _checks(raw: Mapping, mechanism: MechanismSpec, attacks: AttackSpec) -> tuple[CheckSpec, ...]:
    """The validated ``[[checks]]`` entries (none by default)."""
    entries = _array_of_tables(raw, "checks")
    return tuple(_check(entry, f"checks[{i}]", mechanism, attacks) for i, entry in enumerate(entries))


def _check(table: dict, path: str, default: MechanismSpec, attacks: AttackSpec) -> CheckSpec:
    prop = _choice(_required(table, "property", path, f"one of {', '.join(PROPERTIES)}"), PROPERTIES, f"{path}.property")
    accepted = _CHECK_COMMON + _CHECK_FIELDS[prop]
    if prop == "convexity" and table.get("divergence") == "renyi":
        raise ConfigError(
            f'{path}.divergence: convexity (CBDP Thm 2) holds for f-divergences only; Renyi is not one and Renyi '
            'privacy is not convex under mixtures, so the theorem says nothing: use divergence = "kl" or "ipm". '
            "Found 'renyi'."
        )
    for key in table:
        if key not in accepted:
            takers = [name for name, fields in _CHECK_FIELDS.items() if key in fields]
            hint = f"it applies to property {' / '.join(takers)} only" if takers else f"accepted: {', '.join(accepted)}"
            raise ConfigError(f"{path}: property {prop!r} takes no field {key!r}; {hint}. Found {key} = {table[key]!r}.")
    divergence = _choice(table.get("divergence", "kl"), CHECK_DIVERGENCES[prop], f"{path}.divergence")
    alpha = None
    if divergence == "renyi":
        alpha = _alpha(_required(table, "alpha", path, "a Renyi check needs one order, e.g. alpha = 2"), f"{path}.alpha")
    elif "alpha" in table:
        raise ConfigError(f'{path}.alpha: only divergence = "renyi" takes alpha; remove it. Found {table["alpha"]!r}.')
    function_class = _check_class(table.get("function_class", "linear"), divergence, prop, f"{path}.function_class")
    n_samples = int(_number(table.get("n_samples", attacks.n_samples), f"{path}.n_samples", integer=True))
    if not MIN_SAMPLES <= n_samples <= MAX_SAMPLES:
        raise ConfigError(f"{path}.n_samples: must be from {MIN_SAMPLES} to {MAX_SAMPLES:,}. Found {n_samples!r}.")
    try:
        _check_held_out(n_samples, attacks.train_fraction, attacks.confidence)
    except ConfigError as error:
        raise ConfigError(f"{path}.n_samples: {error}") from None
    pair = None
    if "d" in table or "d_prime" in table:
        hint = "give both d and d_prime (neighbouring datasets), or neither for the mechanism's default pair"
        pair = (_dataset(_required(table, "d", path, hint), f"{path}.d"),
                _dataset(_required(table, "d_prime", path, hint), f"{path}.d_prime"))
    return CheckSpec(
        property=prop,
        mechanisms=_check_mechanisms(table, path, prop, default),
        function_class=function_class,
        divergence=divergence,
        alpha=alpha,
        n_samples=n_samples,
        pair=pair,
        adaptive=_flag(table.get("adaptive", False), f"{path}.adaptive"),
        map=_map(table, path) if prop == "post-processing" else None,
        weight=_weight(table.get("weight", 0.5), f"{path}.weight"),
        n_records=_n_records(table.get("n_records", 10), f"{path}.n_records"),
    )


def _check_class(value: Any, divergence: str, prop: str, path: str) -> str:
    """A class that estimates the check's divergence (pinsker: kl or ipm; its hypotheses are checked at run time)."""
    from attacks.classes import parse_function_class

    name = _class_name(value, path)
    if name == "all":
        raise ConfigError(f'{path}: "all" is for claims only (no attack fits every function); use e.g. "linear".')
    needs = ("ipm",) if prop == "pinsker" else (divergence,)
    if not set(needs) & set(parse_function_class(name).divergences):
        raise ConfigError(f"{path}: class {name!r} does not estimate {needs[0]!r}; use e.g. \"linear\". Found {name!r}.")
    return name


def _check_mechanisms(table: dict, path: str, prop: str, default: MechanismSpec) -> tuple[MechanismSpec, ...]:
    """The check's mechanisms: ``mechanisms = [{name, params}, ...]``, else ``[mechanism]`` (repeated)."""
    count = CHECK_MECHANISMS.get(prop, 1)
    if "mechanisms" not in table:
        return (default,) * count
    entries = table["mechanisms"]
    if not isinstance(entries, list) or len(entries) != count or not all(isinstance(e, Mapping) for e in entries):
        raise ConfigError(
            f"{path}.mechanisms: property {prop!r} takes a list of {count} table(s) "
            f"[{{ name = \"laplace\", params = {{ epsilon = 1.0 }} }}{', ...' * (count > 1)}]. Found {entries!r}."
        )
    specs = []
    for i, entry in enumerate(entries):
        where = f"{path}.mechanisms[{i}]"
        if set(entry) - {"name", "params"} or "name" not in entry:
            raise ConfigError(f"{where}: give name (a built-in or adapter) and optional params only. Found {entry!r}.")
        try:
            spec = _mechanism(dict(entry), default.base_dir)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None
        specs.append(spec)
    return tuple(specs)


def _flag(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: must be true or false (a TOML boolean, unquoted). Found {value!r}.")
    return value


def _map(table: dict, path: str) -> str | tuple[tuple[float, ...], ...]:
    """``map``: a matrix (k rows of d numbers: y -> A y) or a name of :data:`MAPS`."""
    value = _required(table, "map", path, 'a matrix, e.g. map = [[1.0, 1.0]], or map = "square"')
    if isinstance(value, str):
        return _choice(value, MAPS, f"{path}.map")
    matrix = _dataset(value, f"{path}.map")
    if matrix.ndim != 2:
        raise ConfigError(f"{path}.map: a matrix needs rows, e.g. [[2.0]] or [[1.0, 1.0]]. Found {value!r}.")
    return tuple(tuple(float(x) for x in row) for row in matrix)


def _weight(value: Any, path: str) -> float:
    weight = float(_number(value, path))
    if not 0.0 < weight < 1.0:
        raise ConfigError(f"{path}: the mixing weight must be in (0, 1), e.g. 0.5. Found {weight!r}.")
    return weight


def _n_records(value: Any, path: str) -> int:
    count = int(_number(value, path, integer=True))
    if not 2 <= count <= 10_000:
        raise ConfigError(f"{path}: records per dataset must be from 2 to 10000, e.g. 10. Found {count!r}.")
    return count
