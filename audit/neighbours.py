"""Neighbouring datasets (D, D') to audit a mechanism on.

Sources of pairs (docs/theory.md section 1; docs/design.md, "Contract: config"):

* explicit ``[[pairs]]`` from the config, optionally checked against a relation;
* the mechanism's own ``default_pairs()`` (its worst case), when nothing is given;
* generators over a record domain (``[neighbours] strategy = ...``):
  ``random`` (random datasets and a random neighbour), ``extremes`` (datasets
  at the corners of the domain, a neighbour at another corner) and
  ``search`` (screen many random and extreme candidates, and the edge-case
  probes of :func:`probe_pairs`, with a cheap attack on few samples and keep
  the most distinguishable);
* ``on-average``: Z ~ D^n and z ~ D from a data distribution D
  (:mod:`audit.data_distributions`), Z' = Z with its first record replaced by
  z (docs/theory.md section 8): iid pairs for on-average claims.

Datasets are arrays of records, shape (m, k); a 1-D array is m records of one
coordinate.  Relations: ``replace-one`` (same size, exactly one record
differs) and ``add-remove`` (one dataset is the other plus one record).
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attacks.classes import parse_function_class
from attacks.vocabulary import IPM, KL
from audit import isolation
from audit.data_distributions import Sampler, check_distribution, make_sampler
from audit.errors import one_line
from audit.group_pairs import MAX_DISTANCE, widen_all
from audit.mechanisms import Mechanism
from audit.validation import as_numbers

RELATIONS = ("replace-one", "add-remove")
STRATEGIES = ("random", "extremes", "search", "on-average")
SPEC_FIELDS = (
    "strategy", "count", "relation", "domain", "candidates", "screen_samples", "function_class", "divergence",
    "distribution", "size", "probes", "distance",
)
ON_AVERAGE_FIELDS = ("strategy", "count", "relation", "distribution", "size", "distance")
"""The fields ``strategy = "on-average"`` takes (no domain: the records come from the distribution)."""
DEFAULT_COUNT = 5
MAX_RECORD = 1e100
"""Largest absolute value of a record coordinate: sums and squares of larger values overflow float64."""
MAX_COUNT = 1000
"""Most pairs a [neighbours] table may ask for: every pair is sampled n_samples times per
dataset and attacked by every class, in both directions."""
MAX_CANDIDATES = 10_000
"""Most candidates ``search`` screens (each costs two attacks on ``screen_samples`` outputs)."""
MAX_DOMAIN_SIZE = 100_000
"""Most records per generated dataset: ``extremes`` and ``random`` build each dataset in memory
and the mechanism reads all of it for every sample."""
MAX_SCREEN_SAMPLES = 1_000_000
"""Most outputs per dataset of a screening attack."""
MAX_PAIR_VALUES = 100_000_000
"""Most record values (800 MB) the datasets of on-average pairs may hold together."""
PROBES = ("out_of_domain", "special_values", "small_sizes", "duplicates", "new_category")
"""The families of edge-case datasets ``search`` screens besides the domain's (:func:`probe_pairs`)."""
SPECIAL_VALUES = (
    ("NaN", np.nan), ("+inf", np.inf), ("-inf", -np.inf), ("-0.0", -0.0),
    ("the largest finite float", np.finfo(float).max), ("minus the largest finite float", -np.finfo(float).max),
    ("2^53", 2.0**53), ("2^53 + 2", 2.0**53 + 2), ("1e39, beyond float32", 1e39), ("-1e39, beyond float32", -1e39),
)
"""Record values that break float arithmetic: NaN passes ``np.clip``, inf and huge values overflow sums,
integers beyond 2^53 and values beyond float32's range lose or change their value when cast."""
FAILURE_CALLS = 5
"""Calls per dataset that count the failures of a candidate that fails on one dataset only."""
SCREENING_DIVERGENCES = (KL.name, IPM.name)
"""Divergences the screening attack of ``search`` may use (``neighbours.divergence``)."""


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


