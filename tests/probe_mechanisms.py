"""Small mechanisms with the input-handling bugs of real DP libraries, and correct counterparts (tests/test_probes.py).

Each takes records in [0, 1] (the histogram: categories 0-4) and releases n outputs with Laplace noise.
"""

import numpy as np


def unclipped_sum(dataset, n, rng):
    """Sum + Lap(1): 1-DP on records in [0, 1], but nothing bounds a record outside it (smartnoise-sdk #622)."""
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def nan_clip(dataset, n, rng):
    """Clipped sum + Lap(1): np.clip lets NaN through, and the output is NaN (google/differential-privacy #405)."""
    return np.sum(np.clip(dataset, 0.0, 1.0)) + rng.laplace(0.0, 1.0, size=n)


def present_histogram(dataset, n, rng):
    """Counts of the categories present + Lap(2) each: the output's length says which are present (diffprivlib #106)."""
    _, counts = np.unique(np.asarray(dataset).ravel(), return_counts=True)
    return counts + rng.laplace(0.0, 2.0, size=(n, len(counts)))


def data_bounds(dataset, n, rng):
    """Sum + Lap((max - min) / 1): the sensitivity read from the data is 0 on a constant dataset (diffprivlib #20)."""
    records = np.asarray(dataset, dtype=float)
    return np.sum(records) + rng.laplace(0.0, float(records.max() - records.min()), size=n)


def exact_when_small(dataset, n, rng):
    """Clipped sum + Lap(1), but the exact sum on datasets of at most one record (opacus #571)."""
    total = np.sum(np.clip(dataset, 0.0, 1.0))
    return np.full(n, total) if len(dataset) <= 1 else total + rng.laplace(0.0, 1.0, size=n)


def clipped_sum(dataset, n, rng):
    """Correct: NaN and infinities mapped into [0, 1], then clipped; sum + Lap(1) is 1-DP for any records."""
    records = np.clip(np.nan_to_num(np.asarray(dataset, dtype=float), nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
    return np.sum(records) + rng.laplace(0.0, 1.0, size=n)


def refusing_sum(dataset, n, rng):
    """Correct: refuses a record outside [0, 1] (NaN included) with a ValueError; sum + Lap(1) on the others."""
    records = np.asarray(dataset, dtype=float)
    if not np.all((records >= 0.0) & (records <= 1.0)):
        raise ValueError("records must lie in [0, 1]")
    return np.sum(records) + rng.laplace(0.0, 1.0, size=n)
