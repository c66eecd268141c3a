"""Drawing a pair's outputs: seeded chunks, coupled sampling and its fallback, forked children with a time limit.

A pair's n outputs on d and on d' are drawn in chunks of :data:`CHUNK_SIZE`
outputs per dataset (the last one shorter).  Chunk k of side s (``d``,
``d_prime``, or ``pair`` for a coupled draw) is drawn from
:func:`audit.sampling.chunks.chunk_seed`, a :func:`audit.engine.plan.task_seed` named by the pair, the side
and k, so the samples do not depend on how many chunks run at once, on
n_jobs or on the backend: the chunks are concatenated in their order.

Coupled sampling (``[attacks] coupled = true``): each chunk's outputs on d and
d' are drawn from two clones of one generator, so that row i of both comes
from the same random numbers (common random numbers) and the attacks use the
paired intervals (:mod:`attacks.paired_ratio`).  Rows can be paired only if
the mechanism spends the same randomness on both datasets: when the two
generators' states differ after any chunk, every chunk of d' is drawn again
from its independent seed and the pair's rows say so
(:data:`COUPLING_REFUSED`).  Equal states are necessary, not sufficient: a
mechanism must also spend the random numbers of row i on row i whatever the
input, as vectorised samplers do.  Mechanisms that ignore the generator (the
OpenDP and PyDP adapters draw from the operating system) leave both states
untouched: their pairs are independent, for which the paired intervals are
still valid.

Isolation: on Linux every chunk is drawn in a forked child process within
``[run] sample_timeout`` seconds, so a mechanism that raises, calls
``sys.exit``, kills its process or hangs costs its pair's rows (error rows
naming the cause), not the audit.  Where the children run follows ``[run]
backend`` (:class:`ChunkSampler`): with ``loky`` and ``threading`` they are
forked from this process, up to one per worker at once, each drawing a batch
of one pair's chunks (a pair's chunks split evenly over the workers, so that
forks stay few), and the mechanism is never pickled; with ``dask`` and
``ray`` each chunk is a job of the cluster whose worker forks the child
(:func:`audit.sampling.chunk_pools._cluster_job`), so the mechanism runs on the cluster's machines; it
is pickled by cloudpickle, the user's own modules by value, so that no
worker needs the config's folder or the current directory on its path.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from attacks.candidates import Draw
from audit.sampling.chunk_pools import ForkPool, pool_for
from audit.sampling.chunks import CHUNK_SIZE, Chunk, PairSamples, chunk_seed, plan_chunks
from audit.sampling.errors import MechanismError, one_line
from audit.sampling.isolation import FORK
from audit.inputs.neighbours import NeighbourPair
from audit.engine.plan import task_seed
from audit.sampling.structure import StructureEncoder

COUPLING_REFUSED = (
    "coupled sampling refused: the mechanism spends different randomness on d and d'; independent samples used"
)
"""The note on the rows of a pair whose samples could not be coupled."""


def draw_chunk(mechanism: Any, pair: NeighbourPair, chunk: Chunk, seed: int) -> PairSamples | str:
    """One chunk of the pair's outputs (the other side empty for a ``d`` or ``d_prime`` chunk), or the mechanism's
    error message.

    A coupled chunk whose generators end in different states has its d' drawn
    again from the independent seed and ``coupled=False`` (module docstring).
    """
    from audit.mechanisms import check_output, sample_coupled

    def independent(dataset: np.ndarray, side: str, width: int | None = None) -> np.ndarray:
        rng = np.random.default_rng(chunk_seed(seed, pair.name, side, chunk.index))
        return check_output(mechanism.sample(dataset, chunk.size, rng), chunk.size, width)

    coupled = chunk.mode == "coupled"
    try:
        if chunk.mode == "d":
            return PairSamples(independent(pair.d, "d"), np.empty((0, 0)), False)
        if chunk.mode == "d_prime":
            return PairSamples(np.empty((0, 0)), independent(pair.d_prime, "d_prime"), False)
        if coupled:
            (p, q), coupled = sample_coupled(mechanism, (pair.d, pair.d_prime), chunk.size,
                                             chunk_seed(seed, pair.name, "pair", chunk.index))
            p = check_output(p, chunk.size)
            q = check_output(q, chunk.size, p.shape[1])
        else:
            p = independent(pair.d, "d")
        if not coupled:
            q = independent(pair.d_prime, "d_prime", p.shape[1])
    except (Exception, SystemExit) as error:  # any failure of the audited code is reported in its rows
        return _failure(mechanism, pair, error)
    return PairSamples(p, q, coupled)


class Raised(str):
    """The error message of a chunk whose mechanism call raised an exception (not malformed outputs, an exit,
    MemoryError, RecursionError, a timeout or a dead process): :func:`draw_pair_isolated` draws the pair again
    one output per call."""


def _failure(mechanism: Any, pair: NeighbourPair, error: BaseException) -> str:
    """The message of what a mechanism call raised; a :class:`Raised` one for an exception of the audited code."""
    if isinstance(error, SystemExit):
        text = one_line(error)
    else:  # capaudit's own errors say what failed; another exception is named by its type too
        named = str(error) if isinstance(error, MechanismError) else f"{type(error).__name__}: {error}"
        text = " ".join(named.split())
    message = f"mechanism {mechanism.name!r} on pair {pair.name}: {text}"
    cause = error.__cause__ if isinstance(error, MechanismError) else error  # a user callable's error is wrapped
    # not events: malformed outputs (the output checks' own errors, without a cause), an exit, and running out of
    # memory or stack, which says what the process could hold, not what the mechanism releases
    event = isinstance(cause, Exception) and not isinstance(cause, (MemoryError, RecursionError))
    return Raised(message) if event else message


def draw_calls(mechanism: Any, pair: NeighbourPair, chunk: Chunk, seed: int) -> PairSamples | str:
    """One side's chunk (``chunk.mode`` ``"d"`` or ``"d_prime"``) drawn one output per call, each call that raises
    giving the row "the mechanism raised" of the mechanism's fixed layout (:meth:`StructureEncoder.raised`).

    The calls' generator is seeded ``"<pair>|<side>|calls"`` (chunk k > 0: ``|chunk<k>``), apart from the
    batch draws' seeds.
    """
    from audit.mechanisms import check_output

    dataset, encoder = (pair.d if chunk.mode == "d" else pair.d_prime), mechanism.structure
    rng = np.random.default_rng(chunk_seed(seed, pair.name, f"{chunk.mode}|calls", chunk.index))
    width = encoder.raised(1).shape[1]
    rows = []
    for _ in range(chunk.size):
        try:
            rows.append(check_output(mechanism.sample(dataset, 1, rng), 1, width))
        except Exception as error:
            failure = _failure(mechanism, pair, error)
            if not isinstance(failure, Raised):
                return failure
            rows.append(encoder.raised(1))
    drawn = np.concatenate(rows)
    return PairSamples(drawn, np.empty((0, 0)), False) if chunk.mode == "d" else PairSamples(np.empty((0, 0)), drawn, False)


def draw_pair(mechanism: Any, pair: NeighbourPair, n: int, seed: int, coupled: bool) -> PairSamples | str:
    """The pair's n samples on d and d', drawn in this process chunk by chunk, or the mechanism's error message.

    The same numbers as :class:`ChunkSampler` draws in its children.
    """
    draws = _PairDraw(pair, n, coupled)
    while not draws.done:
        chunk = draws.next_chunk()
        draws.add(chunk, draw_chunk(mechanism, pair, chunk, seed))
    return draws.result()


def draw_pair_isolated(mechanism: Any, pair: NeighbourPair, n: int, seed: int, coupled: bool, *, workers: int = 1,
                       timeout: float = 600.0, on_chunk: Callable[[int], Any] = lambda k: None,
                       backend: str = "loky") -> PairSamples | str:
    """:func:`draw_pair`'s numbers, drawn isolated within ``timeout`` seconds a chunk (:class:`ChunkSampler`).

    A mechanism that exits, kills its process, hangs or returns malformed
    outputs gives the pair's error message; the engine's pair sampler
    (:func:`pair_sampler`) and the ``[[checks]]`` sample through
    it.  ``on_chunk``, ``backend``: as :class:`ChunkSampler`'s.

    A call that raises is an observable event when the mechanism's layout is
    fixed (:func:`audit.sampling.structure.fix_layout`): the pair's n outputs per
    dataset are then drawn again independently, one output per call
    (:func:`draw_calls`), each call that raises giving the row "the mechanism
    raised", so that a mechanism raising on one dataset only is evidence with
    its counts (k of n calls on d, k' of n on d') and a mechanism raising at
    random is audited with the event among its outputs.  The whole draw
    switches, both datasets at once, so that its rows on d and d' come from
    one procedure whatever raised.  A pair on which every call on both
    datasets raised gives the first error message: the mechanism fails on
    everything there, which is an error, not evidence.  A redrawn draw
    carries the error that made it switch (``redrawn``), so that the report
    says what was absorbed.
    """
    samples = _draw_isolated(functools.partial(draw_chunk, mechanism, seed=seed), pair, n, coupled, workers, timeout,
                             on_chunk, backend)
    encoder = getattr(mechanism, "structure", None)
    if not (isinstance(samples, Raised) and isinstance(encoder, StructureEncoder) and encoder.fixed):
        return samples
    calls = _draw_isolated(functools.partial(draw_calls, mechanism, seed=seed), pair, n, False, workers, timeout,
                           on_chunk, backend)
    if isinstance(calls, str):
        return calls
    if encoder.is_raised(calls.d).all() and encoder.is_raised(calls.d_prime).all():
        return f"{samples} (every one of {n} one-output calls raised, on d and on d')"
    return dataclasses.replace(calls, redrawn=str(samples))


def _draw_isolated(draw: Callable, pair: NeighbourPair, n: int, coupled: bool, workers: int, timeout: float,
                   on_chunk: Callable[[int], Any], backend: str) -> PairSamples | str:
    """One pair's samples or error message from a :class:`ChunkSampler` of ``draw``."""
    sampler = ChunkSampler(draw, [pair], n, coupled, workers, timeout, on_chunk=on_chunk, backend=backend)
    try:
        [(_, samples)] = list(sampler)
    finally:
        sampler.close()
    return samples


