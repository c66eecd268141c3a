"""Where the attacks run: joblib backends (loky, threading, dask, ray), their clusters, results as they finish, progress.

The attacks of a pair are joblib jobs; :func:`finished` yields their results
as they finish so that each reaches ``tasks.jsonl`` and the progress bar at
once.  Sampling does not go through joblib (:mod:`audit.sampling`): with
loky and threading it runs in children forked from this process, so the
mechanism is never pickled; with dask and ray each chunk is a job of the
cluster :func:`cluster` connects to.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import joblib
from tqdm import tqdm

from audit.import_path import import_frozen, safe_worker_path


def progress_bar(total: int, initial: int, enabled: bool) -> tqdm:
    """The audit's bar on stderr: chunks sampled plus tasks attacked; off when not ``enabled`` (``--quiet``).

    When stderr is not a terminal it redraws at most every 30 s, so CI logs are not flooded.
    """
    options = {} if sys.stderr.isatty() else {"mininterval": 30.0}
    return tqdm(total=total, initial=initial, desc="audit", unit="step", file=sys.stderr, disable=not enabled,
                **options)


@contextmanager
def backend(name: str, n_jobs: int) -> Iterator[None]:
    """joblib's backend ``name``; dask and ray need their packages (checked by the config).

    Workers started meanwhile do not put their current directory on
    ``sys.path`` (:func:`audit.import_path.safe_worker_path`).
    """
    with safe_worker_path(), cluster(name, joblib.effective_n_jobs(n_jobs)), joblib.parallel_config(backend=name), \
            _started(name, n_jobs):
        yield


@contextmanager
def _started(name: str, n_jobs: int) -> Iterator[None]:
    """loky: start the workers now, each importing the attacks, while this process goes on (structure pilot,
    memory check, the first samples): a worker's start costs about a second of imports (scikit-learn), which
    the first attacks would otherwise wait for."""
    workers = joblib.effective_n_jobs(n_jobs)
    if name != "loky" or workers <= 1:
        yield
        return
    starter = threading.Thread(target=_start_workers, args=(n_jobs, workers), daemon=True)
    starter.start()
    try:
        yield
    finally:
        starter.join()


def _start_workers(n_jobs: int, workers: int) -> None:
    try:
        joblib.Parallel(n_jobs=n_jobs, backend="loky")(joblib.delayed(_import_attacks)() for _ in range(workers))
    except Exception:  # noqa: BLE001 - the attacks' own jobs report what fails
        pass


def _import_attacks() -> None:
    import_frozen(("attacks.staged",))


@contextmanager
def cluster(name: str, workers: int) -> Iterator[None]:
    """For dask and ray: the cluster this process is connected to, else a local one for the audit.

    The local cluster has ``workers`` single-threaded workers and no
    dashboard, and is shut down when the audit ends; a cluster the caller
    started (``distributed.Client(...)``, ``ray.init(...)``) is left running.
    """
    if name == "dask":
        from distributed import Client, get_client

        try:
            get_client()
        except ValueError:  # no client in this process
            with Client(n_workers=workers, threads_per_worker=1, dashboard_address=None):
                yield
            return
    if name == "ray":
        import ray
        from ray.util.joblib import register_ray

        register_ray()
        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False)
            try:
                yield
            finally:
                ray.shutdown()
            return
    yield


def finished(jobs: Iterable, backend: str, n_jobs: int) -> Iterator[Any]:
    """The jobs' results as they finish.

    joblib's ray backend returns whole lists only: there the jobs go in
    batches of one per worker to one pool, so that finished tasks still reach
    ``tasks.jsonl`` (and the progress bar) before the audit ends.
    """
    if backend != "ray":
        yield from joblib.Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs)
        return
    jobs = iter(jobs)
    with joblib.Parallel(n_jobs=n_jobs) as parallel:
        while batch := list(itertools.islice(jobs, joblib.effective_n_jobs(n_jobs))):
            yield from parallel(batch)
