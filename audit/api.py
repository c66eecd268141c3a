"""The Python entry point of an audit: :func:`run_audit` and its :class:`AuditResult`.

Same semantics as ``capaudit run`` (docs/design.md, "Contract: Python").
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit.checks import combine, run_checks
from audit.config import AuditConfig, ConfigError, load_config, user_import_path
from audit.neighbours import NeighbourPair, make_pairs
from audit.on_average import aggregate_rows
from audit.provenance import describe_audit, pair_records, screening_records
from audit.structure import fix_layout
from audit.plan import task_seed
from audit.runner import run_tasks
from audit.sampling import one_line
from audit.schema import STAGED_COLUMNS, TABLE_COLUMNS, Row
from audit.theory_check import check_bounds
from audit.verdicts import assign_verdicts, exit_code, overall_verdict, summarize_claims

FAILED = "error"
"""The ``verdict`` of results.json when the audit could not reach one (:class:`AuditError`)."""


class AuditError(RuntimeError):
    """The audit failed after it started: no verdict.  The finished rows were saved (the message says where)."""


class AuditInterrupted(KeyboardInterrupt):
    """Ctrl-C during an audit; ``saved`` is the report written with the finished rows, or None."""

    def __init__(self, saved: Path | None) -> None:
        super().__init__(saved)
        self.saved = saved


@dataclass(frozen=True, eq=False)
class AuditResult:
    """The outcome of an audit.

    Attributes
    ----------
    verdict : str
        ``"pass"``, ``"violation"`` or ``"inconclusive"`` (see :mod:`audit.verdicts`).
    table : pandas.DataFrame
        One row per results.json row (docs/design.md schema, plus ``task`` and ``error``).
    rows : list of Row
        The same rows typed (:class:`audit.schema.Row`, a property read off ``table``).
    exit_code : int
        What ``capaudit run`` exits with: 0 pass or inconclusive, 1 violation,
        2 when a task failed (a mechanism error) or a claim went untested.
    seed : int
    seconds : float
        Wall time of the audit.
    versions : dict
        Python, capaudit, its dependencies and the mechanism's library.
    config : dict
        The config as run (after overrides).
    pairs : list of dict
        The audited pairs (:func:`audit.provenance.pair_records`).
    audited : dict
        What was audited: mechanism, config hash, command, date, machine
        (:func:`audit.provenance.describe_audit`).
    theory : list of dict
        Published closed-form bounds against the rows' exact values and lower
        confidence bounds (:func:`audit.theory_check.check_bounds`).
    checks : list of dict
        The ``[[checks]]`` rows (:func:`audit.checks.run_checks`); they join
        the verdict and exit code as :func:`audit.checks.combine` says.
    search : list of dict
        ``[neighbours] strategy = "search"``: every candidate screened, probes
        included, with its score and why it was dropped
        (:func:`audit.provenance.screening_records`); empty otherwise.
    """

    verdict: str
    table: pd.DataFrame
    exit_code: int
    seed: int
    seconds: float
    versions: Mapping[str, str | None]
    config: Mapping[str, Any]
    pairs: Sequence[Mapping[str, Any]] = ()
    audited: Mapping[str, Any] = field(default_factory=dict)
    theory: Sequence[Mapping[str, Any]] = ()
    checks: Sequence[Mapping[str, Any]] = ()
    search: Sequence[Mapping[str, Any]] = ()

    @property
    def rows(self) -> list[Row]:
        """The table's rows as typed rows (:class:`audit.schema.Row`; ``held_out_scores`` stays in the table)."""
        return [Row.from_record(record) for record in self.table.to_dict(orient="records")]

    @property
    def claims(self) -> list[dict[str, Any]]:
        """Per claim: verdict, strongest row, adjusted p, detectable excess (`audit.verdicts.summarize_claims`)."""
        return summarize_claims(self.rows)

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write report.md, results.json, results.csv and figures/ (:func:`audit.report.write_audit_report`)."""
        from audit.report import write_audit_report

        return write_audit_report(
            out_dir, table=self.table, verdict=self.verdict, seed=self.seed, seconds=self.seconds,
            versions=dict(self.versions), config=dict(self.config), pairs=list(self.pairs), audited=dict(self.audited),
            theory=list(self.theory),
            checks=list(self.checks),
            search=list(self.search),
        )


def run_audit(
    config: str | os.PathLike | Mapping[str, Any],
    n_jobs: int | None = None,
    seed: int | None = None,
    out_dir: str | os.PathLike | None = None,
    resume: bool = False,
    backend: str | None = None,
    progress: bool = True,
) -> AuditResult:
    """Audit a mechanism's privacy claims.

    Parameters
    ----------
    config : path or mapping
        A TOML config file or the same structure as a dict (docs/design.md, "Contract: config").
    n_jobs, seed, backend : optional
        Override ``[run]``'s values.
    out_dir : path, optional
        Write ``tasks.jsonl`` there as tasks finish, and the report at the end.
    resume : bool
        Continue the interrupted run in ``out_dir`` without redoing finished tasks.
    progress : bool
        Show a progress bar on stderr.

    Returns
    -------
    AuditResult

    Raises
    ------
    ConfigError
        On an invalid config (the message names the field).
    ValueError
        When ``out_dir`` is not a writable directory, the plan would not fit
        in memory, or ``resume`` meets another config's results or an edited
        ``tasks.jsonl``.
    AuditError
        When the audit fails after its tasks ran (verdicts or report): no
        verdict; the finished rows are saved in ``out_dir`` with verdict
        ``"error"`` (a failing mechanism or attack is not this: it gives
        error rows and exit code 2).
    AuditInterrupted
        On Ctrl-C (a ``KeyboardInterrupt``), after saving the finished rows the same way.

    Examples
    --------
    >>> result = run_audit("examples/laplace.toml", n_jobs=2)  # doctest: +SKIP
    >>> result.verdict, result.exit_code  # doctest: +SKIP
    ('pass', 0)
    """
    if resume and out_dir is None:
        raise ValueError("resume needs the out_dir of the interrupted run. Found out_dir=None.")
    start = time.perf_counter()
    audit_config = load_config(config, {"n_jobs": n_jobs, "seed": seed, "backend": backend})
    out = None if out_dir is None else output_directory(out_dir)
    mechanism = audit_config.mechanism.build()
    pairs = _pairs(audit_config, mechanism)
    finished: dict[str, dict] = {}
    stage = "the tasks"
    try:
        # NaN, inf and changing widths are evidence: fix the outputs' layout before any chunk is drawn (audit.structure)
        fix_layout(mechanism, [data for pair in pairs for data in (pair.d, pair.d_prime)],
                   task_seed(audit_config.run.seed, "structure"), audit_config.run.sample_timeout)
        columns = list(TABLE_COLUMNS)
        if audit_config.attacks.engine == "staged":  # one confirm statistic per claim (audit/staged_audit.py)
            from audit.staged_audit import run_staged

            rows, evidence = run_staged(audit_config, mechanism, pairs, out, resume=resume, progress=progress,
                                        finished=finished)
            columns += STAGED_COLUMNS
        else:
            records, evidence = run_tasks(
                audit_config, mechanism, pairs, out, resume=resume, progress=progress, finished=finished
            )
            rows = claim_rows(audit_config, records.values())
        stage = "the verdicts"
        averages, average_evidence = aggregate_rows(rows, evidence, audit_config.attacks.confidence)
        evidence = {**evidence, **average_evidence}
        rows = assign_verdicts([Row.from_record(row) for row in rows + averages], evidence,
                               audit_config.attacks.confidence)
        verdict = overall_verdict(rows)
        stage = "the checks"
        checks = run_checks(audit_config)
        claims = (verdict, exit_code(rows, verdict)) if audit_config.claims else (None, None)
        verdict, code = combine(*claims, checks)
        records = [row.to_record() for row in rows]
        table = pd.DataFrame(records, columns=columns)
        # The binned held-out scores behind each row: the report's ROC curves and witness histograms.
        table["held_out_scores"] = [getattr(evidence.get(task), "details", {}).get("scores") for task in table["task"]]
        result = AuditResult(
            verdict=verdict,
            table=table,
            exit_code=code,
            seed=audit_config.run.seed,
            seconds=time.perf_counter() - start,
            versions=_versions(mechanism),
            config=audit_config.raw,
            pairs=pair_records(pairs),
            audited=describe_audit(mechanism, config, audit_config.raw),
            theory=check_bounds(records, evidence, audit_config.attacks.confidence),
            checks=checks,
            search=screening_records(pairs),
        )
        stage = "writing the report"
        if out is not None:
            result.write(out)
    except KeyboardInterrupt:
        raise AuditInterrupted(_save_failed(out, audit_config, finished, "interrupted (Ctrl-C)", start)) from None
    except Exception as error:  # a crash is never a verdict: save what finished and say so
        if stage == "the tasks" and isinstance(error, ValueError):  # refused before any task ran
            raise
        message = f"{stage} failed: {one_line(error)}"
        saved = _save_failed(out, audit_config, finished, message, start)
        where = f"; the {len(finished)} finished tasks are saved in {saved.parent}" if saved else ""
        raise AuditError(message + where) from error
    return result


def output_directory(out_dir: str | os.PathLike) -> Path:
    """``out_dir``, created if needed, after checking that it is a writable directory.

    Raises
    ------
    ValueError
        Naming the directory and why it cannot hold the report.
    """
    path = Path(out_dir)
    fix = "choose another output directory (--out)"
    if path.exists() and not path.is_dir():
        raise ValueError(f"output directory {str(path)!r} is an existing file, not a directory; {fix}.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".capaudit-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or error
        raise ValueError(f"output directory {str(path)!r} is not writable ({reason}); {fix}.") from None
    return path


def _save_failed(out: Path | None, config: AuditConfig, records: Mapping[str, dict], reason: str,
                 start: float) -> Path | None:
    """:func:`write_failure` with the finished tasks' rows (:func:`claim_rows`, without verdicts)."""
    if out is None:
        return None
    try:
        if config.attacks.engine == "staged":
            from audit.staged_audit import search_rows

            rows = search_rows(config, records.values())
        else:
            rows = claim_rows(config, records.values())
    except Exception:  # rows of records the claims cannot read: keep the records as they are
        rows = [dict(record) for record in records.values()]
    resume = f"{len(records)} tasks finished; `capaudit run CONFIG --out {out} --resume` continues from tasks.jsonl."
    return write_failure(out, reason, rows, config=config.raw, seed=config.run.seed,
                         seconds=time.perf_counter() - start, hint=resume)