class _PairDraw:
    """The chunks of one pair: those to draw, those drawn, and the samples they make (or the pair's error).

    An independent chunk is drawn as two jobs, one per side, so that even a
    pair of one chunk keeps two workers busy; a coupled chunk is one job.
    """

    def __init__(self, pair: NeighbourPair, n: int, coupled: bool):
        self.pair = pair
        plan = plan_chunks(n, coupled)
        self.todo = collections.deque(
            plan if coupled else [Chunk(chunk.index, chunk.size, side) for chunk in plan for side in ("d", "d_prime")])
        self.drawn: dict[int, PairSamples] = {}
        """Coupled chunks by index."""
        self.sides: dict[str, dict[int, np.ndarray]] = {"d": {}, "d_prime": {}}
        """One side's chunks by index: an independent chunk's halves, or the d' redraws of a refused coupling."""
        self.coupled = coupled
        self.running = 0
        self.chunks = len(self.todo)
        self.planned = len(plan)
        """Chunks of the plan (not redraws) still to finish; all of them once the pair failed."""
        self.error: str | None = None

    @property
    def done(self) -> bool:
        return self.error is not None or (not self.todo and self.running == 0)

    def next_chunk(self) -> Chunk:
        self.running += 1
        return self.todo.popleft()

    def next_batch(self, size: int) -> list[Chunk]:
        """Up to ``size`` chunks to draw one after the other in one child."""
        return [self.next_chunk() for _ in range(min(size, len(self.todo)))]

    def add(self, chunk: Chunk, result: PairSamples | str) -> None:
        """Record a finished chunk; once all are in, queue the d' redraws of a pair whose coupling was refused."""
        self.running -= 1
        if isinstance(result, str):
            self.error, self.planned = self.error or result, 0
            self.todo.clear()
            return
        if chunk.mode == "coupled":
            self.drawn[chunk.index], self.planned = result, self.planned - 1
        else:
            self.sides[chunk.mode][chunk.index] = result.d if chunk.mode == "d" else result.d_prime
            if not self.coupled and all(chunk.index in side for side in self.sides.values()):
                self.planned -= 1
        if self.coupled and not self.todo and self.running == 0 and not self.sides["d_prime"]:
            refused = [k for k, part in self.drawn.items() if not part.coupled]
            paired = [k for k, part in self.drawn.items() if part.coupled]
            if refused and paired:
                self.todo.extend(Chunk(k, self.drawn[k].d.shape[0], "d_prime") for k in sorted(paired))

    def result(self) -> PairSamples | str:
        """The chunks concatenated in their order, or the first error; a width that changes between chunks is one."""
        if self.error is not None:
            return self.error
        if self.coupled:
            indices = sorted(self.drawn)
            d = [self.drawn[k].d for k in indices]
            d_prime = [self.sides["d_prime"].get(k, self.drawn[k].d_prime) for k in indices]
            coupled = all(part.coupled for part in self.drawn.values())
        else:
            indices = sorted(self.sides["d"])
            d, d_prime = [self.sides["d"][k] for k in indices], [self.sides["d_prime"][k] for k in indices]
            coupled = False
        widths = sorted({array.shape[1] for array in d + d_prime})
        if len(widths) > 1:
            return (f"sampling pair {self.pair.name}: the mechanism's output width changed between chunks of "
                    f"{CHUNK_SIZE} outputs or between d and d' (widths {widths})")
        return PairSamples(np.concatenate(d), np.concatenate(d_prime), coupled)


