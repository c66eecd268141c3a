"""Audit configs: a TOML file or a dict, validated into a frozen :class:`AuditConfig`.

The fields are DESIGN.md's "Contract: config".  Every error is a
:class:`ConfigError` whose message names the field path (``claims[1].alpha``),
the value found and what would fix it; ``capaudit`` prints it and exits 2.

User mechanisms (``[mechanism] callable = "module:function"``) are imported
with the config file's directory and the current directory at the front of
``sys.path``, so a module next to the config (``examples/my_mechanism.py``
beside ``examples/custom.toml``) is found without installing it.
"""

from __future__ import annotations

import copy
import difflib
import importlib.util
import math
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audit.neighbours import RELATIONS, SPEC_FIELDS, STRATEGIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DIVERGENCES = ("kl", "renyi", "ipm", "dp")
BACKENDS = {"loky": None, "threading": None, "dask": ("distributed", "dask"), "ray": ("ray", "ray")}
"""Backend name -> (module it needs, capaudit extra that installs it), None for joblib's own."""
MIN_SAMPLES = 100
"""Smallest n_samples: the held-out split must hold enough points for a confidence interval."""

_FIELDS = {
    "": ("mechanism", "pairs", "neighbours", "claims", "attacks", "run"),
    "mechanism": ("name", "callable", "params"),
    "pairs": ("d", "d_prime"),
    "neighbours": SPEC_FIELDS,
    "claims": ("divergence", "alpha", "function_class", "epsilon", "delta"),
    "attacks": ("classes", "n_samples", "confidence", "train_fraction", "class_params", "coupled"),
    "run": ("seed", "n_jobs", "backend"),
}
DEFAULT_CLASSES = ("linear", "poly2", "poly3", "tree3", "atoms")


class ConfigError(ValueError):
    """An audit config is invalid; the message names the field, the value found and the fix."""


@dataclass(frozen=True)
class MechanismSpec:
    """``[mechanism]``: a registry ``name`` or a user ``callable``, with its ``params``."""

    name: str | None
    callable: str | None
    params: Mapping[str, Any]
    base_dir: Path

    def build(self):
        """Build the mechanism (:func:`audit.mechanisms.make_mechanism`), user modules found from ``base_dir``."""
        from audit.mechanisms import make_mechanism

        with user_import_path(self.base_dir):
            return make_mechanism(self.name, dict(self.params), callable=self.callable)


@dataclass(frozen=True)
class Claim:
    """One ``[[claims]]`` entry: Gamma^H(M(D), M(D')) <= epsilon for H = ``function_class``.

    ``alpha`` is a tuple of Renyi orders for ``renyi`` and ``(None,)`` otherwise;
    ``delta`` is used by ``dp`` only.
    """

    divergence: str
    function_class: str
    epsilon: float
    alpha: tuple[float | None, ...] = (None,)
    delta: float = 0.0


@dataclass(frozen=True)
class AttackSpec:
    """``[attacks]``: the adversaries' classes, sample size, audit confidence and class parameters.

    ``coupled``: draw each pair's outputs on d and d' from the same random
    numbers (common random numbers) and use the paired intervals
    (:mod:`audit.runner`, :mod:`attacks.paired_ratio`).
    """

    classes: tuple[str, ...] = DEFAULT_CLASSES
    n_samples: int = 10_000
    confidence: float = 0.95
    train_fraction: float = 0.5
    class_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    coupled: bool = False


