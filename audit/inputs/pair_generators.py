"""Generated neighbouring pairs over a record domain: random, extremes and on-average.

* ``random``: datasets of uniform records in the domain's box, each with a
  random neighbour;
* ``extremes``: datasets with every record at one corner of the box and a
  neighbour with one record at another corner (opposite corners first);
* ``on-average``: Z ~ D^n and z ~ D from a data distribution D
  (:mod:`audit.inputs.data_distributions`), Z' = Z with its first record replaced by
  z (docs/theory.md section 8): iid pairs for on-average claims.

The domain (``[neighbours] domain``) and its caps are read here
(:func:`record_domain`); the dataset search (:mod:`audit.inputs.pair_search`) screens
these pairs with its probes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.inputs.data_distributions import Sampler
from audit.inputs.dataset_distance import as_records
from audit.mechanisms import Mechanism
from audit.config.validation import as_numbers

MAX_RECORD = 1e100
"""Largest absolute value of a record coordinate: sums and squares of larger values overflow float64."""
MAX_DOMAIN_SIZE = 100_000
"""Most records per generated dataset: ``extremes`` and ``random`` build each dataset in memory
and the mechanism reads all of it for every sample."""


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


def record_domain(value: Any, mechanism: Mechanism | None) -> Domain:
    """The record domain of a [neighbours] table; None: the box of the mechanism's default pairs."""
    if value is None:
        # The box spanned by the records of the mechanism's worst-case pairs.
        pairs = list(getattr(mechanism, "default_pairs", lambda: [])())
        if not pairs:
            raise ValueError(f"neighbours.domain is required for mechanism {mechanism.name!r} (it has no default pairs).")
        records = np.vstack([as_records(x) for pair in pairs for x in pair])
        return record_domain({"low": records.min(axis=0), "high": records.max(axis=0), "size": len(as_records(pairs[0][0]))}, mechanism)
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


def corner_move(d: np.ndarray, d_prime: np.ndarray) -> str:
    """"record moved from [low] to [high]": the record of an extreme pair that changes."""
    return f"(every record {_compact(d[0])}, one moved to {_compact(d_prime[-1])})"


def _compact(record: np.ndarray) -> str:
    return "[" + ", ".join(f"{value:.6g}" for value in record) + "]"


def neighbour_of(d: np.ndarray, record: np.ndarray, relation: str, index: int) -> np.ndarray:
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
        pairs.append((d, neighbour_of(d, record, relation, int(rng.integers(domain.size)))))
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
        pairs.append((d, neighbour_of(d, corners[b], relation, domain.size - 1)))
    return pairs
