"""``[[checks]]``: CBDP's theorems as audits, read into :class:`CheckSpec` s (run by :mod:`audit.engine.checks`).

The fields are declared once (:data:`CHECKS`), with the fields each property
takes (:data:`CHECK_FIELDS`) and the divergences each theorem covers
(:data:`CHECK_DIVERGENCES`), from which the schema's per-property rules are
written.  :func:`check_specs` reads a config's entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attacks.vocabulary import IPM, KL, Renyi, divergence_kind
from audit.config.attacks import MAX_SAMPLES, MIN_SAMPLES, AttackSpec, check_held_out
from audit.config.claims import renyi_order
from audit.config.fields import (
    REQUIRED, ConfigError, Field, Section, array_of_tables, choice, class_name, required, value,
)
from audit.mechanisms.compose import MAPS
from audit.mechanisms.spec import MechanismSpec, mechanism_spec
from audit.config.pairs import dataset

PROPERTIES = ("sequential", "parallel", "post-processing", "convexity", "pinsker", "generalization",
              "on-average-post-processing", "on-average-composition")
"""``[[checks]] property``: CBDP Thms 4, 3, 1, 2, 7 and 6 (docs/theory.md section 5, :mod:`audit.engine.checks`) and
OAKL Lemmas 5 and 7 on average over pairs (docs/theory.md section 8, :mod:`audit.engine.on_average_checks`)."""
CHECK_COMMON = ("property", "mechanisms", "function_class", "n_samples")
CHECK_FIELDS = {
    "sequential": ("divergence", "alpha", "adaptive", "d", "d_prime"),
    "parallel": ("divergence", "alpha", "d", "d_prime"),
    "post-processing": ("divergence", "alpha", "map", "d", "d_prime"),
    "convexity": ("divergence", "weight", "d", "d_prime"),
    "pinsker": ("d", "d_prime"),
    "generalization": ("n_records",),
    "on-average-post-processing": ("map", "n_pairs", "epsilons"),
    "on-average-composition": ("adaptive", "n_pairs", "epsilons"),
}
"""Fields each property takes besides :data:`CHECK_COMMON`."""
CHECK_DIVERGENCES = {
    "sequential": (KL.name, Renyi.name),
    "parallel": (KL.name, Renyi.name),
    "post-processing": (KL.name, Renyi.name, IPM.name),
    "convexity": (KL.name, IPM.name),
    "pinsker": (KL.name,),
    "generalization": (KL.name,),
    "on-average-post-processing": (KL.name,),
    "on-average-composition": (KL.name,),
}
"""The divergences each theorem covers (Thms 3, 4: KL and Renyi; Thm 1: f-divergences and Renyi; Thm 2: f-divergences)."""
CHECK_MECHANISMS = {"sequential": 2, "parallel": 2, "convexity": 2, "on-average-composition": 2}
"""Mechanisms a property combines (the others take one)."""
_ATTACK_CLASS = "^(linear|poly[1-9][0-9]*|kernel|mlp|tree[1-9][0-9]*|threshold|atoms|floatbits)$"
_DATASET = {"$ref": "#/$defs/dataset"}


def _per_property() -> list[dict]:
    """The schema's rules: the fields and divergences each property takes, alpha with renyi, d with d_prime."""
    rules = []
    for prop, fields in CHECK_FIELDS.items():
        then: dict[str, Any] = {"propertyNames": {"enum": list(CHECK_COMMON + fields)}}
        if "divergence" in fields:
            then["properties"] = {"divergence": {"enum": list(CHECK_DIVERGENCES[prop])}}
        if "map" in fields:
            then["required"] = ["map"]
        rules.append({"if": {"properties": {"property": {"const": prop}}}, "then": then})
    return rules + [
        {"if": {"properties": {"divergence": {"const": Renyi.name}}, "required": ["divergence"]},
         "then": {"required": ["alpha"]}, "else": {"not": {"required": ["alpha"]}}},
        {"if": {"required": ["d"]}, "then": {"required": ["d_prime"]}},
        {"if": {"required": ["d_prime"]}, "then": {"required": ["d"]}},
    ]


