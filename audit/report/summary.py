"""Short forms of audits for CI logs and dashboards: the strongest evidence per claim, one JSON line, many audits.

A *claim* here is one (divergence, alpha, claim class, claimed value): the
rows of results.json that test it share those four columns.  Its *strongest
evidence* is the row that refutes the claim (its attack class is contained in
the claim's, docs/theory.md section 3) with the largest lower confidence bound
``ci_low``.  When no
row can refute the claim, or none has a lower bound, the largest estimate
stands in, so that every claim has a line.

Each claim also has a verdict per layer (:func:`audit.results.verdicts.layer_verdict`: what the mechanism computes,
``value``; how it stores it, ``representation``), which :func:`layer_text` says in a few words.

``capaudit run --json-summary`` prints :func:`json_summary` on one line;
``capaudit summary DIR...`` prints :func:`summary_table`.
"""

from __future__ import annotations

import collections
import datetime
import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attacks.vocabulary import divergence_kind
from audit.report.figures import format_number, mechanism_label, row_label
from audit.report.tables import bounded, markdown_table
from audit.results.files import json_text, load_results
from audit.results.schema import Row

CLAIM_KEYS = ("divergence", "alpha", "claim_class", "claim")
"""The columns that together name a claim."""
SAME_CAUSE = 80
"""Error messages whose last this many characters agree report one failure (:func:`failure_lines`)."""


