"""Write an audit's results: results.json, results.csv, report.md, report.html and figures.

The writer's input is the results table (one row per results.json row,
docs/design.md "Contract: results.json") and the audit's metadata; it computes
nothing about privacy itself, it only lays the evidence out so that the
verdict comes first and every refuting row can be traced to its numbers.
The table is written as it is (results.json, results.csv) and drawn by the
figures; the claims and report.md read its rows typed
(:class:`audit.schema.Row`), and the Method notes take the engine and the
outputs per dataset off the rows rather than off the config as written
(where a default leaves them out).

JSON has no infinity and no NaN. In results.json a missing number (NaN) is
written as ``null`` and an infinite one as the string ``"inf"`` (or
``"-inf"``), so that the estimate of an "unbounded" row still reads as
infinite instead of vanishing into ``null``; :func:`load_results` turns those
strings back into floats.

results.json carries a ``schema_version`` (:data:`SCHEMA_VERSION`; fields in
docs/results.md, JSON Schema in docs/schema/results.schema.json). report.md is
GitHub-flavoured markdown: every ``|`` inside a table cell is escaped, so the
direction ``P|Q`` stays one cell.

results.json also has a top-level ``claims`` list, one summary per claim
(:func:`audit.verdicts.summarize_claims`: its verdict, including
``"untested"``, the strongest row's task and Holm-adjusted p-value, and the
excess over the claim the audit would have detected with probability 0.8),
and report.md shows it right after the verdict.
"""

from __future__ import annotations

import collections
import json
import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audit.figures import mechanism_label, write_evidence_figures, write_figures
from audit.html_report import write_html_report
from audit.summary import strongest_per_claim
from audit.theory_check import failures

from audit.schema import NUMERIC_COLUMNS, ROW_COLUMNS, STAGE_SIZE_COLUMNS, VERDICT_COLUMNS, Row, column_order  # noqa: E402
from audit.verdicts import POWER, summarize_claims  # noqa: E402
from audit.config import AttackSpec  # noqa: E402

SCHEMA_VERSION = "1.0"
"""Version of results.json's layout: the minor part grows with added fields, the major with changed ones."""

VERDICTS = ("pass", "violation", "inconclusive")
ROW_VERDICTS = ("violation", "unbounded", "inconclusive", "pass", "info")
_HEADLINES = {
    "violation": "at least one claim is refuted by held-out evidence at the audit's confidence.",
    "inconclusive": "no claim is refuted, but some rows could not decide, failed or left a claim untested (see below).",
    "pass": "no claim is refuted by any attack.",
}