CHECKS = Section("checks", (
    Field("property", "string", REQUIRED, choices=PROPERTIES, meaning="the theorem: CBDP Thm 4, 3, 1, 2, 7, 6; OAKL Lemma 5, 7 (below)"),
    Field("mechanisms", "other", type_doc="array of tables `{ name, params }`", default_doc="`[mechanism]` (repeated)",
          schema_extra={"type": "array", "minItems": 1, "maxItems": 2, "items": {
              "type": "object", "additionalProperties": False, "required": ["name"],
              "properties": {"name": {"type": "string"}, "params": {"type": "object"}}}},
          meaning="two for `sequential`, `parallel`, `convexity`, `on-average-composition`; one otherwise; built-ins "
                  "and adapters by name"),
    Field("function_class", "string", "linear", type_doc="class name", schema_extra={"pattern": _ATTACK_CLASS},
          meaning="not `all`; must estimate the divergence (`pinsker`: `ipm`)"),
    Field("divergence", "string", KL.name, choices=(KL.name, Renyi.name, IPM.name), type_doc="string",
          meaning="`sequential`, `parallel`: `kl`, `renyi`; `post-processing`: `kl`, `renyi`, `ipm`; `convexity`: "
                  "`kl`, `ipm` (f-divergences: Rényi is refused, Thm 2 does not cover it); not taken by `pinsker` (KL "
                  "and IPM), `generalization` and the `on-average-` properties (KL)"),
    Field("alpha", "other", type_doc="number", default_doc="required for `renyi`", schema_extra={"$ref": "#/$defs/alpha"},
          meaning="one Rényi order in [1.1, 1000]"),
    Field("n_samples", "integer", low=MIN_SAMPLES, high=MAX_SAMPLES, default_doc="`[attacks] n_samples`",
          limits=f"must be from {MIN_SAMPLES} to {MAX_SAMPLES:,}",
          meaning="100 to 10⁸: outputs per dataset (`generalization`: also the number of trials; `on-average-`: per "
                  "dataset of each pair); the held-out split obeys `[attacks]`' minimum"),
    Field("d", "other", type_doc="dataset", default_doc="the first mechanism's first default pair", schema_extra=_DATASET,
          meaning="the neighbouring pair's D (give both `d` and `d_prime`, or neither); not for `generalization` "
                  "and the `on-average-` properties"),
    Field("d_prime", "other", type_doc="dataset", default_doc="with `d`", schema_extra=_DATASET,
          meaning="the neighbouring pair's D'"),
    Field("adaptive", "boolean", False,
          meaning="`sequential` and `on-average-composition`: M2 sees M1's output (it queries the data only when M1's "
                  "first coordinate is ≥ 0, else the all-zeros dataset): breaks Thm 4's non-adaptive hypothesis and is "
                  "flagged; within OAKL Lemma 7 when the parts' values are closed forms"),
    Field("map", "other", type_doc='matrix, `"square"` or `"append-square"`', default_doc="required for `post-processing` and `on-average-post-processing`",
          schema_extra={"oneOf": [{"enum": list(MAPS)}, {"type": "array", "minItems": 1, "items": {
              "type": "array", "minItems": 1, "items": {"type": "number"}}}]},
          meaning="g: a matrix A (rows of numbers, one column per output coordinate) gives y ↦ A y; `\"square\"` (y ↦ "
                  "y², elementwise) and `\"append-square\"` (y ↦ (y, y²)) are nonlinear and flagged (i ∘ g leaves the "
                  "class: the CBDP blog's caveat that post-processing widens the adversary; with `\"append-square\"` "
                  "a linear adversary on g(y) is a poly2 adversary on y); `on-average-post-processing` flags them only when M's "
                  "eps is measured (OAKL Lemma 5 covers any measurable g)"),
    Field("weight", "number", 0.5, low=0.0, high=1.0, open_low=True, open_high=True,
          limits="the mixing weight must be in (0, 1), e.g. 0.5",
          meaning="`convexity` only: λ in (0, 1), the probability of M1 in the mixture"),
    Field("n_records", "integer", 10, low=2, high=10_000,
          limits="records per dataset must be from 2 to 10000, e.g. 10",
          meaning="`generalization` only: records per dataset, 2 to 10000"),
    Field("n_pairs", "integer", 20, low=2, high=1000,
          limits="the number of pairs must be from 2 to 1000, e.g. 20",
          meaning="`on-average-` properties only: iid pairs (Z, Z') the means are taken over, 2 to 1000"),
    Field("epsilons", "numbers", low=0.0, limits="must be numbers >= 0, one per mechanism, e.g. [0.15]",
          type_doc="array of numbers ≥ 0", default_doc="closed form, else measured",
          meaning="`on-average-` properties only: the parts' on-average KL as claimed (one per mechanism, e.g. the "
                  "config's on-average claims' ε): the lemma's bound is computed from them, so a contradiction "
                  "refutes a part's claim"),
), array=True, schema_extra={"allOf": _per_property()})
"""``[[checks]]``' fields (docs/config.md)."""


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
    function_class: str = CHECKS["function_class"].default
    divergence: str = CHECKS["divergence"].default
    alpha: float | None = None
    n_samples: int = 10_000
    pair: tuple[np.ndarray, np.ndarray] | None = None
    adaptive: bool = CHECKS["adaptive"].default
    map: str | tuple[tuple[float, ...], ...] | None = None
    weight: float = CHECKS["weight"].default
    n_records: int = CHECKS["n_records"].default
    n_pairs: int = CHECKS["n_pairs"].default
    epsilons: tuple[float, ...] | None = None


def check_specs(raw: Mapping, mechanism: MechanismSpec, attacks: AttackSpec) -> tuple[CheckSpec, ...]:
    """The validated ``[[checks]]`` entries (none by default)."""
    entries = array_of_tables(raw, "checks")
    return tuple(_check(entry, f"checks[{i}]", mechanism, attacks) for i, entry in enumerate(entries))


