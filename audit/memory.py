"""The memory check an audit runs before any unit of work: refuse a plan that would not fit (:mod:`audit.engine`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import joblib

from audit.chunks import PairSamples
from audit.config import AuditConfig
from audit.neighbours import NeighbourPair
from audit.plan import MEMORY_FRACTION, available_memory, estimate_memory
from audit.sampling import ChunkSampler, Raised


def check_memory(config: AuditConfig, pairs: Sequence[NeighbourPair], draw: functools.partial, *,
                 n_samples: int, held_pairs: int) -> dict[str, str]:
    """Refuse a plan that would not fit in memory; the output width comes from two outputs of the first pair.

    ``n_samples`` outputs per dataset of ``held_pairs`` pairs are held at once
    (the policy's, ``held``), and each worker fits on 2 ``n_samples`` rows
    (:func:`audit.plan.estimate_memory`).  The two outputs are drawn like every
    chunk (:class:`audit.sampling.ChunkSampler`); when that fails, the failure
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
    workers = joblib.effective_n_jobs(config.run.n_jobs)
    need = estimate_memory(n_samples, dim, held_pairs, config.attacks.classes, workers,
                           class_params=config.attacks.class_params, backend=config.run.backend)
    have = available_memory()
    if have is not None and need > MEMORY_FRACTION * have:
        raise ValueError(
            f"the audit would need about {need / 2**30:.1f} GiB of memory ({held_pairs} pairs x 2 datasets x "
            f"{n_samples} samples x d = {dim}, plus {workers} workers' processes and features) but only "
            f"{have / 2**30:.1f} GiB are available; lower attacks.n_samples or run.n_jobs. "
            f"Found n_samples = {config.attacks.n_samples}."
        )
    return {}
