"""The audit's tasks: plan, seeds, samples, parallel attacks, an append-only results file, resume.

A task is one attack: (pair, direction, attack class, divergence, alpha, delta),
named by a stable id such as ``p0|P|Q|poly3|renyi|4|0``.  Directions: ``P|Q``
estimates Gamma(M(d) || M(d')), ``Q|P`` the reverse (docs/theory.md section 1).
A class is attacked only on the divergences it can estimate
(:attr:`attacks.classes.FunctionClass.divergences`).

Reproducibility: the samples of each (pair, dataset) and the attack of each
task draw from their own ``numpy.random.SeedSequence([seed, h])``, h a hash of
the name, so results do not depend on n_jobs, the backend or the order in
which tasks finish.  Samples are drawn once per pair and dataset (in a child
process, see below) and shared by that pair's tasks; workers only attack.

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
resumed run reads it and redoes only the tasks it lacks, and marks the rows
it read ``resumed``.  The line's ``evidence`` holds the fitted estimate as
plain numbers (:func:`estimate_to_record`): every field of the
``DivergenceEstimate`` but the fitted adversary, which is all its confidence
intervals and p-values (needed by the verdicts) read.  Reading it back runs
no code.  Each line carries a ``checksum`` of its content
(:func:`line_checksum`) and a line that does not match is refused: this
guards against accidents (an edited or corrupted file), not against an
attacker, who can recompute the checksum or simply rerun the tool.  A torn
last line (an interrupted write) is cut off before new lines are appended.

Isolation: every pair is sampled in a forked child process with a time
limit (``[run] sample_timeout``, :func:`sample_pairs`), so a mechanism that
raises, calls ``sys.exit``, kills its process or hangs costs its pair's rows
(error rows), not the audit; attacks of pairs already sampled run while
other pairs still sample.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
    finished: dict[str, dict] | None = None,
) -> tuple[dict[str, dict], dict[str, Any]]:
    """Run the audit's tasks in parallel and return their records.

    Each pair is sampled in a child process of its own (:func:`sample_pairs`),
    at most one per worker at once and each within ``run.sample_timeout``
    seconds; the pairs are attacked one after the other as their samples come
    in (each pair's tasks in parallel), while the other pairs still sample,
    and every finished task is appended to ``tasks.jsonl`` at once.  A
    failure of the audited code (an exception, ``sys.exit``, a process that
    dies or hangs) and a failure of the attack workers (a worker that dies)
    become error rows of the pair's tasks, never an exception.  The main
    thread never blocks on anything but the children and the attacks, so
    Ctrl-C stops the audit at once.

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
    plan = _plan_hash(config, tasks)
    path = None if out_dir is None else Path(out_dir) / TASKS_FILE
    records = {} if finished is None else finished
    evidence: dict[str, Any] = {}
    if resume and path is not None:
        read_records, read_evidence = _read_finished(path, plan)
        records.update(read_records)
        evidence.update(read_evidence)
    pending = [task for task in tasks if task.id not in records]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resume:
            path.write_text("")
    pending_pairs = [pair for pair in pairs if any(task.pair == pair.name for task in pending)]
    workers = joblib.effective_n_jobs(config.run.n_jobs)
    draw = functools.partial(
        _draw, mechanism, n=config.attacks.n_samples, seed=config.run.seed, coupled=config.attacks.coupled
    )
    probed = _check_memory(config, pending_pairs, draw)
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(pending), desc="attacks", file=sys.stderr,
               disable=not progress, **_tqdm_options())

    def keep(record: dict, estimate: Any) -> None:
        record.update(plan=plan, resumed=False)
        records[record["task"]], evidence[record["task"]] = record, estimate
        if path is not None:
            _append(path, record, estimate)
        bar.update()

    # Sampling runs in child processes while this process attacks the pairs already sampled; it
    # advances (new children, deadlines) between pairs, so a hung pair only ever costs its timeout.
    sampler = sample_pairs(draw, [pair for pair in pending_pairs if pair.name not in probed], workers,
                           config.run.sample_timeout)
    failed = [(pair, probed[pair.name]) for pair in pending_pairs if pair.name in probed]
    with bar, _backend(config.run.backend, config.run.n_jobs), contextlib.closing(sampler):
        for count, (pair, samples) in enumerate(itertools.chain(failed, sampler), start=1):
            bar.set_postfix_str(f"pairs sampled {count}/{len(pending_pairs)}")
            laws = _output_laws(mechanism, pair) if isinstance(samples, PairSamples) else None
            pair_tasks = [task for task in pending if task.pair == pair.name]
            jobs = [
                joblib.delayed(_run_task)(task, samples, laws, _theory_bound(mechanism, task), config)
                for task in pair_tasks
            ]
            try:
                for record, estimate in _finished(jobs, config.run.backend, config.run.n_jobs):
                    keep(record, estimate)
            except Exception as error:  # e.g. a worker killed (TerminatedWorkerError): the pair's unfinished tasks
                message = f"the attack workers failed: {one_line(error)}"
                for task in pair_tasks:
                    if task.id not in records:
                        keep(_error_record(task, message), None)
    order = {task.id: i for i, task in enumerate(tasks)}
    ordered = dict(sorted(records.items(), key=lambda item: order[item[0]]))
    return ordered, {task: evidence.get(task) for task in ordered}


