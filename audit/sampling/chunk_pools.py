"""Where a pair's chunks are drawn: children forked from this process, or jobs of a dask or ray cluster.

The two pools of :class:`audit.sampling.sampler.ChunkSampler`, one interface
(``batch_size``, ``start``, ``collect``, ``stop``): :class:`ForkPool` (the
``loky`` and ``threading`` backends) forks a child per batch of a pair's
chunks; :class:`ClusterPool` (``dask``, ``ray``) runs each chunk as a job of
the cluster whose worker forks the child (:func:`_cluster_job`), the draw
pickled by cloudpickle with the user's own modules by value.  Both give a
chunk's samples or its pair's error message: a timeout
(:func:`timeout_message`), a child or worker that ended without a result,
or what the draw raised.  :func:`isolated_call` runs one call (a one-run
audit's training run) isolated the same way under ``[run] backend``: in a
child forked from this process, or as one job of the cluster
(:func:`cluster_call`).  Both submit, wait for, fetch and cancel their
cluster jobs through :class:`ClusterJobs`, which reads a lost worker as a
job that ended without a result.
"""

from __future__ import annotations

import functools
import multiprocessing.connection
import os
import sys
import time
from collections.abc import Callable, Collection, Iterator
from typing import Any

from audit.sampling import parallel
from audit.sampling.chunks import Chunk, PairSamples
from audit.sampling.errors import MechanismError, one_line
from audit.sampling.isolation import Child, call, fork
from audit.inputs.neighbours import NeighbourPair

CLUSTER_BACKENDS = ("dask", "ray")
"""Backends whose chunks are jobs of a cluster (:class:`ClusterPool`); the others fork children of this process."""
_WAIT = 1.0
"""Longest wait (seconds) for a cluster job before the sampler looks again: Ctrl-C stays prompt."""


def timeout_message(pair: NeighbourPair, timeout: float, size: int) -> str:
    """The error of a pair whose chunk of ``size`` outputs per dataset ran past ``run.sample_timeout``."""
    return (
        f"sampling pair {pair.name} took longer than run.sample_timeout = {timeout:g} s "
        f"(for a chunk of {size} outputs per dataset) and was stopped; raise "
        "run.sample_timeout if the mechanism is merely slow"
    )