class ChunkSampler:
    """Draw the pairs' chunks, up to ``workers`` at once, isolated and timed; iterate over the sampled pairs.

    A chunk is drawn as one job (coupled) or two (independent: one per
    dataset, :class:`_PairDraw`).  With ``backend`` ``"loky"`` or
    ``"threading"`` the jobs run in children forked from this process, each
    child drawing a batch of ceil(jobs of the pair / workers) jobs of one pair
    and sending them one by one.  With ``"dask"`` or ``"ray"`` every job is a
    task of the cluster this process is connected to
    (:func:`audit.sampling.parallel.cluster`): the task forks a child of its worker
    that draws it (:func:`audit.sampling.chunk_pools._cluster_job`), so the mechanism runs on the
    cluster's machines with the same isolation.
    Iterating yields ``(pair, PairSamples or error message)`` as pairs are
    complete (their order may vary; their samples do not).  A chunk that runs
    longer than ``timeout`` seconds is killed and its pair gets a message
    naming ``run.sample_timeout``; one whose child dies without answering
    (``os._exit``, a crash, the out-of-memory killer) gets one with its exit
    code, as does one whose cluster worker died; the pair's other chunks are
    then stopped.  At most ``workers + 1`` pairs are sampled and not yet
    handed out, so memory stays bounded.  :meth:`advance` lets the caller draw
    on while it attacks the pairs already handed out.

    Parameters
    ----------
    draw : callable
        ``draw(pair, chunk) -> PairSamples or str`` (:func:`draw_chunk` with its mechanism and seed).
    pairs : sequence of NeighbourPair
    n : int
        Outputs per dataset.
    coupled : bool
    workers : int
        Jobs at once.
    timeout : float
        Seconds a chunk may take (``run.sample_timeout``).
    on_chunk : callable, optional
        ``on_chunk(k)``: k more chunks of the plan are finished (a progress bar; a
        failed pair's chunks count as finished, the redraws of refused couplings not at all).
    backend : str
        ``run.backend``.  ``"dask"`` and ``"ray"`` need their cluster to be
        running (inside :func:`audit.sampling.parallel.backend`).
    """

    def __init__(self, draw: Callable[[NeighbourPair, Chunk], PairSamples | str], pairs: Sequence[NeighbourPair],
                 n: int, coupled: bool, workers: int, timeout: float, on_chunk: Callable[[int], Any] = lambda k: None,
                 *, backend: str = "loky"):
        self.draw, self.n, self.coupled, self.timeout, self.on_chunk = draw, n, coupled, timeout, on_chunk
        self.workers = max(workers, 1)
        self.waiting = collections.deque(pairs)
        self.active: dict[str, _PairDraw] = {}
        self.running: dict[Any, tuple[_PairDraw, list[Chunk], float]] = {}
        """Job -> (pair, the job's chunks not yet received, when its current chunk started)."""
        self.sampled: collections.deque = collections.deque()
        self.pool = pool_for(backend, draw, timeout)

    def __iter__(self) -> Iterator[tuple[NeighbourPair, PairSamples | str]]:
        while self.waiting or self.active or self.sampled:
            if self.sampled:
                yield self.sampled.popleft()
            else:
                self.advance(block=True)

    def advance(self, block: bool = False) -> None:
        """Start chunks on free workers and collect the finished ones; ``block``: wait for at least one."""
        if not FORK and isinstance(self.pool, ForkPool):  # Windows, macOS: in this process, without a timeout
            if block and (draws := self._next()) is not None:
                chunk = draws.next_chunk()
                self._finish_chunk(draws, chunk, self.draw(draws.pair, chunk))
            return
        self._fill()
        if not self.running:
            return
        for job, result in self.pool.collect(self.running, block):
            if job not in self.running:  # stopped meanwhile with its pair's other chunks
                continue
            draws, batch, _ = self.running[job]
            chunk = batch.pop(0)
            if batch and not isinstance(result, str):  # the child goes on with its next chunk
                self.running[job] = (draws, batch, time.monotonic())
            else:
                self._stop(job)
            self._finish_chunk(draws, chunk, result)
        self._fill()

    def close(self) -> None:
        """Stop every running child and job."""
        for job in list(self.running):
            self._stop(job)

    def _next(self) -> _PairDraw | None:
        """The pair whose next chunk goes next: the first active pair with chunks to draw, else a new pair."""
        for draws in self.active.values():
            if draws.todo:
                return draws
        if self.waiting and len(self.active) + len(self.sampled) <= self.workers:
            pair = self.waiting.popleft()
            self.active[pair.name] = _PairDraw(pair, self.n, self.coupled)
            return self.active[pair.name]
        return None

    def _fill(self) -> None:
        """Start a job per free worker, each for a batch of a pair's chunks: a pair is spread over the workers."""
        while len(self.running) < self.workers and (draws := self._next()) is not None:
            batch = draws.next_batch(self.pool.batch_size(draws.chunks, self.workers))
            self.running[self.pool.start(draws.pair, batch)] = (draws, batch, time.monotonic())

    def _finish_chunk(self, draws: _PairDraw, chunk: Chunk, result: PairSamples | str) -> None:
        planned = draws.planned
        draws.add(chunk, result)
        self.on_chunk(planned - draws.planned)
        if not draws.done:
            return
        for job, (other, *_) in list(self.running.items()):  # a failed pair's other chunks
            if other is draws:
                self._stop(job)
        del self.active[draws.pair.name]
        self.sampled.append((draws.pair, draws.result()))

    def _stop(self, job: Any) -> None:
        del self.running[job]
        self.pool.stop(job)