def write_failure(
    out_dir: str | os.PathLike,
    reason: str,
    rows: Sequence[Mapping[str, Any]] = (),
    *,
    config: Mapping[str, Any] | None = None,
    seed: int | None = None,
    seconds: float = 0.0,
    hint: str = "",
) -> Path | None:
    """Write results.json (``"verdict": "error"``), results.csv and report.md for an audit that reached no verdict.

    A crash is never a verdict, and a failed run must not leave an earlier
    run's report in place to be read as this one's.  Writing never raises
    over the original failure: None when the files could not be written.

    Returns
    -------
    pathlib.Path or None
        The path of report.md.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        columns = list(TABLE_COLUMNS) if rows and "claim" in rows[0] else None
        pd.DataFrame(list(rows), columns=columns).to_csv(out / "results.csv", index=False)
        document = {"verdict": FAILED, "error": reason, "seed": seed, "seconds": seconds, "config": config,
                    "rows": [{key: _json_number(value) for key, value in row.items()} for row in rows]}
        (out / "results.json").write_text(json.dumps(document, indent=2, allow_nan=False, default=str) + "\n")
        report = out / "report.md"
        report.write_text(
            f"# capaudit audit report\n\n## Verdict: **ERROR**\n\nThe audit reached no verdict: {reason}.\n\n"
            f"{len(rows)} rows in results.json and results.csv. {hint}\n"
        )
    except Exception:
        return None
    return report


def _json_number(value: Any) -> Any:
    """NaN -> null and +-inf -> "inf"/"-inf", as :mod:`audit.report` writes them."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def claim_rows(config: AuditConfig, records: Sequence[dict] | Any) -> list[dict]:
    """One results row per (task record, claim on the task's divergence, alpha and delta).

    ``refutes_claim`` is True when the attack's class is contained in the
    claim's class (docs/theory.md section 3); verdicts and intervals are filled
    later by :func:`audit.verdicts.assign_verdicts`.
    """
    from attacks.classes import parse_function_class

    rows = []
    for record in records:
        attack_class = parse_function_class(record["function_class"])
        for claim in config.claims:
            same_target = (claim.divergence, claim.delta) == (record["divergence"], record["delta"])
            if not same_target or record["alpha"] not in claim.alpha:
                continue
            rows.append({
                "pair": record["pair"],
                "direction": record["direction"],
                "function_class": record["function_class"],
                "divergence": record["divergence"],
                "alpha": math.nan if record["alpha"] is None else record["alpha"],
                "estimate": record["estimate"],
                "ci_low": math.nan,
                "ci_high": math.nan,
                "n_samples": config.attacks.n_samples,
                "claim": claim.epsilon,
                "claim_class": claim.function_class,
                # a pair of an on-average claim is judged by the mean over pairs (audit.on_average), not alone
                "refutes_claim": not claim.on_average
                and attack_class.is_contained_in(parse_function_class(claim.function_class)),
                "theory_bound": _number(record["theory_bound"]),
                "exact": _number(record["exact"]),
                "verdict": None,
                "note": record["note"],
                "p_adjusted": math.nan,
                "detectable_excess": math.nan,
                "task": record["task"],
                "unbounded": bool(record["unbounded"]),
                "error": record["error"],
                "resumed": bool(record.get("resumed", False)),
                "on_average": claim.on_average,
            })
    return rows


def _number(value: float | None) -> float:
    """Unknown values are NaN in the table (null in results.json)."""
    return math.nan if value is None else float(value)


def _pairs(config: AuditConfig, mechanism: Any) -> list[NeighbourPair]:
    """The neighbouring pairs: explicit, from [neighbours], or the mechanism's worst-case defaults."""
    spec = config.neighbours if config.neighbours is not None else ([*config.pairs] or None)
    rng = np.random.default_rng(task_seed(config.run.seed, "neighbours"))
    user_code = isinstance((config.neighbours or {}).get("distribution"), str)  # on-average: "module:function"
    try:
        with user_import_path(config.mechanism.base_dir) if user_code else contextlib.nullcontext():
            return make_pairs(spec, mechanism, rng)
    except ValueError as error:
        raise ConfigError(f"{'neighbours' if config.neighbours is not None else 'pairs'}: {error}") from None


def _versions(mechanism: Any) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("capaudit", "numpy", "scipy", "scikit-learn", "pandas", "joblib"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    versions["mechanism_library"] = getattr(mechanism, "library_version", None)
    # Libraries that draw from the operating system (OpenDP, PyDP) ignore the audit's seed.
    versions["mechanism_seedable"] = bool(getattr(mechanism, "seedable", True))
    return versions
