"""Neighbouring datasets (D, D') to audit a mechanism on: the ``[[pairs]]`` and ``[neighbours]`` tables made pairs.

Sources of pairs (docs/theory.md section 1; docs/design.md, "Contract: config"):

* explicit ``[[pairs]]`` from the config, optionally checked against a relation
  (:mod:`audit.inputs.dataset_distance`);
* the mechanism's own ``default_pairs()`` (its worst case), when nothing is given;
* generators over a record domain (``[neighbours] strategy = ...``,
  :mod:`audit.inputs.pair_generators`): ``random`` (random datasets and a random
  neighbour), ``extremes`` (datasets at the corners of the domain, a
  neighbour at another corner) and ``search`` (:mod:`audit.inputs.pair_search`:
  screen many random and extreme candidates, and the edge-case probes, with
  a cheap attack on few samples and keep the most distinguishable);
* ``on-average``: Z ~ D^n and z ~ D from a data distribution D
  (:mod:`audit.inputs.data_distributions`), Z' = Z with its first record replaced by
  z (docs/theory.md section 8): iid pairs for on-average claims.

This module checks the ``[neighbours]`` table (:func:`check_spec`, with its
caps) and names the pairs (:class:`NeighbourPair`, :class:`PairList`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attacks.classes import parse_function_class
from audit.inputs.data_distributions import check_distribution, make_sampler
from audit.inputs.dataset_distance import RELATIONS, check_neighbours, record_distance
from audit.inputs.group_pairs import MAX_DISTANCE, widen_all
from audit.mechanisms import Mechanism
from audit.inputs.pair_generators import (
    MAX_DOMAIN_SIZE, Domain, corner_move, extreme_pairs, on_average_pairs, random_pairs, record_domain,
)
from audit.inputs.pair_search import PROBES, SCREENING_DIVERGENCES, Screened, best_screened, probe_pairs, screen_candidates

STRATEGIES = ("random", "extremes", "search", "on-average")
SPEC_FIELDS = (
    "strategy", "count", "relation", "domain", "candidates", "screen_samples", "function_class", "divergence",
    "distribution", "size", "probes", "distance", "default_pairs",
)
ON_AVERAGE_FIELDS = ("strategy", "count", "relation", "distribution", "size", "distance", "default_pairs")
"""The fields ``strategy = "on-average"`` takes (no domain: the records come from the distribution)."""
DEFAULT_COUNT = 5
MAX_COUNT = 1000
"""Most pairs a [neighbours] table may ask for: every pair is sampled n_samples times per
dataset and attacked by every class, in both directions."""
MAX_CANDIDATES = 10_000
"""Most candidates ``search`` screens (each costs two attacks on ``screen_samples`` outputs)."""
MAX_SCREEN_SAMPLES = 1_000_000
"""Most outputs per dataset of a screening attack."""
MAX_PAIR_VALUES = 100_000_000
"""Most record values (800 MB) the datasets of on-average pairs may hold together."""


@dataclass(frozen=True)
class NeighbourPair:
    """A named pair of neighbouring datasets.

    Attributes
    ----------
    name : str
        Stable id used in results rows (``"p0"``, ``"p1"``, ...).
    d, d_prime : numpy.ndarray
        The two datasets, as given to ``mechanism.sample``.
    distance : int
        The number of records in which they differ (:func:`record_distance`):
        1 for neighbours; explicit pairs given without a relation may be
        farther apart, and the report states it.
    """

    name: str
    d: np.ndarray
    d_prime: np.ndarray
    distance: int = 1
    origin: str = ""
    """How the pair was made (``search``: ``"extreme: ..."``, ``"random"``, ``"probe <family>: ..."``); "" otherwise."""
    d_in: float | int | None = None
    """The pair's input distance, in the units of the claims read or carried to several distances
    (:attr:`audit.config.claims.Claim.d_in`; :func:`audit.config.library_claims.pair_d_in`); None otherwise."""


class PairList(list):
    """The audited pairs (a list of :class:`NeighbourPair`) and, for ``search``, the screening log.

    Attributes
    ----------
    screening : list of Screened
        Every candidate ``search`` screened, in order; empty for other sources.
    """

    def __init__(self, pairs: Sequence[NeighbourPair] = (), screening: Sequence[Screened] = ()):
        super().__init__(pairs)
        self.screening = list(screening)


def check_spec(spec: Mapping[str, Any]) -> None:
    """Raise ValueError, naming the field, unless ``spec`` is a valid ``[neighbours]`` table.

    Checks every field that does not need the mechanism: names, types and
    the caps (``MAX_COUNT``, ``MAX_CANDIDATES``, ``MAX_DOMAIN_SIZE``,
    ``MAX_SCREEN_SAMPLES``) that keep a generated audit within memory.
    """
    unknown = sorted(map(str, set(spec) - set(SPEC_FIELDS)))
    if unknown:
        raise ValueError(f"neighbours: unknown field(s) {', '.join(unknown)}; accepted: {', '.join(SPEC_FIELDS)}.")
    if spec.get("strategy") not in STRATEGIES:
        raise ValueError(f"neighbours.strategy must be one of {', '.join(STRATEGIES)}. Found {spec.get('strategy')!r}.")
    relation = _option(spec, "relation", "replace-one")
    if relation not in RELATIONS:
        raise ValueError(f"neighbours.relation must be one of {', '.join(RELATIONS)}. Found {relation!r}.")
    count = _count(spec, "count", DEFAULT_COUNT, 1, MAX_COUNT, "pairs to generate")
    _distances(spec, count)
    if spec["strategy"] == "on-average":
        _check_on_average(spec, relation)
        return
    if "default_pairs" in spec:
        raise ValueError(f"neighbours.default_pairs is for strategy = \"on-average\" only (the other strategies' "
                         f"pairs replace the defaults); remove it. Found strategy {spec['strategy']!r}.")
    if "distribution" in spec or "size" in spec:
        raise ValueError(
            f"neighbours: distribution and size are for strategy = \"on-average\" only; remove them or use "
            f"domain = {{low = [...], high = [...], size = m}}. Found strategy {spec['strategy']!r}."
        )
    _count(spec, "candidates", 10 * count, 1, MAX_CANDIDATES, "random candidates screened by search")
    _count(spec, "screen_samples", 2000, 10, MAX_SCREEN_SAMPLES, "outputs per dataset of the screening attack")
    divergence = _option(spec, "divergence", "kl")
    if divergence not in SCREENING_DIVERGENCES:
        raise ValueError(f"neighbours.divergence (of the screening attack) must be 'kl' or 'ipm'. Found {divergence!r}.")
    function_class = _option(spec, "function_class", "linear")
    try:
        supported = divergence in parse_function_class(function_class).divergences
    except ValueError as error:
        raise ValueError(f"neighbours.function_class (of the screening attack): {error}") from None
    if not supported:
        raise ValueError(
            f"neighbours.function_class (of the screening attack) must be a class that estimates {divergence!r}, "
            f"e.g. 'linear'. Found {function_class!r}."
        )
    if spec.get("domain") is not None:
        record_domain(spec["domain"], None)
    _probes(spec)


def _probes(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The probe families of a ``search`` table (default: all of :data:`PROBES`), or a ValueError naming the field."""
    value = _option(spec, "probes", list(PROBES))
    if spec["strategy"] != "search" and "probes" in spec:
        raise ValueError(f"neighbours.probes is for strategy = \"search\" only. Found strategy {spec['strategy']!r}.")
    known = isinstance(value, (list, tuple)) and all(isinstance(name, str) and name in PROBES for name in value)
    if not known or len(set(value)) != len(value):
        raise ValueError(
            f"neighbours.probes must be a list of distinct probe families from {', '.join(PROBES)} ([] turns them "
            f"off). Found {value!r}."
        )
    return tuple(value)


