"""The audit's one orchestrator: the staged search of :mod:`attacks.staged` under a selection policy.

``[attacks] policy`` (docs/config.md) says which candidates (pair x direction x attack class) get a confirmed row:

- ``"best"``: one search per claim, Renyi order and layer (:func:`attacks.staged.staged_search`): every candidate of
  the layer (:attr:`attacks.classes.FunctionClass.layer`: the values, or their IEEE-754 representation) contained in
  the claim's class screened, the finalists trained and checked, ONE statistic confirmed on a fresh sample; one row
  per claim, order and layer, Holm over those (so the error is spent across both layers and the audit-wide
  guarantee holds).  A ``dp`` claim's declared classes (``canary``: a witness fixed before the data) get a unit of
  their own, a row per pair scored on every output, no training split (:mod:`audit.engine.declared`).
- ``"every"``: every candidate of every pair trained on the train share and its own set or witness confirmed on a
  fresh held-out share (:func:`attacks.staged.confirm_every`, ``train_fraction`` splitting ``n_samples``): a row per
  pair, direction, class and claim (the per-class tables, the per-pair estimates on-average claims average), Holm
  over every refuting row.

Both run as *units* (best: a claim at one order; every: a pair), then each ``[[checks]]`` entry as one unit
(:func:`audit.engine.checks.run_check`), the one unit of work, of ``tasks.jsonl`` and of resume: a finished unit
appends all its records (:mod:`audit.engine.store`), a resume keeps the units whose records were all written and
runs the others, with the numbers an uninterrupted run gives (every seed names its unit, never its turn). One
structure pilot (:func:`audit.sampling.structure.fix_layout`) and one memory check before any unit, one progress bar
in outputs per dataset drawn, one record builder (:func:`_record`: exact value, closed-form bound, the coupling and
deterministic-release notes); a unit's rows (:func:`engine_rows`) are made as it finishes.

Samples come from :func:`audit.sampling.sampler.pair_sampler` (opened after the memory check,
:func:`audit.engine.memory.checked_sampler`): each (pair, stage, chunk) drawn in forked children within
``[run] sample_timeout`` seconds a chunk (:func:`audit.sampling.sampler.draw_pair_isolated`) from the seed of
``"staged|<stage>|<chunk>"``, so numbers depend on the config and seed only, never on ``n_jobs`` or the backend. A
mechanism that fails on a pair costs that pair's rows (error rows, exit code 2), a search that fails costs its
claim's row (the confirm stage's failure included), never the audit.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attacks.classes import LAYERS, REPRESENTATION, VALUE, parse_function_class
from attacks.clipped_witness import ClippedWitnessEstimate, bounded_class
from attacks.sequential import FIXED, Limits, interval_of, schedule, sequential_search
from attacks.budget import StageSizes
from attacks.candidates import Target
from attacks.event_divergence import event_note
from attacks.staged import MAX_FINALISTS, StagedResult, confirm_every, later_outputs, staged_search
from attacks.vocabulary import DP, divergence_of
from audit.engine import store
from audit.engine.checks import check_name, run_check
from audit.engine.declared import run_declared, split_declared, with_directions
from audit.config.attacks import AttackSpec
from audit.config.claims import Claim
from audit.config.load import AuditConfig
from audit.sampling.errors import one_line
from audit.sampling.events import EventCounter
from audit.engine.memory import checked_sampler
from audit.engine.shares import Shares
from audit.inputs.neighbours import NeighbourPair
from audit.sampling.parallel import backend
from audit.engine.plan import DIRECTIONS, Task, task_seed
from audit.engine.progress import OutputsBar, ProgressBar
from audit.sampling.sampler import COUPLING_REFUSED, SamplingError
from audit.sampling.structure import fix_layout
from audit.results.on_average import aggregate_rows
from audit.results.schema import Row
from audit.theory.exact import exact_value, known_laws
from audit.theory.table import theory_bound as law_bound
from audit.engine.watch import OutputWatch

DETERMINISTIC_NOTE = (
    "every output on D equal, every output on D' equal, and different: consistent with a deterministic release, "
    "but a finite sample bounds the divergence only by its size (dp and ipm rows: exact count bounds; "
    "kl and renyi rows: exact count bounds of the event that separates them)"
)
"""The note of a pair whose samples look deterministic.  A finite sample never proves infinity (a
randomized response at epsilon = 8 repeats one output 1 000 times in a row about 70 % of the time),
so such rows get the attacks' finite bounds like any other (CBDP Lemma 2's infinity is not claimed)."""

NO_STATISTIC = "staged search found no statistic"
"""The start of the error row of a search that lost every candidate: its cause is the pairs' own error rows."""