def _check(table: dict, path: str, default: MechanismSpec, attacks: AttackSpec) -> CheckSpec:
    prop = choice(required(table, "property", path, f"one of {', '.join(PROPERTIES)}"), PROPERTIES, f"{path}.property")
    accepted = CHECK_COMMON + CHECK_FIELDS[prop]
    if prop == "convexity" and _kind(table.get("divergence")) is Renyi:
        raise ConfigError(
            f'{path}.divergence: convexity (CBDP Thm 2) holds for f-divergences only; Renyi is not one and Renyi '
            'privacy is not convex under mixtures, so the theorem says nothing: use divergence = "kl" or "ipm". '
            "Found 'renyi'."
        )
    for key in table:
        if key not in accepted:
            takers = [name for name, fields in CHECK_FIELDS.items() if key in fields]
            hint = f"it applies to property {' / '.join(takers)} only" if takers else f"accepted: {', '.join(accepted)}"
            raise ConfigError(f"{path}: property {prop!r} takes no field {key!r}; {hint}. Found {key} = {table[key]!r}.")
    divergence = choice(table.get("divergence", CHECKS["divergence"].default), CHECK_DIVERGENCES[prop],
                        f"{path}.divergence")
    alpha = None
    if divergence_kind(divergence).has_order:
        alpha = renyi_order(required(table, "alpha", path, "a Renyi check needs one order, e.g. alpha = 2"),
                            f"{path}.alpha")
    elif "alpha" in table:
        raise ConfigError(f'{path}.alpha: only divergence = "renyi" takes alpha; remove it. Found {table["alpha"]!r}.')
    function_class = _check_class(table.get("function_class", CHECKS["function_class"].default), divergence, prop,
                                  f"{path}.function_class")
    n_samples = value(table, CHECKS["n_samples"], f"{path}.n_samples", default=attacks.n_samples)
    try:
        check_held_out(n_samples, attacks.train_fraction, attacks.confidence)
    except ConfigError as error:
        raise ConfigError(f"{path}.n_samples: {error}") from None
    pair = None
    if "d" in table or "d_prime" in table:
        hint = "give both d and d_prime (neighbouring datasets), or neither for the mechanism's default pair"
        pair = (dataset(required(table, "d", path, hint), f"{path}.d"),
                dataset(required(table, "d_prime", path, hint), f"{path}.d_prime"))
    return CheckSpec(
        property=prop,
        mechanisms=_check_mechanisms(table, path, prop, default),
        function_class=function_class,
        divergence=divergence,
        alpha=alpha,
        n_samples=n_samples,
        pair=pair,
        adaptive=value(table, CHECKS["adaptive"], f"{path}.adaptive"),
        map=_map(table, path) if "map" in CHECK_FIELDS[prop] else None,
        weight=value(table, CHECKS["weight"], f"{path}.weight"),
        n_records=value(table, CHECKS["n_records"], f"{path}.n_records"),
        n_pairs=value(table, CHECKS["n_pairs"], f"{path}.n_pairs"),
        epsilons=_epsilons(table, path, CHECK_MECHANISMS.get(prop, 1)),
    )


def _epsilons(table: dict, path: str, count: int) -> tuple[float, ...] | None:
    """``epsilons``: the parts' claimed on-average KL, one number >= 0 per mechanism; None when not given."""
    if "epsilons" not in table:
        return None
    found = value(table, CHECKS["epsilons"], f"{path}.epsilons")
    if len(found) != count:
        raise ConfigError(f"{path}.epsilons: give one number per mechanism ({count}), e.g. "
                          f"[{', '.join(['0.15'] * count)}]. Found {table['epsilons']!r}.")
    return tuple(float(x) for x in found)


def _kind(name: Any) -> type | None:
    """The divergence type named ``name``, None for anything else (the field is checked after)."""
    try:
        return divergence_kind(name)
    except ValueError:
        return None


def _check_class(found: Any, divergence: str, prop: str, path: str) -> str:
    """A class that estimates the check's divergence (pinsker: ipm; its hypotheses are checked at run time)."""
    from attacks.classes import All, parse_function_class

    name = class_name(found, path)
    function_class = parse_function_class(name)
    if isinstance(function_class, All):
        raise ConfigError(f'{path}: "all" is for claims only (no attack fits every function); use e.g. "linear".')
    needs = IPM.name if prop == "pinsker" else divergence
    if needs not in function_class.divergences:
        raise ConfigError(f"{path}: class {name!r} does not estimate {needs!r}; use e.g. \"linear\". Found {name!r}.")
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
            spec = mechanism_spec(dict(entry), default.base_dir)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None
        specs.append(spec)
    return tuple(specs)


def _map(table: dict, path: str) -> str | tuple[tuple[float, ...], ...]:
    """``map``: a matrix (k rows of d numbers: y -> A y) or a name of :data:`MAPS`."""
    found = required(table, "map", path, 'a matrix, e.g. map = [[1.0, 1.0]], or map = "square"')
    if isinstance(found, str):
        return choice(found, MAPS, f"{path}.map")
    matrix = dataset(found, f"{path}.map")
    if matrix.ndim != 2:
        raise ConfigError(f"{path}.map: a matrix needs rows, e.g. [[2.0]] or [[1.0, 1.0]]. Found {found!r}.")
    return tuple(tuple(float(x) for x in row) for row in matrix)
