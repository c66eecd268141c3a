"""The audit's tasks: plan, seeds, samples, parallel attacks, an append-only results file, resume.

A task is one attack: (pair, direction, attack class, divergence, alpha, delta),
named by a stable id such as ``p0|P|Q|poly3|renyi|4|0``.  Directions: ``P|Q``
estimates Gamma(M(d) || M(d')), ``Q|P`` the reverse (THEORY.md section 1).
A class is attacked only on the divergences it can estimate
(:attr:`attacks.classes.FunctionClass.divergences`).

Reproducibility: the samples of each (pair, dataset) and the attack of each
task draw from their own ``numpy.random.SeedSequence([seed, h])``, h a hash of
the name, so results do not depend on n_jobs, the backend or the order in
which tasks finish.  Samples are drawn once per pair and dataset in the
parent process and shared by that pair's tasks; workers only attack.

Coupled sampling (``[attacks] coupled = true``): the outputs on d and d' are
drawn from two clones of one generator (seeded by the pair's name), so that
row i of both comes from the same random numbers (common random numbers) and
the attacks use the paired intervals (:mod:`attacks.paired_ratio`,
:func:`attacks.estimate.estimate_divergence`).  Rows can be paired only if
the mechanism spends the same randomness on both datasets: when the two
generators' states differ after sampling, d' is drawn again from its own
independent seed and the pair's rows say so (:data:`COUPLING_REFUSED`).
Equal states are necessary, not sufficient: a mechanism must also spend the
random numbers of row i on row i whatever the input, as vectorised
samplers do.  Mechanisms that ignore the generator (the OpenDP and PyDP
adapters draw from the operating system) leave both states untouched: their
pairs are independent, for which the paired intervals are still valid.

Each finished task is appended as one JSON line to ``DIR/tasks.jsonl``; a
resumed run reads it and redoes only the tasks it lacks.  The line's
``evidence`` holds the fitted estimate as plain numbers
(:func:`estimate_to_record`): every field of the ``DivergenceEstimate`` but
the fitted adversary, which is all its confidence intervals and p-values
(needed by the verdicts) read.  Reading it back runs no code, so resuming
from a directory written by someone else is safe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import joblib
import numpy as np
from tqdm import tqdm

from audit.config import AuditConfig
from audit.neighbours import NeighbourPair

if TYPE_CHECKING:
    from attacks.estimate import DivergenceEstimate

TASKS_FILE = "tasks.jsonl"
DIRECTIONS = ("P|Q", "Q|P")
MEMORY_FRACTION = 0.8
"""Largest share of the available memory a plan may need."""
COUPLING_REFUSED = (
    "coupled sampling refused: the mechanism spends different randomness on d and d'; independent samples used"
)
"""The note on the rows of a pair whose samples could not be coupled."""


@dataclass(frozen=True)
class PairSamples:
    """A pair's n outputs on d and on d'; ``coupled``: row i of both drawn from the same random numbers."""

    d: np.ndarray
    d_prime: np.ndarray
    coupled: bool


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


def plan_tasks(config: AuditConfig, pair_names: Sequence[str]) -> list[Task]:
    """Every task: pairs x directions x attack classes x the claims' (divergence, alpha, delta).

    Two claims on the same divergence and alpha share their tasks (an estimate
    does not depend on the claimed value or class).
    """
    from attacks.classes import parse_function_class

    targets = list(dict.fromkeys((c.divergence, a, c.delta) for c in config.claims for a in c.alpha))
    return [
        Task(pair, direction, name, divergence, alpha, delta)
        for pair in pair_names
        for direction in DIRECTIONS
        for name in config.attacks.classes
        for divergence, alpha, delta in targets
        if divergence in parse_function_class(name).divergences
    ]


def run_tasks(
    config: AuditConfig,
    mechanism: Any,
    pairs: Sequence[NeighbourPair],
    out_dir: str | os.PathLike | None = None,
    *,
    resume: bool = False,
    progress: bool = True,
) -> tuple[dict[str, dict], dict[str, Any]]:
    """Run the audit's tasks in parallel and return their records.

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
        Show a tqdm progress bar on stderr.

    Returns
    -------
    records : dict
        Task id -> record (the task's fields, ``estimate``, ``unbounded``,
        ``error``, ``note``, ``exact``, ``theory_bound``, ``seconds``).
    evidence : dict
        Task id -> the task's ``DivergenceEstimate`` (None when it has none).

    Raises
    ------
    ValueError
        When the plan would not fit in memory, or ``resume`` meets a results
        file written by a different config.
    """
    tasks = plan_tasks(config, [pair.name for pair in pairs])
    plan = _plan_hash(config, tasks)
    path = None if out_dir is None else Path(out_dir) / TASKS_FILE
    records, evidence = _read_finished(path, plan) if resume and path is not None else ({}, {})
    pending = [task for task in tasks if task.id not in records]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resume:
            path.write_text("")
    pending_pairs = [pair for pair in pairs if any(task.pair == pair.name for task in pending)]
    _check_memory(config, mechanism, pending_pairs)
    n, seed = config.attacks.n_samples, config.run.seed
    samples = {pair.name: _draw(mechanism, pair, n, seed, config.attacks.coupled) for pair in pending_pairs}
    laws = {pair.name: mechanism.output_laws(pair.d, pair.d_prime) for pair in pending_pairs}
    jobs = (
        joblib.delayed(_run_task)(
            task,
            samples[task.pair],
            laws[task.pair],
            _theory_bound(mechanism, task),
            config,
        )
        for task in pending
    )
    with _backend(config.run.backend, config.run.n_jobs), tqdm(
        total=len(tasks), initial=len(tasks) - len(pending), desc="attacks", file=sys.stderr, disable=not progress
    ) as bar:
        for record, estimate in _finished(jobs, config.run.backend, config.run.n_jobs):
            record["plan"] = plan
            records[record["task"]], evidence[record["task"]] = record, estimate
            if path is not None:
                _append(path, record, estimate)
            bar.update()
    order = {task.id: i for i, task in enumerate(tasks)}
    records = dict(sorted(records.items(), key=lambda item: order[item[0]]))
    return records, {task: evidence.get(task) for task in records}


def task_seed(seed: int, name: str) -> np.random.SeedSequence:
    """The seed of a named task or sample: ``SeedSequence([seed, sha256(name)])``, independent of scheduling."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.SeedSequence([seed, digest])


