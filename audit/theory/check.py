"""Published closed-form bounds checked against an audit's rows: exact values and lower confidence bounds.

A mechanism's ``theory_bound(function_class, divergence, alpha)`` is the
closed-form upper bound it states for a (class, divergence, alpha): CBDP
Table 1 / Corollary 2 / Theorem 5 for (lin, Renyi), an exact closed form
(appendix Thms 9-12) elsewhere (docs/theory.md section 6).  Published bounds
are claims (the proof of appendix Thm 13 drops a 2^{-d} factor), so every
row that has one is compared with

* the row's ``exact`` value (``output_laws`` + ``audit.theory.exact``): the bound
  fails when the exact value exceeds it by more than a relative
  :data:`BOUND_RTOL` (the numerical accuracy of ``audit.theory.exact``);
* the row's lower confidence bound on its estimand (a lower bound on the
  restricted divergence of its class, hence on that of every class
  containing it): the bound fails when the lower confidence bound exceeds
  it at the Bonferroni level ``1 - (1 - confidence) / m``, m the number of
  rows compared with an interval (:func:`bonferroni_level`).  The
  probability that a true bound reads "BOUND FAILS" from the attacks is then
  at most ``1 - confidence`` for the whole audit, whatever the dependence
  between rows (Bonferroni's inequality; the rows of one pair share samples).

A row whose interval cannot be trusted (a ``caveat``), whose task failed or
whose estimate is NaN is compared with its exact value only and still counts
in m (so that the other rows' level does not depend on which rows the data
flagged, as in ``audit.results.verdicts``).  Rows whose bound is infinite (a
non-private release, CBDP Lemma 2) state nothing to check and are skipped.

Pure functions of the rows and their evidence: ``audit.commands.api`` calls
:func:`check_bounds`, ``audit.report.audit_report`` renders its entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from audit.results.schema import Row

BOUND_RTOL = 1e-4
"""Relative accuracy of ``audit.theory.exact``: an exact value fails a bound only when above it by more than this."""
HOLDS = "bound holds"
FAILS_EXACT = "BOUND FAILS: exact value exceeds it"
FAILS_PREFIX = "BOUND FAILS"
NOT_TESTED = "not tested by the attack (no exact value, no trusted interval)"
ENTRY_FIELDS = (
    "task",
    "pair",
    "direction",
    "function_class",
    "divergence",
    "alpha",
    "bound",
    "exact",
    "lower_bound",
    "level",
    "status",
    "fails",
)


def bonferroni_level(confidence: float, m: int) -> float:
    """One-sided confidence level of each of m lower bounds: 1 - (1 - confidence) / max(m, 1).

    Bonferroni's inequality: if each of m true bounds is exceeded by its lower
    confidence bound with probability at most (1 - confidence) / m, any of
    them is with probability at most 1 - confidence.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1. Found {confidence!r}.")
    return 1.0 - (1.0 - confidence) / max(int(m), 1)


def exact_exceeds(exact: float | None, bound: float) -> bool:
    """The exact value is above the bound by more than the relative tolerance :data:`BOUND_RTOL`."""
    return exact is not None and not math.isnan(exact) and exact > bound + BOUND_RTOL * abs(exact)


def check_bounds(rows: Sequence[Row], confidence: float) -> list[dict[str, Any]]:
    """One entry per row with a finite published bound: the bound, exact value, lower bound and status.

    Parameters
    ----------
    rows : sequence of Row
        Results rows, each with its ``evidence`` (``lower_bound(level)``,
        ``caveat``; None for a failed task).  Rows of one task (several
        claims) are compared once.
    confidence : float
        The audit's confidence; the family-wise level of the comparisons.

    Returns
    -------
    list of dict
        Keys :data:`ENTRY_FIELDS`: ``lower_bound`` at ``level`` (NaN when the
        row has no trusted interval), ``status`` one of :data:`HOLDS`,
        :data:`FAILS_EXACT`, "BOUND FAILS: lower confidence bound x > bound y
        at level z" or :data:`NOT_TESTED`, and ``fails`` (bool).
    """
    compared = list({row.task: row for row in rows if math.isfinite(row.theory_bound)}.values())
    level = bonferroni_level(confidence, len(compared))
    return [_entry(row, level) for row in compared]


def failures(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The entries whose bound fails."""
    return [entry for entry in entries if entry["fails"]]


def _entry(row: Row, level: float) -> dict[str, Any]:
    bound = row.theory_bound
    exact = _number(row.exact)
    low = _lower_bound(row, level)
    if exact_exceeds(exact, bound):
        status = FAILS_EXACT
    elif low > bound:
        status = f"{FAILS_PREFIX}: lower confidence bound {low:.4g} > bound {bound:.4g} at level {level:.4g}"
    elif math.isnan(low) and exact is None:
        status = NOT_TESTED
    else:
        status = HOLDS
    return {
        "task": row.task,
        "pair": row.pair,
        "direction": row.direction,
        "function_class": row.function_class,
        "divergence": row.divergence,
        "alpha": _number(row.alpha),
        "bound": bound,
        "exact": exact,
        "lower_bound": low,
        "level": level,
        "status": status,
        "fails": status.startswith(FAILS_PREFIX),
    }


def _lower_bound(row: Row, level: float) -> float:
    """The row's one-sided lower confidence bound at ``level``; NaN without a trusted interval."""
    evidence = row.evidence
    if evidence is None or math.isnan(row.estimate) or math.isinf(row.estimate) or evidence.caveat:
        return math.nan
    return float(evidence.lower_bound(level))


def _number(value: Any) -> float | None:
    """A float, or None for a missing value (None or NaN)."""
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number