class SamplingError(RuntimeError):
    """The mechanism failed on a pair (the sampler's message)."""


def pair_sampler(mechanism: Any, pairs: Sequence[NeighbourPair], seed: int, coupled: bool, *, workers: int = 1,
                 timeout: float = 600.0, on_outputs: Callable[[int], Any] = lambda n: None,
                 failed: dict[str, str] | None = None, backend: str = "loky",
                 on_redrawn: Callable[[int, str], Any] = lambda pair, error: None):
    """The sampling callable of :mod:`attacks.staged` over ``pairs``; the staged search may call it from several
    threads at once (``on_outputs`` must allow that).

    ``sample(pair, n, stage, chunk)`` draws n outputs on pair ``pair``'s d and
    d' with :func:`draw_pair_isolated` (forked children or, with ``backend`` dask or ray, jobs
    of its cluster; ``timeout`` seconds a chunk),
    from the seed of ``"staged|<stage>|<chunk>"``.  ``on_outputs(k)``: k more
    outputs per dataset are drawn (as each chunk of :data:`audit.sampling.chunks.CHUNK_SIZE`
    comes in; a failed pair's outputs count as drawn).  A pair named in
    ``failed`` (pair name -> message, e.g. the memory check's probe) is not
    sampled again: it fails at once with its message.  A failure raises
    :class:`SamplingError`.  ``on_redrawn(pair, error)``: a draw of the pair
    was redone one output per call after a call for many outputs raised
    ``error`` (:func:`draw_pair_isolated`).
    """
    failed = failed or {}

    def sample(pair: int, n: int, stage: str, chunk: int) -> Draw:
        if pairs[pair].name in failed:
            on_outputs(n)
            raise SamplingError(failed[pairs[pair].name])
        key = int(task_seed(seed, f"staged|{stage}|{chunk}").generate_state(1)[0])
        counted = 0

        def on_chunk(chunks: int) -> None:
            nonlocal counted
            step = min(chunks * CHUNK_SIZE, n - counted)
            counted += step
            on_outputs(step)

        try:
            drawn = draw_pair_isolated(mechanism, pairs[pair], n, key, coupled, workers=workers, timeout=timeout,
                                       on_chunk=on_chunk, backend=backend)
        finally:
            on_outputs(n - counted)
        if isinstance(drawn, str):
            raise SamplingError(drawn)
        if drawn.redrawn is not None:
            on_redrawn(pair, drawn.redrawn)
        return Draw(drawn.d, drawn.d_prime, drawn.coupled)

    return sample
