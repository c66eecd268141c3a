"""Where the attacks run: joblib backends (threading, loky, dask, ray), their clusters, progress; ``[run]``.

The attacks' fits and summaries are joblib jobs of the chosen backend:
threads of the audit's process by default (``threading``), fresh worker
processes with ``loky``, the cluster's workers with ``dask`` and ``ray``.
Sampling does not go through joblib (:mod:`audit.sampling.sampler`): with threading
and loky it runs in children forked from this process, so the mechanism is
never pickled; with dask and ray each chunk is a job of the cluster
:func:`cluster` connects to.

In the audit's process every BLAS and OpenMP library runs one thread
(:func:`backend`): a fit is one thread and the audit's parallelism is
``n_jobs``, as joblib arranges in loky's workers: OpenBLAS's own threads
cost the audit's tall, thin products CPU without shortening them
(docs/speed.md, "Why one BLAS thread").

The ``[run]`` table (seed, workers, backend, time limits) is declared here
(:data:`RUN`) and read by :func:`run_spec`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import joblib
from threadpoolctl import threadpool_limits

from audit.config.fields import ConfigError, Field, Section, check_fields, value
from audit.config.import_path import import_frozen, safe_worker_path

BACKENDS = {"threading": None, "loky": None, "dask": ("distributed", "dask"), "ray": ("ray", "ray")}
"""Backend name -> (module it needs, capaudit extra that installs it), None for joblib's own."""
RUN = Section("run", (
    Field("seed", "integer", 0, low=0, limits="must be a non-negative integer",
          meaning="≥ 0: every sample, attack and generated pair derives from it; `--seed` overrides"),
    Field("n_jobs", "integer", 1, forbid=(0,), limits="must be a positive number of workers or negative (-1: all cores)",
          meaning="not 0; −1 uses every core; `--n-jobs` overrides. The numbers do not depend on it."),
    Field("backend", "string", "threading", choices=tuple(BACKENDS),
          meaning="joblib's backend, for the attacks and for sampling: with `threading` the fits run in threads of "
                  "the audit's process (each with one BLAS thread), with `loky` in fresh worker processes (each "
                  "importing numpy and SciPy first, about 1 CPU s: worth it only where fits hold the GIL, e.g. `mlp` on "
                  "many cores; [speed.md](speed.md)); with both, sampling runs in children forked from the audit's "
                  "process; with `dask` and `ray` every chunk of outputs is a job of the cluster (the caller's "
                  "client / ray instance, else a local one for the audit), drawn in a child its worker forks, so the "
                  "mechanism runs on the cluster's machines; it is pickled there, a config's `callable` module by "
                  "value; a `[one_run]` audit's training run is one job of the cluster (a local one of one worker "
                  "when the caller has none), in a child its worker forks. `dask` and `ray` need their extras (`pip install \".[dask]\"` in a capaudit checkout); "
                  "`--backend` overrides"),
    Field("sample_timeout", "number", 600.0, low=0.0, open_low=True,
          limits="must be a positive number of seconds, e.g. 600",
          meaning="> 0: seconds to sample one chunk of a pair (10 000 outputs per dataset, fewer when `n_samples` is "
                  "smaller; in a forked child on Linux, forked by a cluster worker with `dask` and `ray`); a pair "
                  "whose chunk takes longer, exits or dies becomes error rows naming the cause; a `[one_run]` audit's one training "
                  "run has the same limit, in a forked child too (forked by a cluster worker with `dask` and `ray`; a "
                  "learner that fails, exits, dies or hangs: exit 2)"),
    Field("max_seconds", "number", None, low=0.0, open_low=True,
          limits="must be a positive number of seconds, e.g. 600, or left out (no wall-clock limit)",
          default_doc="unset: no wall-clock limit",
          meaning="> 0: an audit without `n_samples` starts no round that it expects (4 × the last round's time) to "
                  "end after this many seconds; each search (claim, Rényi order and layer) runs in turn on its weighted "
                  "share of the seconds the searches before it left, as for `[attacks] max_outputs`. "
                  "Unset, the budget is counted in outputs only (`[attacks] max_outputs`), so the same config and "
                  "seed give the same numbers on any machine and under any load; set, a search it stops reads `time "
                  "limit`, and results.json (`machine_dependent`) and report.md say the numbers depend on the "
                  "machine"),
))
"""``[run]``'s fields (docs/config.md)."""


@dataclass(frozen=True)
class RunSpec:
    """``[run]``: the audit's seed, joblib's n_jobs and backend, each pair's sampling time limit (seconds), and
    the wall time after which a sequential audit stops looking (``max_seconds``; None, the default: no wall-clock
    limit, so that the numbers do not depend on the machine or its load)."""

    seed: int = RUN["seed"].default
    n_jobs: int = RUN["n_jobs"].default
    backend: str = RUN["backend"].default
    sample_timeout: float = RUN["sample_timeout"].default
    max_seconds: float | None = RUN["max_seconds"].default


def run_spec(table: Mapping[str, Any]) -> RunSpec:
    """A ``[run]`` table validated (also ``capaudit oakl``'s options); ConfigError names the field."""
    check_fields(table, RUN.names, "run")
    values = {entry.name: value(table, entry, f"run.{entry.name}") for entry in RUN.fields}
    needs = BACKENDS[values["backend"]]
    if needs is not None and importlib.util.find_spec(needs[0]) is None:
        from audit.config.validation import install_hint

        raise ConfigError(
            f"run.backend: {values['backend']!r} needs the {needs[0]!r} package, which is not installed; "
            f"{install_hint(needs[1])}; or use backend = \"threading\"."
        )
    return RunSpec(**values)


@contextmanager
def backend(name: str, n_jobs: int) -> Iterator[None]:
    """joblib's backend ``name``, with one BLAS / OpenMP thread in this process; dask and ray need their
    packages (checked by the config).

    Workers started meanwhile do not put their current directory on
    ``sys.path`` (:func:`audit.config.import_path.safe_worker_path`).  The thread
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
    memory check, the first samples): a worker's start costs about a second of imports (numpy, SciPy), which
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
            # its own logging off below errors: a failed audit's stderr is one line (audit.commands.cli)
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
