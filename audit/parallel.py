"""Where the attacks run: joblib backends (threading, loky, dask, ray), their clusters, progress.

The attacks' fits and summaries are joblib jobs of the chosen backend:
threads of the audit's process by default (``threading``), fresh worker
processes with ``loky``, the cluster's workers with ``dask`` and ``ray``.
Sampling does not go through joblib (:mod:`audit.sampling`): with threading
and loky it runs in children forked from this process, so the mechanism is
never pickled; with dask and ray each chunk is a job of the cluster
:func:`cluster` connects to.

In the audit's process every BLAS and OpenMP library runs one thread
(:func:`backend`): a fit is one thread and the audit's parallelism is
``n_jobs``, as joblib arranges in loky's workers: OpenBLAS's own threads
cost the audit's tall, thin products CPU without shortening them
(docs/speed.md, "Why one BLAS thread").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import joblib
from threadpoolctl import threadpool_limits

from audit.import_path import import_frozen, safe_worker_path


@contextmanager
def backend(name: str, n_jobs: int) -> Iterator[None]:
    """joblib's backend ``name``, with one BLAS / OpenMP thread in this process; dask and ray need their
    packages (checked by the config).

    Workers started meanwhile do not put their current directory on
    ``sys.path`` (:func:`audit.import_path.safe_worker_path`).  The thread
    limit is restored on exit (``threadpoolctl``); children forked for
    sampling inherit it.
    """
    with safe_worker_path(), threadpool_limits(limits=1), cluster(name, joblib.effective_n_jobs(n_jobs)), \
            joblib.parallel_config(backend=name, **_worker_options(name)), _started(name, n_jobs):
        yield


def _worker_options(name: str) -> dict:
    """loky: every worker runs :func:`_exit_with_parent` first, so that none outlives an audit killed with kill -9."""
    return {"initializer": _exit_with_parent, "initargs": (os.getpid(),)} if name == "loky" else {}


def _exit_with_parent(parent: int) -> None:
    """In a loky worker: end it once the audit's process ``parent`` is gone (the worker is then re-parented).

    A watching thread rather than ``PR_SET_PDEATHSIG``: that signal follows the *thread* that started the
    worker, and loky starts workers from short-lived threads too (:func:`_started`)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


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
    try:  # the backend's options again: joblib's configuration is per thread
        with joblib.parallel_config(backend="loky", **_worker_options("loky")):
            joblib.Parallel(n_jobs=n_jobs)(joblib.delayed(_import_attacks)() for _ in range(workers))
    except Exception:  # noqa: BLE001 - the attacks' own jobs report what fails
        pass


def _import_attacks() -> None:
    import_frozen(("attacks.staged",))


@contextmanager
def cluster(name: str, workers: int) -> Iterator[None]:
    """For dask and ray: the cluster this process is connected to, else a local one for the audit.

    The local cluster has ``workers`` single-threaded workers, no
    dashboard and no log lines below errors, and is shut down when the audit ends; a cluster the caller
    started (``distributed.Client(...)``, ``ray.init(...)``) is left running.
    """
    if name == "dask":
        from distributed import Client, get_client

        try:
            get_client()
        except ValueError:  # no client in this process
            # its own logging off below errors: a failed audit's stderr is one line (audit.cli)
            with Client(n_workers=workers, threads_per_worker=1, dashboard_address=None, silence_logs=logging.ERROR):
                yield
            return
    if name == "ray":
        import ray
        from ray.util.joblib import register_ray

        register_ray()
        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, logging_level=logging.ERROR)
            try:
                yield
            finally:
                ray.shutdown()
            return
    yield