class ForkPool:
    """Batches of jobs drawn in children forked from this process (loky and threading backends)."""

    def __init__(self, draw: Callable, timeout: float):
        self.draw, self.timeout = draw, timeout
        self.children: dict[Any, Any] = {}
        """Pipe -> its child process."""

    @staticmethod
    def batch_size(chunks: int, workers: int) -> int:
        return -(-chunks // workers)  # few forks: a pair's chunks split evenly over the workers

    def start(self, pair: NeighbourPair, batch: list[Chunk]) -> Any:
        receiver, self.children[receiver] = _spawn(self.draw, pair, batch)
        return receiver

    def collect(self, running: dict, block: bool) -> Iterator[tuple[Any, PairSamples | str]]:
        """(pipe, result) of each chunk that ended or ran past the timeout; ``block``: until one does."""
        deadline = min(started + self.timeout for *_, started in running.values())
        wait = max(0.0, deadline - time.monotonic()) if block else 0.0  # block: until a chunk ends or a deadline
        ready = multiprocessing.connection.wait(list(running), timeout=wait)
        for receiver, (draws, batch, started) in list(running.items()):
            if receiver not in running:  # stopped by the caller meanwhile, with its pair's other chunks
                continue
            if receiver in ready:
                yield receiver, _receive((receiver, self.children[receiver]), draws.pair)
            elif time.monotonic() >= started + self.timeout:
                yield receiver, timeout_message(draws.pair, self.timeout, batch[0].size)

    def stop(self, receiver: Any) -> None:
        process = self.children.pop(receiver)
        process.kill()
        process.join()
        receiver.close()


class ClusterJobs:
    """Jobs of the dask or ray cluster this process is connected to (the dask client, else the ray instance):
    submit, wait, fetch a result, cancel.  What :class:`ClusterPool` and :func:`cluster_call` both do with a job."""

    def __init__(self, backend: str):
        self.backend = backend
        self.remotes: dict[Callable, Any] = {}
        """A function -> its ray remote (ray only)."""
        if backend == "dask":
            from distributed import get_client

            self.client = get_client()
        else:
            import ray

            self.ray = ray

    def submit(self, function: Callable, *args: Any) -> Any:
        """``function(*args)`` as a job, never retried (a job that killed its worker must not kill another)."""
        if self.backend == "dask":
            return self.client.submit(function, *args, pure=False, retries=0)
        if function not in self.remotes:
            self.remotes[function] = self.ray.remote(max_retries=0)(function)
        return self.remotes[function].remote(*args)

    def done(self, jobs: list, wait: float) -> Collection:
        """The jobs of ``jobs`` that finished, after waiting up to ``wait`` seconds for the first."""
        if self.backend == "dask":
            from distributed import wait as wait_for

            try:
                return wait_for(jobs, timeout=wait, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                return ()
        return self.ray.wait(jobs, num_returns=1, timeout=wait)[0]

    def result(self, job: Any) -> Any:
        """A finished job's result.

        Raises
        ------
        MechanismError
            When the job ended without a result (its worker died, was killed by the out-of-memory killer, or
            left the cluster).
        """
        try:
            return job.result() if self.backend == "dask" else self.ray.get(job)
        except Exception as error:
            cause = getattr(error, "cause", None) or error  # ray wraps what the job raised, with a coloured traceback
            raise MechanismError(f"the {self.backend} job ended without a result ({one_line(cause)})") from None

    def cancel(self, job: Any) -> None:
        """Drop a job: a running ray task is interrupted, a running dask task runs on (dask cannot interrupt it)."""
        if self.backend == "dask":
            job.cancel()
        else:
            self.ray.cancel(job)  # not force=True: killing the worker would leave its child running


class ClusterPool:
    """Each job a task of the dask or ray cluster this process is connected to (:func:`_cluster_job`).

    The draw callable (the mechanism with it) is pickled once with
    cloudpickle, the user's own modules by value (:func:`_user_modules`), so
    that the workers need neither the config's folder nor the current
    directory on their path.
    """

    def __init__(self, backend: str, draw: Callable, timeout: float):
        self.timeout = timeout
        self.payload = _pickle_draw(draw)
        self.cluster = ClusterJobs(backend)
        self.collected: set[Any] = set()
        """Jobs whose result came back and which the sampler has not released yet."""

    @staticmethod
    def batch_size(chunks: int, workers: int) -> int:
        return 1

    def start(self, pair: NeighbourPair, batch: list[Chunk]) -> Any:
        [chunk] = batch
        return self.cluster.submit(_cluster_job, self.payload, pair, chunk, self.timeout)

    def collect(self, running: dict, block: bool) -> Iterator[tuple[Any, PairSamples | str]]:
        """(job, result) of each finished job; ``block``: wait up to :data:`_WAIT` seconds for one."""
        jobs = list(running)
        done = self.cluster.done(jobs, _WAIT if block else 0)
        for job in jobs:
            if job in done:
                self.collected.add(job)
                yield job, self._result(job, running[job][0].pair)

    def _result(self, job: Any, pair: NeighbourPair) -> PairSamples | str:
        try:
            return self.cluster.result(job)
        except MechanismError as error:
            return f"sampling pair {pair.name}: {error}"

    def stop(self, job: Any) -> None:
        """Drop a job's result.  A running ray task is interrupted (and kills its child); a running dask task
        ends at its own timeout (:func:`_cluster_job`), as dask cannot interrupt it.  A job whose result came
        back is not cancelled: ray ends the audit's process when a task it still completes was cancelled
        (``Check failed: ... Tried to complete task that was not pending``, exit code 1)."""
        if job in self.collected:
            self.collected.remove(job)
        else:
            self.cluster.cancel(job)


def pool_for(backend: str, draw: Callable, timeout: float) -> ForkPool | ClusterPool:
    """The pool of ``run.backend``: cluster jobs for :data:`CLUSTER_BACKENDS`, else children forked from this process."""
    return ClusterPool(backend, draw, timeout) if backend in CLUSTER_BACKENDS else ForkPool(draw, timeout)


def _pickle_draw(draw: Callable) -> bytes:
    """``draw`` pickled by cloudpickle, the user's modules by value (:class:`ClusterPool`)."""
    import cloudpickle

    modules = _user_modules()
    for module in modules:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(draw)
    finally:
        for module in modules:
            cloudpickle.unregister_pickle_by_value(module)


def _user_modules() -> list[Any]:
    """The loaded modules that are the user's files (a config's callable, what it imports, a script's), not
    capaudit's nor an installed package's: cluster workers may not have their folders on ``sys.path`` (ray's
    never do), and the folders must not be put there (a config's folder, the current directory)."""
    installed = _installed_paths()
    return [
        module for name, module in list(sys.modules.items())
        if name.partition(".")[0] not in ("__main__", "audit", "attacks")  # __main__ goes by value anyway
        and isinstance(getattr(module, "__file__", None), str)
        and not module.__file__.startswith(installed)
    ]


@functools.lru_cache(maxsize=1)
def _installed_paths() -> tuple[str, ...]:
    """Where installed packages and the standard library live, as given and with links resolved."""
    import sysconfig

    paths = {sysconfig.get_paths()[key] for key in ("purelib", "platlib", "stdlib", "platstdlib")}
    return tuple(sorted(paths | {os.path.realpath(path) for path in paths}))


def _cluster_job(payload: bytes, pair: NeighbourPair, chunk: Chunk, timeout: float) -> PairSamples | str:
    """A chunk drawn on a cluster worker: in a child forked from the worker, within ``timeout`` seconds.

    The child is killed at the timeout, so a hung mechanism holds its worker
    no longer than this; where processes cannot be forked the chunk is
    drawn in the worker itself, without a timeout.
    """
    import pickle

    kind, value = _isolated(functools.partial(_draw_one, pickle.loads(payload), pair, chunk), timeout)
    if kind == "timeout":
        return timeout_message(pair, timeout, chunk.size)
    return _ended_message(pair, value) if kind == "ended" else value


def isolated_call(backend: str, function: Callable[[], Any], timeout: float | None) -> Any:
    """``function()`` isolated as ``[run] backend`` draws a chunk: with ``dask`` and ``ray`` one job of the cluster
    (the caller's client / ray instance, else a local one of one worker: :func:`audit.sampling.parallel.backend`)
    whose worker forks the child (:func:`cluster_call`), else a child forked from this process
    (:func:`audit.sampling.isolation.call`); killed after ``timeout`` seconds (None: no limit).  Raises as
    :func:`cluster_call`."""
    if backend in CLUSTER_BACKENDS:
        with parallel.backend(backend, 1):
            return cluster_call(backend, function, timeout)
    return call(function, timeout)


def cluster_call(backend: str, function: Callable[[], Any], timeout: float | None) -> Any:
    """``function()`` as one job of the dask or ray cluster this process is connected to, in a child forked by the
    worker (:func:`audit.sampling.isolation.call`) that is killed after ``timeout`` seconds (None: no limit): the
    contract of ``call``, on the cluster.  ``function`` is pickled as :class:`ClusterPool`'s draws are (the user's
    modules by value); the wait is :data:`_WAIT` seconds at a time, so Ctrl-C stays prompt (it cancels the job).

    Raises
    ------
    TimeoutError
        When the child ran past ``timeout`` (it is killed).
    ChildProcessError
        When the child ended without a result; ``args[0]`` is its exit code.
    MechanismError
        When the job itself ended without a result (its worker died or left the cluster).
    """
    payload = _pickle_draw(function)
    cluster = ClusterJobs(backend)
    job = cluster.submit(_isolated_job, payload, timeout)
    try:
        while not cluster.done([job], _WAIT):
            pass
    except BaseException:  # Ctrl-C: the job is dropped (a running dask job ends at its own timeout)
        cluster.cancel(job)
        raise
    kind, value = cluster.result(job)
    if kind == "timeout":
        raise TimeoutError(f"ran past {timeout:g} s")
    if kind == "ended":
        raise ChildProcessError(value)
    return value


def _isolated_job(payload: bytes, timeout: float | None) -> tuple[str, Any]:
    """:func:`cluster_call`'s job on a worker: :func:`_isolated` of the pickled function."""
    import pickle

    return _isolated(pickle.loads(payload), timeout)


def _isolated(function: Callable[[], Any], timeout: float | None) -> tuple[str, Any]:
    """:func:`audit.sampling.isolation.call` on a worker: ``("done", result)``, ``("timeout", None)`` or
    ``("ended", exit code)``, tagged rather than raised, so that each cluster returns it alike."""
    try:
        return "done", call(function, timeout)
    except TimeoutError:
        return "timeout", None
    except ChildProcessError as error:
        return "ended", error.args[0]


def _draw_one(draw: Callable, pair: NeighbourPair, chunk: Chunk) -> PairSamples | str:
    """``draw(pair, chunk)``, or the message of whatever it raised."""
    try:
        return draw(pair, chunk)
    except BaseException as error:  # noqa: BLE001 - whatever the audited code does is its pair's error
        return f"sampling pair {pair.name} failed: {one_line(error)}"


def _spawn(draw: Callable, pair: NeighbourPair, batch: list[Chunk]) -> tuple[Any, Child]:
    """Fork a child (:func:`audit.sampling.isolation.fork`) that sends ``draw(pair, chunk)`` for each chunk of the batch in
    turn, and exits after the first error message (or the message of what ``draw`` raised)."""

    def work(send: Callable[[Any], None]) -> None:
        for chunk in batch:
            result = _draw_one(draw, pair, chunk)
            send(result)
            if isinstance(result, str):
                break

    return fork(work)


def _receive(child: tuple[Any, Any], pair: NeighbourPair) -> PairSamples | str:
    receiver, process = child
    try:
        return receiver.recv()
    except (EOFError, OSError):
        process.join()
        return _ended_message(pair, process.exitcode)


def _ended_message(pair: NeighbourPair, exitcode: int | None) -> str:
    """The error of a pair whose child ended without sending its chunk."""
    return (
        f"sampling pair {pair.name}: the mechanism's process ended without a result (exit code "
        f"{exitcode}: os._exit, a crash or the out-of-memory killer)"
    )
