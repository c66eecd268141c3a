"""The memory an audit needs (:func:`estimate_memory`) and the check it runs before any unit of work: refuse a plan that
would not fit (:mod:`audit.engine.run`); the units' sampler is opened after it (:func:`checked_sampler`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import joblib

from attacks.sequential import EARLIER_BYTES
from audit.sampling.chunks import PairSamples
from audit.config.load import AuditConfig
from audit.inputs.neighbours import NeighbourPair
from audit.sampling.sampler import ChunkSampler, Raised, draw_chunk, pair_sampler

MEMORY_FRACTION = 0.8
"""Largest share of the available memory a plan may need."""
PROCESS_BASELINE = 160 * 2**20
"""Resident bytes of one Python process with capaudit's libraries loaded (163 MiB measured, bench_memory.py)."""
_WORDS_PER_ROW = 7.0
"""8-byte words a task holds per output row besides its features: samples, splits, witness values (measured)."""
_WORDS_PER_FEATURE = 0.7
"""8-byte words per feature and output row: the feature matrices of the train and held-out splits (measured)."""


def checked_sampler(config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair], held: tuple[int, int] | None,
                    *, on_outputs: Callable[[int], Any], on_redrawn: Callable[[int, str], Any]) -> Callable:
    """The units' sampler (:func:`audit.sampling.sampler.pair_sampler` from ``[run]``'s seed, workers, timeout and
    backend), opened after :func:`check_memory` of ``held`` (n_samples, pairs held at once; None: no check): a pair
    whose probe failed is not drawn again, its failure is the sampler's."""
    run = config.run
    probed = {} if held is None else check_memory(config, pairs, functools.partial(draw_chunk, mechanism, seed=run.seed),
                                                  n_samples=held[0], held_pairs=held[1])
    return pair_sampler(mechanism, pairs, run.seed, config.attacks.coupled,
                        workers=max(joblib.effective_n_jobs(run.n_jobs), 1), timeout=run.sample_timeout,
                        on_outputs=on_outputs, failed=probed, backend=run.backend, on_redrawn=on_redrawn)


def check_memory(config: AuditConfig, pairs: Sequence[NeighbourPair], draw: functools.partial, *,
                 n_samples: int, held_pairs: int) -> dict[str, str]:
    """Refuse a plan that would not fit in memory; the output width comes from two outputs of the first pair.

    ``n_samples`` outputs per dataset of ``held_pairs`` pairs are held at once
    (the policy's, ``held``), and each worker fits on 2 ``n_samples`` rows
    (:func:`estimate_memory`); a search in rounds holds its earlier rounds' outputs too, at most
    :data:`attacks.sequential.EARLIER_BYTES`.  The two outputs are drawn like every
    chunk (:class:`audit.sampling.sampler.ChunkSampler`); when that fails, the failure
    is returned as the first pair's (pair name -> message), so that a hung
    mechanism costs one timeout, not two, and the check is skipped.
    """
    if not pairs:
        return {}
    [(pair, samples)] = list(ChunkSampler(draw, pairs[:1], 2, config.attacks.coupled, 1, config.run.sample_timeout,
                                          backend=config.run.backend))
    if isinstance(samples, Raised):  # perhaps evidence (draw_pair_isolated decides): the pair is sampled, unchecked
        return {}
    if not isinstance(samples, PairSamples):
        return {pair.name: samples}
    dim = samples.d.shape[1]
    workers, attacks = joblib.effective_n_jobs(config.run.n_jobs), config.attacks
    need = estimate_memory(n_samples, dim, held_pairs, attacks.classes, workers,
                           class_params=attacks.class_params, backend=config.run.backend)
    # a search in rounds holds its earlier outputs too, and max_outputs sets its sizes
    field, value = ("max_outputs", attacks.max_outputs) if attacks.sequential else ("n_samples", attacks.n_samples)
    need += EARLIER_BYTES if attacks.sequential else 0
    have = available_memory()
    if have is not None and need > MEMORY_FRACTION * have:
        raise ValueError(
            f"the audit would need about {need / 2**30:.1f} GiB of memory ({held_pairs} pairs x 2 datasets x "
            f"{n_samples} samples x d = {dim}, plus {workers} workers' processes and features) but only "
            f"{have / 2**30:.1f} GiB are available; lower attacks.{field} or run.n_jobs. "
            f"Found attacks.{field} = {value}."
        )
    return {}


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
    children hold one chunk each (:data:`audit.sampling.chunks.CHUNK_SIZE` rows),
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
