"""The staged engine of an audit (``[attacks] engine = "staged"``): one confirm statistic per claim.

For every claim (and every Renyi order it names) :func:`attacks.staged.staged_search`
screens the candidates (the audit's pairs x both directions x the attack
classes contained in the claim's class), trains the finalists, chooses one
statistic on check samples and confirms it on a large fresh sample.  Each
claim gets one result row, the winning candidate's, with the usual row
schema (docs/results.md) plus the stage sizes and the search's counts
(:data:`audit.schema.STAGED_COLUMNS`), so verdicts (Holm over the claims' few
statistics), report and summary read it as any other row.

``n_samples`` is the budget of one pair over all four stages: outputs per
dataset, split by ``[attacks] stages`` (:meth:`attacks.staged.StageSizes.from_budget`);
every pair is screened, only the finalists' pairs get the later stages.

Samples are drawn in forked children within ``[run] sample_timeout`` seconds a
chunk (:func:`audit.sampling.draw_pair_isolated`: coupled when asked, with its
fallback to independent samples; a mechanism that raises, exits, dies or
hangs costs its pair, as in the rows engine), each
(stage, chunk) of a pair from its own seed ``task_seed(seed, "staged|<stage>|<chunk>")``,
so results depend on the config and seed only; the screen and train fits run
on ``[run] n_jobs`` workers of ``[run] backend`` (seeded per candidate, so
n_jobs and the backend change no number).  A mechanism that fails on a
pair costs that pair (an error row, exit code 2); the search goes on with
the others.  Searches run one claim after the other; each finished search
appends its records to ``tasks.jsonl`` (:mod:`audit.store`), so Ctrl-C
keeps it and a resume runs only the searches left.  The progress bar counts
outputs per dataset drawn, over every stage and pair.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
from tqdm import tqdm

from attacks.sequential import FIRST_BUDGET, FIXED, Limits, SequentialEstimate, least_outputs, round_budgets, \
    sequential_search
from attacks.staged import MAX_FINALISTS, Draw, StagedResult, StageSizes, Target, later_outputs, staged_search
from audit import store
from audit.config import AuditConfig, Claim
from audit.exact import known_laws
from audit.neighbours import NeighbourPair
from audit.parallel import backend
from audit.plan import Task, plan_hash, task_seed
from audit.runner import check_memory, task_exact, task_record, task_theory_bound
from audit.sampling import CHUNK_SIZE, COUPLING_REFUSED, draw_chunk, draw_pair_isolated


class SamplingError(RuntimeError):
    """The mechanism failed on a pair (the runner's message)."""


def pair_sampler(mechanism: Any, pairs: Sequence[NeighbourPair], seed: int, coupled: bool, *, workers: int = 1,
                 timeout: float = 600.0, on_outputs: Callable[[int], Any] = lambda n: None,
                 failed: dict[str, str] | None = None):
    """The sampling callable of :func:`attacks.staged.staged_search` over ``pairs``.

    ``sample(pair, n, stage, chunk)`` draws n outputs on pair ``pair``'s d and
    d' with :func:`audit.sampling.draw_pair_isolated` (forked children, ``timeout`` seconds a chunk),
    from the seed of ``"staged|<stage>|<chunk>"``.  ``on_outputs(k)``: k more
    outputs per dataset are drawn (as each chunk of :data:`audit.sampling.CHUNK_SIZE`
    comes in; a failed pair's outputs count as drawn).  A pair named in
    ``failed`` (pair name -> message, e.g. the memory check's probe) is not
    sampled again: it fails at once with its message.
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
                                       on_chunk=on_chunk)
        finally:
            on_outputs(n - counted)
        if isinstance(drawn, str):
            raise SamplingError(drawn)
        return Draw(drawn.d, drawn.d_prime, drawn.coupled)

    return sample


@dataclass(frozen=True)
class Search:
    """One staged search: claim ``index`` of the config at one of its Renyi orders (``alpha``; None but for renyi).

    ``id`` names its seed and its records in tasks.jsonl; its rows' task ids
    are ``staged|claim<index>|<task id>``.
    """

    index: int
    claim: Claim
    alpha: float | None

    @property
    def id(self) -> str:
        return f"staged|claim{self.index}|{self.alpha}"


def run_staged(config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair],
               out_dir: str | os.PathLike | None = None, *, resume: bool = False, progress: bool = True,
               finished: dict[str, dict] | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Search every claim (and Renyi order) and return its result rows and their evidence.

    Each finished search appends its records (the winner's with its confirm
    statistic's plain record, and the error records of failed pairs) to
    ``out_dir/tasks.jsonl`` (:mod:`audit.store`); ``resume`` reads the searches
    finished there (all their records written) and runs only the others, with
    the numbers an uninterrupted run gives (each search's seeds name the
    search, never its turn).  ``finished`` is filled with the records as
    searches finish, so that a caller interrupted by ``KeyboardInterrupt``
    still holds them (:func:`search_rows` makes their rows).

    Returns
    -------
    rows : list of dict
        One row per claim and order (:func:`audit.api.claim_rows` of the
        winner's record, plus :data:`audit.schema.STAGED_COLUMNS`), and an error row per
        pair whose sampling failed.
    evidence : dict
        Task id -> the confirm statistic (None for error rows).

    Raises
    ------
    ValueError
        When ``resume`` meets a tasks.jsonl written by another config, seed or
        engine, or edited since (:func:`audit.store.read_finished`), and when
        the stages would not fit in memory (:func:`audit.runner.check_memory`).
    """
    searches = [Search(index, claim, alpha) for index, claim in enumerate(config.claims) for alpha in claim.alpha]
    sizes = StageSizes.from_budget(_largest_budget(config, len(pairs), len(searches)), config.attacks.stages)
    plan = plan_hash(config, searches)
    path = None if out_dir is None else Path(out_dir) / store.TASKS_FILE
    records = {} if finished is None else finished
    done, evidence = _finished_searches(path, plan) if resume and path is not None else ({}, {})
    if path is not None and not resume:
        path.write_text("")
    pending = [search for search in searches if search.id not in done]
    probed = {}  # the train stage holds the finalists' pairs at once; the check and confirm stages count chunks
    if pending:
        probed = check_memory(config, pairs, functools.partial(draw_chunk, mechanism, seed=config.run.seed),
                              n_samples=max(sizes.screen, sizes.train), held_pairs=min(MAX_FINALISTS, len(pairs)))
    bar = _OutputsBar(sizes, len(pairs), len(pending), progress)
    sample = pair_sampler(mechanism, pairs, config.run.seed, config.attacks.coupled,
                          workers=max(joblib.effective_n_jobs(config.run.n_jobs), 1), timeout=config.run.sample_timeout,
                          on_outputs=bar.update, failed=probed)
    start = time.perf_counter()
    with bar.bar:
        for search in searches:
            if search.id not in done:
                left = sum(other.id not in done for other in searches)  # this search's share of the time left
                seconds = (config.run.max_seconds - (time.perf_counter() - start)) / left
                done[search.id] = _search(search, config, mechanism, pairs, sizes, sample, bar, seconds,
                                          len(searches))
                for record in done[search.id]:
                    record.update(plan=plan, resumed=False)
                    evidence[record["task"]] = record.pop("evidence")
                    if path is not None:
                        store.append(path, record, evidence[record["task"]])
            records.update((record["task"], record) for record in done[search.id])
    rows = search_rows(config, records.values())
    return rows, {row["task"]: evidence.get(row["task"]) if row["error"] is None else None for row in rows}


def search_rows(config: AuditConfig, records: Iterable[dict]) -> list[dict]:
    """The result rows of staged records: :func:`audit.api.claim_rows` of each record against its own search's
    claim and order, with the search's :data:`audit.schema.STAGED_COLUMNS`."""
    from audit.api import claim_rows

    rows = []
    for record in records:
        claim = config.claims[record["claim_index"]]
        one_claim = dataclasses.replace(config, claims=(dataclasses.replace(claim, alpha=(record["alpha"],)),))
        rows += [{**row, **record["staged"]} for row in claim_rows(one_claim, [record])]
    return rows


def _largest_budget(config: AuditConfig, n_pairs: int, n_searches: int) -> int:
    """Outputs per dataset of a pair of the largest search: ``n_samples``, or a sequential search's last round
    (:func:`attacks.sequential.round_budgets` of its share of ``max_outputs``)."""
    if not config.attacks.sequential:
        return config.attacks.n_samples
    share = config.attacks.max_outputs // n_searches
    return round_budgets(FIRST_BUDGET, share, least_outputs(n_pairs, config.attacks.stages))[-1]


def _search(search: Search, config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair], sizes: StageSizes,
            sample: Callable, bar: _OutputsBar, seconds: float = float("inf"), n_searches: int = 1) -> list[dict]:
    """One search's records (:func:`_records`), each naming its search, its claim, their number, the staged
    columns, and its ``evidence`` (the confirm statistic on the winner's record, else None).  A sequential
    search (:func:`attacks.sequential.sequential_search`) gets ``seconds`` and its share of ``max_outputs``, and
    stops at the level of Holm's first step over the ``n_searches`` searches."""
    start = time.perf_counter()
    claim = search.claim
    target = Target.for_claim(claim.divergence, claim.function_class, config.attacks.classes, search.alpha,
                              claim.delta, config.attacks.class_params)
    seed = int(task_seed(config.run.seed, search.id).generate_state(1)[0])
    bar.start()
    with backend(config.run.backend, config.run.n_jobs):
        if config.attacks.sequential:
            limits = Limits(config.attacks.max_outputs // n_searches, seconds, config.attacks.tolerance,
                            (1.0 - config.attacks.confidence) / n_searches)
            result = sequential_search(sample, len(pairs), target, claim.epsilon, limits, shares=config.attacks.stages,
                                       seed=seed, n_jobs=config.run.n_jobs, on_round=bar.round,
                                       on_screened=bar.screened,
                                       on_look=lambda evidence: bar.look(search.index, evidence, limits.level))
        else:
            result = staged_search(sample, len(pairs), target, sizes, seed=seed, n_jobs=config.run.n_jobs,
                                   on_screened=bar.screened)
    bar.finish()
    name = f"staged|claim{search.index}"  # the rows' task ids: name|pair|direction|class|divergence|alpha|delta
    records = _records(result, name, mechanism, pairs, config.attacks.coupled, time.perf_counter() - start)
    fields = dict(search=search.id, claim_index=search.index, search_records=len(records),
                  staged=_staged_fields(result, 2 * bar.drawn))
    return [dict(record, **fields, evidence=result.evidence if record["error"] is None else None)
            for record in records]


