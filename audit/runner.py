"""The audit's orchestrator: plan the tasks, sample the pairs in chunks, attack them in parallel, store each row.

The jobs live in their own modules: the tasks, their ids and seeds in
:mod:`audit.plan`; drawing a pair's outputs in seeded chunks, in forked
children within ``run.sample_timeout`` (coupled or not) in
:mod:`audit.sampling`; the append-only ``tasks.jsonl`` and resume in
:mod:`audit.store`; joblib backends and progress in :mod:`audit.parallel`.
This module runs them together (:func:`run_tasks`) and attacks one task
(:func:`_run_task`, in a worker).

Pairs are attacked as soon as their chunks are in, while the chunks of the
next pairs are drawn: the sampler advances between finished attacks.  Each
chunk and each attack draws from its own named seed, so results do not depend
on n_jobs, the backend or the order in which jobs finish.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import joblib
import numpy as np

from audit import parallel, store
from audit.config import AuditConfig
from audit.neighbours import NeighbourPair
from audit.plan import MEMORY_FRACTION, Task, available_memory, estimate_memory, plan_hash, plan_tasks, task_seed
from audit.theory.exact import exact_value, known_laws
from audit.theory.table import theory_bound
from audit.sampling import (
    COUPLING_REFUSED,
    ChunkSampler,
    PairSamples,
    draw_chunk,
    draw_pair,
    one_line,
    plan_chunks,
)

__all__ = ["COUPLING_REFUSED", "DETERMINISTIC_NOTE", "PairSamples", "draw_pair", "run_tasks", "task_seed"]
"""``task_seed``, ``PairSamples``, ``draw_pair`` and ``COUPLING_REFUSED`` are re-exported for callers of the runner."""


def run_tasks(
    config: AuditConfig,
    mechanism: Any,
    pairs: Sequence[NeighbourPair],
    out_dir: str | os.PathLike | None = None,
    *,
    resume: bool = False,
    progress: bool = True,
    finished: dict[str, dict] | None = None,
) -> tuple[dict[str, dict], dict[str, Any]]:
    """Run the audit's tasks in parallel and return their records.

    Each pair's outputs are drawn in chunks (:class:`audit.sampling.ChunkSampler`),
    each chunk in a child process of its own, at most one per worker at once
    and each within ``run.sample_timeout`` seconds; the pairs are attacked one
    after the other as their chunks come in (each pair's tasks in parallel),
    while the next pairs' chunks are drawn, and every finished task is
    appended to ``tasks.jsonl`` at once.  A failure of the audited code (an
    exception, ``sys.exit``, a process that dies or hangs) and a failure of
    the attack workers (a worker that dies) become error rows of the pair's
    tasks, never an exception.  The main thread never blocks on anything but
    the children and the attacks, so Ctrl-C stops the audit at once.

    Parameters
    ----------
    config : AuditConfig
    mechanism : Mechanism
        Built from ``config.mechanism``.
    pairs : sequence of NeighbourPair
    out_dir : path, optional
        Where ``tasks.jsonl`` is written; None keeps everything in memory.
    resume : bool
        Keep the records of ``out_dir/tasks.jsonl`` and run only the missing tasks.
    progress : bool
        Show a tqdm progress bar on stderr (chunks sampled plus tasks attacked).
    finished : dict, optional
        Filled with task id -> record as tasks finish, so that a caller
        interrupted by ``KeyboardInterrupt`` still holds the finished records.

    Returns
    -------
    records : dict
        Task id -> record (the task's fields, ``estimate``, ``unbounded``,
        ``error``, ``note``, ``exact``, ``theory_bound``, ``seconds``,
        ``resumed``: read back from ``tasks.jsonl`` by ``resume``).
    evidence : dict
        Task id -> the task's ``DivergenceEstimate`` (None when it has none).

    Raises
    ------
    ValueError
        When the plan would not fit in memory, or ``resume`` meets a results
        file written by a different config or edited since (a checksum fails).
    """
    tasks = plan_tasks(config, [pair.name for pair in pairs])
    plan = plan_hash(config, tasks)
    path = None if out_dir is None else Path(out_dir) / store.TASKS_FILE
    records = {} if finished is None else finished
    evidence: dict[str, Any] = {}
    if resume and path is not None:
        read_records, read_evidence = store.read_finished(path, plan)
        records.update(read_records)
        evidence.update(read_evidence)
    pending = [task for task in tasks if task.id not in records]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resume:
            path.write_text("")
    pending_pairs = [pair for pair in pairs if any(task.pair == pair.name for task in pending)]
    workers = joblib.effective_n_jobs(config.run.n_jobs)
    draw = functools.partial(draw_chunk, mechanism, seed=config.run.seed)
    probed = check_memory(config, pending_pairs, draw)
    n, coupled = config.attacks.n_samples, config.attacks.coupled
    to_sample = [pair for pair in pending_pairs if pair.name not in probed]
    chunks = len(plan_chunks(n, coupled)) * len(to_sample)
    bar = parallel.progress_bar(chunks + len(tasks), len(tasks) - len(pending), progress)

    def keep(record: dict, estimate: Any) -> None:
        record.update(plan=plan, resumed=False)
        records[record["task"]], evidence[record["task"]] = record, estimate
        if path is not None:
            store.append(path, record, estimate)
        bar.update()

    # Chunks are drawn in child processes while this process attacks the pairs already sampled; the
    # sampler advances (new children, deadlines) between finished attacks, so a hung chunk only costs its timeout.
    sampler = ChunkSampler(draw, to_sample, n, coupled, workers, config.run.sample_timeout, on_chunk=bar.update)
    failed = [(pair, probed[pair.name]) for pair in pending_pairs if pair.name in probed]
    with bar, parallel.backend(config.run.backend, config.run.n_jobs), contextlib.closing(sampler):
        for count, (pair, samples) in enumerate(itertools.chain(failed, sampler), start=1):
            bar.set_postfix_str(f"pairs sampled {count}/{len(pending_pairs)}")
            laws = known_laws(mechanism, pair.d, pair.d_prime) if isinstance(samples, PairSamples) else None
            pair_tasks = [task for task in pending if task.pair == pair.name]
            jobs = [
                joblib.delayed(_run_task)(task, samples, laws, task_theory_bound(mechanism, task), config)
                for task in pair_tasks
            ]
            try:
                for record, estimate in parallel.finished(jobs, config.run.backend, config.run.n_jobs):
                    keep(record, estimate)
                    sampler.advance()
            except Exception as error:  # e.g. a worker killed (TerminatedWorkerError): the pair's unfinished tasks
                message = f"the attack workers failed: {one_line(error)}"
                for task in pair_tasks:
                    if task.id not in records:
                        keep(task_record(task, error=message), None)
    order = {task.id: i for i, task in enumerate(tasks)}
    ordered = dict(sorted(records.items(), key=lambda item: order[item[0]]))
    return ordered, {task: evidence.get(task) for task in ordered}


def task_theory_bound(mechanism: Any, task: Task) -> float | None:
    """The closed-form bound of the mechanism's law for the task (:mod:`audit.theory.table`); None when it has
    none or cannot compute it."""
    try:
        return theory_bound(getattr(mechanism, "theory_law", None), task.function_class, task.divergence, task.alpha)
    except (ArithmeticError, ValueError, IndexError):  # e.g. an overflow at epsilon = 1e308: unknown, not fatal
        return None


def _run_task(
    task: Task,
    samples: PairSamples | str,
    laws: tuple[Any, Any] | None,
    theory_bound: float | None,
    config: AuditConfig,
) -> tuple[dict, Any]:
    """Attack one task (in a worker); return its record and estimate."""
    from attacks.estimate import estimate_divergence

    start = time.perf_counter()
    record = task_record(task, theory_bound=theory_bound)
    estimate = None
    if isinstance(samples, str):
        record["error"] = samples
    else:
        p, q = (samples.d, samples.d_prime) if task.direction == "P|Q" else (samples.d_prime, samples.d)
        notes = [COUPLING_REFUSED] if config.attacks.coupled and not samples.coupled else []
        if laws is not None:
            record["exact"] = task_exact(task, laws)
        if _deterministic_release(p, q):
            notes.append(DETERMINISTIC_NOTE)
        try:
            estimate = estimate_divergence(
                p, q, task.function_class, task.divergence, alpha=task.alpha, delta=task.delta,
                train_fraction=config.attacks.train_fraction,
                random_state=int(task_seed(config.run.seed, task.id).generate_state(1)[0]),
                class_params=config.attacks.class_params.get(task.function_class),
                coupled=samples.coupled,
            )
        except Exception as error:  # an attack that fails costs its row, not the audit
            record["error"] = f"attack {task.function_class}/{task.divergence} failed: {one_line(error)}"
        else:
            record.update(estimate=float(estimate.estimate), unbounded=bool(estimate.unbounded))
            # verdicts need only the intervals and p-values, not the fitted adversary
            estimate = dataclasses.replace(estimate, adversary=None)
        record["note"] = "; ".join(notes)
    record["seconds"] = time.perf_counter() - start
    return record, estimate


DETERMINISTIC_NOTE = (
    "every output on D equal, every output on D' equal, and different: consistent with a deterministic release, "
    "but a finite sample bounds the divergence only by its size (dp and ipm rows: exact count bounds; "
    "kl and renyi rows: no spread to measure, never a violation)"
)
"""The note of a pair whose samples look deterministic.  A finite sample never proves infinity (a
randomized response at epsilon = 8 repeats one output 1 000 times in a row about 70 % of the time),
so such rows get the attacks' finite bounds like any other (CBDP Lemma 2's infinity is not claimed)."""


def _deterministic_release(p: np.ndarray, q: np.ndarray) -> bool:
    """Both samples repeat a single output and the two differ (see :data:`DETERMINISTIC_NOTE`)."""
    return bool(np.all(p == p[0]) and np.all(q == q[0]) and np.any(p[0] != q[0]))


def task_exact(task: Task, laws: tuple[Any, Any]) -> float | None:
    """The exact divergence of the task's class in its direction, from the pair's laws (P on d, Q on d')."""
    return exact_value(laws if task.direction == "P|Q" else laws[::-1], task.function_class, task.divergence,
                       task.alpha)


def task_record(task: Task, *, task_id: str | None = None, error: str | None = None,
                theory_bound: float | None = None) -> dict:
    """A task's record before its attack: the task's fields, its id (``task_id``, default ``task.id``), no estimate."""
    return dict(dataclasses.asdict(task), task=task.id if task_id is None else task_id, estimate=math.nan,
                unbounded=False, error=error, note="", exact=None, theory_bound=theory_bound, seconds=0.0)


def check_memory(config: AuditConfig, pairs: Sequence[NeighbourPair], draw: functools.partial, *,
                 n_samples: int | None = None, held_pairs: int | None = None) -> dict[str, str]:
    """Refuse a plan that would not fit in memory; the output width comes from two outputs of the first pair.

    ``n_samples`` outputs per dataset of ``held_pairs`` pairs are held at once
    (default: the rows engine's, every pair's ``attacks.n_samples``; the staged
    engine passes its largest stage and its finalists' pairs), and each worker
    fits on 2 ``n_samples`` rows (:func:`audit.plan.estimate_memory`).  The
    two outputs are drawn like every chunk (:class:`audit.sampling.ChunkSampler`);
    when that fails, the failure is returned as the first pair's (pair name ->
    message), so that a hung mechanism costs one timeout, not two, and the
    check is skipped.
    """
    if not pairs:
        return {}
    [(pair, samples)] = list(ChunkSampler(draw, pairs[:1], 2, config.attacks.coupled, 1, config.run.sample_timeout))
    if not isinstance(samples, PairSamples):
        return {pair.name: samples}
    dim = samples.d.shape[1]
    n = config.attacks.n_samples if n_samples is None else n_samples
    held = len(pairs) if held_pairs is None else held_pairs
    workers = joblib.effective_n_jobs(config.run.n_jobs)
    need = estimate_memory(n, dim, held, config.attacks.classes, workers,
                           class_params=config.attacks.class_params, backend=config.run.backend)
    have = available_memory()
    if have is not None and need > MEMORY_FRACTION * have:
        raise ValueError(
            f"the audit would need about {need / 2**30:.1f} GiB of memory ({held} pairs x 2 datasets x "
            f"{n} samples x d = {dim}, plus {workers} workers' processes and features) but only "
            f"{have / 2**30:.1f} GiB are available; lower attacks.n_samples or run.n_jobs. "
            f"Found n_samples = {config.attacks.n_samples}."
        )
    return {}