def write_audit_report(
    out_dir: str | pathlib.Path,
    *,
    table: pd.DataFrame,
    verdict: str,
    seed: int | None,
    seconds: float,
    versions: Mapping[str, Any],
    config: Mapping[str, Any],
    pairs: Sequence[Mapping[str, Any]] = (),
    audited: Mapping[str, Any] | None = None,
    theory: Sequence[Mapping[str, Any]] = (),
    checks: Sequence[Mapping[str, Any]] = (),
) -> pathlib.Path:
    """Write results.json, results.csv, report.md, report.html and figures/*.png for an audit.

    Parameters
    ----------
    out_dir : str or Path
        Output directory, created if needed; existing files of the same names
        are overwritten.
    table : pandas.DataFrame
        One row per results row with the columns of docs/design.md's schema
        (:data:`ROW_COLUMNS`); extra columns (``task``, ``error``, ...) are
        kept in results.json and results.csv.
    verdict : {"pass", "violation", "inconclusive"}
        The overall verdict.
    seed : int or None
        The audit's seed.
    seconds : float
        Wall time of the audit.
    versions : mapping
        Versions of capaudit, Python and the audited libraries.
    config : mapping
        The audit configuration as a JSON-serialisable dict (TOML layout of
        docs/design.md "Contract: config").
    pairs : sequence of mapping, optional
        The audited pairs, ``{"name", "d", "d_prime", "relation"}`` each
        (:func:`audit.provenance.pair_records`), saved so a pair can be re-run.
    audited : mapping, optional
        What was audited (:func:`audit.provenance.describe_audit`): the
        report's opening block after the verdict.
    theory : sequence of mapping, optional
        Published bounds against the rows (:func:`audit.theory_check.check_bounds`):
        results.json ``theory`` and report.md's Theory section.
    checks : sequence of mapping, optional
        The ``[[checks]]`` rows (:func:`audit.checks.run_checks`): results.json's
        ``checks`` and report.md's "Property checks".

    Returns
    -------
    pathlib.Path
        The path of report.md.

    Raises
    ------
    ValueError
        If ``verdict`` is unknown or ``table`` lacks a column of the schema.
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}. Found {verdict!r}.")
    missing = [column for column in ROW_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"table lacks the results columns {missing}. Found columns {list(table.columns)!r}.")
    out_dir = pathlib.Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    table = table[column_order(table.columns)].reset_index(drop=True)
    records = table.to_dict(orient="records")
    rows = [Row.from_record(record) for record in records]
    meta = {
        "schema_version": SCHEMA_VERSION, "verdict": verdict, "seed": seed, "seconds": seconds,
        "versions": dict(versions), "config": dict(config), "audited": dict(audited or {}), "pairs": list(pairs),
        "claims": summarize_claims(rows), "outputs_drawn": _outputs_drawn(rows, config),
        "theory": [dict(entry) for entry in theory],
        **({"checks": [dict(check) for check in checks]} if checks else {}),  # only configs with [[checks]]
    }
    document = {**meta, "rows": [_json_row(row) for row in records]}
    # default=str: TOML dates and the like in the config are written as text.
    text = json.dumps(_json_value(document), indent=2, allow_nan=False, default=str)
    (out_dir / "results.json").write_text(text + "\n")
    table.drop(columns=["held_out_scores"], errors="ignore").to_csv(out_dir / "results.csv", index=False)
    figures = write_figures(table, out_dir / "figures", mechanism=mechanism_label(config))
    if "held_out_scores" in table.columns and len(table):  # a config of checks only has no rows
        figures += write_evidence_figures(strongest_per_claim(table), out_dir / "figures", mechanism=mechanism_label(config))
    report = out_dir / "report.md"
    report.write_text(_markdown(_by_importance(rows), meta, [path.relative_to(out_dir) for path in figures]))
    write_html_report(report)
    return report


def load_results(path: str | pathlib.Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a results.json back into ``(table, meta)``.

    Parameters
    ----------
    path : str or Path
        A results.json file, or the directory holding one.

    Returns
    -------
    table : pandas.DataFrame
        One row per results row, schema columns first; ``null`` numbers are
        NaN and ``"inf"`` strings are infinite floats again.
    meta : dict
        ``schema_version``, ``verdict``, ``seed``, ``seconds``, ``versions``,
        ``config``, ``audited``, ``pairs``, ``claims`` and ``theory`` (results
        written before schema version 1.0 lack the first and the last three,
        those before the theory check ``theory``).
    """
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "results.json"
    document = json.loads(path.read_text())
    rows = document.pop("rows")
    table = pd.DataFrame(rows, columns=column_order(rows[0].keys() if rows else ROW_COLUMNS))
    for column in NUMERIC_COLUMNS + tuple(c for c in VERDICT_COLUMNS if c in table.columns):
        table[column] = pd.to_numeric(table[column].replace({"inf": math.inf, "-inf": -math.inf}), errors="raise")
    return table, document


def _by_importance(rows: Sequence[Row]) -> list[Row]:
    """Rows in the order of :data:`ROW_VERDICTS` (violations first), stable within a verdict."""
    rank = {verdict: i for i, verdict in enumerate(ROW_VERDICTS)}
    return sorted(rows, key=lambda row: rank.get(row.verdict, len(ROW_VERDICTS)))


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: _json_value(value) for key, value in row.items()}


def _json_value(value: Any) -> Any:
    """NaN and None -> null, +-inf -> "inf"/"-inf", numpy scalars -> Python scalars."""
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    if value is pd.NA or value is pd.NaT:
        return None
    return value


# --- report.md -------------------------------------------------------------


