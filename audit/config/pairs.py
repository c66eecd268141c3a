"""``[[pairs]]`` and ``[neighbours]``: the neighbouring datasets an audit attacks, given or generated.

The fields are declared once (:data:`PAIRS`, :data:`NEIGHBOURS`).  Explicit
pairs are read here (:func:`pair`); a ``[neighbours]`` table's rules are
:func:`audit.inputs.neighbours.check_spec`'s, the generator's own, which the
declarations describe for the docs and the schema.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audit.config.fields import (
    REQUIRED, ConfigError, Field, Section, check_fields, choice, one_line, required, value,
)
from audit.config.import_path import user_import_path
from audit.inputs.dataset_distance import RELATIONS, distance_under, record_distance
from audit.inputs.group_pairs import MAX_DISTANCE
from audit.inputs.neighbours import DEFAULT_COUNT, MAX_CANDIDATES, MAX_COUNT, MAX_SCREEN_SAMPLES, STRATEGIES, check_spec
from audit.inputs.pair_generators import MAX_DOMAIN_SIZE, MAX_RECORD
from audit.inputs.pair_search import PROBES, SCREENING_DIVERGENCES
from audit.config.validation import as_numbers

_NUMBERS = {"oneOf": [{"type": "number"}, {"type": "array", "minItems": 1, "items": {"type": "number"}}]}
_TARGET = {"type": "string", "pattern": "^[^:]+:[^:]+$"}
DATASET = {
    "description": "A dataset: an array of records, each a number or a list of numbers (shape (m,) or (m, k)); "
                   "finite, non-empty.",
    "type": "array", "minItems": 1, "items": _NUMBERS,
}
"""The JSON Schema of a dataset (``$defs/dataset``)."""
_DATASET = {"$ref": "#/$defs/dataset"}

PAIRS = Section("pairs", (
    Field("d", "other", schema_extra=_DATASET, type_doc="array of numbers or of arrays of numbers", default_doc="required",
          meaning="the dataset D: m records, each a number or a row of k numbers; finite, non-empty"),
    Field("d_prime", "other", schema_extra=_DATASET, type_doc="same", default_doc="required",
          meaning="the neighbouring dataset D'"),
    Field("relation", "string", choices=RELATIONS,
          meaning="optional: the relation the pair's distance is counted under (`replace-one`: positions whose "
                  "records differ, datasets of one size; `add-remove`: the size of the multiset symmetric difference), "
                  "and the pair is refused unless it is `distance` apart under it (default 1: neighbours; the error "
                  "names the distance found). Without it the distance is the mechanism's own, rounded up (a library's "
                  "input metric; the norm of q - q' for query answers or counts), else the records added, removed or "
                  "replaced. A pair more than "
                  "1 apart is judged against each claim carried to its distance (\"Pairs at several distances\"); "
                  "d' = d, which can only pass, is refused"),
    Field("distance", "integer", low=1, high=MAX_DISTANCE, default_doc="the pair's own",
          limits=f"must be a whole number from 1 to {MAX_DISTANCE}",
          meaning=f"optional, 1 to {MAX_DISTANCE}: the distance the pair is declared to lie at, checked against the "
                  "one counted (under `relation` where given); a pair at another distance is refused. For a `callable` "
                  "without `relation`, whose inputs may be scores or answers rather than records, taken as stated"),
), array=True, schema_extra={"required": ["d", "d_prime"]})
"""``[[pairs]]``' fields (docs/config.md)."""

_CLASS_PATTERN = "^(linear|poly[1-9][0-9]*|kernel|mlp|tree[1-9][0-9]*|threshold|atoms|floatbits)$"
_DISTRIBUTION = {"oneOf": [_TARGET, {
    "type": "object", "additionalProperties": False, "required": ["name"],
    "properties": {
        "name": {"enum": ["normal", "uniform", "bernoulli", "truncated-normal"]},
        "mean": {"type": "number", "default": 0}, "std": {"type": "number", "exclusiveMinimum": 0, "default": 1},
        "low": {"type": "number", "description": "uniform: default 0; truncated-normal: required."},
        "high": {"type": "number", "description": "uniform: default 1; truncated-normal: required."},
        "p": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
        "dim": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1},
    }}]}