@dataclass(frozen=True)
class Screened:
    """One candidate of the dataset search and what its screening found.

    Attributes
    ----------
    label : str
        What the candidate is (e.g. ``"probe special_values: NaN record"``).
    score : float
        The screening attack's larger held-out estimate; NaN when it was not sampled on both datasets.
    note : str
        Why it was dropped (the mechanism refuses a probe, or fails on both
        datasets) or, for an in-domain candidate on one of whose datasets the
        mechanism fails, the finding and its counts; "" when screened.
    pair : str
        The name of the audited pair it became (``"p0"`` is the best screened), "" when not kept.
    """

    label: str
    score: float
    note: str = ""
    pair: str = ""


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


def as_records(dataset: Any, name: str = "dataset") -> np.ndarray:
    """A dataset as a float array of records, shape (m, k) (1-D input: k = 1)."""
    records = np.asarray(dataset, dtype=float)
    if records.ndim == 1:
        records = records[:, None]
    if records.ndim != 2 or not np.all(np.isfinite(records)):
        raise ValueError(f"{name} must be a finite array of records of shape (m, k) or (m,). Found {dataset!r}.")
    return records


def _records(dataset: Any, name: str) -> np.ndarray:
    """A dataset as float records (m, k), any values and sizes (the probes' NaN, inf and empty datasets)."""
    records = np.asarray(dataset, dtype=float)
    records = records[:, None] if records.ndim == 1 else records
    if records.ndim != 2:
        raise ValueError(f"{name} must be an array of records of shape (m, k) or (m,). Found {dataset!r}.")
    return records


def _row_keys(records: np.ndarray) -> list[tuple[str, ...]]:
    """Each record's values bit for bit (``float.hex``): NaN equals NaN, -0.0 differs from 0.0."""
    return [tuple(float(value).hex() for value in row) for row in records]


def record_distance(d: Any, d_prime: Any) -> int:
    """The number of records in which d and d' differ.

    Same number of records: the positions whose rows differ (datasets are
    ordered, as the mechanism reads them). Different numbers: the fewest
    records to add, remove or replace to turn one multiset of rows into the
    other, max(|D \\ D'|, |D' \\ D|).  Values are compared bit for bit, so
    the probes' NaN and -0.0 records count as records like any other.
    """
    a, b = _records(d, "d"), _records(d_prime, "d_prime")
    if a.shape[1] != b.shape[1] and len(a) and len(b):
        raise ValueError(f"d and d_prime must have records of the same width. Found shapes {a.shape} and {b.shape}.")
    keys_a, keys_b = _row_keys(a), _row_keys(b)
    if len(a) == len(b):
        return sum(x != y for x, y in zip(keys_a, keys_b))
    rows_a, rows_b = Counter(keys_a), Counter(keys_b)
    return max(sum((rows_a - rows_b).values()), sum((rows_b - rows_a).values()))