def _markdown(rows: Sequence[Row], meta: dict[str, Any], figures: list[pathlib.Path]) -> str:
    """report.md of the typed ``rows`` (in the order shown) and the audit's metadata."""
    verdict = meta["verdict"]
    attacks = meta["config"].get("attacks", {})
    confidence = attacks.get("confidence")
    lines = [
        "# capaudit audit report",
        "",
        f"## Verdict: **{verdict.upper()}**",
        "",
        f"**{verdict.upper()}**: {_HEADLINES[verdict]}",
        "",
        _counts(rows) if rows else "No claims: the verdict is about the property checks.",
        "",
        *_theory_headline(meta.get("theory", [])),
        *_checks_summary(meta.get("checks", [])),
        f"Seed {meta['seed']}, {meta['seconds']:.1f} s. Versions: "
        + ", ".join(f"{name} {version}" for name, version in meta["versions"].items())
        + ".",
        "",
    ]
    lines += _audited_block(meta["audited"], meta["pairs"], meta["config"])
    if meta["versions"].get("mechanism_seedable") is False:
        lines += [
            "**Not reproducible bit for bit:** the mechanism's library draws its own randomness and "
            "cannot be seeded, so another run with the same seed gives other numbers (the verdict "
            "should not change).",
            "",
        ]
    if meta["claims"]:
        lines += ["## Claims", "", _claims_table(meta["claims"]), ""]
    lines += _on_average_section(rows, confidence)
    lines += _checks_block(meta.get("checks", []))
    lines += _staged_section(rows) + _stop_lines(rows, attacks.get("tolerance", AttackSpec.tolerance))
    for row_verdict, title in (
        ("violation", "Violations"),
        ("unbounded", "Unbounded rows"),
        ("inconclusive", "Inconclusive rows"),
    ):
        judged = [row for row in rows if row.verdict == row_verdict]
        if judged:
            lines += [f"## {title} ({len(judged)})", "", _summary_table(judged), ""]
    failed = [row for row in rows if row.error]
    if failed:
        lines += [f"## Failed tasks ({len(failed)})", "", _failed_table(failed), ""]
    lines += _theory_section(meta.get("theory", []))
    lines += ["## Results per claim", ""] if rows else []
    claims: dict[tuple, list[Row]] = {}
    for row in rows:
        claims.setdefault((row.divergence, row.claim_class, row.claim, row.on_average), []).append(row)
    for (divergence, claim_class, claim, on_average), claim_rows in claims.items():
        lines += [f"### {_claim_title(divergence, claim_class, claim, on_average)}", "", _claim_table(claim_rows), ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{path.stem}]({path.as_posix()})\n" for path in figures]
    # what the rows carry (the engine, outputs per dataset) is read off them, not off the config as written
    engine = next((row.engine for row in rows if row.engine is not None), "rows")
    n_samples = next((row.n_samples for row in rows if not math.isnan(row.n_samples)), attacks.get("n_samples"))
    lines += ["## Method", "", *_method_notes(confidence, n_samples, attacks.get("coupled", False), engine), ""]
    return "\n".join(lines)


def _theory_headline(theory: Sequence[Mapping[str, Any]]) -> list[str]:
    """The line beside the verdict when a published bound fails (the verdict is about the claims only)."""
    failing = failures(theory)
    if not failing:
        return []
    return [
        f"**PUBLISHED BOUND FAILS:** {len(failing)} of {len(theory)} published closed-form bounds compared are "
        "exceeded by an exact value or a lower confidence bound (see Theory). The verdict above is about the "
        "config's claims only.",
        "",
    ]