NEIGHBOURS = Section("neighbours", (
    Field("strategy", "string", REQUIRED, choices=STRATEGIES,
          meaning="random datasets and a random neighbour; datasets at the corners of the domain with one record moved "
                  "to another corner (farthest moves first); screen candidates with a cheap attack and keep the most "
                  "distinguishable; or iid pairs from a data distribution (below)"),
    Field("count", "integer", DEFAULT_COUNT, low=1, high=MAX_COUNT, meaning=f"1 to {MAX_COUNT}: pairs kept"),
    Field("relation", "string", RELATIONS[0], choices=RELATIONS,
          meaning="same size and one record differs; or one dataset is the other plus one record"),
    Field("domain", "other", type_doc="table `{ low = [...], high = [...], size = m }`",
          default_doc="the box spanned by the mechanism's default pairs",
          schema_extra={"type": "object", "additionalProperties": False, "required": ["low", "high"],
                        "properties": {"low": _NUMBERS, "high": _NUMBERS,
                                       "size": {"type": "integer", "minimum": 1, "default": 1}}},
          meaning="per-coordinate bounds of a record (finite, `low <= high`, equal lengths) and the number of records "
                  "per dataset (`size`, integer ≥ 1, default 1). Required for mechanisms without default pairs."),
    Field("candidates", "integer", low=1, high=MAX_CANDIDATES, default_doc="10 × `count`",
          meaning=f"`search` only: 1 to {MAX_CANDIDATES} random candidates screened (besides every extreme pair)"),
    Field("screen_samples", "integer", 2000, low=10, high=MAX_SCREEN_SAMPLES,
          meaning=f"`search` only: 10 to {MAX_SCREEN_SAMPLES} outputs per dataset for the screening attack"),
    Field("function_class", "string", "linear", type_doc="class name", schema_extra={"pattern": _CLASS_PATTERN},
          meaning="`search` only: the screening attack's class"),
    Field("divergence", "string", SCREENING_DIVERGENCES[0], choices=SCREENING_DIVERGENCES,
          meaning="`search` only: the screening attack's divergence"),
    Field("distribution", "other", type_doc="table or `\"module:function\"`", default_doc="required for `on-average`",
          schema_extra=_DISTRIBUTION, meaning="`on-average` only: the data distribution D of the records (below)"),
    Field("size", "integer", low=1, high=MAX_DOMAIN_SIZE, default_doc="required for `on-average`",
          meaning=f"`on-average` only: 1 to {MAX_DOMAIN_SIZE} records per dataset (n); 2 × `count` × `size` × `dim` at "
                  "most 10⁸ record values (the pairs are held in memory)"),
    Field("probes", "other", PROBES, type_doc="array of " + ", ".join(f'`"{name}"`' for name in PROBES),
          default_doc="all five", schema_extra={"type": "array", "uniqueItems": True, "items": {"enum": list(PROBES)}},
          meaning="`search` only: the families of edge-case datasets screened besides the domain's corners and random "
                  "pairs ([probes.md](probes.md)); `[]` turns them off. A probe the mechanism refuses (raises on) is "
                  "dropped with a note in the report, never an error or a violation"),
    Field("distance", "other", 1, type_doc="integer or array of integers",
          schema_extra={"oneOf": [{"type": "integer", "minimum": 1, "maximum": MAX_DISTANCE},
                                  {"type": "array", "minItems": 1, "uniqueItems": True,
                                   "items": {"type": "integer", "minimum": 1, "maximum": MAX_DISTANCE}}]},
          meaning=f"1 to {MAX_DISTANCE}: records added or removed (`add-remove`) or replaced (`replace-one`) per pair: "
                  "group neighbours, and user-level ones (one user owning `distance` records, added or removed "
                  "together). Each generated pair's one-record change is repeated (the new record added `distance` "
                  "times, or `distance` records replaced by it); a `replace-one` candidate with fewer records is "
                  "dropped, and `distance` above `domain.size` is refused. `on-average`: the first `distance` records "
                  "are redrawn. A claim from the library is read at the pairs' `d_in` (\"Claims from the library\"); an "
                  "integer is the default `distance` of the claims typed by hand (they hold as typed). A list "
                  "(e.g. `[1, 2, 6]`, not for `on-average`): `count` pairs at each distance, each judged against the "
                  "claims at its own (\"Pairs at several distances\")"),
    Field("default_pairs", "boolean", False, limits="must be true or false",
          meaning="`on-average` only: add the mechanism's own default pairs (its worst case, e.g. a learner's "
                  "canaries) after the iid pairs: worst-case claims are judged on every pair, on-average claims "
                  "average over the iid pairs only"),
), schema_extra={"required": ["strategy"]})
"""``[neighbours]``' fields (docs/config.md); their rules are :func:`audit.inputs.neighbours.check_spec`'s."""


def dataset(found: Any, path: str) -> np.ndarray:
    """A dataset: a non-empty array of records (numbers or rows of numbers) within +-``MAX_RECORD``, read-only."""
    try:
        array = as_numbers(found, path)
    except ValueError:
        raise ConfigError(f"{path}: must be an array of numbers, e.g. [[0.0], [1.0]]. Found {found!r}.") from None
    if array.ndim > 2:
        raise ConfigError(
            f"{path}: must be a list of records (a list of numbers, or of lists of numbers), "
            f"not {array.ndim} levels deep. Found {found!r}."
        )
    if array.size == 0 or not np.all(np.abs(array) <= MAX_RECORD):
        raise ConfigError(
            f"{path}: must be a non-empty array of finite numbers within +-{MAX_RECORD:g} (larger values overflow "
            f"the mechanism's sums and the attacks' squares). Found {found!r}."
        )
    array.setflags(write=False)
    return array


