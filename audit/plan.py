"""The audit's plan: its tasks and their stable ids, the seeds named after them, the plan hash, its memory.

A task is one attack: (pair, direction, attack class, divergence, alpha, delta),
named by a stable id such as ``p0|P|Q|poly3|renyi|4|0``.  Directions: ``P|Q``
estimates Gamma(M(d) || M(d')), ``Q|P`` the reverse (docs/theory.md section 1).
A class is attacked only on the divergences it can estimate
(:attr:`attacks.classes.FunctionClass.divergences`); :mod:`audit.engine`
decides which tasks run (its policy).

Reproducibility: every random draw of the audit (each chunk of samples, each
attack) is seeded by :func:`task_seed` from the audit's seed and a name, so
results do not depend on n_jobs, the backend or the order in which jobs finish.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.config import AuditConfig

DIRECTIONS = ("P|Q", "Q|P")
MEMORY_FRACTION = 0.8
"""Largest share of the available memory a plan may need."""
PROCESS_BASELINE = 160 * 2**20
"""Resident bytes of one Python process with capaudit's libraries loaded (163 MiB measured, bench_memory.py)."""
_WORDS_PER_ROW = 7.0
"""8-byte words a task holds per output row besides its features: samples, splits, witness values (measured)."""
_WORDS_PER_FEATURE = 0.7
"""8-byte words per feature and output row: the feature matrices of the train and held-out splits (measured)."""


@dataclass(frozen=True)
class Task:
    """One attack of the audit; ``id`` is stable across runs with the same config."""

    pair: str
    direction: str
    function_class: str
    divergence: str
    alpha: float | None
    delta: float

    @property
    def id(self) -> str:
        alpha = "" if self.alpha is None else f"{self.alpha:g}"
        return f"{self.pair}|{self.direction}|{self.function_class}|{self.divergence}|{alpha}|{self.delta:g}"


def task_seed(seed: int, name: str) -> np.random.SeedSequence:
    """The seed of a named task or sample: ``SeedSequence([seed, sha256(name)])``, independent of scheduling."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.SeedSequence([seed, digest])


def plan_hash(config: AuditConfig, units: Sequence[Any]) -> str:
    """What a resumed run must share with the interrupted one: config (minus n_jobs, backend) and the ids of its
    units of work (:class:`audit.engine.Unit`)."""
    raw = {key: value for key, value in config.raw.items() if key != "run"}
    raw["seed"] = config.run.seed
    text = json.dumps([raw, [unit.id for unit in units]], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def estimate_memory(
    n_samples: int,
    dim: int,
    n_pairs: int,
    classes: Sequence[str],
    n_workers: int,
    *,
    class_params: Mapping[str, Mapping[str, Any]] | None = None,
    backend: str = "threading",
) -> int:
    """Bytes an audit needs at its peak; within a factor 1.5 of the peaks measured by benchmarks/bench_memory.py.

    ``PROCESS_BASELINE`` per process (the main one, plus one per worker when
    ``n_workers > 1`` and the backend is not ``threading``), the samples of
    every pair in the main process (8 bytes x n_samples x dim x 2 datasets x
    pairs), and per worker one task on 2 n_samples output rows of
    ``_WORDS_PER_ROW + _WORDS_PER_FEATURE F`` words, F the widest feature map
    of the classes (:meth:`attacks.classes.FunctionClass.feature_count`: dim
    for treeK, threshold, atoms and floatbits, C(dim + K, K) for linear and polyK,
    ``n_components`` for kernel and 2 ``width`` for mlp, its hidden activations).  The sampling
    children hold one chunk each (:data:`audit.chunks.CHUNK_SIZE` rows),
    within the baseline of the process they were forked from.
    """
    from attacks.classes import parse_function_class

    class_params = class_params or {}
    features = [dim] + [parse_function_class(name).feature_count(dim, class_params.get(name, {})) for name in classes]
    processes = 1 + (n_workers if n_workers > 1 and backend != "threading" else 0)
    rows = 2 * n_samples
    task = 8 * rows * (_WORDS_PER_ROW + _WORDS_PER_FEATURE * max(features))
    return int(processes * PROCESS_BASELINE + 8 * rows * dim * n_pairs + n_workers * task)


def available_memory() -> int | None:
    """Available memory in bytes from /proc/meminfo (MemAvailable), else os.sysconf; None if unknown."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
