"""The columns of a results row, listed once: results.json's ``rows``, results.csv, ``AuditResult.table``.

A row is described field by field in docs/results.md and
docs/schema/results.schema.json; every module that orders, converts or
selects row columns reads them from here.
"""

from __future__ import annotations

from collections.abc import Iterable

ROW_COLUMNS = (
    "pair",
    "direction",
    "function_class",
    "divergence",
    "alpha",
    "estimate",
    "ci_low",
    "ci_high",
    "n_samples",
    "claim",
    "claim_class",
    "refutes_claim",
    "theory_bound",
    "exact",
    "verdict",
    "note",
)
"""The columns every row has, first and in this order in results.json and results.csv."""
VERDICT_COLUMNS = ("p_adjusted", "detectable_excess")
"""Filled by :func:`audit.verdicts.assign_verdicts`; tables of older versions lack them."""
TASK_COLUMNS = ("task", "error", "resumed")
"""The task's stable id (:class:`audit.plan.Task`), its error message or None, and whether ``--resume`` read it back."""
ON_AVERAGE_COLUMNS = ("on_average", "pairs_averaged", "worst_case", "worst_case_low")
"""On-average claims (:mod:`audit.on_average`): whether the row belongs to one, and its aggregate's fields."""
TABLE_COLUMNS = ROW_COLUMNS + VERDICT_COLUMNS + TASK_COLUMNS + ON_AVERAGE_COLUMNS
"""The columns of ``AuditResult.table`` and of the rows ``run_audit`` writes."""
STAGE_SIZE_COLUMNS = ("n_screen", "n_train", "n_check", "n_confirm", "candidates", "finalists", "sets_pooled")
"""The staged engine's stage sizes and counts (report.md's "Staged search")."""
STAGED_COLUMNS = ("engine",) + STAGE_SIZE_COLUMNS
"""Result fields of a staged row (``[attacks] engine = "staged"``), after :data:`TABLE_COLUMNS`."""
NUMERIC_COLUMNS = ("alpha", "estimate", "ci_low", "ci_high", "n_samples", "claim", "theory_bound", "exact")
"""Columns read back as floats (None and null become NaN)."""


def column_order(columns: Iterable[str]) -> list[str]:
    """:data:`ROW_COLUMNS` first, then the other ``columns`` in their order."""
    return list(ROW_COLUMNS) + [column for column in columns if column not in ROW_COLUMNS]