def _draw(mechanism: Any, pair: NeighbourPair, n: int, seed: int, coupled: bool) -> PairSamples | str:
    """The pair's samples on d and d' (coupled when asked and possible), or the mechanism's error message.

    Independent: d and d' from their own seeds (``pair|d``, ``pair|d_prime``).
    Coupled: both from clones of one generator (``pair|pair``); if their
    states differ afterwards the mechanism spent different randomness on the
    two inputs, and d' is drawn again from its independent seed (module
    docstring).
    """
    from audit.mechanisms import check_output, sample_coupled

    def independent(dataset: np.ndarray, name: str, width: int | None = None) -> np.ndarray:
        rng = np.random.default_rng(task_seed(seed, f"{pair.name}|{name}"))
        return check_output(mechanism.sample(dataset, n, rng), n, width)

    try:
        if coupled:
            (p, q), coupled = sample_coupled(mechanism, (pair.d, pair.d_prime), n, task_seed(seed, f"{pair.name}|pair"))
            p = check_output(p, n)
            q = check_output(q, n, p.shape[1])
        else:
            p = independent(pair.d, "d")
        if not coupled:
            q = independent(pair.d_prime, "d_prime", p.shape[1])
    except Exception as error:  # any failure of the audited code is reported in its rows, not raised
        return f"mechanism {mechanism.name!r} on pair {pair.name}: {error}"
    return PairSamples(p, q, coupled)