def _finished_searches(path: Path, plan: str) -> tuple[dict[str, list[dict]], dict[str, Any]]:
    """The searches of ``path`` whose records were all written (search id -> records), and the records' evidence;
    a search cut off between its records is run again."""
    read, evidence = store.read_finished(path, plan)
    searches: dict[str, list[dict]] = {}
    for record in read.values():
        searches.setdefault(record["search"], []).append(record)
    return {key: found for key, found in searches.items() if len(found) == found[0]["search_records"]}, evidence


class _OutputsBar:
    """The staged engine's progress bar, in outputs per dataset drawn (every stage, every pair).

    Before a search's screen ends its later stages are counted for the most
    pairs they may use (``min(pairs, MAX_FINALISTS)``); the screen's finalists
    then fix them (:func:`attacks.staged.later_outputs`), and the search's end
    sets the total to what was drawn (a failed pair draws no more).
    """

    def __init__(self, sizes: StageSizes, n_pairs: int, searches: int, enabled: bool):
        self.sizes, self.n_pairs = sizes, n_pairs
        self.planned = n_pairs * sizes.screen + later_outputs(sizes, min(n_pairs, MAX_FINALISTS))
        options = {} if sys.stderr.isatty() else {"mininterval": 30.0}
        self.bar = tqdm(total=searches * self.planned, desc="staged search", unit="outputs", unit_scale=True,
                        file=sys.stderr, disable=not enabled, **options)
        self.search_planned = self.drawn = self.before = 0

    def update(self, outputs: int) -> None:
        self.drawn += outputs
        self.bar.update(outputs)

    def start(self) -> None:
        self.search_planned, self.drawn, self.before = self.planned, 0, 0

    def round(self, sizes: StageSizes) -> None:
        """A sequential search's round of ``sizes`` starts: its screen on every pair, the later stages on the most
        pairs they may use."""
        self.sizes, self.before = sizes, self.drawn
        self._retotal(self.drawn + self.n_pairs * sizes.screen + later_outputs(sizes, min(self.n_pairs, MAX_FINALISTS)))

    def screened(self, later: int) -> None:
        """The search's (round's) screen is over; its later stages draw ``later`` outputs per dataset."""
        self._retotal(self.before + self.n_pairs * self.sizes.screen + later)

    def look(self, claim: int, evidence: SequentialEstimate, level: float) -> None:
        """The current bound beside the claim after a sequential search's look."""
        self.bar.set_postfix_str(f"claim {claim}: bound {evidence.lower_bound(1.0 - level):.4g}", refresh=True)

    def finish(self) -> None:
        self._retotal(self.drawn)

    def _retotal(self, planned: int) -> None:
        self.bar.total += planned - self.search_planned
        self.search_planned = planned
        self.bar.refresh()