@dataclass(frozen=True)
class Unit:
    """One unit of work and of resume: a claim at one Renyi order (policy ``best``), a pair (``every``) or a
    ``[[checks]]`` entry.

    ``id`` names its seeds and its records in tasks.jsonl; ``targets`` are
    what it searches (best: the claim's; every: every distinct divergence,
    order and delta of the claims, with every attack class that estimates
    it; none for a check); ``claim_index`` (best) is the claim its rows
    answer, ``pair`` (every) the index of its pair, ``check`` the index of
    its check (:func:`audit.engine.checks.run_check`); ``declared``: a unit of declared statistics
    (:mod:`audit.engine.declared`); ``max_outputs`` and ``max_seconds``: its share of the audit's, set as it starts
    (:mod:`audit.engine.shares`).
    """

    id: str
    targets: tuple[Target, ...]
    claim_index: int | None = None
    pair: int | None = None
    check: int | None = None
    declared: bool = False
    max_outputs: int | None = None
    max_seconds: float | None = None


@dataclass(frozen=True)
class Outcome:
    """A row-to-be of a unit: its task, its confirm statistic or error, the stage fields of its target's search."""

    task: Task
    evidence: Any = None
    error: str | None = None
    staged: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def run_engine(config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair],
               out_dir: str | os.PathLike | None = None, *, resume: bool = False, progress: bool = True,
               finished: dict[str, dict] | None = None) -> list[Row]:
    """Run every unit of the config's policy and return the result rows, each with its evidence.

    Parameters
    ----------
    config : AuditConfig
    mechanism : Mechanism
        Built from ``config.mechanism``.
    pairs : sequence of NeighbourPair
    out_dir : path, optional
        Where ``tasks.jsonl`` is written; None keeps everything in memory.
    resume : bool
        Keep the finished units of ``out_dir/tasks.jsonl`` and run the others.
    progress : bool
        Show a progress bar on stderr (outputs per dataset drawn).
    finished : dict, optional
        Filled with task id -> record as units finish, so that a caller
        interrupted by ``KeyboardInterrupt`` still holds them
        (:func:`engine_rows` makes their rows).

    Returns
    -------
    list of Row
        :func:`engine_rows` of each unit's records, made as the unit finishes (or is read back): the stage
        columns (:data:`audit.results.schema.STAGED_COLUMNS`) and the confirm statistic (``evidence``) filled;
        error rows (``evidence`` None) for failed pairs and searches; then one row per
        ``[[checks]]`` entry (``checked`` set, :func:`audit.engine.checks.run_check`); then the on-average claims'
        aggregate rows (:func:`audit.results.on_average.aggregate_rows`).  No verdicts yet.

    Raises
    ------
    ValueError
        When ``resume`` meets a tasks.jsonl written by another config, seed or
        policy, or edited since (:func:`audit.engine.store.read_finished`), and when
        the samples held at once would not fit in memory (:func:`audit.engine.memory.check_memory`).
    """
    policy = POLICIES[config.attacks.policy]
    config = with_directions(config, mechanism)
    units = policy.units(config, pairs)
    checks = [Unit(check_name(index), (), check=index) for index in range(len(config.checks))]
    sizes = policy.largest_sizes(config.attacks, len(pairs))
    plan = plan_hash(config, units + checks)
    path = None if out_dir is None else Path(out_dir) / store.TASKS_FILE
    records = {} if finished is None else finished
    done, evidence = _finished_units(path, plan) if resume and path is not None else ({}, {})
    if path is not None and not resume:
        path.write_text("")
    pending = [unit for unit in units if unit.id not in done]
    # NaN, inf and changing widths are evidence: the layout fixed before any chunk or cluster (audit.sampling.structure)
    with ProgressBar("structure pilot", " datasets", progress) as pilot:  # drawn only when the pilot runs
        fix_layout(mechanism, [data for pair in pairs for data in (pair.d, pair.d_prime)],
                   task_seed(config.run.seed, "structure"), config.run.sample_timeout, pilot.show)
    # one backend (and, for dask and ray, one cluster) for the memory check's probe and every unit: the
    # sampler runs the mechanism on the cluster's workers
    planned = policy.planned(config.attacks, sizes, len(pairs), len(units))
    # the bar shows from the first mechanism call on (the memory check's), its heartbeat while a chunk runs
    checks_pending = sum(unit.id not in done for unit in checks)
    rows: list[Row] = []
    with backend(config.run.backend, config.run.n_jobs), \
            OutputsBar(planned, len(pending) + checks_pending, progress) as bar:
        held = None  # resumed, every unit finished: no memory check
        if pending:
            held = policy.held(sizes, config.attacks.n_samples, len(pairs))
            bar.status = "first outputs (memory check)"
        events = EventCounter(getattr(mechanism, "structure", None))
        sample = checked_sampler(config, mechanism, pairs, held, on_outputs=bar.update,
                                 on_redrawn=lambda pair, error: events.redrawn(pairs[pair].name, error))
        outputs = OutputWatch(sample, events, [pair.name for pair in pairs])
        shares = Shares.for_units(config.attacks.max_outputs, config.run.max_seconds, units)
        for index, unit in enumerate(units):
            if unit.id not in done:
                share = dataclasses.replace(unit, **shares.of(index))  # the unit with its share of the limits
                done[unit.id], outcomes = _run_unit(share, policy, config, mechanism, pairs, sizes, outputs, events, bar)
                for record, outcome in zip(done[unit.id], outcomes):
                    record.update(plan=plan, resumed=False)
                    evidence[record["task"]] = outcome.evidence if outcome.error is None else None
                    if path is not None:
                        store.append(path, record, evidence[record["task"]])
            records.update((record["task"], record) for record in done[unit.id])
            shares.spend(done[unit.id][0])
            rows += engine_rows(config, done[unit.id], evidence)  # the unit's rows, as it finishes or is read back
        for unit in checks:  # each check one unit: its row is its record (audit.results.schema.Row.to_check_record)
            if unit.id not in done:
                bar.start()
                row = run_check(config, unit.check, on_outputs=bar.update)
                bar.finish()
                done[unit.id] = [dict(row.to_check_record(), task=unit.id, search=unit.id, search_records=1,
                                      plan=plan)]
                evidence[unit.id] = None
                if path is not None:
                    store.append(path, done[unit.id][0], None)
            records[unit.id] = done[unit.id][0]
            rows += engine_rows(config, done[unit.id], evidence)
    return rows + aggregate_rows(rows, config.attacks.confidence)


