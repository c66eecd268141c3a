"""The chunk plan of a pair's samples: chunks of :data:`CHUNK_SIZE` outputs per dataset and their seeds.

Chunk k of side s (``d``, ``d_prime``, or ``pair`` for a coupled draw) is
drawn from :func:`chunk_seed`, a :func:`audit.engine.plan.task_seed` named by the
pair, the side and k, so the samples do not depend on how many chunks run at
once, on n_jobs or on the backend (:mod:`audit.sampling.sampler` draws them,
:mod:`audit.sampling.chunk_pools` runs the draws).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.engine.plan import task_seed

CHUNK_SIZE = 10_000
"""Outputs per dataset in one chunk: fixed, so that samples are the same whatever the number of workers."""


@dataclass(frozen=True)
class PairSamples:
    """A pair's n outputs on d and on d'; ``coupled``: row i of both drawn from the same random numbers."""

    d: np.ndarray
    d_prime: np.ndarray
    coupled: bool
    redrawn: str | None = None
    """The error of the call for many outputs that raised, when the draw was redone one output per call
    (:func:`draw_pair_isolated`); None for a draw in batches."""


@dataclass(frozen=True)
class Chunk:
    """Rows ``start`` to ``start + size`` of a pair's samples, chunk number ``index``.

    ``mode``: ``"independent"`` (d and d' from their own seeds), ``"coupled"``
    (both from clones of one generator), ``"d"`` or ``"d_prime"`` (one side
    alone from its independent seed: the samplers draw an independent chunk's
    sides as two jobs, and ``"d_prime"`` is also the redraw of a pair whose
    coupling was refused).
    """

    index: int
    size: int
    mode: str


def chunk_seed(seed: int, pair: str, side: str, index: int) -> np.random.SeedSequence:
    """The seed of chunk ``index`` of side ``side`` (``d``, ``d_prime`` or ``pair``) of a pair.

    Chunk 0 is named ``"<pair>|<side>"``, the name of a whole side's seed
    before samples were chunked, so that audits of at most :data:`CHUNK_SIZE`
    outputs draw the numbers they drew then; chunk k > 0 is ``"<pair>|<side>|chunk<k>"``.
    """
    return task_seed(seed, f"{pair}|{side}" if index == 0 else f"{pair}|{side}|chunk{index}")


def plan_chunks(n: int, coupled: bool) -> list[Chunk]:
    """The chunks of n outputs per dataset: ``CHUNK_SIZE`` each, the last one the remainder."""
    mode = "coupled" if coupled else "independent"
    return [Chunk(k, min(CHUNK_SIZE, n - start), mode) for k, start in enumerate(range(0, n, CHUNK_SIZE))]