def one_line(error: BaseException, limit: int = 400) -> str:
    """``"Type: message"`` on one line (whitespace collapsed), cut to ``limit`` characters."""
    if isinstance(error, SystemExit):
        text = f"called sys.exit({error.code!r})"
    else:
        text = " ".join(f"{type(error).__name__}: {error}".split()).rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tqdm_options() -> dict[str, Any]:
    """Redraw at most every 30 s when stderr is not a terminal, so CI logs are not flooded."""
    return {} if sys.stderr.isatty() else {"mininterval": 30.0}


def sample_pairs(
    draw: Callable[[NeighbourPair], PairSamples | str],
    pairs: Sequence[NeighbourPair],
    workers: int,
    timeout: float,
) -> Iterator[tuple[NeighbourPair, PairSamples | str]]:
    """Each pair's ``draw(pair)``, computed in a child process, as the children finish.

    At most ``workers`` children run at once.  A child that runs longer than
    ``timeout`` seconds is killed and its pair gets an error message naming
    ``run.sample_timeout``; one that dies without answering (``os._exit``, a
    crash, the out-of-memory killer) gets a message with its exit code.  The
    children are forked, so the mechanism is never pickled and a user module
    imported by the config is already there.  Where ``fork`` is not available
    (Windows, macOS) the pairs are sampled in this process, one after the
    other, without a timeout.
    """
    if not _FORK:
        for pair in pairs:
            yield pair, draw(pair)
        return
    waiting, running = list(pairs), {}
    try:
        while waiting or running:
            while waiting and len(running) < max(workers, 1):
                pair = waiting.pop(0)
                running[pair.name] = (pair, _spawn(draw, pair), time.monotonic())
            deadline = min(started + timeout for _, _, started in running.values())
            ready = multiprocessing.connection.wait(
                [child[0] for _, child, _ in running.values()], timeout=max(0.0, deadline - time.monotonic())
            )
            for name, (pair, child, started) in list(running.items()):
                if child[0] in ready:
                    result = _receive(child, pair)
                elif time.monotonic() >= started + timeout:
                    result = (
                        f"sampling pair {pair.name} took longer than run.sample_timeout = {timeout:g} s and was "
                        "stopped; raise run.sample_timeout if the mechanism is merely slow"
                    )
                else:
                    continue
                _stop(child)
                del running[name]
                yield pair, result
    finally:
        for _, child, _ in running.values():
            _stop(child)


_FORK = sys.platform.startswith("linux")
"""Whether pairs are sampled in forked child processes (see :func:`sample_pairs`)."""


def _spawn(draw: Callable, pair: NeighbourPair) -> tuple[Any, Any]:
    """Fork a child that sends ``draw(pair)`` (or the message of what it raised) and exits."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, draw, pair))
    with warnings.catch_warnings():  # forking a process with threads: the child only runs the mechanism
        warnings.simplefilter("ignore", DeprecationWarning)
        process.start()
    sender.close()
    return receiver, process


def _child(sender: Any, draw: Callable, pair: NeighbourPair) -> None:
    try:
        result = draw(pair)
    except BaseException as error:  # noqa: BLE001 - whatever the audited code does is its pair's error
        result = f"sampling pair {pair.name} failed: {one_line(error)}"
    try:
        sender.send(result)
    finally:
        os._exit(0)  # skip the parent's atexit handlers and buffers, inherited by the fork


def _receive(child: tuple[Any, Any], pair: NeighbourPair) -> PairSamples | str:
    receiver, process = child
    try:
        return receiver.recv()
    except (EOFError, OSError):
        process.join()
        return (
            f"sampling pair {pair.name}: the mechanism's process ended without a result (exit code "
            f"{process.exitcode}: os._exit, a crash or the out-of-memory killer)"
        )


def _stop(child: tuple[Any, Any]) -> None:
    receiver, process = child
    if process.is_alive():
        process.kill()
    process.join()
    receiver.close()


def _error_record(task: Task, message: str) -> dict:
    """The record of a task that could not run."""
    return dict(dataclasses.asdict(task), task=task.id, estimate=math.nan, unbounded=False, error=message,
                note="", exact=None, theory_bound=None, seconds=0.0)


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
    except (Exception, SystemExit) as error:  # any failure of the audited code is reported in its rows
        text = one_line(error) if isinstance(error, SystemExit) else " ".join(str(error).split())
        return f"mechanism {mechanism.name!r} on pair {pair.name}: {text}"
    return PairSamples(p, q, coupled)


def _theory_bound(mechanism: Any, task: Task) -> float | None:
    """The mechanism's closed-form bound for the task; None when it has none or cannot compute it."""
    try:
        bound = mechanism.theory_bound(task.function_class, task.divergence, task.alpha)
        return None if bound is None else float(bound)
    except (ArithmeticError, ValueError, IndexError):  # e.g. an overflow at epsilon = 1e308: unknown, not fatal
        return None


