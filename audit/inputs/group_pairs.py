"""Pairs at any distance: k records added or removed, or k records replaced (group and user-level neighbours).

A library's privacy map is stated at an input distance ``d_in``
(docs/config.md, ``[neighbours] distance``): under the symmetric distance,
k records added or removed are at d_in = k and k records replaced at 2k;
under the change-one distance k records replaced are at k.  One user who
owns k records is such a pair too (user-level privacy: the user's records
added or removed together).  :func:`widen` turns each neighbouring pair of
the generators (one record changed) into its pair at distance k by
repeating its change: the record added k times, or k records replaced by
the new one, so that a sum's sensitivity grows as k times the record's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_DISTANCE = 1000
"""Largest ``[neighbours] distance``: records added or replaced per pair."""


def widen(d: np.ndarray, d_prime: np.ndarray, relation: str, distance: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The pair (d, d') at one record apart made ``distance`` records apart, or None when d has too few records.

    ``add-remove``: d' is d with one record appended (as the generators make
    it); that record is appended ``distance`` times.  ``replace-one``: the one
    record that differs and the ``distance - 1`` records before it (wrapping)
    take the new record; None when d holds fewer than ``distance`` records or
    a replaced record already equals the new one (the pair would be nearer).
    """
    if distance == 1:
        return d, d_prime
    if relation == "add-remove":
        return d, np.vstack([d_prime, np.repeat(d_prime[-1:], distance - 1, axis=0)])
    changed = np.flatnonzero(np.any(np.asarray(d) != np.asarray(d_prime), axis=1))
    if len(d) < distance or len(changed) != 1:
        return None
    indices = (changed[0] - np.arange(distance)) % len(d)
    record = d_prime[changed[0]]
    if np.any(np.all(d[indices] == record, axis=1)):
        return None
    wide = d.copy()
    wide[indices] = record
    return d, wide


def widen_all(pairs: Sequence[tuple[np.ndarray, np.ndarray]], relation: str, distance: int
              ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[int]]:
    """Every pair that :func:`widen` can make ``distance`` records apart, and the indices of those kept."""
    kept, indices = [], []
    for i, (d, d_prime) in enumerate(pairs):
        wide = widen(d, d_prime, relation, distance)
        if wide is not None:
            kept.append(wide)
            indices.append(i)
    return kept, indices