def _run_unit(unit: Unit, policy: Any, config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair],
              sizes: StageSizes, outputs: OutputWatch, events: EventCounter,
              bar: OutputsBar) -> tuple[list[dict], list[Outcome]]:
    """Run one unit under ``policy`` (:data:`POLICIES`): its records (:func:`_record`, one per outcome, each with the
    outputs the unit drew, its seconds and what the mechanism did meanwhile) and its outcomes."""
    bar.start()
    start, before = time.perf_counter(), events.snapshot()
    outcomes = policy.run(unit, config, pairs, sizes, outputs, bar)
    bar.finish()
    drawn = 2 * bar.drawn  # both datasets, every pair, stage and round of the unit
    outcomes = [dataclasses.replace(outcome, staged={**outcome.staged, "outputs_drawn": drawn}) for outcome in outcomes]
    seconds, drawn_events = time.perf_counter() - start, events.since(before)
    return [_record(unit, outcome, len(outcomes), mechanism, pairs, config, outputs, seconds, drawn_events)
            for outcome in outcomes], outcomes


class _Best:
    """Policy ``best``: one staged search per claim, Renyi order and layer (:func:`attacks.staged.staged_search`), or,
    without ``n_samples``, searches in rounds until decided (:func:`attacks.sequential.sequential_search`: each
    unit gets its weighted share of what the units before it left of ``max_outputs`` and of ``[run] max_seconds``
    when set, :mod:`audit.engine.shares`, and stops at the level of Holm's first step over the units)."""

    @staticmethod
    def units(config: AuditConfig, pairs: Sequence[NeighbourPair]) -> list[Unit]:
        """A unit per claim, Renyi order and layer (:data:`attacks.classes.LAYERS`) with a usable class: a
        representation finding (``floatbits``) never ends the value classes' search, which goes on to its own
        verdict; a claim no class can test keeps one (empty) unit, its row an error.  A ``dp`` claim's declared
        classes form a unit of their own (:func:`audit.engine.declared.split_declared`)."""
        attacks, units = config.attacks, []
        for index, claim in enumerate(config.claims):
            for alpha in claim.alpha:
                targets = {layer: Target.for_claim(claim.divergence, claim.function_class, attacks.classes, alpha,
                                                   claim.delta, attacks.class_params, layer=layer)
                           for layer in LAYERS}
                targets[VALUE], declared = split_declared(targets[VALUE])
                tested = [layer for layer in LAYERS if targets[layer].classes] or [VALUE] * (not declared.classes)
                units += [Unit(f"staged|claim{index}|{alpha}" + ("" if layer == VALUE else f"|{layer}"),
                               (targets[layer],), claim_index=index) for layer in tested]
                if declared.classes:
                    units.append(Unit(f"staged|claim{index}|{alpha}|declared", (declared,), claim_index=index,
                                      declared=True))
        return units

    @staticmethod
    def held(sizes: StageSizes, n_samples: int, n_pairs: int) -> tuple[int, int]:
        """The train stage holds the finalists' pairs at once; the check and confirm stages count chunks."""
        return max(sizes.screen, sizes.train), min(MAX_FINALISTS, n_pairs)

    @staticmethod
    def largest_sizes(attacks: AttackSpec, n_pairs: int) -> StageSizes:
        """The stage sizes of the largest unit: ``attacks.stage_sizes``, or a search in rounds' last round
        (:func:`attacks.sequential.schedule` of all of ``max_outputs``: a unit may get what the others left)."""
        if not attacks.sequential:
            return attacks.stage_sizes
        return StageSizes.from_budget(schedule(attacks.max_outputs, n_pairs, attacks.stages)[-1], attacks.stages)

    @staticmethod
    def planned(attacks: AttackSpec, sizes: StageSizes, n_pairs: int, n_units: int) -> int:
        """Outputs per dataset a unit may draw: the screen on every pair and the later stages on the finalists',
        or, for a search in rounds, an equal share of ``max_outputs`` (replanned to its share as it starts)."""
        if attacks.sequential:
            return attacks.max_outputs // max(n_units, 1) // 2
        return n_pairs * sizes.screen + later_outputs(sizes, min(n_pairs, MAX_FINALISTS))

    @staticmethod
    def run(unit: Unit, config: AuditConfig, pairs: Sequence[NeighbourPair], sizes: StageSizes,
            sample: Callable, bar: OutputsBar) -> list[Outcome]:
        [target] = unit.targets
        # the search runs over the pairs at the claim's d_in: index i of the search is pair held[i]
        held = [i for i, pair in enumerate(pairs) if config.claims[unit.claim_index].holds_at(pair.d_in)]
        mine = functools.partial(_held_sample, sample, held)
        if unit.declared:
            return _declared_outcomes(unit, target, config, [pairs[i] for i in held], mine)
        seed = int(task_seed(config.run.seed, unit.id).generate_state(1)[0])
        try:
            if config.attacks.sequential:
                result = _sequential(unit, target, config, len(held), mine, bar, seed)
            else:
                result = staged_search(mine, len(held), target, sizes, seed=seed, n_jobs=config.run.n_jobs,
                                       on_screened=lambda later: bar.replan(len(held) * sizes.screen + later))
        except Exception as error:  # e.g. a worker killed (TerminatedWorkerError): the claim's row, not the audit
            return [Outcome(_task("-", "-", target), error=f"the attack workers failed: {one_line(error)}")]
        staged = _staged_fields("best", result.sizes, result.screened, len(result.finalists), result.sets_pooled,
                                result.rounds, result.stop or (FIXED if result.evidence is not None else None))
        outcomes = [Outcome(_task(pairs[held[pair]].name, "P|Q", target),
                            error=_pair_error(pairs[held[pair]], message), staged=staged)
                    for pair, message in result.failures.items()]
        if result.evidence is None:  # no candidate, or the winner's pair failed in a later stage (confirm included)
            return [*outcomes, Outcome(_task("-", "-", target), error=f"{NO_STATISTIC}: {result.error}",
                                       staged=staged)]
        winner = result.winner
        task = _task(pairs[held[winner.pair]].name, winner.direction, target,
                     bounded_class(result.evidence, winner, target))
        return [*outcomes, Outcome(task, result.evidence, staged=staged)]