def check_neighbours(d: Any, d_prime: Any, relation: str) -> int:
    """Raise ValueError unless d and d' are neighbours under ``relation``; return their distance (1).

    ``replace-one``: same number of records, exactly one row differs.
    ``add-remove``: one has exactly one more record, and removing one of its
    records gives the other (as multisets of rows, order ignored).
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {', '.join(RELATIONS)}. Found {relation!r}.")
    distance = record_distance(d, d_prime)
    sizes = (len(_records(d, "d")), len(_records(d_prime, "d_prime")))
    if relation == "replace-one" and (sizes[0] != sizes[1] or distance != 1):
        raise ValueError(
            f"d and d_prime are not replace-one neighbours: they must have the same number of records "
            f"and differ in exactly one. Found {sizes[0]} and {sizes[1]} records differing in {distance}."
        )
    if relation == "add-remove" and (abs(sizes[0] - sizes[1]) != 1 or distance != 1):
        raise ValueError(
            f"d and d_prime are not add-remove neighbours: one must be the other plus one record. "
            f"Found {sizes[0]} and {sizes[1]} records differing in {distance}."
        )
    return distance


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
    _count(spec, "distance", 1, 1, MAX_DISTANCE, "records added, removed or replaced per pair")
    if spec["strategy"] == "on-average":
        _check_on_average(spec, relation)
        return
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
        _domain(spec["domain"], None)
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
        ``distribution`` (:mod:`audit.data_distributions`) and ``size``
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


# ---------------------------------------------------------------- generators


@dataclass(frozen=True)
class Domain:
    """Records live in the box [low, high] (per coordinate); datasets have ``size`` records."""

    low: np.ndarray
    high: np.ndarray
    size: int

    def random_records(self, rng: np.random.Generator, m: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=(m, self.low.size))

    def corners(self) -> np.ndarray:
        """The 2^k corners of the box, in a fixed order (first the all-low corner)."""
        return np.array([np.where(bits, self.high, self.low) for bits in itertools.product((0, 1), repeat=self.low.size)])


def _domain(value: Any, mechanism: Mechanism | None) -> Domain:
    """The record domain of a [neighbours] table; None: the box of the mechanism's default pairs."""
    if value is None:
        # The box spanned by the records of the mechanism's worst-case pairs.
        pairs = list(getattr(mechanism, "default_pairs", lambda: [])())
        if not pairs:
            raise ValueError(f"neighbours.domain is required for mechanism {mechanism.name!r} (it has no default pairs).")
        records = np.vstack([as_records(x) for pair in pairs for x in pair])
        return _domain({"low": records.min(axis=0), "high": records.max(axis=0), "size": len(as_records(pairs[0][0]))}, mechanism)
    if not isinstance(value, Mapping) or not {"low", "high"} <= set(value) or set(value) - {"low", "high", "size"}:
        raise ValueError(f"neighbours.domain must be a table {{low = [...], high = [...], size = m}}. Found {value!r}.")
    low = np.atleast_1d(as_numbers(value["low"], "neighbours.domain.low"))
    high = np.atleast_1d(as_numbers(value["high"], "neighbours.domain.high"))
    within = np.all(np.abs(low) <= MAX_RECORD) and np.all(np.abs(high) <= MAX_RECORD)
    if low.ndim != 1 or low.shape != high.shape or not within or np.any(low > high):
        raise ValueError(
            f"neighbours.domain: low and high must be finite lists of equal length with low <= high, within "
            f"+-{MAX_RECORD:g}. Found low={value['low']!r}, high={value['high']!r}."
        )
    size = value.get("size", 1)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 1 <= size <= MAX_DOMAIN_SIZE:
        raise ValueError(
            f"neighbours.domain.size (records per dataset) must be an integer from 1 to {MAX_DOMAIN_SIZE} "
            f"(each generated dataset is held in memory). Found {size!r}."
        )
    return Domain(low, high, int(size))


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
    distance = _option(spec, "distance", 1)
    if spec["strategy"] == "on-average":
        return on_average_pairs(make_sampler(spec["distribution"]), spec["size"], count, rng, distance), [], []
    domain = _domain(spec.get("domain"), mechanism)
    if distance > domain.size and relation == "replace-one":
        raise ValueError(f"neighbours.distance: {distance} records cannot be replaced in datasets of "
                         f"domain.size = {domain.size} records; raise domain.size or lower distance.")
    if spec["strategy"] == "random":
        return widen_all(random_pairs(domain, relation, count, rng), relation, distance)[0], [], []
    if spec["strategy"] == "extremes":
        return widen_all(extreme_pairs(domain, relation), relation, distance)[0][:count], [], []
    candidates = _option(spec, "candidates", 10 * count)
    extremes = extreme_pairs(domain, relation)
    probes = probe_pairs(domain, relation, _probes(spec), rng)
    pool = extremes + [(d, d_prime) for _, d, d_prime in probes] + random_pairs(domain, relation, candidates, rng)
    labels = (
        [f"extreme {_corner_move(d, d_prime)}" for d, d_prime in extremes]
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
    order = _best(screening, count)
    names = {index: f"p{rank}" for rank, index in enumerate(order)}
    screening = [replace(entry, pair=names.get(i, "")) for i, entry in enumerate(screening)]
    return [pool[i] for i in order], [labels[i] for i in order], screening


def _corner_move(d: np.ndarray, d_prime: np.ndarray) -> str:
    """"record moved from [low] to [high]": the record of an extreme pair that changes."""
    return f"(every record {_compact(d[0])}, one moved to {_compact(d_prime[-1])})"


def _compact(record: np.ndarray) -> str:
    return "[" + ", ".join(f"{value:.6g}" for value in record) + "]"


def _neighbour(d: np.ndarray, record: np.ndarray, relation: str, index: int) -> np.ndarray:
    """d with record ``index`` replaced by ``record`` (replace-one) or with ``record`` appended (add-remove)."""
    if relation == "add-remove":
        return np.vstack([d, record])
    d_prime = d.copy()
    d_prime[index] = record
    return d_prime


def random_pairs(
    domain: Domain, relation: str, count: int, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` random datasets of ``domain.size`` uniform records, each with a random neighbour."""
    pairs = []
    for _ in range(count):
        d = domain.random_records(rng, domain.size)
        record = domain.random_records(rng, 1)[0]
        pairs.append((d, _neighbour(d, record, relation, int(rng.integers(domain.size)))))
    return pairs


def on_average_pairs(
    sampler: Sampler, size: int, count: int, rng: np.random.Generator, replaced: int = 1
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` iid pairs (Z, Z'): Z ~ D^size, z ~ D, Z' = Z with its first record replaced by z.

    The pairs of OAKL's on-average KL privacy (docs/theory.md section 8).  The
    first record, as the definition states; since Z's records are iid this is
    the same law as a random index for any mechanism.  ``replaced`` = k > 1
    redraws the first k records (OAKL Lemma 6, small groups).  Z and then its
    new records are drawn from ``rng`` in turn, pair after pair, so a seed
    fixes every pair.
    """
    pairs = []
    for _ in range(count):
        d = sampler(size, rng)
        records = sampler(replaced, rng)
        if records.shape[1] != d.shape[1]:
            raise ValueError(f"neighbours.distribution returned records of widths {d.shape[1]} and {records.shape[1]}.")
        d_prime = d.copy()
        d_prime[:replaced] = records
        pairs.append((d, d_prime))
    return pairs


def extreme_pairs(domain: Domain, relation: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Datasets with every record at one corner of the domain and a neighbour with a record at another.

    Ordered by how far the changed record moves (opposite corners first),
    since for sum-like queries that is where the sensitivity is attained.
    """
    corners = domain.corners()
    moves = [(a, b) for a in range(len(corners)) for b in range(len(corners)) if a != b]
    moves.sort(key=lambda ab: -float(np.sum(np.abs(corners[ab[0]] - corners[ab[1]]))))
    pairs = []
    for a, b in moves:
        d = np.tile(corners[a], (domain.size, 1))
        pairs.append((d, _neighbour(d, corners[b], relation, domain.size - 1)))
    return pairs


def probe_pairs(
    domain: Domain, relation: str, families: Sequence[str] = PROBES, rng: np.random.Generator | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Edge-case pairs beyond the domain's random and corner datasets: ``(label, d, d_prime)`` each.

    The inputs that break real implementations (docs/config.md, ``probes``):

    * ``out_of_domain``: one record beyond the domain, by its width and by a
      million times it (the domain states what the mechanism must clip or
      refuse; a mechanism that claims DP for any input is tested beyond it);
    * ``special_values``: one record of :data:`SPECIAL_VALUES` (NaN, +-inf,
      -0.0, the largest finite float, 2^53, beyond float32's range);
    * ``small_sizes``: datasets of the smallest sizes the relation allows
      (0 and 1, 1 and 2 records under ``add-remove``; 1 and 2 under
      ``replace-one``), at the domain's corners;
    * ``duplicates``: random records and one of them duplicated;
    * ``new_category``: for integer domains (categories), every category but
      one in d and that category in d' only.

    Each changed record is the dataset's last (``replace-one``) or an added
    one (``add-remove``), the others at the domain's low corner unless said.
    """
    rng = np.random.default_rng(rng)
    base = np.tile(domain.low, (domain.size, 1))
    probes: list[tuple[str, np.ndarray, np.ndarray]] = []

    def one_record(label: str, record: np.ndarray, d: np.ndarray = base) -> None:
        probes.append((label, d, _neighbour(d, record, relation, len(d) - 1)))

    span = np.where(domain.high > domain.low, domain.high - domain.low, 1.0)
    if "out_of_domain" in families:
        for label, record in (
            ("a record above the domain by its width", domain.high + span),
            ("a record below the domain by its width", domain.low - span),
            ("a record 1e6 widths above the domain", domain.high + 1e6 * span),
            ("a record 1e6 widths below the domain", domain.low - 1e6 * span),
        ):
            one_record(f"out_of_domain: {label}", record)
    if "special_values" in families:
        for label, value in SPECIAL_VALUES:
            one_record(f"special_values: a record of {label}", np.full(domain.low.size, value))
    if "small_sizes" in families:
        empty, low, high = np.empty((0, domain.low.size)), domain.low[None, :], domain.high[None, :]
        if relation == "add-remove":
            probes += [
                ("small_sizes: 0 and 1 records (the low corner added)", empty, low),
                ("small_sizes: 0 and 1 records (the high corner added)", empty, high),
                ("small_sizes: 1 and 2 records (low corner, high corner added)", low, np.vstack([low, high])),
            ]
        else:
            probes += [
                ("small_sizes: 1 record, low corner to high corner", low, high),
                ("small_sizes: 2 records, one moved from the low to the high corner",
                 np.vstack([low, low]), np.vstack([low, high])),
            ]
    if "duplicates" in families:
        records = domain.random_records(rng, max(domain.size, 2))
        one_record("duplicates: random records, one of them duplicated", records[0], records)
    categories = np.arange(domain.low[0], domain.high[0] + 1)
    integer = np.all(domain.low == np.round(domain.low)) and np.all(domain.high == np.round(domain.high))
    if "new_category" in families and integer and 1 < len(categories) <= MAX_DOMAIN_SIZE:
        for new in (categories[-1], categories[0]):
            present = np.resize(categories[categories != new], max(domain.size, 2))
            d = np.tile(domain.low, (len(present), 1))
            d[:, 0] = present
            record = domain.low.copy()
            record[0] = new
            one_record(f"new_category: category {new:g} in d' only", record, d)
    return probes


def screen_candidates(
    candidates: Sequence[tuple[np.ndarray, np.ndarray]],
    labels: Sequence[str],
    mechanism: Mechanism,
    rng: np.random.Generator,
    *,
    n: int = 2000,
    function_class: str = "linear",
    divergence: str = "kl",
    timeout: float | None = None,
    on_screened: Callable[[int, int], None] | None = None,
) -> list[Screened]:
    """Screen each candidate pair with a cheap attack; record what the mechanism refused.

    Each candidate is sampled ``n`` times per dataset in a child forked from
    this process (:func:`audit.isolation.call`), which hands back the
    outputs and the layout of structural outputs its copy of the mechanism
    ended with (:mod:`audit.structure`; this process's mechanism adopts it),
    and scored by the larger held-out estimate of
    :func:`attacks.estimate_divergence` over both directions (divergences are
    directional).  A candidate the mechanism raises on is not scored (NaN):
    a probe (label ``"probe ..."``) on one of whose datasets it raises is
    dropped with a note (the mechanism refuses the input: no error, no
    violation); an in-domain candidate on one of whose datasets only it
    raises is a finding, its failures counted over :data:`FAILURE_CALLS`
    calls per dataset (in the same child); failures on both datasets are
    noted.  A child that runs past ``timeout`` seconds (a mechanism that
    hangs, in Python or in C) is killed: a probe's candidate is dropped with
    a note, an in-domain candidate's stops the search (a mechanism that hangs
    on a dataset of its domain is an error, as a hung pair is in the audit; a
    search in which every candidate hangs costs one timeout, not one per
    candidate); a child that dies drops its candidate with its exit code.  Seeds are drawn from
    ``rng`` in order, so a seed fixes the result.  ``on_screened(k, len(candidates))`` is called before the
    first draw (k = 0) and after each candidate (a progress bar from the first call on).

    Raises
    ------
    MechanismError
        When no candidate could be scored (the first failure's message), or an in-domain candidate hung.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 10:
        raise ValueError(f"neighbours.screen_samples must be an integer >= 10. Found {n!r}.")
    if divergence not in SCREENING_DIVERGENCES:
        raise ValueError(f"neighbours.divergence (of the screening attack) must be 'kl' or 'ipm'. Found {divergence!r}.")
    from attacks.estimate import estimate_divergence

    screening, first_failure = [], None
    encoder = getattr(mechanism, "structure", None)
    screened = on_screened or (lambda done, total: None)
    for (d, d_prime), label in zip(candidates, labels):
        screened(len(screening), len(candidates))
        seed = int(rng.integers(2**32))
        try:
            draw = isolation.call(functools.partial(_screen_draw, mechanism, (d, d_prime), n, seed), timeout)
        except (TimeoutError, ChildProcessError) as error:
            failure = (f"{HUNG} = {timeout:g} s" if isinstance(error, TimeoutError) else
                       f"the mechanism's process ended without a result (exit code {error.args[0]})")
            if isinstance(error, TimeoutError) and not label.startswith("probe"):
                from audit.mechanisms import MechanismError

                raise MechanismError(f"the search stopped: {failure} on the in-domain candidate pair "
                                     f"{label or len(screening)} (a hung pair is an error, as in the audit)")
            first_failure = first_failure or failure
            screening.append(Screened(label, np.nan, f"dropped: {failure}"))
            continue
        if draw.layout is not None and hasattr(encoder, "adopt"):
            encoder.adopt(*draw.layout)
        if draw.failure is not None:
            first_failure = first_failure or draw.failure
            screening.append(Screened(label, np.nan, _failure_note(label, draw.failure, draw.failures)))
            continue
        p, q = draw.outputs
        try:
            score = max(
                estimate_divergence(x, y, function_class, divergence, random_state=seed).estimate
                for x, y in ((p, q), (q, p))
            )
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:  # outputs the cheap attack cannot fit
            screening.append(Screened(label, np.nan, f"dropped: the screening attack failed ({error})"))
            continue
        screening.append(Screened(label, float(score)))
    screened(len(screening), len(candidates))
    if screening and all(entry.note for entry in screening):
        from audit.mechanisms import MechanismError

        first = first_failure.split("|", 1)[-1] if first_failure else screening[0].note
        raise MechanismError(f"the mechanism failed on every candidate pair of the search: {first}")
    return screening


@dataclass(frozen=True)
class _ScreenDraw:
    """What a screening child hands back: both datasets' outputs, or which failed and how (``"d|message"``)
    with the failures in :data:`FAILURE_CALLS` calls per dataset; the layout its mechanism ended with."""

    outputs: tuple[np.ndarray, np.ndarray] | None
    failure: str | None
    failures: tuple[int, int]
    layout: tuple[int | None, bool] | None


HUNG = "the mechanism took longer than run.sample_timeout"
"""How a candidate whose screening ran past its time limit is reported (the note of its candidate)."""


def _screen_draw(mechanism: Mechanism, pair: tuple[np.ndarray, np.ndarray], n: int, seed: int) -> _ScreenDraw:
    """In the screening child: :func:`_sample_both`, and on a failure :func:`_failure_counts`."""
    outputs = _sample_both(mechanism, pair, n, seed)
    failures = (0, 0) if not isinstance(outputs, str) else _failure_counts(mechanism, pair, seed)
    encoder = getattr(mechanism, "structure", None)
    layout = (encoder.width, encoder.structural) if hasattr(encoder, "adopt") else None
    if isinstance(outputs, str):
        return _ScreenDraw(None, outputs, failures, layout)
    return _ScreenDraw(outputs, None, failures, layout)


def _sample_both(mechanism: Mechanism, datasets: Sequence[np.ndarray], n: int, seed: int) -> tuple[np.ndarray, ...] | str:
    """n outputs on each dataset from one seeded generator, or which dataset failed and how.

    The first structural output widens the layout (:mod:`audit.structure`):
    outputs drawn before it are drawn again in the new layout.
    """
    for _ in range(2):
        sample_rng, outputs = np.random.default_rng(seed), []
        for name, dataset in zip(("d", "d'"), datasets):
            try:
                outputs.append(mechanism.sample(dataset, n, sample_rng))
            except SystemExit as error:  # the audited code's exit, in its own words (not "exit code 0" of the child)
                return f"{name}|{one_line(error)}"
            except Exception as error:
                return f"{name}|{' '.join(str(error).split())}"
        if len({output.shape[1] for output in outputs}) == 1:
            return tuple(outputs)
    return f"d|the output width changed between the datasets after the layout was fixed: {[o.shape for o in outputs]}"


def _failure_counts(mechanism: Mechanism, pair: tuple[np.ndarray, np.ndarray], seed: int) -> tuple[int, int]:
    """How many of :data:`FAILURE_CALLS` one-output calls per dataset raise."""
    failures = [0, 0]
    sample_rng = np.random.default_rng(seed)
    for _ in range(FAILURE_CALLS):
        for side, dataset in enumerate(pair):
            try:
                mechanism.sample(dataset, 1, sample_rng)
            except (Exception, SystemExit):
                failures[side] += 1
    return failures[0], failures[1]


def _failure_note(label: str, failure: str, failures: tuple[int, int]) -> str:
    """Why a candidate was not scored: a refused probe, a one-sided failure (a finding, with counts), or both failing."""
    message = failure.split("|", 1)[1]
    if all(failures):
        return f"dropped: the mechanism fails on both datasets ({message})"
    side = "d" if failures[0] else "d'" if failures[1] else failure.split("|", 1)[0]  # else: n outputs at once only
    if label.startswith("probe"):
        return f"dropped: the mechanism refuses the probe's {side} ({message})"
    return (
        f"finding: the mechanism fails on {side} only, so the failure itself distinguishes the datasets "
        f"({failures[0]} of {FAILURE_CALLS} calls failed on d, {failures[1]} of {FAILURE_CALLS} on d'; {message})"
    )


def _best(screening: Sequence[Screened], count: int) -> list[int]:
    """Indices of the ``count`` highest scores of the candidates sampled on both datasets (NaN last; ties keep the
    earlier candidate)."""
    scores = np.nan_to_num(np.array([entry.score for entry in screening], dtype=float), nan=-np.inf)
    scored = [i for i in np.argsort(-scores, kind="stable") if not screening[i].note]
    return [int(i) for i in scored[:count]]


def search_pairs(
    candidates: list[tuple[np.ndarray, np.ndarray]],
    mechanism: Mechanism,
    count: int,
    rng: np.random.Generator,
    *,
    n: int = 2000,
    function_class: str = "linear",
    divergence: str = "kl",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Keep the ``count`` candidates that a cheap attack distinguishes best (:func:`screen_candidates`).

    Candidates the mechanism fails on are never kept; ties keep the earlier candidate.
    """
    screening = screen_candidates(
        candidates, [""] * len(candidates), mechanism, rng, n=n, function_class=function_class, divergence=divergence
    )
    return [candidates[i] for i in _best(screening, count)]