def _theory_bound(mechanism: Any, task: Task) -> float | None:
    bound = mechanism.theory_bound(task.function_class, task.divergence, task.alpha)
    return None if bound is None else float(bound)


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
    record = dict(dataclasses.asdict(task), task=task.id, estimate=math.nan, unbounded=False, error=None,
                  note="", exact=None, theory_bound=theory_bound)
    estimate = None
    if isinstance(samples, str):
        record["error"] = samples
    else:
        p, q = (samples.d, samples.d_prime) if task.direction == "P|Q" else (samples.d_prime, samples.d)
        notes = [COUPLING_REFUSED] if config.attacks.coupled and not samples.coupled else []
        if laws is not None:
            record["exact"] = _exact(task, laws if task.direction == "P|Q" else laws[::-1])
        if task.divergence != "ipm" and _deterministic_release(p, q):
            notes.append("deterministic release: each dataset gives one output and they differ")
            record.update(estimate=math.inf, unbounded=True)
        else:
            try:
                estimate = estimate_divergence(
                    p, q, task.function_class, task.divergence, alpha=task.alpha, delta=task.delta,
                    train_fraction=config.attacks.train_fraction,
                    random_state=int(task_seed(config.run.seed, task.id).generate_state(1)[0]),
                    class_params=config.attacks.class_params.get(task.function_class),
                    coupled=samples.coupled,
                )
            except Exception as error:  # an attack that fails costs its row, not the audit
                record["error"] = (
                    f"attack {task.function_class}/{task.divergence} failed: {type(error).__name__}: {error}"
                )
            else:
                record.update(estimate=float(estimate.estimate), unbounded=bool(estimate.unbounded))
                if estimate.unbounded:
                    record["estimate"] = math.inf
                # verdicts need only the intervals and p-values, not the fitted adversary
                estimate = dataclasses.replace(estimate, adversary=None)
        record["note"] = "; ".join(notes)
    record["seconds"] = time.perf_counter() - start
    return record, estimate


def _deterministic_release(p: np.ndarray, q: np.ndarray) -> bool:
    """Both datasets give a single repeated output and the two differ (CBDP Lemma 2: unbounded)."""
    return bool(np.all(p == p[0]) and np.all(q == q[0]) and np.any(p[0] != q[0]))


def _exact(task: Task, laws: tuple[Any, Any]) -> float | None:
    """The exact restricted divergence of the attack's class for 1-D output laws; None when not computable."""
    from attacks.classes import parse_function_class
    from audit.exact import restricted_divergence

    if parse_function_class(task.function_class).kind not in ("poly", "threshold", "all"):
        return None
    try:
        return float(restricted_divergence(*laws, function_class=task.function_class,
                                           divergence=task.divergence, alpha=task.alpha))
    except ValueError:  # a (class, divergence) audit.exact does not cover: the value is unknown
        return None