@dataclass(frozen=True)
class RunSpec:
    """``[run]``: the audit's seed, joblib's n_jobs and backend."""

    seed: int = 0
    n_jobs: int = 1
    backend: str = "loky"


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
    """

    mechanism: MechanismSpec
    pairs: tuple[tuple[np.ndarray, np.ndarray], ...]
    neighbours: Mapping[str, Any] | None
    claims: tuple[Claim, ...]
    attacks: AttackSpec
    run: RunSpec
    raw: Mapping[str, Any]


def load_config(
    source: str | os.PathLike | Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> AuditConfig:
    """Read and validate an audit config.

    Parameters
    ----------
    source : path or mapping
        A TOML file (DESIGN.md, "Contract: config") or the same structure as a dict.
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
    if isinstance(source, Mapping):
        raw, base_dir = copy.deepcopy(dict(source)), Path.cwd()
    else:
        path = Path(source)
        try:
            with path.open("rb") as handle:
                raw = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist.") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {error}.") from None
        base_dir = path.resolve().parent
    run = dict(_table(raw, "run", "run"))
    run.update({key: value for key, value in (overrides or {}).items() if value is not None})
    if run:
        raw["run"] = run
    return _validate(raw, base_dir)


def _validate(raw: dict, base_dir: Path) -> AuditConfig:
    _check_fields(raw, "", "the config")
    if "mechanism" not in raw:
        raise ConfigError(
            'config: missing required table [mechanism] (name = "laplace" or callable = "module:function").'
        )
    mechanism = _mechanism(_table(raw, "mechanism", "mechanism"), base_dir)
    if "pairs" in raw and "neighbours" in raw:
        raise ConfigError("config: give either [[pairs]] or [neighbours], not both.")
    pairs = tuple(_pair(entry, f"pairs[{i}]") for i, entry in enumerate(_array_of_tables(raw, "pairs")))
    if pairs:  # plain lists, so that results.json can record the config as run
        raw["pairs"] = [{"d": d.tolist(), "d_prime": d_prime.tolist()} for d, d_prime in pairs]
    neighbours = _neighbours(_table(raw, "neighbours", "neighbours")) if "neighbours" in raw else None
    if "pairs" in raw and not pairs:
        raise ConfigError("pairs: the list is empty; give at least one [[pairs]] entry with d and d_prime.")
    if not pairs and neighbours is None and mechanism.callable is not None:
        raise ConfigError(
            "pairs: missing required field for a user mechanism (it has no default neighbours); "
            "add [[pairs]] entries with d and d_prime, or a [neighbours] table."
        )
    claims = tuple(_claim(entry, f"claims[{i}]") for i, entry in enumerate(_array_of_tables(raw, "claims")))
    if not claims:
        raise ConfigError(
            "claims: missing required field; add at least one [[claims]] entry (divergence, function_class, epsilon)."
        )
    return AuditConfig(
        mechanism=mechanism,
        pairs=pairs,
        neighbours=neighbours,
        claims=claims,
        attacks=_attacks(_table(raw, "attacks", "attacks")),
        run=_run(_table(raw, "run", "run")),
        raw=raw,
    )


def _check_fields(table: Mapping, section: str, where: str) -> None:
    known = _FIELDS[section]
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"accepted fields: {', '.join(known)}."
            raise ConfigError(f"{where}: unknown field {key!r}; {hint}")


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
        raise ConfigError(f"{path}: must be {kind}. Found {value!r}.")
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
    key = "name" if name is not None else "callable"
    spec = MechanismSpec(
        name=None if name is None else _string(name, "mechanism.name"),
        callable=None if target is None else _string(target, "mechanism.callable"),
        params=dict(params),
        base_dir=base_dir,
    )
    try:
        spec.build()
    except ValueError as error:
        raise ConfigError(f"mechanism.{key}: {error}") from None
    return spec


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
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: must be an array of numbers, e.g. [[0.0], [1.0]]. Found {value!r}.") from None
    if array.size == 0 or not np.all(np.isfinite(array)):
        raise ConfigError(f"{path}: must be a non-empty array of finite numbers. Found {value!r}.")
    array.setflags(write=False)
    return array