def on_average_pair_names(spec: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The names of the iid pairs of an on-average table with ``default_pairs = true`` (the first ``count`` of
    :func:`make_pairs`: p0, p1, ...; the mechanism's default pairs follow them), or None when every pair is one
    (no ``default_pairs``).  An on-average claim averages over these only; worst-case claims are judged on all."""
    if not isinstance(spec, Mapping) or spec.get("strategy") != "on-average" or not spec.get("default_pairs", False):
        return None
    return frozenset(f"p{i}" for i in range(_option(spec, "count", DEFAULT_COUNT)))


def _check_on_average(spec: Mapping[str, Any], relation: str) -> None:
    """Raise ValueError, naming the field, unless ``spec`` is a valid on-average table."""
    extra = sorted(map(str, set(spec) - set(ON_AVERAGE_FIELDS)))
    if extra:
        raise ValueError(
            f"neighbours: strategy = \"on-average\" draws records from the distribution and does not take "
            f"{', '.join(extra)}; accepted: {', '.join(ON_AVERAGE_FIELDS)}."
        )
    if relation != "replace-one":
        raise ValueError(
            f"neighbours.relation must be \"replace-one\" for strategy = \"on-average\" (on-average privacy "
            f"replaces one record of Z by a fresh z ~ D). Found {relation!r}."
        )
    if not isinstance(spec.get("default_pairs", False), bool):
        raise ValueError(f"neighbours.default_pairs must be true or false. Found {spec['default_pairs']!r}.")
    if "distribution" not in spec:
        raise ValueError(
            'neighbours.distribution is required for strategy = "on-average": a table such as '
            '{ name = "normal", mean = 0, std = 1 } or user code "module:function".'
        )
    width = check_distribution(spec["distribution"]).get("dim", 1)  # user code: known once it runs
    if "size" not in spec:
        raise ValueError('neighbours.size (records per dataset, n) is required for strategy = "on-average", e.g. size = 100.')
    size = _count(spec, "size", 1, 1, MAX_DOMAIN_SIZE, "records per dataset, each held in memory")
    values = 2 * _option(spec, "count", DEFAULT_COUNT) * size * width
    if values > MAX_PAIR_VALUES:
        raise ValueError(
            f"neighbours: count x size x distribution.dim x 2 datasets = {values:,} record values, more than "
            f"{MAX_PAIR_VALUES:,} (the pairs are held in memory); lower count, size or dim."
        )


def _count(spec: Mapping[str, Any], key: str, default: int, low: int, high: int, what: str) -> int:
    """An integer field of ``spec`` in [low, high], or a ValueError naming it."""
    value = _option(spec, key, default)
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"neighbours.{key} ({what}) must be an integer from {low} to {high}. Found {value!r}.")
    return int(value)


def _distances(spec: Mapping[str, Any], count: int) -> list[int]:
    """``distance``: an integer from 1 to ``MAX_DISTANCE``, or a list of distinct ones (``count`` pairs at each, each
    pair judged against the claims at its own distance; not for ``on-average``, whose claim is an average over
    pairs of one law), in increasing order; a ValueError names the field."""
    found = _option(spec, "distance", 1)
    if not isinstance(found, list):
        return [_count(spec, "distance", 1, 1, MAX_DISTANCE, "records added, removed or replaced per pair")]
    whole = all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 1 <= k <= MAX_DISTANCE for k in found)
    if not found or not whole or len(set(found)) != len(found):
        raise ValueError(f"neighbours.distance must be an integer or a list of distinct integers from 1 to "
                         f"{MAX_DISTANCE}, e.g. [1, 2, 6]. Found {found!r}.")
    if spec["strategy"] == "on-average":
        raise ValueError(f"neighbours.distance: an on-average claim averages over pairs of one law; give one integer. "
                         f"Found {found!r}.")
    if count * len(found) > MAX_COUNT:
        raise ValueError(f"neighbours.count: {count} pairs at each of {len(found)} distances exceed {MAX_COUNT} pairs; "
                         f"lower count to at most {MAX_COUNT // len(found)}. Found {count!r}.")
    return sorted(int(k) for k in found)


def make_pairs(
    spec: Mapping[str, Any] | Sequence[Any] | None,
    mechanism: Mechanism,
    rng: np.random.Generator | int | None = None,
    relation: str | None = None,
    *,
    timeout: float | None = None,
    on_screened: Callable[[int, int], None] | None = None,
) -> list[NeighbourPair]:
    """The neighbouring pairs to audit ``mechanism`` on.

    Parameters
    ----------
    spec : mapping, sequence of pairs, or None
        A ``[neighbours]`` table (``strategy``: ``random`` | ``extremes`` |
        ``search``; ``count`` (default 5); ``relation`` (default
        ``replace-one``); ``domain``: ``{low = [...], high = [...], size = m}``
        per-coordinate bounds of a record and the number of records, by
        default the box spanned by the mechanism's default pairs; for
        ``search`` also ``candidates`` (default 10 count),
        ``screen_samples`` (default 2000), ``function_class`` (default
        ``linear``), ``divergence`` (default ``kl``), ``probes`` (default
        every family of :data:`PROBES`: :func:`probe_pairs`); ``on-average`` takes
        ``distribution`` (:mod:`audit.inputs.data_distributions`) and ``size``
        instead of ``domain``: :func:`on_average_pairs`); or explicit pairs, each
        ``(d, d_prime)`` or ``{"d": ..., "d_prime": ...}``; or None for the
        mechanism's ``default_pairs()``.
    mechanism : Mechanism
    rng : numpy.random.Generator or int, optional
        Randomness of the generators; the same seed gives the same pairs.
    relation : str, optional
        For explicit pairs: check each against this relation.
    timeout : float, optional
        ``search`` only: seconds the screening of one candidate may take
        (``run.sample_timeout``); a candidate that takes longer is dropped
        (:func:`screen_candidates`).
    on_screened : callable, optional
        ``search`` only: called with (candidates screened, candidates) before
        the first candidate's draw and after each (a progress bar).

    Returns
    -------
    PairList
        The NeighbourPair objects, named ``p0``, ``p1``, ... in order, and
        for ``search`` the screening log (``screening``: every candidate, its
        score, and why a probe was dropped).

    Raises
    ------
    ValueError
        On an unknown strategy, relation or field, a malformed domain, pairs
        that are not neighbours, or no pairs at all.
    """
    origins: list[str] = []
    screening: list[Screened] = []
    if spec is None:
        pairs = list(getattr(mechanism, "default_pairs", lambda: [])())
        if not pairs:
            raise ValueError(
                f"mechanism {mechanism.name!r} has no default neighbouring pairs: give [[pairs]] or [neighbours]."
            )
    elif isinstance(spec, Mapping):
        pairs, origins, screening = _generate(spec, mechanism, np.random.default_rng(rng), timeout, on_screened)
    else:
        pairs = [_explicit(entry, i) for i, entry in enumerate(spec)]
        if not pairs:
            raise ValueError("pairs: the list is empty; give at least one (d, d_prime).")
        if relation is not None:
            for i, (d, d_prime) in enumerate(pairs):
                try:
                    check_neighbours(d, d_prime, relation)
                except ValueError as error:
                    raise ValueError(f"pairs[{i}]: {error}") from None
    origins = origins or [""] * len(pairs)
    return PairList(
        [
            NeighbourPair(f"p{i}", np.asarray(d), np.asarray(d_prime), record_distance(d, d_prime), origin)
            for i, ((d, d_prime), origin) in enumerate(zip(pairs, origins))
        ],
        screening,
    )


def _explicit(entry: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(entry, Mapping):
        if set(entry) != {"d", "d_prime"}:
            raise ValueError(f"pairs[{index}] must have exactly the fields d and d_prime. Found {sorted(entry)}.")
        entry = (entry["d"], entry["d_prime"])
    if len(entry) != 2:
        raise ValueError(f"pairs[{index}] must be a pair (d, d_prime). Found {entry!r}.")
    return np.asarray(entry[0], dtype=float), np.asarray(entry[1], dtype=float)


def _option(spec: Mapping[str, Any], key: str, default: Any) -> Any:
    return spec[key] if key in spec else default


def _generate(
    spec: Mapping[str, Any], mechanism: Mechanism, rng: np.random.Generator, timeout: float | None = None,
    on_screened: Callable[[int, int], None] | None = None,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[str], list[Screened]]:
    """The pairs of a [neighbours] table, their origins ([] unless searched) and the search's screening log."""
    check_spec(spec)
    relation = _option(spec, "relation", "replace-one")
    count = _option(spec, "count", DEFAULT_COUNT)
    distances = _distances(spec, count)
    if spec["strategy"] == "on-average":
        drawn = on_average_pairs(make_sampler(spec["distribution"]), spec["size"], count, rng, distances[0])
        if not spec.get("default_pairs", False):
            return drawn, [], []
        defaults = list(getattr(mechanism, "default_pairs", lambda: [])())
        if not defaults:
            raise ValueError(f"neighbours.default_pairs: mechanism {mechanism.name!r} has no default pairs; "
                             "remove default_pairs.")
        return drawn + defaults, ["on-average"] * len(drawn) + ["the mechanism's default pair"] * len(defaults), []
    domain = record_domain(spec.get("domain"), mechanism)
    if distances[-1] > domain.size and relation == "replace-one":
        raise ValueError(f"neighbours.distance: {distances[-1]} records cannot be replaced in datasets of "
                         f"domain.size = {domain.size} records; raise domain.size or lower distance.")
    pairs, origins, screening = [], [], []
    for distance in distances:  # count pairs at each distance, named on from the pairs before them
        found = _generate_at(spec, mechanism, rng, domain, relation, distance, len(pairs), timeout, on_screened)
        pairs += found[0]
        origins += found[1] or [""] * len(found[0])
        screening += found[2]
    return pairs, origins if any(origins) else [], screening


def _generate_at(
    spec: Mapping[str, Any], mechanism: Mechanism, rng: np.random.Generator, domain: Domain, relation: str,
    distance: int, first: int, timeout: float | None, on_screened: Callable[[int, int], None] | None,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[str], list[Screened]]:
    """The pairs of a [neighbours] table at one distance, their origins and screening log (search: the kept
    pairs named from ``p<first>`` on)."""
    count = _option(spec, "count", DEFAULT_COUNT)
    if spec["strategy"] == "random":
        return widen_all(random_pairs(domain, relation, count, rng), relation, distance)[0], [], []
    if spec["strategy"] == "extremes":
        return widen_all(extreme_pairs(domain, relation), relation, distance)[0][:count], [], []
    candidates = _option(spec, "candidates", 10 * count)
    extremes = extreme_pairs(domain, relation)
    probes = probe_pairs(domain, relation, _probes(spec), rng)
    pool = extremes + [(d, d_prime) for _, d, d_prime in probes] + random_pairs(domain, relation, candidates, rng)
    labels = (
        [f"extreme {corner_move(d, d_prime)}" for d, d_prime in extremes]
        + [f"probe {label}" for label, _, _ in probes]
        + ["random"] * candidates
    )
    pool, kept = widen_all(pool, relation, distance)  # group / user-level pairs: the change made `distance` times
    labels = [labels[i] if distance == 1 or labels[i] == "random" else f"{labels[i]}, x{distance}" for i in kept]
    screening = screen_candidates(
        pool, labels, mechanism, rng,
        n=_option(spec, "screen_samples", 2000),
        function_class=_option(spec, "function_class", "linear"),
        divergence=_option(spec, "divergence", "kl"),
        timeout=timeout,
        on_screened=on_screened,
    )
    order = best_screened(screening, count)
    names = {index: f"p{first + rank}" for rank, index in enumerate(order)}
    screening = [replace(entry, pair=names.get(i, "")) for i, entry in enumerate(screening)]
    return [pool[i] for i in order], [labels[i] for i in order], screening