def _declared_outcomes(unit: Unit, target: Target, config: AuditConfig, pairs: Sequence[NeighbourPair],
                       sample: Callable) -> list[Outcome]:
    """A declared unit's rows (:func:`audit.engine.declared.run_declared`): every pair scored on ``n_samples``
    outputs per dataset (without ``n_samples``: the unit's share of ``max_outputs``, split over the pairs and the
    two datasets), all of them in the confirm stage."""
    n = unit.max_outputs // 2 // len(pairs) if config.attacks.sequential else config.attacks.n_samples
    staged = _staged_fields("best", StageSizes(0, 0, 0, n), len(pairs) * len(target.classes), 0, 0)
    return [Outcome(_task(pairs[candidate.pair].name, candidate.direction, target, candidate.function_class),
                    evidence, error, staged)
            for candidate, evidence, error in run_declared(target, config.claims[unit.claim_index].epsilon, config,
                                                           pairs, sample, n)]


def _held_sample(sample: Callable, held: Sequence[int], pair: int, *args: Any, **kwargs: Any) -> Any:
    """``sample`` of the search's pair index ``pair``: the audit's pair ``held[pair]`` (its seeds are that pair's)."""
    return sample(held[pair], *args, **kwargs)


def _sequential(unit: Unit, target: Target, config: AuditConfig, n_pairs: int, sample: Callable,
                bar: OutputsBar, seed: int) -> StagedResult:
    """A ``best`` unit's search in rounds (:func:`attacks.sequential.sequential_search`); the progress bar counts
    against the most the unit may draw (a total that stays put) and shows the round and the lower bound beside
    the claim."""
    attacks, units = config.attacks, len(_Best.units(config, ()))
    limits = Limits(unit.max_outputs, unit.max_seconds, attacks.tolerance, (1.0 - attacks.confidence) / units)
    bar.replan(unit.max_outputs // 2)
    claim = config.claims[unit.claim_index]
    rounds = len(schedule(limits.max_outputs, n_pairs, attacks.stages))
    looks = {"round": 0, "bound": ""}

    def on_round(sizes: StageSizes) -> None:
        looks["round"] += 1
        bar.status = f"claim {unit.claim_index}: round {looks['round']} of at most {rounds}{looks['bound']}"

    def on_look(evidence) -> None:
        looks["bound"] = (f", lower bound {evidence.lower_bound(1.0 - limits.level):.4g} "
                          f"vs claim {claim.epsilon:.4g}")
        bar.status = f"claim {unit.claim_index}: round {looks['round']} of at most {rounds}{looks['bound']}"

    return sequential_search(sample, n_pairs, target, claim.epsilon, limits, shares=attacks.stages, seed=seed,
                             n_jobs=config.run.n_jobs, on_round=on_round, on_look=on_look)


class _Every:
    """Policy ``every``: each pair's candidates all trained and confirmed (:func:`attacks.staged.confirm_every`)."""

    @staticmethod
    def units(config: AuditConfig, pairs: Sequence[NeighbourPair]) -> list[Unit]:
        attacks, units = config.attacks, []
        for index, pair in enumerate(pairs):  # the targets of the claims that hold at the pair's d_in
            keys = dict.fromkeys((claim.divergence, alpha, claim.delta) for claim in config.claims
                                 if claim.holds_at(pair.d_in) for alpha in claim.alpha)
            # each row answers every claim that holds its attack class: no one claim's class
            targets = tuple(dataclasses.replace(Target.for_claim(divergence, "all", attacks.classes, alpha, delta,
                                                                 attacks.class_params), claim_class=None)
                            for divergence, alpha, delta in keys)
            units.append(Unit(f"every|{pair.name}", targets, pair=index))
        return units

    @staticmethod
    def held(sizes: StageSizes, n_samples: int, n_pairs: int) -> tuple[int, int]:
        """One pair at a time, all of its outputs when its targets share them."""
        return n_samples, 1

    @staticmethod
    def largest_sizes(attacks: AttackSpec, n_pairs: int) -> StageSizes:
        """Every unit's stage sizes: ``attacks.stage_sizes`` (its train / held-out split)."""
        return attacks.stage_sizes

    @staticmethod
    def planned(attacks: AttackSpec, sizes: StageSizes, n_pairs: int, n_units: int) -> int:
        """Outputs per dataset a unit draws: its pair's train and confirm samples."""
        return sizes.train + sizes.confirm

    @staticmethod
    def run(unit: Unit, config: AuditConfig, pairs: Sequence[NeighbourPair], sizes: StageSizes,
            sample: Callable, bar: OutputsBar) -> list[Outcome]:
        pair = pairs[unit.pair]
        # the targets share the pair's samples: drawn once, held until the pair is done
        draw = functools.cache(sample) if len(unit.targets) > 1 else sample
        outcomes, failed = [], None
        for target in unit.targets:
            tasks = [_task(pair.name, direction, target, name) for direction in DIRECTIONS for name in target.classes]
            staged = _staged_fields("every", sizes, len(tasks), len(tasks), int(isinstance(divergence_of(target), DP)))
            seed = int(task_seed(config.run.seed, f"{unit.id}|{tasks[0].id}").generate_state(1)[0])
            try:
                if failed is not None:  # a pair that failed is not sampled again
                    raise SamplingError(failed)
                confirmed = confirm_every(draw, unit.pair, target, sizes, seed=seed, n_jobs=config.run.n_jobs)
            except SamplingError as error:
                failed = str(error)
                outcomes += [Outcome(task, error=_pair_error(pair, failed), staged=staged) for task in tasks]
                continue
            except Exception as error:  # e.g. a worker killed (TerminatedWorkerError): the pair's rows
                outcomes += [Outcome(task, error=f"the attack workers failed: {one_line(error)}", staged=staged)
                             for task in tasks]
                continue
            for candidate, found in confirmed:
                task = _task(pair.name, candidate.direction, target, candidate.function_class)
                outcomes.append(Outcome(task, error=found, staged=staged) if isinstance(found, str)
                                else Outcome(task, found, staged=staged))
        return outcomes


POLICIES = {"best": _Best, "every": _Every}
"""The one place a policy's name is read: ``[attacks] policy`` -> what its units are and how they run."""


def _task(pair: str, direction: str, target: Target, function_class: str | None = None) -> Task:
    """The task of a row of ``target`` (an error row without a candidate: its first class)."""
    name = target.classes[0] if function_class is None else function_class
    return Task(pair, direction, name, target.divergence, target.alpha, target.delta)


def _pair_error(pair: NeighbourPair, message: str) -> str:
    return f"mechanism failed on pair {pair.name}: {message}"


def _staged_fields(policy: str, sizes: StageSizes, candidates: int, finalists: int, sets_pooled: int,
                   rounds: int = 1, stop: str | None = FIXED) -> dict:
    """The :data:`audit.results.schema.STAGED_COLUMNS` of a unit's rows but ``outputs_drawn`` (:func:`run_engine` adds
    it when the unit is over): the stage sizes (a sequential search's last round's, whose budget is then the
    rows' ``n_samples``), its rounds and why it stopped."""
    fields = dict(policy=policy, n_screen=sizes.screen, n_train=sizes.train, n_check=sizes.check,
                  n_confirm=sizes.confirm, candidates=candidates, finalists=finalists, sets_pooled=sets_pooled,
                  rounds=rounds, stop=stop)
    if rounds > 1 or stop not in (FIXED, None):  # a sequential search
        fields["n_samples"] = sizes.screen + sizes.train + sizes.check + sizes.confirm
    return fields


def _record(unit: Unit, outcome: Outcome, unit_records: int, mechanism: Any, pairs: Sequence[NeighbourPair],
            config: AuditConfig, outputs: OutputWatch, seconds: float, events: Mapping[str, Any]) -> dict:
    """The one record builder: a task's fields, its id, estimate, error, notes, exact value and closed-form bound,
    the unit it belongs to (``search``, ``claim_index``, ``search_records``), its stage fields (``staged``) and
    what the mechanism did while the unit drew (``events``: :meth:`audit.sampling.events.EventCounter.since`, the same in
    every record of the unit)."""
    task = outcome.task
    task_id = task.id if unit.claim_index is None else f"staged|claim{unit.claim_index}|{task.id}"
    record = task_record(task, task_id=task_id, error=outcome.error)
    index = next((i for i, pair in enumerate(pairs) if pair.name == task.pair), None)
    record.update(search=unit.id, claim_index=unit.claim_index, search_records=unit_records,
                  staged=dict(outcome.staged), seconds=seconds, events=dict(events),
                  d_in=None if index is None else pairs[index].d_in)
    if outcome.error is not None:
        return record
    notes = event_note(outcome.evidence, config.attacks.confidence)  # first: report.md cuts long notes
    clipped = getattr(outcome.evidence, "evidence", outcome.evidence)  # a sequential search's look holds its own
    notes += [clipped.note()] if isinstance(clipped, ClippedWitnessEstimate) else []
    notes += [COUPLING_REFUSED] if config.attacks.coupled and not outcome.evidence.coupled else []
    if outputs.deterministic(index):
        notes.append(DETERMINISTIC_NOTE)
    notes += outputs.raised_note(index)
    if parse_function_class(task.function_class).layer == REPRESENTATION:
        notes += outputs.bit_note(index)
    exact, theory_bound = _theory(mechanism, pairs[index], task)
    record.update(estimate=float(outcome.evidence.estimate), note="; ".join(notes), exact=exact,
                  theory_bound=theory_bound)
    return record


def _theory(mechanism: Any, pair: NeighbourPair, task: Task) -> tuple[float | None, float | None]:
    """(exact divergence of the task's class in its direction, the mechanism's closed-form bound); None where
    unknown.  The one place the audit reads theory (:mod:`audit.theory.exact`, :mod:`audit.theory.table`).
    Closed forms hold in exact arithmetic, of the values: a representation-layer task (``floatbits``, how the
    outputs are stored) has no published bound to exceed, nor has a pair with a NaN or infinite record (the
    probes': outside every domain a closed form is stated on, e.g. a Gaussian sum shifted by inf), nor a pair more
    than one record apart among pairs at several distances (the bounds hold for neighbours)."""
    laws = known_laws(mechanism, pair.d, pair.d_prime)
    exact = None
    if laws is not None:
        exact = exact_value(laws if task.direction == "P|Q" else laws[::-1], task.function_class, task.divergence,
                            task.alpha)
    finite = all(np.isfinite(np.asarray(data, dtype=float)).all() for data in (pair.d, pair.d_prime))
    farther = pair.d_in is not None and pair.distance != 1  # a pair at one of several distances: bounds are for 1
    if parse_function_class(task.function_class).layer == REPRESENTATION or not finite or farther:
        return exact, None
    try:
        theory_bound = law_bound(getattr(mechanism, "theory_law", None), task.function_class, task.divergence,
                                 task.alpha, task.delta)
    except (ArithmeticError, ValueError, IndexError):  # e.g. an overflow at epsilon = 1e308: unknown, not fatal
        theory_bound = None
    return exact, theory_bound


def task_record(task: Task, *, task_id: str | None = None, error: str | None = None) -> dict:
    """A task's record before its statistic: the task's fields, its id (``task_id``, default ``task.id``), no estimate."""
    return dict(dataclasses.asdict(task), task=task.id if task_id is None else task_id, estimate=math.nan,
                error=error, note="", exact=None, theory_bound=None, seconds=0.0)


def engine_rows(config: AuditConfig, records: Iterable[dict], evidence: Mapping[str, Any] | None = None) -> list[Row]:
    """The result rows of the engine's records: :func:`claim_rows` of each record (a ``best`` record against its
    own search's claim and order, an ``every`` record against every claim), with its stage columns and its
    evidence (``evidence``: task id -> confirm statistic; a failed task's rows carry None, and so do all rows
    without ``evidence``, e.g. those a failed audit saves without verdicts); a check's record is its row
    (:meth:`audit.results.schema.Row.from_check_record`, ``property`` set)."""
    rows, claims, averaged, n_samples = [], config.claims, config.averaged_pairs, config.attacks.n_samples
    for record in records:
        if "property" in record:  # a check's record (audit.engine.checks)
            rows.append(Row.from_check_record(record))
            continue
        own = claims
        if record.get("claim_index") is not None:  # its search's claim, at its order
            own = (dataclasses.replace(claims[record["claim_index"]], alpha=(record["alpha"],)),)
        found = None if evidence is None or record["error"] is not None else evidence.get(record["task"])
        rows += claim_rows(own, record, found, averaged=averaged, n_samples=n_samples)
    return rows


def claim_rows(claims: Sequence[Claim], record: Mapping[str, Any], evidence: Any = None, *,
               averaged: frozenset[str] | None = None, n_samples: int | None = None) -> list[Row]:
    """One results row per claim of ``claims`` on the record's divergence, alpha and delta, carrying ``evidence``.

    ``refutes_claim`` is True when the attack's class is contained in the
    claim's class (docs/theory.md section 3); verdicts and intervals are filled
    later by :func:`audit.results.verdicts.assign_verdicts`.  ``averaged``: the pairs
    of the on-average claims (``AuditConfig.averaged_pairs``; None: every pair); ``n_samples``: the
    fixed design's (None: a search in rounds).  The record's stage fields
    (``staged``: :data:`audit.results.schema.STAGED_COLUMNS`, and a sequential search's
    ``n_samples``) are the rows'.
    """
    attack_class = parse_function_class(record["function_class"])
    task = {
        "pair": record["pair"],
        "direction": record["direction"],
        "function_class": record["function_class"],
        "divergence": record["divergence"],
        "delta": float(record["delta"]),
        "alpha": math.nan if record["alpha"] is None else float(record["alpha"]),
        "estimate": float(record["estimate"]),
        "n_samples": math.nan if n_samples is None else n_samples,
        "theory_bound": _number(record["theory_bound"]),
        "exact": _number(record["exact"]),
        "note": record["note"],
        "task": record["task"],
        "error": record["error"],
        "resumed": bool(record.get("resumed", False)),
        "evidence": evidence,
        **record.get("staged", {}),
        **({"interval": interval_of(evidence)} if "staged" in record and evidence is not None else {}),
    }
    return [
        Row(**task, claim=claim.epsilon, claim_class=claim.function_class, on_average=claim.on_average,
            d_in=claim.d_in if claim.d_in is not None else record.get("d_in"),
            # a pair of an on-average claim is judged by the mean over pairs (audit.results.on_average), not alone
            refutes_claim=not claim.on_average
            and attack_class.is_contained_in(claim.class_type))
        for claim in claims
        if (claim.divergence, claim.delta) == (record["divergence"], record["delta"]) and record["alpha"] in claim.alpha
        and claim.holds_at(record.get("d_in"))
        and not (claim.on_average and averaged is not None and record["pair"] not in averaged)
    ]


def _number(value: float | None) -> float:
    """Unknown values are NaN in the table (null in results.json)."""
    return math.nan if value is None else float(value)


def plan_hash(config: AuditConfig, units: Sequence[Any]) -> str:
    """What a resumed run must share with the interrupted one: config (minus n_jobs, backend) and the ids of its
    units of work (:class:`Unit`)."""
    raw = {key: value for key, value in config.raw.items() if key != "run"}
    raw["seed"] = config.run.seed
    text = json.dumps([raw, [unit.id for unit in units]], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _finished_units(path: Path, plan: str) -> tuple[dict[str, list[dict]], dict[str, Any]]:
    """The units of ``path`` whose records were all written (unit id -> records), and the records' evidence;
    a unit cut off between its records is run again."""
    read, evidence = store.read_finished(path, plan)
    units: dict[str, list[dict]] = {}
    for record in read.values():
        units.setdefault(record["search"], []).append(record)
    return {key: found for key, found in units.items() if len(found) == found[0]["search_records"]}, evidence