def strongest_per_claim(table: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: its strongest evidence (module docstring), claims in the table's order.

    Parameters
    ----------
    table : pandas.DataFrame
        Results rows (:data:`audit.results.schema.ROW_COLUMNS`).

    Returns
    -------
    pandas.DataFrame
        A subset of ``table``'s rows, one per distinct :data:`CLAIM_KEYS`.
    """
    chosen = []
    # claims that differ in delta or on-average-ness apart (tables of older versions lack those columns)
    keys = [*CLAIM_KEYS, *(key for key in ("delta", "on_average") if key in table.columns)]
    for _, rows in table.groupby(keys, dropna=False, sort=False):
        refuting = rows[rows["refutes_claim"].astype(bool)]
        candidates = refuting if len(refuting) else rows
        low = candidates["ci_low"].astype(float)
        key = low if low.notna().any() else candidates["estimate"].astype(float)
        chosen.append(candidates.index[int(np.nanargmax(key.fillna(-math.inf).to_numpy()))])
    return table.loc[chosen]


def evidence_text(row: Row) -> str:
    """One claim's strongest evidence in words.

    E.g. ``"kl (all) <= 0.12: estimate 0.71, lower bound 0.25, pair p0, M(d) against M(d'), linear functions
    (linear), violation"``.
    """
    order = f" alpha={format_number(row.alpha)}" if divergence_kind(row.divergence).has_order else ""
    divergence = row.divergence + order
    return (
        f"{'on average ' if row.on_average else ''}"
        f"{divergence} ({row.claim_class}) <= {format_number(row.claim)}"
        f"{'' if row.d_in is None else f' at d_in = {format_number(row.d_in)}'}: "
        f"estimate {format_number(row.estimate)}, lower bound {format_number(row.ci_low)}, "
        f"{row_label(row.pair, row.direction, row.function_class)}, {row_verdict(row.verdict, row.error)}"
    )


def row_verdict(verdict: str | None, error: Any) -> str:
    """A row's verdict as the summaries show it: ``"error"`` for a failed task (whose ``verdict`` column reads
    ``inconclusive``), else its verdict."""
    failed = isinstance(error, str) and bool(error)
    return "error" if failed else str(verdict)


def evidence_lines(table: pd.DataFrame) -> list[str]:
    """:func:`evidence_text` of each claim's strongest row (:func:`strongest_per_claim`), claims in the table's order."""
    return [evidence_text(Row.from_record(record)) for record in strongest_per_claim(table).to_dict(orient="records")]


def layer_text(claim: Mapping) -> str:
    """A claim's verdict per layer in words, e.g. ``"values pass, representation violation"`` (claims of
    results.json; those of older versions have no layers: "")."""
    if "value_verdict" not in claim:
        return ""
    return f"values {claim['value_verdict']}, representation {claim['representation_verdict']}"


def claim_verdicts(claims: Sequence[Mapping]) -> list[dict]:
    """Per claim of results.json's ``claims``: its label, verdict and verdict per layer (the json summary's
    ``claims``)."""
    return [{"claim": claim.get("label") or _claim_words(claim), "verdict": claim["verdict"],
             **{key: claim[key] for key in ("value_verdict", "representation_verdict") if key in claim}}
            for claim in claims]


def _claim_words(claim: Mapping) -> str:
    alpha = claim.get("alpha")
    order = (f" alpha={format_number(alpha)}" if divergence_kind(claim["divergence"]).has_order
             and alpha is not None else "")
    delta = claim.get("delta")
    slack = f" delta={format_number(delta)}" if isinstance(delta, float) and delta and not math.isnan(delta) else ""
    distance = f" at d_in = {format_number(claim['d_in'])}" if claim.get("d_in") is not None else ""
    return f"{'on average ' if claim.get('on_average') else ''}{claim['divergence']}{order}{slack} " \
           f"({claim['claim_class']}) <= {format_number(claim['claim'])}{distance}"


def json_summary(table: pd.DataFrame, verdict: str, exit_code: int, report: str | pathlib.Path | None,
                 claims: Sequence[Mapping] = ()) -> str:
    """One line of JSON for CI: verdict, exit code, row counts, strongest row per claim, each claim's verdict per
    layer (``claims``: :func:`claim_verdicts` of results.json's claims), report path.

    Numbers that JSON cannot hold are written as in results.json: NaN as
    ``null``, infinities as ``"inf"`` / ``"-inf"``.  A failed task counts, and
    shows as the strongest row, as ``"error"`` (:func:`row_verdict`).  The
    line's JSON Schema is docs/schema/summary.schema.json.

    Returns
    -------
    str
        ``{"verdict": ..., "exit_code": ..., "counts": {verdict: rows}, "rows": n,
        "strongest": [{claim keys, pair, direction, function_class, layer, estimate,
        ci_low, verdict}, ...], "claims": [{claim, verdict, value_verdict,
        representation_verdict}, ...], "report": path or null}`` without newlines.
    """
    columns = [*CLAIM_KEYS, "pair", "direction", "function_class", "layer", "estimate", "ci_low", "verdict"]
    columns = [column for column in columns if column in table.columns]
    strongest = []
    for record in (strongest_per_claim(table).to_dict(orient="records") if len(table) else []):
        strongest.append({**{key: record[key] for key in columns},
                          "verdict": row_verdict(record["verdict"], record.get("error"))})
    verdicts = [row_verdict(v, e) for v, e in zip(table["verdict"], table.get("error", [None] * len(table)))]
    document = {
        "verdict": verdict,
        "exit_code": exit_code,
        "rows": len(table),
        "counts": {str(key): int(value) for key, value in collections.Counter(verdicts).items()},
        "strongest": strongest,
        "claims": claim_verdicts(claims),
        "report": None if report is None else str(report),
    }
    return json_text(document, indent=None)


def summary_table(paths: Sequence[str | pathlib.Path], problems: list[str] | None = None) -> str:
    """A markdown table of many audits: one line per results.json.

    Parameters
    ----------
    paths : sequence of path
        Audit directories (searched recursively for results.json) or
        results.json files.
    problems : list, optional
        Receives one message per results.json that could not be read (it
        still gets its line, verdict ``unreadable``), so that one bad file
        does not hide the others.

    Returns
    -------
    str
        Columns: audit (its directory), mechanism, verdict, each claim's
        verdict per layer (values, representation), strongest evidence
        per claim (``<br>``-separated), rows, date (results.json's ``date`` if
        it has one, else the file's modification time, UTC).  Every cell is
        text with ``|``, line breaks and HTML escaped.

    Raises
    ------
    ValueError
        If a path holds no results.json (the message names it).
    """
    lines = []
    for file in results_files(paths):
        try:
            table, meta = load_results(file)
            line = {
                "mechanism": mechanism_label(meta.get("config") or {}),
                "verdict": str(meta["verdict"]),
                "evidence": evidence_lines(table),
                "layers": [f"{entry['claim']}: {layer_text(claim)}" for entry, claim
                           in zip(claim_verdicts(meta.get("claims") or []), meta.get("claims") or [])
                           if layer_text(claim)],
                "rows": str(len(table)),
                "date": str((meta.get("audited") or {}).get("date") or meta.get("date") or _modified(file)),
            }
        except Exception as error:  # noqa: BLE001 - any unreadable file: name it and go on
            reason = str(error) if isinstance(error, (ValueError, OSError)) else f"{type(error).__name__}: {error}"
            message = f"{file}: unreadable results.json: {reason}"
            if problems is not None:
                problems.append(bounded(message))
            line = {"mechanism": "-", "verdict": "unreadable", "evidence": [], "layers": [], "rows": "-",
                    "date": _modified(file)}
        verdict = line["verdict"]
        lines.append({
            "audit": file.parent.as_posix(),
            "mechanism": line["mechanism"],
            "verdict": f"**{verdict}**" if verdict in ("violation", "error", "unreadable") else verdict,
            "verdict per layer": line["layers"],
            "strongest evidence per claim": line["evidence"],
            "rows": line["rows"],
            "date": line["date"],
        })
    return markdown_table(pd.DataFrame(lines))


def results_files(paths: Sequence[str | pathlib.Path]) -> list[pathlib.Path]:
    """The results.json files named by ``paths``: files as given, directories searched recursively (sorted).

    Raises
    ------
    ValueError
        If a path is neither a results.json file nor a directory holding one.
    """
    files = []
    for path in map(pathlib.Path, paths):
        found = [path] if path.is_file() else sorted(path.rglob("results.json")) if path.is_dir() else []
        if not found:
            raise ValueError(f"{path}: no results.json there; give audit output directories (capaudit run --out).")
        files += [file for file in found if file not in files]
    return files


def _modified(file: pathlib.Path) -> str:
    stamp = datetime.datetime.fromtimestamp(file.stat().st_mtime, tz=datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M UTC")


def failure_lines(messages: Sequence[str]) -> list[str]:
    """One line per failure: messages that end alike (one cause reported by several rows) are said once.

    A failed pair gives an error row per task or claim, and a search that
    lost its candidates reports the same cause again under its own prefix;
    two messages whose last :data:`SAME_CAUSE` characters agree are one
    failure, shown by its shortest message, cut to
    :data:`audit.report.tables.LINE_LIMIT` characters.
    """
    causes: dict[str, str] = {}
    for message in messages:
        text = " ".join(str(message).split())
        cause = text[-SAME_CAUSE:]
        if cause not in causes or len(text) < len(causes[cause]):
            causes[cause] = text
    return [bounded(text) for text in causes.values()]