def _records(result: StagedResult, name: str, mechanism: Any, pairs: Sequence[NeighbourPair], coupled: bool,
             seconds: float) -> list[dict]:
    """The winner's record (the runner's record layout) and an error record per failed pair."""
    target = result.target
    records = [
        _record(Task(pairs[pair].name, "P|Q", target.classes[0], target.divergence, target.alpha, target.delta), name,
                f"mechanism failed on pair {pairs[pair].name}: {message}")
        for pair, message in result.failures.items()
    ]
    if result.winner is None:
        records.append(_record(Task("-", "-", target.classes[0], target.divergence, target.alpha, target.delta), name,
                               f"staged search found no statistic: {result.error}"))
        return records
    winner = result.winner
    task = Task(pairs[winner.pair].name, winner.direction, winner.function_class, target.divergence, target.alpha,
                target.delta)
    record = _record(task, name, None)
    laws = known_laws(mechanism, pairs[winner.pair].d, pairs[winner.pair].d_prime)
    if laws is not None:
        record["exact"] = task_exact(task, laws)
    record.update(estimate=float(result.evidence.estimate), theory_bound=task_theory_bound(mechanism, task),
                  note=COUPLING_REFUSED if coupled and not result.evidence.coupled else "", seconds=seconds)
    return [*records, record]


def _record(task: Task, name: str, error: str | None) -> dict:
    """The runner's record of ``task`` (:func:`audit.runner.task_record`) under the search's id ``name|<task id>``."""
    return task_record(task, task_id=f"{name}|{task.id}", error=error)


def _staged_fields(result: StagedResult, outputs: int) -> dict:
    """The :data:`audit.schema.STAGED_COLUMNS` of a search's rows (the stage sizes of its last round, and a
    sequential search's last budget as their ``n_samples``); ``outputs``: all the search drew (both datasets,
    every pair, stage and round)."""
    sizes = result.sizes
    fields = dict(engine="staged", n_screen=sizes.screen, n_train=sizes.train, n_check=sizes.check,
                  n_confirm=sizes.confirm, candidates=result.screened, finalists=len(result.finalists),
                  sets_pooled=result.sets_pooled, outputs_drawn=int(outputs), rounds=result.rounds,
                  stop=result.stop or (FIXED if result.evidence is not None else None))
    if result.stop is not None:  # a sequential search: the rows' n_samples is its last round's budget
        fields["n_samples"] = sizes.screen + sizes.train + sizes.check + sizes.confirm
    return fields
