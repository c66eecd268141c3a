"""Datasets as arrays of records, the number of records two datasets differ in, and the neighbour relations.

Datasets are arrays of records, shape (m, k); a 1-D array is m records of one
coordinate.  Relations (docs/theory.md section 1): ``replace-one`` (same size,
exactly one record differs) and ``add-remove`` (one dataset is the other plus
one record).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

RELATIONS = ("replace-one", "add-remove")


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


def distance_under(d: Any, d_prime: Any, relation: str) -> int:
    """The records d and d' are apart under ``relation``: the length of the shortest chain of neighbours joining them.

    ``replace-one``: datasets of one size, the positions whose records differ
    (a ValueError for datasets of different sizes, which no chain of
    replacements joins).  ``add-remove``: the size of the multiset symmetric
    difference |D \\ D'| + |D' \\ D| (a replaced record is one removed and one
    added: 2).  Records are compared bit for bit, as :func:`record_distance` does.
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {', '.join(RELATIONS)}. Found {relation!r}.")
    a, b = _records(d, "d"), _records(d_prime, "d_prime")
    if relation == "replace-one":
        if len(a) != len(b):
            raise ValueError(f"d and d_prime have {len(a)} and {len(b)} records, and replace-one neighbours keep "
                             "the size.")
        return record_distance(a, b)
    rows_a, rows_b = Counter(_row_keys(a)), Counter(_row_keys(b))
    return sum((rows_a - rows_b).values()) + sum((rows_b - rows_a).values())


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


class RecordNeighbours:
    """Mixin of a mechanism whose library states its claim for neighbours one record apart (``from = "library"``).

    :func:`audit.config.library_claims.claim_distances` reads the pairs' distance in
    records with :meth:`input_distance`, and a ``[neighbours]`` table's with
    :meth:`relation_distance`.
    """

    def input_distance(self, d: np.ndarray, d_prime: np.ndarray) -> int:
        """Records in which d and d' differ (:func:`record_distance`): the library's claim is at 1."""
        return record_distance(d, d_prime)

    def relation_distance(self, relation: str, distance: int) -> int:
        """Records apart of generated pairs: ``distance`` under either relation."""
        return distance