def _theory_section(theory: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's published bound (``theory_bound``) beside its exact value, lower confidence bound and status."""
    if not theory:
        return []
    shown = pd.DataFrame(
        {
            "pair": [e["pair"] for e in theory],
            "direction": [e["direction"] for e in theory],
            "attack class": [e["function_class"] for e in theory],
            "divergence": [_divergence_label(e["divergence"], e["alpha"]) for e in theory],
            "published bound": [_number(e["bound"]) for e in theory],
            "exact": [_number(e["exact"]) for e in theory],
            "lower bound": [_number(e["lower_bound"]) for e in theory],
            "level": [_number(e["level"]) for e in theory],
            "status": [f"**{e['status']}**" if e["fails"] else e["status"] for e in theory],
        }
    )
    return [
        f"## Theory ({len(failures(theory))} of {len(theory)} published bounds fail)",
        "",
        "The mechanism's closed-form bound for each row's (class, divergence, alpha) (`theory_bound`: the "
        "paper's Table 1 / Corollary 2 / Theorem 5 bound, or an exact unrestricted value; docs/theory.md "
        "section 6; for (linear, Renyi) at alpha <= 2, where Corollary 2 states no bound, the unrestricted "
        "value) against the row's exact value and its lower confidence bound. A lower bound fails a "
        "published bound at the Bonferroni level shown (1 - (1 - confidence) / m over the m rows compared), "
        "an exact value beyond a relative tolerance of 1e-4. Published bounds are claims; they are reported "
        "as published, not corrected.",
        "",
        _to_markdown(shown),
        "",
    ]


def _staged_section(rows: Sequence[Row]) -> list[str]:
    """"Staged search": per claim, the outputs per dataset each stage used and the candidate that won."""
    searched = [row for row in rows if row.n_confirm is not None and not row.error]
    if not searched:
        return []
    frame = pd.DataFrame({
        "claim": [_claim_label(r.divergence, r.claim_class, r.claim, r.alpha) for r in searched],
        "winner (pair, direction, class)": [f"{r.pair}, {r.direction}, {r.function_class}" for r in searched],
        **{name: [str(getattr(r, name)) for r in searched] for name in STAGE_SIZE_COLUMNS},
    })
    return [
        "## Staged search", "",
        "`attacks.engine = \"staged\"`: `n_samples` is one pair's budget over four stages. Outputs per dataset: "
        "`n_screen` on every pair (all candidates: pairs x directions x classes), `n_train` and `n_check` on the "
        "finalists' pairs, `n_confirm` on the winner's pair only, a fresh sample that no choice saw; the claim's "
        "one statistic (pooled over `sets_pooled` nested sets when more than 1) is its confirm bound, and Holm "
        "corrects over the claims only.", "",
        _to_markdown(frame), "",
    ]


_STOP_WORDS = {
    "violation": "violation",
    "decided": "decided (an excess of {tolerance} over the claim would have been detected with {power:.0%} probability)",
    "output limit": "output limit reached, undecided",
    "time limit": "time limit reached, undecided",
    "fixed": "the fixed n_samples budget",
}


def _stop_lines(rows: Sequence[Row], tolerance: float) -> list[str]:
    """Why each claim's search stopped, in words ("stopped after 3 400 outputs: violation")."""
    stopped = [row for row in rows if row.stop is not None and not row.error]
    if not stopped:
        return []
    lines = [f"- {_claim_label(r.divergence, r.claim_class, r.claim, r.alpha)}: stopped after "
             f"{_thousands(r.outputs_drawn)} outputs ({r.rounds} round{'s' if r.rounds != 1 else ''}): "
             + _STOP_WORDS[r.stop].format(tolerance=tolerance, power=POWER) for r in stopped]
    return ["Outputs drawn (both datasets, every pair, stage and round) and why each search stopped "
            f"(tolerance {tolerance}):", "", *lines, ""]


def _thousands(value: int) -> str:
    return f"{int(value):,}".replace(",", " ")


def _outputs_drawn(rows: Sequence[Row], config: Mapping[str, Any]) -> int:
    """All outputs the audit drew: each staged search's (counted once over its rows), else every pair's n_samples
    on both datasets (the rows engine)."""
    searches = {(row.task.split("|")[1], _json_value(row.alpha)): row.outputs_drawn
                for row in rows if row.outputs_drawn is not None}
    if searches:
        return int(sum(searches.values()))
    n_samples = config.get("attacks", {}).get("n_samples", AttackSpec.n_samples)
    return 2 * int(n_samples) * len({row.pair for row in rows if not row.on_average})


def _audited_block(audited: Mapping[str, Any], pairs: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[str]:
    """The "What was audited" section: mechanism, pairs, config, command, date, machine (what is known)."""
    items = []
    mechanism = audited.get("mechanism")
    if mechanism:
        items.append(f"- **Mechanism:** {_mechanism_line(mechanism)}")
    if pairs:
        items.append(f"- **Neighbouring pairs** ({_pair_source(config)}; saved with every digit in results.json `pairs`):")
        items += [f"  - {_pair_line(pair, i)}" for i, pair in enumerate(pairs)]
    if audited.get("config_sha256"):
        where = f"`{audited['config_path']}`" if audited.get("config_path") else "a Python mapping"
        items.append(f"- **Config:** {where}, sha256 `{audited['config_sha256']}`")
    if audited.get("command"):
        items.append(f"- **Command:** `{audited['command']}`")
    if audited.get("date"):
        items.append(f"- **Date:** {audited['date']}")
    machine = audited.get("machine")
    if machine:
        items.append(
            f"- **Machine:** {machine.get('platform')}, {machine.get('cpu_count')} CPUs, Python {machine.get('python')}"
        )
    return ["## What was audited", "", *items, ""] if items else []


def _mechanism_line(mechanism: Mapping[str, Any]) -> str:
    params = ", ".join(f"{key}={value!r}" for key, value in mechanism.get("params", {}).items())
    name = str(mechanism.get("name"))
    if mechanism.get("library"):
        library = f"{mechanism['library']} {mechanism.get('library_version') or '(version unknown)'}"
    else:
        library = "user code" if ":" in name else "capaudit built-in"
    seedable = "seedable (reproducible bit for bit)" if mechanism.get("seedable", True) else "not seedable"
    true_privacy = f"; true privacy: {mechanism['true_privacy']}" if mechanism.get("true_privacy") else ""
    return f"`{name}` ({params or 'no parameters'}); library: {library}, {seedable}{true_privacy}"


def _pair_source(config: Mapping[str, Any]) -> str:
    neighbours = config.get("neighbours")
    if isinstance(neighbours, Mapping):
        relation = neighbours.get("relation", "replace-one")
        return f"generated by `[neighbours]` strategy {neighbours.get('strategy')!r}, relation {relation}"
    if config.get("pairs"):
        return "explicit `[[pairs]]` from the config"
    return "the mechanism's worst-case default pairs"


_INLINE_VALUES = 24
"""Pairs with at most this many numbers in d and d' together are shown in report.md; all are in results.json."""


def _pair_line(pair: Mapping[str, Any], index: int) -> str:
    d, d_prime = np.asarray(pair["d"], dtype=float), np.asarray(pair["d_prime"], dtype=float)
    relation = pair.get("relation") or _difference(d, d_prime)
    if d.size + d_prime.size <= _INLINE_VALUES:
        data = f"d = `{_compact(pair['d'])}`, d' = `{_compact(pair['d_prime'])}`"
    else:
        data = f"d: {_shape(d)}, d': {_shape(d_prime)}, in results.json `pairs[{index}]`"
    return f"`{pair['name']}`: {data} ({relation})"


def _difference(d: np.ndarray, d_prime: np.ndarray) -> str:
    """How two datasets that are neither replace-one nor add-remove neighbours differ."""
    if d.shape == d_prime.shape and d.ndim:
        differing = int(np.count_nonzero(np.any((d != d_prime).reshape(len(d), -1), axis=1)))
        return f"{differing} of {len(d)} records differ"
    return f"{_shape(d)} against {_shape(d_prime)}"


def _compact(values: Any) -> str:
    """Nested lists of numbers, each to 6 significant digits (results.json keeps every digit)."""
    if isinstance(values, (list, tuple)):
        return "[" + ", ".join(_compact(value) for value in values) + "]"
    return f"{values:.6g}"


def _shape(records: np.ndarray) -> str:
    records = np.atleast_1d(records)
    rows, width = len(records), records.shape[1] if records.ndim > 1 else 1
    return f"{rows} records of {width} value{'s' if width != 1 else ''}"


def _on_average_section(rows: Sequence[Row], confidence: float | None) -> list[str]:
    """"On-average privacy": one line per aggregate row (audit.on_average) and what the claim promises."""
    averaged = [row for row in rows if row.pairs_averaged is not None]
    if not averaged:
        return []
    level = f"{confidence:g}" if confidence is not None else "the audit's confidence"
    shown = pd.DataFrame(
        {
            "claim": [f"on average: {_claim_label(r.divergence, r.claim_class, r.claim, r.alpha)}" for r in averaged],
            "direction": [r.direction for r in averaged],
            "attack class": [r.function_class for r in averaged],
            "mean over pairs [CI]": [_with_interval(r) for r in averaged],
            "pairs": [f"{r.pairs_averaged}" for r in averaged],
            "worst case: max estimate": [_number(r.worst_case) for r in averaged],
            "worst case: lower bound": [_number(r.worst_case_low) for r in averaged],
            "verdict": [f"**{r.verdict}**" if r.verdict == "violation" else r.verdict for r in averaged],
        }
    )
    return [
        "## On-average privacy",
        "",
        "An on-average claim promises that the restricted divergence between M(Z) and M(Z'), Z drawn "
        "from the data distribution and Z' = Z with its first record replaced by a fresh draw, is at most "
        "epsilon on average over the data (OAKL); it promises nothing for an unlucky dataset or record, "
        "which a worst-case claim covers. `P|Q` is the divergence of M(Z) from M(Z').",
        "",
        _to_markdown(shown),
        "",
        "The mean is over iid pairs of the held-out estimates; its interval is Student's t over pairs at "
        "Holm's level, whose variance over pairs holds both the draw of the pairs and each pair's sampling "
        "noise (law of total variance); it assumes iid pairs and a finite variance, and is approximate with "
        "few pairs (10 or more recommended). A failed or untrusted pair makes its mean inconclusive. The worst "
        "case is over the same pairs: the largest estimate and the largest per-pair lower bound at level "
        f"1 - (1 - {level}) / pairs (Bonferroni), a lower bound on the largest divergence among these pairs: "
        "a worst-case claim below it does not hold.",
        "",
    ]


def _counts(rows: Sequence[Row]) -> str:
    counts = collections.Counter(row.verdict for row in rows)
    parts = [f"{counts[verdict]} {verdict}" for verdict in ROW_VERDICTS if verdict in counts]
    return f"{len(rows)} row{'s' if len(rows) != 1 else ''}: " + ", ".join(parts) + "."


def _claims_table(claims: list[dict[str, Any]]) -> str:
    shown = pd.DataFrame(
        {
            "claim": [("on average: " if c.get("on_average") else "")
                      + _claim_label(c["divergence"], c["claim_class"], c["claim"], c["alpha"]) for c in claims],
            "verdict": [f"**{c['verdict']}**" if c["verdict"] != "pass" else "pass" for c in claims],
            "strongest row": [c["strongest_task"] or "-" for c in claims],  # _to_markdown escapes its "|"
            "adjusted p": [_number(c["p_adjusted"]) for c in claims],
            f"detectable excess ({POWER:.0%} power)": [_number(c["detectable_excess"]) for c in claims],
            "note": [c["note"] for c in claims],
        },
        columns=["claim", "verdict", "strongest row", "adjusted p", f"detectable excess ({POWER:.0%} power)", "note"],
    )
    return _to_markdown(shown)


def _summary_table(rows: Sequence[Row]) -> str:
    shown = pd.DataFrame(
        {
            "pair": [r.pair for r in rows],
            "direction": [r.direction for r in rows],
            "attack class": [r.function_class for r in rows],
            "divergence": [_divergence_label(r.divergence, r.alpha) for r in rows],
            "estimate [CI]": [_with_interval(r) for r in rows],
            "claim": [f"{_number(r.claim)} ({r.claim_class})" for r in rows],
            "note": [r.note for r in rows],
        }
    )
    return _to_markdown(shown)


def _failed_table(rows: Sequence[Row]) -> str:
    shown = pd.DataFrame({column: [getattr(r, column) for r in rows]
                          for column in ("pair", "direction", "function_class", "divergence", "alpha", "error")})
    return _to_markdown(shown)


def _claim_table(rows: Sequence[Row]) -> str:
    shown = pd.DataFrame(
        {
            "pair": [r.pair for r in rows],
            "direction": [r.direction for r in rows],
            "attack class": [r.function_class for r in rows],
            "alpha": [_number(r.alpha) for r in rows],
            "estimate [CI]": [_with_interval(r) for r in rows],
            "theory bound": [_number(r.theory_bound) for r in rows],
            "exact": [_number(r.exact) for r in rows],
            "n": [f"{int(r.n_samples)}" if math.isfinite(r.n_samples) else "-" for r in rows],
            "adjusted p": [_number(r.p_adjusted) for r in rows],
            "verdict": [f"**{r.verdict}**" if r.verdict in ("violation", "unbounded") else r.verdict for r in rows],
        }
    )
    return _to_markdown(shown)


def _claim_title(divergence: str, claim_class: Any, claim: Any, on_average: bool = False) -> str:
    return f"Claim{' (on average)' if on_average else ''}: {_claim_label(divergence, claim_class, claim)}"


def _claim_label(divergence: str, claim_class: Any, claim: Any, alpha: Any = None) -> str:
    label = {"kl": "KL", "renyi": "Renyi", "ipm": "IPM", "dp": "DP epsilon"}.get(divergence, str(divergence))
    order = f" alpha={_number(alpha)}" if divergence == "renyi" and alpha is not None and not pd.isna(alpha) else ""
    return f"({claim_class}, {label}{order}) <= {_number(claim)}"


def _divergence_label(divergence: str, alpha: Any) -> str:
    return f"renyi, alpha={_number(alpha)}" if divergence == "renyi" else str(divergence)


def _with_interval(row: Row) -> str:
    return f"{_number(row.estimate)} [{_number(row.ci_low)}, {_number(row.ci_high)}]"


def _number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (int, float, np.number)):
        return "inf" if np.isposinf(value) else "-inf" if np.isneginf(value) else f"{value:.4g}"
    return str(value)


def _to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table; cells are text with ``|`` escaped and line breaks as spaces."""
    cells = pd.DataFrame({_cell(column): [_cell(value) for value in frame[column]] for column in frame.columns})
    return cells.to_markdown(index=False, disable_numparse=True)


def _cell(value: Any) -> str:
    """One table cell's text (numbers as :func:`_number`): an unescaped ``|`` ends a GFM cell, a newline its row."""
    return " ".join(_number(value).replace("|", "\\|").splitlines())


def _method_notes(confidence: float | None, n_samples: int | None, coupled: bool = False,
                  engine: str = "rows") -> list[str]:
    level = f"{confidence:g}" if confidence is not None else "the configured confidence"
    per_dataset = f"{n_samples} outputs" if n_samples is not None else "the configured number of outputs"
    sampling = [
        f"- Samples (staged engine): {per_dataset} per dataset are one pair's budget over four stages (Staged "
        "search). Every candidate (pair, direction, class) is screened on a small sample, the finalists are "
        "trained and checked on fresh samples, and the one statistic chosen per claim is evaluated on a confirm "
        "sample that no choice saw; its interval is the held-out interval below, on the confirm sample.",
    ] if engine == "staged" else [
        f"- Samples: {per_dataset} of the mechanism on each dataset of each neighbouring pair; "
        "both directions (P, Q) and (Q, P) are attacked.",
    ]
    coupling = [
        "- Coupled sampling (`attacks.coupled = true`): the outputs on the two datasets of a pair were drawn "
        "row by row from the same random numbers, and the intervals are the paired ones (dp, ipm: the bounds "
        "on the cells both / only P / only Q / neither; kl, renyi: the variance of the paired "
        "difference). A pair whose mechanism spent different randomness on its two datasets was sampled "
        "independently instead; its rows say so."
    ] if coupled else []
    return [
        *sampling,
        *coupling,
        "- Held-out scores: each adversary is fitted on a train split and its variational objective is "
        "evaluated on the held-out rest, so an estimate is an unbiased estimate of a lower bound on the "
        "restricted divergence of its class (docs/theory.md section 2); the interval is a confidence interval "
        "for that lower bound.",
        "- dp and ipm rows: bounds on log((P(S) - delta) / Q(S)) and on 2 (P(S) - Q(S)) from the held-out "
        "counts of the attack set S: score bounds where the counts reach 10 (30 discordant pairs when "
        "coupled), else Clopper-Pearson bounds on P(S) and Q(S) at Bonferroni-split levels, exact at any "
        "count. They assume only independent held-out outputs (independent pairs when coupled); a zero "
        "count gives a finite bound.",
        "- A row can refute a claim only when its attack class is contained in the claim's class; other "
        "rows are `info`.",
        "- `atoms` and `floatbits` attack the representation of the outputs (exact values, IEEE-754 bits; "
        "attacks.representation) and refute claims about `all` only. A feature of the released output is "
        "post-processing, so a violation measured on the features is a violation of the mechanism.",
        f"- Family-wise error: Holm's step-down procedure over the refuting rows keeps the probability of "
        f"any false violation below 1 - {level} for the whole audit, not per row.",
        "- `inconclusive`: the estimate exceeds the claim but Holm does not reject (the note gives the "
        "Holm-adjusted p-value; a claim equal to the attack's estimand reads so about half the time at any "
        "sample size), or the row's interval cannot be trusted (its note says why; such a row enters Holm's "
        "family with p = 1, so the other rows' levels do not depend on it), or the estimate is NaN, or the task "
        "failed. No row is unbounded: a finite sample never proves an infinite divergence, even when each "
        "dataset's outputs repeat one value (a deterministic release, or a randomized response at high epsilon); "
        "an infinite estimate is an error of its row (`unbounded` rows appear only in results of earlier versions).",
        "- Claims: `untested` when no row that could refute the claim ran (all failed, or no attack class is "
        "contained in the claim's); the audit is then not a pass and exits 2. `adjusted p` is the smallest "
        "Holm-adjusted p-value of the claim's rows (a violation exactly when it is at most 1 - confidence). "
        f"`detectable excess`: the smallest excess of a row's estimand over the claim that this audit would "
        f"report as a violation with probability {POWER:g}, (estimate - lower bound) x (1 + z({POWER:g}) / "
        "z(1 - a)) with the lower bound at the level a = (1 - confidence) / m at which Holm tests a lone false "
        "claim among m rows; it assumes the standard error under the alternative is the one observed (for dp "
        "rows the width of the bound on the count ratio stands for it), and the best row alone.",
        "- Renyi and alpha-divergences use CBDP's convention f(t) = (|t|^alpha - 1)/(alpha^2 - alpha) on all "
        "of R (the |t| convention); with f = +inf on t < 0 restricted values would come out larger.",
        "- `theory bound` is the paper's closed-form upper bound when one applies (a claim itself, not a "
        "fact); `exact` is the exact restricted divergence when the output law is known (audit.exact).",
    ]


def _checks_summary(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line after the verdict counting the property checks' verdicts (none without checks)."""
    if not checks:
        return []
    counts = pd.Series([check["verdict"] for check in checks]).value_counts()
    return [f"{len(checks)} property checks: " + ", ".join(f"{n} {v}" for v, n in counts.items())
            + " (a contradicted check counts as a violation; see Property checks).", ""]


def _checks_block(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """report.md's "Property checks": each CBDP theorem checked, its bound, the measurements and the verdict."""
    if not checks:
        return []
    shown = pd.DataFrame(
        {
            "check": [c["check"] for c in checks],
            "theorem": [c["theorem"] for c in checks],
            "mechanisms": [" + ".join(c["mechanisms"]) for c in checks],
            "class, divergence": [f"{c['function_class']}, {_divergence_label(c['divergence'], c['alpha'])}"
                                  for c in checks],
            "bound": [_number(c["bound"]) for c in checks],
            "measured [lower bound]": [f"{_number(c['measured'])} [{_number(c['measured_low'])}]" for c in checks],
            "measurements: estimate [lower, upper] (exact)": ["; ".join(map(_measurement_text, c["measurements"]))
                                                              for c in checks],
            "verdict": [f"**{c['verdict']}**" if c["verdict"] != "holds" else "holds" for c in checks],
            "note": [c["error"] or c["note"] for c in checks],
        }
    )
    return [
        "## Property checks", "",
        "Each row measures both sides of one of CBDP's theorems with the audit's attacks on held-out samples "
        "(docs/theory.md section 5). The bound is the theorem's right-hand side from the parts' epsilon (their "
        "exact value when the output laws are known, else their upper confidence bound); **contradicted**: the "
        "composed release's lower confidence bound exceeds it; **hypothesis broken**: a constructed case outside "
        "the theorem's hypotheses, flagged, not a contradiction. Bounds are one-sided at the level in results.json "
        "(the audit's error rate split over the checks' bounds).", "",
        _to_markdown(shown), "",
    ]


def _measurement_text(measurement: Mapping[str, Any]) -> str:
    exact = measurement.get("exact")
    tail = f" (exact {_number(exact)})" if exact is not None else ""
    return (f"{measurement['role']}: {_number(measurement['estimate'])} "
            f"[{_number(measurement['low'])}, {_number(measurement['high'])}]{tail}")