def _output_laws(mechanism: Any, pair: NeighbourPair) -> tuple[Any, Any] | None:
    """The pair's exact output laws, None when unknown or not computable (they only fill ``exact``)."""
    try:
        return mechanism.output_laws(pair.d, pair.d_prime)
    except (ArithmeticError, ValueError, IndexError):
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


def _exact(task: Task, laws: tuple[Any, Any]) -> float | None:
    """The exact restricted divergence of the attack's class for 1-D output laws; None when not computable."""
    from attacks.classes import parse_function_class
    from audit.exact import restricted_divergence

    if parse_function_class(task.function_class).kind not in ("poly", "threshold", "all"):
        return None
    try:
        return float(restricted_divergence(*laws, function_class=task.function_class,
                                           divergence=task.divergence, alpha=task.alpha))
    except (ArithmeticError, ValueError, IndexError):  # not covered by audit.exact, or extreme laws: unknown
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
    line.pop("resumed", None)
    line["checksum"] = line_checksum(line)
    with path.open("a") as handle:
        handle.write(json.dumps(line, allow_nan=True) + "\n")
        handle.flush()


def line_checksum(line: dict[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys) of a tasks.jsonl line without its ``checksum``.

    It catches a line changed by accident (an edit, a bad merge, a disk
    error), not an attacker: whoever can rewrite the file can recompute it,
    or simply rerun the tool.
    """
    content = {key: value for key, value in line.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, allow_nan=True).encode()).hexdigest()


def _read_finished(path: Path, plan: str) -> tuple[dict[str, dict], dict[str, DivergenceEstimate | None]]:
    """The records of ``tasks.jsonl``, marked ``resumed``; a torn last line is cut off the file.

    Every other line must decode, carry this plan's hash and a matching
    :func:`line_checksum`, else the resume is refused.
    """
    records: dict[str, dict] = {}
    evidence: dict[str, DivergenceEstimate | None] = {}
    if not path.exists():
        return records, evidence
    lines = _drop_torn_line(path)
    fix = "run without --resume (or choose another --out directory) to redo the audit"
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ValueError(f"{path} line {number} is not valid JSON although later lines are; {fix}.") from None
        if not isinstance(record, dict) or record.get("plan") != plan:
            raise ValueError(
                f"{path} line {number} was written by a different config, seed or plan; {fix}."
            )
        if record.pop("checksum", None) != line_checksum(record):
            raise ValueError(
                f"{path} line {number} was changed after capaudit wrote it (its checksum does not match); {fix}."
            )
        stored = record.pop("evidence")
        if not (stored is None or isinstance(stored, dict)):
            raise ValueError(
                f"{path} line {number}: evidence must be a JSON object of numbers (older capaudit versions "
                f"stored it pickled); run without --resume. Found {type(stored).__name__}."
            )
        record["resumed"] = True
        records[record["task"]] = record
        evidence[record["task"]] = None if stored is None else estimate_from_record(stored)
    return records, evidence


def _drop_torn_line(path: Path) -> list[str]:
    """The complete lines of ``path``; a last line cut short by an interrupted write is removed from the file.

    A line is torn when it does not end with a newline or does not decode
    (the newline of a later write may follow a torn line); the records
    appended next then start on a line of their own.
    """
    text = path.read_text()
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    else:  # no final newline: the last write was interrupted
        lines, text = lines[:-1], text[: len(text) - len(lines[-1])]
    if lines:
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines.pop()
            text = "".join(line + "\n" for line in lines)
    path.write_text(text)
    return lines


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


def _check_memory(config: AuditConfig, pairs: Sequence[NeighbourPair], draw: functools.partial) -> dict[str, str]:
    """Refuse a plan that would not fit in memory; the output width comes from two outputs of the first pair.

    Those are drawn like every sample (:func:`sample_pairs`); when that fails,
    the failure is returned as the first pair's (pair name -> message), so
    that a hung mechanism costs one timeout, not two, and the check is skipped.
    """
    if not pairs:
        return {}
    probe = functools.partial(draw.func, *draw.args, **dict(draw.keywords, n=2))
    [(pair, samples)] = list(sample_pairs(probe, pairs[:1], 1, config.run.sample_timeout))
    if not isinstance(samples, PairSamples):
        return {pair.name: samples}
    dim = samples.d.shape[1]
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
    return {}