def pair(table: dict, path: str) -> tuple[np.ndarray, np.ndarray]:
    """A [[pairs]] entry's datasets (its distance is checked by :func:`pair_distances`, which knows the mechanism)."""
    check_fields(table, PAIRS.names, path)
    hint = "each [[pairs]] entry needs d and d_prime (neighbouring datasets)"
    d = dataset(required(table, "d", path, hint), f"{path}.d")
    d_prime = dataset(required(table, "d_prime", path, hint), f"{path}.d_prime")
    if "relation" in table:
        choice(table["relation"], RELATIONS, f"{path}.relation")
    if "distance" in table:
        value(table, PAIRS["distance"], f"{path}.distance")
    return d, d_prime


def pair_distances(entries: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                   mechanism: Any) -> list[int]:
    """Each explicit pair's distance: the length of the shortest chain of neighbours joining d and d'.

    Under the entry's ``relation`` where it gives one
    (:func:`audit.inputs.dataset_distance.distance_under`); else in the
    mechanism's own notion, rounded up: a library's input metric
    (``mechanism.input_distance``, e.g. OpenDP's symmetric distance, where a
    replaced record is 2) or, for inputs that are query answers or counts
    (``mechanism.input_relation``), the norm of q − q'
    (:func:`audit.results.provenance.answer_distance`), neighbours being at most 1
    apart in both; else the records added, removed or replaced
    (:func:`audit.inputs.dataset_distance.record_distance`).  ``mechanism`` is
    None for a user callable (not built before the rest of the config is
    checked), whose inputs capaudit cannot read (records, or a vector of
    scores or answers): its pair's declared ``distance`` is taken as stated
    where it gives no ``relation``, else records are counted.  A ConfigError
    names the pair when it is at distance 0 (d' = d), when no chain joins it,
    or when its declared ``distance`` (default 1 with a ``relation``) is not
    the one counted.
    """
    from audit.results.provenance import answer_distance

    input_relation = getattr(mechanism, "input_relation", None)
    metric = hasattr(mechanism, "input_distance")
    found = []
    for i, (entry, (d, d_prime)) in enumerate(zip(entries, pairs)):
        path, relation = f"pairs[{i}]", entry.get("relation")
        if mechanism is None and relation is None and "distance" in entry:  # the callable's own notion, as stated
            found.append(int(entry["distance"]))
            continue
        try:
            if relation is not None:
                k = distance_under(d, d_prime, relation)
            elif metric:
                k = math.ceil(mechanism.input_distance(d, d_prime))
            elif input_relation is not None:
                k = math.ceil(answer_distance(d, d_prime, input_relation))
            else:
                k = record_distance(d, d_prime)
        except (ValueError, OverflowError) as error:  # OverflowError: ceil(inf), answers of different lengths
            cause = "d and d_prime have different lengths" if isinstance(error, OverflowError) else one_line(error)
            hint = ', or relation = "add-remove"' if relation == "replace-one" else ""
            raise ConfigError(f"{path}: {cause.rstrip('.')}, so no chain of neighbours joins them and no claim "
                              f"carries to them; give datasets a chain of neighbours apart{hint}.") from None
        apart = (f"{k} apart under relation = {relation!r}" if relation else
                 f"{k} apart in the mechanism's input metric, rounded up" if metric else
                 f"{k} apart in the mechanism's input notion (the norm of q - q', rounded up)" if input_relation else
                 f"{k} records apart (added, removed or replaced)")
        if k == 0:
            under = f" under relation = {relation!r}" if relation else ""
            raise ConfigError(f"{path}: d and d_prime are one dataset (0 apart{under}): M(d) and M(d') are one law, "
                              "so its rows could only pass; remove the pair or give a d_prime that differs.")
        declared = int(entry.get("distance", 1 if relation is not None else k))
        if declared != k:
            default = "" if "distance" in entry else " (the default with relation: neighbours)"
            raise ConfigError(f"{path}.distance: d and d_prime are {apart}, not {declared}{default}; give "
                              f"distance = {k} to audit the pair at that distance (each claim carried there), or "
                              f"datasets {declared} apart. Found {declared!r}.")
        found.append(k)
    return found


def neighbours_spec(table: dict) -> dict:
    """A ``[neighbours]`` table checked by the generator's rules (:func:`audit.inputs.neighbours.check_spec`)."""
    check_fields(table, NEIGHBOURS.names, "neighbours")
    choice(required(table, "strategy", "neighbours", "e.g. strategy = \"random\""), STRATEGIES, "neighbours.strategy")
    try:
        check_spec(table)
    except ValueError as error:
        raise ConfigError(one_line(error)) from None
    return table


def import_distribution(target: str, base_dir: Path) -> None:
    """Import an on-average data distribution's user code once to check it; a ConfigError names the field."""
    from audit.inputs.data_distributions import make_sampler

    try:
        with user_import_path(base_dir):
            make_sampler(target)
    except ValueError as error:
        raise ConfigError(one_line(error)) from None
