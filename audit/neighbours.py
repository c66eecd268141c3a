"""Neighbouring datasets (D, D') to audit a mechanism on.

Sources of pairs (docs/theory.md section 1; docs/design.md, "Contract: config"):

* explicit ``[[pairs]]`` from the config, optionally checked against a relation;
* the mechanism's own ``default_pairs()`` (its worst case), when nothing is given;
* generators over a record domain (``[neighbours] strategy = ...``):
  ``random`` (random datasets and a random neighbour), ``extremes`` (datasets
  at the corners of the domain, a neighbour at another corner) and
  ``search`` (screen many random and extreme candidates with a cheap attack
  on few samples and keep the most distinguishable);
* ``on-average``: Z ~ D^n and z ~ D from a data distribution D
  (:mod:`audit.data_distributions`), Z' = Z with its first record replaced by
  z (docs/theory.md section 8): iid pairs for on-average claims.

Datasets are arrays of records, shape (m, k); a 1-D array is m records of one
coordinate.  Relations: ``replace-one`` (same size, exactly one record
differs) and ``add-remove`` (one dataset is the other plus one record).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attacks.classes import parse_function_class
from audit.data_distributions import Sampler, check_distribution, make_sampler
from audit.mechanisms import Mechanism
from audit.validation import as_numbers

RELATIONS = ("replace-one", "add-remove")
STRATEGIES = ("random", "extremes", "search", "on-average")
SPEC_FIELDS = (
    "strategy", "count", "relation", "domain", "candidates", "screen_samples", "function_class", "divergence",
    "distribution", "size",
)
ON_AVERAGE_FIELDS = ("strategy", "count", "relation", "distribution", "size")
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


def as_records(dataset: Any, name: str = "dataset") -> np.ndarray:
    """A dataset as a float array of records, shape (m, k) (1-D input: k = 1)."""
    records = np.asarray(dataset, dtype=float)
    if records.ndim == 1:
        records = records[:, None]
    if records.ndim != 2 or not np.all(np.isfinite(records)):
        raise ValueError(f"{name} must be a finite array of records of shape (m, k) or (m,). Found {dataset!r}.")
    return records


def record_distance(d: Any, d_prime: Any) -> int:
    """The number of records in which d and d' differ.

    Same number of records: the positions whose rows differ (datasets are
    ordered, as the mechanism reads them). Different numbers: the fewest
    records to add, remove or replace to turn one multiset of rows into the
    other, max(|D \\ D'|, |D' \\ D|).
    """
    a, b = as_records(d, "d"), as_records(d_prime, "d_prime")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"d and d_prime must have records of the same width. Found shapes {a.shape} and {b.shape}.")
    if len(a) == len(b):
        return int(np.count_nonzero(np.any(a != b, axis=1)))
    rows_a, rows_b = Counter(map(tuple, a)), Counter(map(tuple, b))
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
    sizes = (len(as_records(d)), len(as_records(d_prime)))
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
    if divergence not in ("kl", "ipm"):
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
        ``linear``), ``divergence`` (default ``kl``); ``on-average`` takes
        ``distribution`` (:mod:`audit.data_distributions`) and ``size``
        instead of ``domain``: :func:`on_average_pairs`); or explicit pairs, each
        ``(d, d_prime)`` or ``{"d": ..., "d_prime": ...}``; or None for the
        mechanism's ``default_pairs()``.
    mechanism : Mechanism
    rng : numpy.random.Generator or int, optional
        Randomness of the generators; the same seed gives the same pairs.
    relation : str, optional
        For explicit pairs: check each against this relation.

    Returns
    -------
    list of NeighbourPair
        Named ``p0``, ``p1``, ... in order.

    Raises
    ------
    ValueError
        On an unknown strategy, relation or field, a malformed domain, pairs
        that are not neighbours, or no pairs at all.
    """
    if spec is None:
        pairs = list(getattr(mechanism, "default_pairs", lambda: [])())
        if not pairs:
            raise ValueError(
                f"mechanism {mechanism.name!r} has no default neighbouring pairs: give [[pairs]] or [neighbours]."
            )
    elif isinstance(spec, Mapping):
        pairs = _generate(spec, mechanism, np.random.default_rng(rng))
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
    return [
        NeighbourPair(f"p{i}", np.asarray(d), np.asarray(d_prime), record_distance(d, d_prime))
        for i, (d, d_prime) in enumerate(pairs)
    ]


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


def _generate(spec: Mapping[str, Any], mechanism: Mechanism, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    check_spec(spec)
    relation = _option(spec, "relation", "replace-one")
    count = _option(spec, "count", DEFAULT_COUNT)
    if spec["strategy"] == "on-average":
        return on_average_pairs(make_sampler(spec["distribution"]), spec["size"], count, rng)
    domain = _domain(spec.get("domain"), mechanism)
    if spec["strategy"] == "random":
        return random_pairs(domain, relation, count, rng)
    if spec["strategy"] == "extremes":
        return extreme_pairs(domain, relation)[:count]
    candidates = _option(spec, "candidates", 10 * count)
    pool = extreme_pairs(domain, relation) + random_pairs(domain, relation, candidates, rng)
    return search_pairs(
        pool, mechanism, count, rng,
        n=_option(spec, "screen_samples", 2000),
        function_class=_option(spec, "function_class", "linear"),
        divergence=_option(spec, "divergence", "kl"),
    )


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
    """Keep the ``count`` candidates that a cheap attack distinguishes best.

    Each candidate is screened with :func:`attacks.estimate_divergence` on
    ``n`` samples per dataset, in both directions (divergences are
    directional), and scored by the larger held-out estimate.  Candidates
    are screened in order with seeds drawn from ``rng``, so a seed fixes the
    result; ties keep the earlier candidate.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 10:
        raise ValueError(f"neighbours.screen_samples must be an integer >= 10. Found {n!r}.")
    if divergence not in ("kl", "ipm"):
        raise ValueError(f"neighbours.divergence (of the screening attack) must be 'kl' or 'ipm'. Found {divergence!r}.")
    from attacks.estimate import estimate_divergence

    scores = []
    for d, d_prime in candidates:
        seed = int(rng.integers(2**32))
        sample_rng = np.random.default_rng(seed)
        p, q = mechanism.sample(d, n, sample_rng), mechanism.sample(d_prime, n, sample_rng)
        scores.append(
            max(
                estimate_divergence(x, y, function_class, divergence, random_state=seed).estimate
                for x, y in ((p, q), (q, p))
            )
        )
    scores = np.nan_to_num(np.asarray(scores, dtype=float), nan=-np.inf)
    order = np.argsort(-scores, kind="stable")  # ties keep candidate order
    return [candidates[i] for i in order[:count]]