def _pair(table: dict, path: str) -> tuple[np.ndarray, np.ndarray]:
    _check_fields(table, "pairs", path)
    hint = "each [[pairs]] entry needs d and d_prime (neighbouring datasets)"
    d = _dataset(_required(table, "d", path, hint), f"{path}.d")
    d_prime = _dataset(_required(table, "d_prime", path, hint), f"{path}.d_prime")
    return d, d_prime


def _neighbours(table: dict) -> dict:
    _check_fields(table, "neighbours", "neighbours")
    _choice(_required(table, "strategy", "neighbours", "e.g. strategy = \"random\""), STRATEGIES, "neighbours.strategy")
    if "relation" in table:
        _choice(table["relation"], RELATIONS, "neighbours.relation")
    if "count" in table and _number(table["count"], "neighbours.count", integer=True) < 1:
        raise ConfigError(f"neighbours.count: must be a positive integer. Found {table['count']!r}.")
    return table


def _claim(table: dict, path: str) -> Claim:
    _check_fields(table, "claims", path)
    divergence = _choice(
        _required(table, "divergence", path, f"one of {', '.join(DIVERGENCES)}"), DIVERGENCES, f"{path}.divergence"
    )
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
    return Claim(divergence=divergence, function_class=function_class, epsilon=epsilon, alpha=alpha, delta=delta)


def _alpha(value: Any, path: str) -> float:
    value = float(_number(value, path))
    if value <= 1.0:
        raise ConfigError(
            f'{path}: Renyi orders must be > 1 (alpha = 1 is KL: use divergence = "kl"). Found {value!r}.'
        )
    return value


def _class_name(value: Any, path: str) -> str:
    from attacks.classes import parse_function_class

    value = _string(value, path)
    try:
        parse_function_class(value)
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from None
    return value


def _attacks(table: dict) -> AttackSpec:
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
    n_samples = _number(table.get("n_samples", defaults.n_samples), "attacks.n_samples", integer=True)
    if n_samples < MIN_SAMPLES:
        raise ConfigError(
            f"attacks.n_samples: must be at least {MIN_SAMPLES} per dataset (the held-out split needs enough "
            f"points for a confidence interval). Found {n_samples!r}."
        )
    confidence = float(_number(table.get("confidence", defaults.confidence), "attacks.confidence"))
    if not 0.5 <= confidence < 1.0:
        raise ConfigError(f"attacks.confidence: must be in [0.5, 1), e.g. 0.95. Found {confidence!r}.")
    train_fraction = float(_number(table.get("train_fraction", defaults.train_fraction), "attacks.train_fraction"))
    if not 0.0 < train_fraction < 1.0:
        raise ConfigError(f"attacks.train_fraction: must be in (0, 1), e.g. 0.5. Found {train_fraction!r}.")
    class_params = table.get("class_params", {})
    if not isinstance(class_params, Mapping) or not all(isinstance(v, Mapping) for v in class_params.values()):
        raise ConfigError(
            "attacks.class_params: must map class names to tables, e.g. { mlp = { hidden = 16 } }. "
            f"Found {class_params!r}."
        )
    for name in class_params:
        if name not in classes:
            raise ConfigError(f"attacks.class_params: {name!r} is not in attacks.classes ({', '.join(classes)}).")
    coupled = table.get("coupled", defaults.coupled)
    if not isinstance(coupled, bool):
        raise ConfigError(f"attacks.coupled: must be true or false (a TOML boolean, unquoted). Found {coupled!r}.")
    return AttackSpec(
        classes=classes,
        n_samples=int(n_samples),
        confidence=confidence,
        train_fraction=train_fraction,
        class_params={name: dict(params) for name, params in class_params.items()},
        coupled=coupled,
    )


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
        raise ConfigError(
            f"run.backend: {backend!r} needs the {needs[0]!r} package, which is not installed; "
            f"pip install \"capaudit[{needs[1]}]\" or use backend = \"loky\"."
        )
    return RunSpec(seed=int(seed), n_jobs=int(n_jobs), backend=backend)
