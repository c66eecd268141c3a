"""The Python entry point of an audit: :func:`run_audit` and its :class:`AuditResult`.

Same semantics as ``capaudit run`` (DESIGN.md, "Contract: Python").
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit.config import AuditConfig, ConfigError, load_config
from audit.neighbours import NeighbourPair, make_pairs
from audit.runner import run_tasks, task_seed
from audit.verdicts import assign_verdicts, exit_code

ROW_COLUMNS = (
    "pair", "direction", "function_class", "divergence", "alpha", "estimate", "ci_low", "ci_high",
    "n_samples", "claim", "claim_class", "refutes_claim", "theory_bound", "exact", "verdict", "note",
    "task", "error",
)


@dataclass(frozen=True, eq=False)
class AuditResult:
    """The outcome of an audit.

    Attributes
    ----------
    verdict : str
        ``"pass"``, ``"violation"`` or ``"inconclusive"`` (see :mod:`audit.verdicts`).
    table : pandas.DataFrame
        One row per results.json row (DESIGN.md schema, plus ``task`` and ``error``).
    exit_code : int
        What ``capaudit run`` exits with: 0 pass or inconclusive, 1 violation,
        2 when a task failed (a mechanism error).
    seed : int
    seconds : float
        Wall time of the audit.
    versions : dict
        Python, capaudit, its dependencies and the mechanism's library.
    config : dict
        The config as run (after overrides).
    """

    verdict: str
    table: pd.DataFrame
    exit_code: int
    seed: int
    seconds: float
    versions: Mapping[str, str | None]
    config: Mapping[str, Any]

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write report.md, results.json, results.csv and figures/ (:func:`audit.report.write_audit_report`)."""
        from audit.report import write_audit_report

        return write_audit_report(
            out_dir, table=self.table, verdict=self.verdict, seed=self.seed, seconds=self.seconds,
            versions=dict(self.versions), config=dict(self.config),
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
        A TOML config file or the same structure as a dict (DESIGN.md, "Contract: config").
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
        When the plan would not fit in memory or ``resume`` meets another config's results.

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
    mechanism = audit_config.mechanism.build()
    pairs = _pairs(audit_config, mechanism)
    records, evidence = run_tasks(audit_config, mechanism, pairs, out_dir, resume=resume, progress=progress)
    rows = claim_rows(audit_config, records.values())
    verdict = assign_verdicts(rows, evidence, audit_config.attacks.confidence)
    table = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    # The binned held-out scores behind each row: the report's ROC curves and witness histograms.
    table["held_out_scores"] = [getattr(evidence.get(task), "details", {}).get("scores") for task in table["task"]]
    result = AuditResult(
        verdict=verdict,
        table=table,
        exit_code=exit_code(rows, verdict),
        seed=audit_config.run.seed,
        seconds=time.perf_counter() - start,
        versions=_versions(mechanism),
        config=audit_config.raw,
    )
    if out_dir is not None:
        result.write(out_dir)
    return result


def claim_rows(config: AuditConfig, records: Sequence[dict] | Any) -> list[dict]:
    """One results row per (task record, claim on the task's divergence, alpha and delta).

    ``refutes_claim`` is True when the attack's class is contained in the
    claim's class (THEORY.md section 3); verdicts and intervals are filled
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
                "refutes_claim": attack_class.is_contained_in(parse_function_class(claim.function_class)),
                "theory_bound": _number(record["theory_bound"]),
                "exact": _number(record["exact"]),
                "verdict": None,
                "note": record["note"],
                "task": record["task"],
                "error": record["error"],
            })
    return rows


def _number(value: float | None) -> float:
    """Unknown values are NaN in the table (null in results.json)."""
    return math.nan if value is None else float(value)


def _pairs(config: AuditConfig, mechanism: Any) -> list[NeighbourPair]:
    """The neighbouring pairs: explicit, from [neighbours], or the mechanism's worst-case defaults."""
    spec = config.neighbours if config.neighbours is not None else ([*config.pairs] or None)
    rng = np.random.default_rng(task_seed(config.run.seed, "neighbours"))
    try:
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
