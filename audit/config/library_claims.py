"""Claims read from a library's own privacy map: ``[[claims]] from = "library"``.

A library states its promise as a map from an input distance ``d_in`` to a
privacy loss (OpenDP's ``measurement.map(d_in)``; a DP-SGD learner's
accountant: dp_accounting's PLD profile, Opacus's epsilon at delta).  The audited pairs may
lie at several ``d_in`` in the mechanism's input metric; the claim is the
map at each ``d_in``, in the library's own measure (max-divergence: ``dp``;
zero-concentrated: ``zcdp``; approximate or smoothed max-divergence: ``dp``
with its delta or a ``profile`` table), read here into an ordinary claim
table, with its source in words for the report (docs/config.md, "Claims
from the library"), and each pair is judged against the claim at its own ``d_in``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from audit.inputs.dataset_distance import record_distance

SOURCES = ("library",)
"""Accepted values of ``[[claims]] from``."""
FIELDS = ("from", "function_class", "alpha", "epsilons", "reason")
"""The fields a claim from the library takes; its divergence and values come from the map."""
PROFILE_EPSILONS = (0.0, 0.25, 0.5, 1.0)
"""Default epsilon grid of a privacy-profile claim from a library, in units of the profile's epsilon at PROFILE_DELTA."""
PROFILE_DELTA = 1e-6
RESOLVED = ("divergence", "epsilon", "delta", "deltas")
"""The fields the map gives: written into the config as run (results.json), accepted back when they agree."""


def claim_distances(mechanism: Any, pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                    neighbours: Mapping[str, Any] | None) -> list[float | int]:
    """The ``d_in`` of the audited pairs in the mechanism's input metric, in increasing order.

    Explicit pairs (else the mechanism's default pairs): each pair's distance
    (``mechanism.input_distance``); ``[neighbours]``: ``distance`` records (default 1; a list: each of them)
    added or removed, or replaced, by ``relation`` (:func:`relation_d_in`).  The claim is read at each, and each
    pair judged against the claim at its own ``d_in``.  Raises ``ValueError`` when a pair has ``d_in = 0`` or none
    is given.
    """
    if neighbours is None:
        pairs = pairs or mechanism.default_pairs()
    if pairs:
        distances = sorted({pair_d_in(mechanism, d, d_prime, record_distance(d, d_prime)) for d, d_prime in pairs})
        if distances[0] == 0:
            raise ValueError("a pair has d_in = 0 (d = d'); give pairs that differ.")
        return distances
    if neighbours is None:
        raise ValueError(f"mechanism {mechanism.name!r} has no default pairs; give [[pairs]] or [neighbours] so that "
                         "the claim is read at their d_in.")
    if neighbours.get("strategy") == "on-average":
        return [relation_d_in(mechanism, "replace-one", 1)]
    relation = neighbours.get("relation", "replace-one")
    return sorted({relation_d_in(mechanism, relation, k) for k in neighbour_distances(neighbours)})


def neighbour_distances(neighbours: Mapping[str, Any] | None) -> list[int]:
    """``[neighbours] distance`` as a list of records apart (an integer: itself; absent: 1)."""
    found = (neighbours or {}).get("distance", 1)
    return sorted(set(found)) if isinstance(found, list) else [found]


def relation_d_in(mechanism: Any, relation: str, k: int) -> float | int:
    """``d_in`` of pairs ``k`` records apart under ``relation``: in the mechanism's input metric
    (``mechanism.relation_distance``) where it reads one, else ``k``."""
    return mechanism.relation_distance(relation, k) if hasattr(mechanism, "relation_distance") else k


def pair_d_in(mechanism: Any, d: np.ndarray, d_prime: np.ndarray, records: int) -> float | int:
    """A pair's ``d_in``: in the mechanism's input metric (``mechanism.input_distance``) where it reads one, else
    ``records`` (the records in which they differ), the units of :func:`relation_d_in`."""
    return mechanism.input_distance(d, d_prime) if hasattr(mechanism, "input_distance") else records


def library_claim_table(table: Mapping[str, Any], path: str, mechanism: Any, d_in: float | int) -> tuple[dict, str]:
    """The ``[[claims]]`` entry ``table`` (``from = "library"``) as an ordinary claim table at ``d_in``, and its source.

    ``function_class`` defaults to ``"all"`` (a library's map bounds every
    test); ``alpha`` (orders of a zCDP claim) and ``epsilons`` (the grid of a
    smoothed max-divergence profile) pass through; the source names the
    library, version, measure, ``d_in`` and value.
    """
    if table["from"] not in SOURCES:
        raise ValueError(f"{path}.from: must be \"library\" (the claim is the mechanism's own privacy map). "
                         f"Found {table['from']!r}.")
    extra = sorted(set(table) - set(FIELDS) - set(RESOLVED))
    if extra:
        raise ValueError(f"{path}.{extra[0]}: a claim from the library takes its divergence and values from the "
                         f"privacy map; remove {', '.join(extra)} (accepted: {', '.join(FIELDS)}).")
    if not hasattr(mechanism, "library_claim"):
        raise ValueError(f"{path}.from: mechanism {mechanism.name!r} states no privacy map; use "
                         "name = \"opendp.measurement\" (or a library adapter, dp_gd_logistic, opacus.dp_sgd), or "
                         "give divergence and epsilon.")
    try:
        claim = mechanism.library_claim(d_in, table.get("epsilons"), table.get("delta"))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    for key in sorted(set(RESOLVED) & set(table)):  # results.json's config holds the map's values: they must agree
        if not _same(table[key], claim.table.get(key)):
            raise ValueError(f"{path}.{key}: a claim from the library takes its values from the privacy map, which "
                             f"gives {key} = {claim.table.get(key)!r} at d_in = {d_in}; remove {key}. "
                             f"Found {table[key]!r}.")
    takes = {"alpha": "zcdp", "epsilons": "profile"}
    for key, divergence in takes.items():
        if key in table and claim.table["divergence"] != divergence:
            raise ValueError(f"{path}.{key}: this measurement's map gives a {claim.table['divergence']} claim, which "
                             f"takes no {key} (only {divergence} claims do); remove it.")
    resolved = {**claim.table, "function_class": table.get("function_class", "all")}
    if "alpha" in table:
        resolved["alpha"] = table["alpha"]
    return resolved, claim.source


def library_reason(table: Mapping[str, Any], source: str) -> str:
    """The reason a claim from the library shows in the report: the user's own, then the map's ``source``."""
    own = table.get("reason", "")
    return source if not own or source in own else f"{own} ({source})"


def _same(given: Any, stated: Any) -> bool:
    """Whether a value read back from results.json is the map's (numbers to 1e-9 relative, text exactly)."""
    if isinstance(given, str) or isinstance(stated, str) or given is None or stated is None:
        return given == stated
    try:
        return bool(np.allclose(np.asarray(given, dtype=float), np.asarray(stated, dtype=float), rtol=1e-9, atol=0))
    except (TypeError, ValueError):
        return False