def _plan_hash(config: AuditConfig, tasks: Sequence[Task]) -> str:
    """What a resumed run must share with the interrupted one: config (minus n_jobs, backend) and tasks."""
    raw = {key: value for key, value in config.raw.items() if key != "run"}
    raw["seed"] = config.run.seed
    text = json.dumps([raw, [task.id for task in tasks]], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def estimate_to_record(estimate: DivergenceEstimate) -> dict[str, Any]:
    """A ``DivergenceEstimate`` as plain JSON numbers, without its fitted adversary.

    Numpy scalars become Python numbers; ``inf`` and ``nan`` stay floats
    (``json`` writes them as ``Infinity`` and ``NaN`` and reads them back).

    Parameters
    ----------
    estimate : DivergenceEstimate

    Returns
    -------
    dict
        Every field but ``adversary``; ``details`` keeps all its entries.
    """
    return {
        field.name: _plain(getattr(estimate, field.name))
        for field in dataclasses.fields(estimate)
        if field.name != "adversary"
    }


def estimate_from_record(record: dict[str, Any]) -> DivergenceEstimate:
    """The ``DivergenceEstimate`` of :func:`estimate_to_record`'s record, with ``adversary=None``.

    Its ``lower_bound``, ``confidence_interval`` and ``p_value`` equal those
    of the estimate the record was made from.
    """
    from attacks.estimate import DivergenceEstimate

    return DivergenceEstimate(**record, adversary=None)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.item() if isinstance(value, np.generic) else value


def _append(path: Path, record: dict, estimate: DivergenceEstimate | None) -> None:
    line = dict(record, evidence=None if estimate is None else estimate_to_record(estimate))
    with path.open("a") as handle:
        handle.write(json.dumps(line, allow_nan=True) + "\n")
        handle.flush()


def _read_finished(path: Path, plan: str) -> tuple[dict[str, dict], dict[str, DivergenceEstimate | None]]:
    records: dict[str, dict] = {}
    evidence: dict[str, DivergenceEstimate | None] = {}
    if not path.exists():
        return records, evidence
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the last line of an interrupted run may be cut short: redo that task
            continue
        if record.get("plan") != plan:
            raise ValueError(
                f"{path} line {number} was written by a different config, seed or plan; "
                "run without --resume or choose another --out directory."
            )
        stored = record.pop("evidence")
        if not (stored is None or isinstance(stored, dict)):
            raise ValueError(
                f"{path} line {number}: evidence must be a JSON object of numbers (older capaudit versions "
                f"stored it pickled); run without --resume. Found {type(stored).__name__}."
            )
        records[record["task"]] = record
        evidence[record["task"]] = None if stored is None else estimate_from_record(stored)
    return records, evidence


@contextmanager
def _backend(name: str, n_jobs: int) -> Iterator[None]:
    """joblib's backend ``name``; dask and ray need their packages (checked by the config)."""
    with _cluster(name, joblib.effective_n_jobs(n_jobs)), joblib.parallel_config(backend=name):
        yield


@contextmanager
def _cluster(name: str, workers: int) -> Iterator[None]:
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


def _finished(jobs: Iterable, backend: str, n_jobs: int) -> Iterator[tuple[dict, DivergenceEstimate | None]]:
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


PROCESS_BASELINE = 160 * 2**20
"""Resident bytes of one Python process with capaudit's libraries loaded (163 MiB measured, bench_memory.py)."""
_WORDS_PER_ROW = 7.0
"""8-byte words a task holds per output row besides its features: samples, splits, witness values (measured)."""
_WORDS_PER_FEATURE = 0.7
"""8-byte words per feature and output row: the feature matrices of the train and held-out splits (measured)."""


def estimate_memory(
    n_samples: int,
    dim: int,
    n_pairs: int,
    classes: Sequence[str],
    n_workers: int,
    *,
    class_params: Mapping[str, Mapping[str, Any]] | None = None,
    backend: str = "loky",
) -> int:
    """Bytes an audit needs at its peak; within a factor 1.5 of the peaks measured by benchmarks/bench_memory.py.

    ``PROCESS_BASELINE`` per process (the main one, plus one per worker when
    ``n_workers > 1`` and the backend is not ``threading``), the samples of
    every pair in the main process (8 bytes x n_samples x dim x 2 datasets x
    pairs), and per worker one task on 2 n_samples output rows of
    ``_WORDS_PER_ROW + _WORDS_PER_FEATURE F`` words, F the widest feature map
    of the classes: dim for linear, treeK and threshold, C(dim + K, K)
    monomials for polyK, ``n_components`` (default 100) for kernel and
    2 ``width`` (default 32) for mlp (its hidden activations).
    """
    from attacks.classes import parse_function_class

    class_params = class_params or {}
    features = [dim]
    for name in classes:
        function_class, params = parse_function_class(name), class_params.get(name, {})
        if function_class.kind == "poly":
            features.append(math.comb(dim + function_class.degree, function_class.degree))
        elif function_class.kind == "kernel":
            features.append(int(params.get("n_components", 100)))
        elif function_class.kind == "mlp":
            features.append(2 * int(params.get("width", 32)))
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


def _check_memory(config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair]) -> None:
    if not pairs:
        return
    try:  # the output width, from two outputs; a failing mechanism is reported by its rows instead
        dim = np.atleast_2d(np.asarray(mechanism.sample(pairs[0].d, 2, np.random.default_rng(0))).T).shape[0]
    except Exception:
        return
    workers = joblib.effective_n_jobs(config.run.n_jobs)
    need = estimate_memory(config.attacks.n_samples, dim, len(pairs), config.attacks.classes, workers,
                           class_params=config.attacks.class_params, backend=config.run.backend)
    have = available_memory()
    if have is not None and need > MEMORY_FRACTION * have:
        raise ValueError(
            f"the audit would need about {need / 2**30:.1f} GiB of memory ({len(pairs)} pairs x 2 datasets x "
            f"{config.attacks.n_samples} samples x d = {dim}, plus {workers} workers' processes and features) but only "
            f"{have / 2**30:.1f} GiB are available; lower attacks.n_samples or run.n_jobs. "
            f"Found n_samples = {config.attacks.n_samples}."
        )

