"""The Python entry point of an audit: :func:`run_audit` and its :class:`AuditResult`.

Same semantics as ``capaudit run`` (docs/design.md, "Contract: Python").
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit.config.load import AuditConfig, ConfigError, load_config
from audit.config.import_path import user_import_path
from audit.sampling.events import event_summary
from audit.config.families import claim_summaries
from audit.config.library_claims import pair_d_in
from audit.inputs.neighbours import NeighbourPair, PairList, make_pairs
from audit.results.provenance import describe_audit, pair_records, screening_records
from audit.results.files import results_table, write_results
from audit.engine.plan import task_seed
from audit.engine.progress import ProgressBar
from audit.sampling.errors import MechanismError, one_line
from audit.results.schema import STAGED_COLUMNS, TABLE_COLUMNS, Row
from audit.theory.check import check_bounds
from audit.results.verdicts import assign_verdicts, exit_code, overall_verdict

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
        ``"pass"``, ``"violation"`` or ``"inconclusive"`` (see :mod:`audit.results.verdicts`).
    rows : tuple of Row
        The results rows (:class:`audit.results.schema.Row`), each carrying its evidence, as the engine and the
        verdicts built them; the report is written from them.
    table : pandas.DataFrame
        The same rows as one table, as results.json holds them (docs/results.md: the schema's columns,
        ``task``, ``error``, the staged fields and ``held_out_scores``; a property built from ``rows``).
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
        The audited pairs (:func:`audit.results.provenance.pair_records`).
    audited : dict
        What was audited: mechanism, config hash, command, date, machine
        (:func:`audit.results.provenance.describe_audit`).
    theory : list of dict
        Published closed-form bounds against the rows' exact values and lower
        confidence bounds (:func:`audit.theory.check.check_bounds`).
    checks : tuple of Row
        The ``[[checks]]`` rows (:func:`audit.engine.checks.run_check`, run by the engine); they join the verdict
        and exit code as :func:`audit.engine.checks.combine` says; results.json's ``checks``
        (:meth:`audit.results.schema.Row.to_check_record`).
    search : list of dict
        ``[neighbours] strategy = "search"``: every candidate screened, probes
        included, with its score and why it was dropped
        (:func:`audit.results.provenance.screening_records`); empty otherwise.
    events : list of dict
        Per pair, what the mechanism did besides regular outputs: structural
        outputs per dataset and draws redone one output per call after a call
        for many outputs raised (:func:`audit.sampling.events.event_summary`); empty
        when it did nothing of the kind.
    """

    verdict: str
    rows: Sequence[Row]
    exit_code: int
    seed: int
    seconds: float
    versions: Mapping[str, str | None]
    config: Mapping[str, Any]
    pairs: Sequence[Mapping[str, Any]] = ()
    audited: Mapping[str, Any] = field(default_factory=dict)
    theory: Sequence[Mapping[str, Any]] = ()
    checks: Sequence[Row] = ()
    search: Sequence[Mapping[str, Any]] = ()
    events: Sequence[Mapping[str, Any]] = ()
    one_run: Mapping[str, Any] | None = None
    """``[one_run]`` audits: results.json's ``one_run`` (:func:`audit.engine.one_run.one_run_audit`); no rows."""

    @functools.cached_property
    def table(self) -> pd.DataFrame:
        """The rows as a pandas table, as results.json holds them (:func:`audit.results.files.results_table`)."""
        return results_table(self.rows)

    @property
    def claims(self) -> list[dict[str, Any]]:
        """Per claim: verdict, strongest row, adjusted p, detectable excess (`audit.config.families.claim_summaries`:
        `audit.results.verdicts.summarize_claims` with one line per gdp / zcdp / profile claim); a one-run audit's
        readings of its claims (results.json ``one_run.claims``)."""
        if self.one_run is not None:
            return list(self.one_run["claims"])
        return claim_summaries(self.rows, self.config)

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write report.md, results.json, results.csv and figures/ (:func:`audit.report.audit_report.write_audit_report`).

        ``out_dir`` is prepared as for a run (:func:`output_directory`: refused
        when it holds other files, locked, an earlier report's files removed;
        ``tasks.jsonl`` is kept).
        """
        from audit.report.audit_report import write_audit_report

        out = output_directory(out_dir, resume=True)
        try:
            if self.one_run is not None:
                from audit.engine.one_run import write_one_run_report
                from audit.results.files import SCHEMA_VERSION

                return write_one_run_report(out, {
                    "schema_version": SCHEMA_VERSION, "verdict": self.verdict, "seed": self.seed,
                    "seconds": self.seconds, "versions": dict(self.versions), "config": dict(self.config),
                    "audited": dict(self.audited), "pairs": [], "one_run": dict(self.one_run)})
            return write_audit_report(
                out, rows=self.rows, verdict=self.verdict, seed=self.seed, seconds=self.seconds,
                versions=dict(self.versions), config=dict(self.config), pairs=list(self.pairs),
                audited=dict(self.audited), theory=list(self.theory), checks=list(self.checks),
                search=list(self.search), events=list(self.events),
            )
        finally:
            release_directory(out)


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
    out = None if out_dir is None else output_directory(out_dir, resume=resume)
    mechanism = audit_config.mechanism.build()
    if audit_config.one_run is not None:
        return _one_run(audit_config, mechanism, config, out, start)
    with ProgressBar("dataset search", " candidates", progress) as bar:  # drawn only by a search's first call
        pairs = _pairs(audit_config, mechanism, on_screened=bar.show)
    finished: dict[str, dict] = {}
    stage = "the tasks"
    from audit.engine.checks import combine  # with the exact values (scipy.stats): not on `import audit.commands.api`
    from audit.engine.run import run_engine  # with the attacks (scipy.stats): not on `import audit.commands.api`

    try:
        rows = run_engine(audit_config, mechanism, pairs, out, resume=resume, progress=progress, finished=finished)
        checks = tuple(row for row in rows if row.checked is not None)
        rows = [row for row in rows if row.checked is None]
        stage = "the verdicts"
        rows = assign_verdicts(rows, audit_config.attacks.confidence)  # the on-average aggregates among them
        verdict = overall_verdict(rows)
        claims = (verdict, exit_code(rows, verdict)) if audit_config.claims else (None, None)
        verdict, code = combine(*claims, checks)
        result = AuditResult(
            verdict=verdict,
            rows=tuple(rows),
            exit_code=code,
            seed=audit_config.run.seed,
            seconds=time.perf_counter() - start,
            versions=_versions(mechanism),
            config=audit_config.raw,
            pairs=pair_records(pairs, getattr(mechanism, "input_relation", None)),
            audited=describe_audit(mechanism, config, audit_config.raw, probe=pairs[0] if pairs else None,
                                   timeout=audit_config.run.sample_timeout),
            theory=check_bounds(rows, audit_config.attacks.confidence),
            checks=checks,
            search=screening_records(pairs),
            events=event_summary(finished.values()),
        )
        stage = "writing the report"
        if out is not None:
            result.write(out)
    except KeyboardInterrupt:
        saved = _save_failed(out, audit_config, "interrupted (Ctrl-C)", start, finished)
        raise AuditInterrupted(saved) from None
    except Exception as error:  # a crash is never a verdict: save what finished and say so
        if stage == "the tasks" and isinstance(error, ValueError):  # refused before any task ran
            raise
        message = f"{stage} failed: {one_line(error)}"
        saved = _save_failed(out, audit_config, message, start, finished)
        where = f"; the {len(finished)} finished tasks are saved in {saved.parent}" if saved else ""
        raise AuditError(message + where) from error
    finally:
        release_directory(out)
    return result


ARTEFACTS = ("report.md", "report.html", "results.json", "results.csv", "tasks.jsonl")
"""The files an audit writes in its output directory (besides ``figures/*.svg`` and :data:`LOCK_FILE`)."""
FIGURES = "figures"
FIGURE_SUFFIXES = (".svg", ".png")
"""The figures an audit writes (SVG) and those of older versions (PNG), cleared by the next run into the directory."""
LOCK_FILE = ".capaudit.lock"
"""Held (``flock``) by the run writing the directory: a second run into it is refused."""
_HELD: dict[Path, int] = {}  # output directory -> the descriptor of its lock, while this process writes it


def output_directory(out_dir: str | os.PathLike, resume: bool = False) -> Path:
    """``out_dir``, created if needed, locked and cleared of an earlier audit's artefacts.

    The directory must be empty or hold only what an audit writes
    (:data:`ARTEFACTS`, ``figures/*.svg`` or ``*.png``): a directory with other files is
    refused rather than mixed with a report.  The run takes the directory's
    lock (:data:`LOCK_FILE`; released by :func:`release_directory` or when
    the process ends), so that two runs never write one directory.  The
    earlier artefacts are removed (``tasks.jsonl`` kept when ``resume``):
    an earlier run's figures never stand beside a new report, and a symbolic
    link planted under an artefact's name is removed, not followed.

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
        foreign = _foreign_entries(path)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise ValueError(f"output directory {str(path)!r} holds files capaudit did not write ({shown}); "
                             f"{fix}: an empty or new one, or one an earlier audit wrote.")
        _lock(path)
        clear_artefacts(path, keep=("tasks.jsonl",) if resume else ())
    except OSError as error:
        reason = error.strerror or error
        raise ValueError(f"output directory {str(path)!r} is not writable ({reason}); {fix}.") from None
    return path


def release_directory(path: Path | None) -> None:
    """Release the lock :func:`output_directory` took on ``path`` (nothing when it holds none)."""
    descriptor = None if path is None else _HELD.pop(Path(path).resolve(), None)
    if descriptor is not None:
        os.close(descriptor)  # closing the descriptor drops its flock


def clear_artefacts(path: Path, keep: Sequence[str] = ()) -> None:
    """Remove an earlier audit's artefacts from ``path`` (symbolic links are unlinked, never followed)."""
    for name in ARTEFACTS:
        target = path / name
        if target.is_symlink() or (name not in keep and target.is_file()):
            target.unlink()
    figures = path / FIGURES
    if figures.is_symlink():
        figures.unlink()
    elif figures.is_dir():
        for figure in figures.iterdir():
            if figure.suffix in FIGURE_SUFFIXES and (figure.is_file() or figure.is_symlink()):
                figure.unlink()


def _foreign_entries(path: Path) -> list[str]:
    """What in ``path`` no audit writes: names other than the artefacts, ``figures/`` with other than figures."""
    foreign = []
    for entry in sorted(path.iterdir()):
        if entry.name in (*ARTEFACTS, LOCK_FILE):
            if entry.is_dir() and not entry.is_symlink():
                foreign.append(entry.name + "/")
        elif entry.name == FIGURES and entry.is_dir() and not entry.is_symlink():
            foreign += [f"{FIGURES}/{figure.name}" for figure in sorted(entry.iterdir())
                        if figure.suffix not in FIGURE_SUFFIXES or figure.is_dir()]
        elif entry.name != FIGURES:
            foreign.append(entry.name)
    return foreign


def _lock(path: Path) -> None:
    """Take ``path``'s lock for this process, or raise ValueError when another run holds it (POSIX only)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; the directory is not locked
        return
    key = path.resolve()
    release_directory(key)  # this process's own earlier run into the directory (e.g. one that failed early)
    descriptor = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise ValueError(f"output directory {str(path)!r} is being written by another capaudit run (its "
                         f"{LOCK_FILE} is locked); wait for it to finish or choose another output directory (--out)."
                         ) from None
    _HELD[key] = descriptor


def _save_failed(out: Path | None, config: AuditConfig, reason: str, start: float,
                 records: Mapping[str, dict] | None = None) -> Path | None:
    """:func:`write_failure` of an audit that failed after it started (None without ``out``): with the finished tasks'
    rows (:func:`audit.engine.run.engine_rows`, without verdicts) and how to resume; a one-run audit (``records``
    None) has no tasks to save or resume."""
    if out is None:
        return None
    rows: list[dict] = []
    resume = ""
    if records is not None:
        from audit.engine.run import engine_rows

        try:
            rows = [row.to_record() for row in engine_rows(config, records.values()) if row.checked is None]
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
    """Write results.json (``"verdict": "error"``), results.csv, report.md and report.html for an audit that reached
    no verdict.

    A crash is never a verdict, and a failed run must not leave an earlier
    run's report in place to be read as this one's.  Writing never raises
    over the original failure: None when the files could not be written.

    Returns
    -------
    pathlib.Path or None
        The path of report.md.
    """
    out = Path(out_dir)
    taken = False
    try:
        out.mkdir(parents=True, exist_ok=True)
        if _foreign_entries(out):  # not an audit's directory: leave it as it is
            return None
        if out.resolve() not in _HELD:  # raises ValueError while another run writes the directory
            _lock(out)
            taken = True
        clear_artefacts(out, keep=("tasks.jsonl",))  # an earlier run's figures and report.html too
        columns = [*TABLE_COLUMNS, *STAGED_COLUMNS] if rows and "claim" in rows[0] else None
        write_results(out, {"verdict": FAILED, "error": reason, "seed": seed, "seconds": seconds, "config": config},
                      pd.DataFrame(list(rows), columns=columns))
        from audit.report.tables import bounded, plain_text

        report = out / "report.md"
        report.write_text(  # the reason echoes user input: one bounded line, never raw HTML
            f"# capaudit audit report\n\n## Verdict: **ERROR**\n\nThe audit reached no verdict: "
            f"{plain_text(bounded(reason))}.\n\n"
            f"{len(rows)} rows in results.json and results.csv. {hint}\n"
        )
        from audit.report.html_report import write_html_report

        write_html_report(report)
    except Exception:
        return None
    finally:
        if taken:
            release_directory(out)
    return report


def _one_run(config: AuditConfig, mechanism: Any, source: Any, out: Path | None, start: float) -> AuditResult:
    """A ``[one_run]`` audit (:mod:`audit.engine.one_run`): one training run, its result written to ``out``."""
    from audit.engine.one_run import one_run_audit, overall

    try:
        readings = one_run_audit(mechanism, config.one_run, config.raw.get("claims", []),
                                 config.attacks.confidence, config.run.seed, config.run.sample_timeout,
                                 config.run.backend)
        verdict = overall(readings)
        result = AuditResult(
            verdict=verdict, rows=(), exit_code=1 if verdict == "violation" else 0, seed=config.run.seed,
            seconds=time.perf_counter() - start, versions=_versions(mechanism), config=config.raw,
            audited=describe_audit(mechanism, source, config.raw, timeout=config.run.sample_timeout),
            one_run=readings,
        )
        if out is not None:
            result.write(out)
    except (ConfigError, KeyboardInterrupt):
        raise
    except Exception as error:  # a failing run or report is never a verdict
        cause = " ".join(str(error).split()) if isinstance(error, MechanismError) else one_line(error)  # names itself
        message = f"the one-run audit failed: {cause}"
        saved = _save_failed(out, config, message, start)
        raise AuditError(message + (f"; see {saved}" if saved else "")) from error
    finally:
        release_directory(out)
    return result


def _pairs(config: AuditConfig, mechanism: Any,
           on_screened: Callable[[int, int], None] | None = None) -> list[NeighbourPair]:
    """The neighbouring pairs: explicit, from [neighbours], or the mechanism's worst-case defaults (a dataset
    search calls ``on_screened`` as it screens its candidates: :func:`audit.inputs.neighbours.make_pairs`)."""
    spec = config.neighbours if config.neighbours is not None else ([*config.pairs] or None)
    rng = np.random.default_rng(task_seed(config.run.seed, "neighbours"))
    user_code = isinstance((config.neighbours or {}).get("distribution"), str)  # on-average: "module:function"
    try:
        with user_import_path(config.mechanism.base_dir) if user_code else contextlib.nullcontext():
            pairs = make_pairs(spec, mechanism, rng, timeout=config.run.sample_timeout, on_screened=on_screened)
    except ValueError as error:
        raise ConfigError(f"{'neighbours' if config.neighbours is not None else 'pairs'}: {error}") from None
    if not config.claim_distances:
        return pairs
    placed = []
    for index, pair in enumerate(pairs):  # explicit pairs: at their distance under their relation (config)
        d_in = (config.pair_d_in[index] if config.pair_d_in
                else pair_d_in(mechanism, pair.d, pair.d_prime, pair.distance))
        if d_in not in config.claim_distances:
            raise ConfigError(f"neighbours: pair {pair.name} is at d_in = {d_in} in the input metric, the claims at "
                              f"d_in = {', '.join(map(str, config.claim_distances))}; give pairs at those distances.")
        placed.append(replace(pair, d_in=d_in))
    return PairList(placed, pairs.screening)


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
