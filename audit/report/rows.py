"""report.md's tables of rows: the verdict tables (violations, inconclusive rows), the failed tasks and
the results per claim, rows ordered by importance (:data:`ROW_VERDICTS`).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence

import pandas as pd

from audit.report.words import divergence_label, with_interval
from audit.results.schema import Row
from audit.report.tables import bounded, format_number, markdown_table


ROW_VERDICTS = ("violation", "inconclusive", "pass", "info")


def by_importance(rows: Sequence[Row]) -> list[Row]:
    """Rows in the order of :data:`ROW_VERDICTS` (violations first), stable within a verdict."""
    rank = {verdict: i for i, verdict in enumerate(ROW_VERDICTS)}
    return sorted(rows, key=lambda row: rank.get(row.verdict, len(ROW_VERDICTS)))


def row_counts(rows: Sequence[Row]) -> str:
    counts = collections.Counter("failed" if row.error else row.verdict for row in rows)
    parts = [f"{counts[verdict]} {verdict}" for verdict in (*ROW_VERDICTS, "failed") if verdict in counts]
    return f"{len(rows)} row{'s' if len(rows) != 1 else ''}: " + ", ".join(parts) + "."


def _row_table(rows: Sequence[Row], columns: dict[str, list]) -> str:
    """A markdown table of ``rows``: the columns that name each row (pair, direction, class), then ``columns``."""
    named = {"pair": [r.pair for r in rows], "direction": [r.direction for r in rows],
             "function class": [r.function_class for r in rows]}
    return markdown_table(pd.DataFrame({**named, **columns}))


def summary_table(rows: Sequence[Row]) -> str:
    return _row_table(rows, {
        "divergence": [divergence_label(r.divergence, r.alpha) for r in rows],
        "estimate [CI]": [with_interval(r) for r in rows],
        "claim": [f"{format_number(r.claim)} ({r.claim_class}{'' if r.d_in is None else f', d_in = {r.d_in:g}'})"
                  for r in rows],
        "note": [r.note for r in rows],
    })


def failed_table(rows: Sequence[Row]) -> str:
    return _row_table(rows, {
        "divergence": [divergence_label(r.divergence, r.alpha) for r in rows],
        "error": [bounded(r.error) for r in rows],
    })


def claim_table(rows: Sequence[Row]) -> str:
    return _row_table(rows, {
        "alpha": [format_number(r.alpha) for r in rows],
        "estimate [CI]": [with_interval(r) for r in rows],
        "theory bound": [format_number(r.theory_bound) for r in rows],
        "exact": [format_number(r.exact) for r in rows],
        "n": [f"{int(r.n_samples)}" if math.isfinite(r.n_samples) else "-" for r in rows],
        "adjusted p": [format_number(r.p_adjusted) for r in rows],
        "verdict": ["failed" if r.error else f"**{r.verdict}**" if r.verdict == "violation"
                    else r.verdict for r in rows],
    })
