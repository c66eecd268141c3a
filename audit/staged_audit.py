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
the others.  Sampling runs in this process, one claim after the other,
without the rows engine's per-pair time limit or resume.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

import joblib
from tqdm import tqdm

from attacks.staged import Draw, StagedResult, StageSizes, Target, staged_search
from audit.config import AuditConfig
from audit.neighbours import NeighbourPair
from audit.parallel import backend
from audit.plan import Task, task_seed
from audit.exact import known_laws
from audit.runner import task_exact, task_record, task_theory_bound
from audit.sampling import COUPLING_REFUSED, draw_pair_isolated



class SamplingError(RuntimeError):
    """The mechanism failed on a pair (the runner's message)."""


def pair_sampler(mechanism: Any, pairs: Sequence[NeighbourPair], seed: int, coupled: bool, *, workers: int = 1,
                 timeout: float = 600.0):
    """The sampling callable of :func:`attacks.staged.staged_search` over ``pairs``.

    ``sample(pair, n, stage, chunk)`` draws n outputs on pair ``pair``'s d and
    d' with :func:`audit.sampling.draw_pair_isolated` (forked children, ``timeout`` seconds a chunk),
    from the seed of ``"staged|<stage>|<chunk>"``.
    """
    def sample(pair: int, n: int, stage: str, chunk: int) -> Draw:
        key = int(task_seed(seed, f"staged|{stage}|{chunk}").generate_state(1)[0])
        drawn = draw_pair_isolated(mechanism, pairs[pair], n, key, coupled, workers=workers, timeout=timeout)
        if isinstance(drawn, str):
            raise SamplingError(drawn)
        return Draw(drawn.d, drawn.d_prime, drawn.coupled)

    return sample


def run_staged(config: AuditConfig, mechanism: Any, pairs: Sequence[NeighbourPair], *, progress: bool = True,
               finished: dict[str, dict] | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Search every claim (and Renyi order) and return its result rows and their evidence.

    Returns
    -------
    rows : list of dict
        One row per claim and order (:func:`audit.api.claim_rows` of the
        winner's record, plus :data:`audit.schema.STAGED_COLUMNS`), and an error row per
        pair whose sampling failed.
    evidence : dict
        Task id -> the confirm statistic (None for error rows).
    """
    from audit.api import claim_rows

    sizes = StageSizes.from_budget(config.attacks.n_samples, config.attacks.stages)
    searches = [(index, claim, alpha) for index, claim in enumerate(config.claims) for alpha in claim.alpha]
    records = {} if finished is None else finished
    rows, evidence = [], {}
    sample = pair_sampler(mechanism, pairs, config.run.seed, config.attacks.coupled,
                          workers=max(joblib.effective_n_jobs(config.run.n_jobs), 1), timeout=config.run.sample_timeout)
    for index, claim, alpha in tqdm(searches, desc="staged search", file=sys.stderr, disable=not progress):
        start = time.perf_counter()
        target = Target.for_claim(claim.divergence, claim.function_class, config.attacks.classes, alpha, claim.delta,
                                  config.attacks.class_params)
        name = f"staged|claim{index}"  # the rows' task ids: name|pair|direction|class|divergence|alpha|delta
        seed = int(task_seed(config.run.seed, f"{name}|{alpha}").generate_state(1)[0])
        with backend(config.run.backend, config.run.n_jobs):
            result = staged_search(sample, len(pairs), target, sizes, seed=seed, n_jobs=config.run.n_jobs)
        claim_records = _records(result, name, mechanism, pairs, config.attacks.coupled, time.perf_counter() - start)
        records.update((record["task"], record) for record in claim_records)
        one_claim = dataclasses.replace(config, claims=(dataclasses.replace(claim, alpha=(alpha,)),))
        for row in claim_rows(one_claim, claim_records):
            rows.append({**row, **_staged_fields(result)})
            evidence[row["task"]] = result.evidence if row["error"] is None else None
    return rows, evidence


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


def _staged_fields(result: StagedResult) -> dict:
    """The :data:`audit.schema.STAGED_COLUMNS` of a search's rows."""
    sizes = result.sizes
    return dict(engine="staged", n_screen=sizes.screen, n_train=sizes.train, n_check=sizes.check,
                n_confirm=sizes.confirm, candidates=result.screened, finalists=len(result.finalists),
                sets_pooled=result.sets_pooled)
