"""Row verdicts and the overall verdict of an audit, family-wise error controlled by Holm's step-down.

A row compares one attack's estimate with one claim.  It can refute the claim
only when the attack's class is contained in the claim's class (THEORY.md
section 3; :meth:`attacks.classes.FunctionClass.is_contained_in`); other rows
are ``"info"``.  The refuting rows form one family of one-sided tests of
H0: "the estimand <= the claim", tested with Holm's step-down procedure at
family-wise level ``1 - confidence`` (Holm, "A simple sequentially
rejective multiple test procedure", Scand. J. Statist. 1979), so that the
probability of reporting any false violation is at most ``1 - confidence``
for the whole audit, not per row.

Row verdicts:

* ``"info"``: the attack class is not contained in the claim's class.
* ``"unbounded"``: the estimate is unbounded (separable outputs, e.g. a
  deterministic release, CBDP Lemma 2): it refutes every finite claim about a
  class containing the attack's.  It enters Holm's family with p = 0 and the
  overall verdict is ``"violation"`` (the claim *is* violated); the note says
  "unbounded".
* ``"violation"``: Holm rejects H0.
* ``"inconclusive"``: not rejected although the point estimate exceeds the
  claim (the note gives the sample size that would decide), or the estimate
  is NaN, or the task failed (``error`` set).  A NaN estimate is never a pass.
* ``"pass"``: not rejected and the estimate does not exceed the claim.

Intervals: a refuting row's ``ci_low``/``ci_high`` is an equal-tailed
interval whose one-sided level in each tail is the one Holm's procedure
judged it at.  A rejected row, the k-th smallest of m p-values, gets its
step's level ``(1 - confidence) / (m - k + 1)``, so its ``ci_low`` exceeds
the claim.  Every row not rejected gets the level of the step where the
procedure stopped, ``(1 - confidence) / (m - r)`` with r rows rejected (the
level of Strassburger and Bretz's 2008 confidence bounds compatible with
Holm's procedure); its ``ci_low`` then stays at or below the claim.  A row
after the stop, whose own step would have been more lenient, would
otherwise show a ``ci_low`` above the claim beside the word inconclusive.
So a table's ``ci_low`` exceeds the claim exactly on the violations.
An ``"info"`` row's interval is the plain two-sided ``confidence`` interval.

Overall: ``"violation"`` if any row is a violation or unbounded; else
``"inconclusive"`` if any row is; else ``"pass"``.  Exit codes
(:func:`exit_code`): 2 when any task failed (a mechanism error: the audit is
incomplete, and DESIGN.md reserves 2 for it, so it wins over 1), else 1 for a
violation, else 0 (an inconclusive audit found no violation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

EXIT_PASS, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2


class Evidence(Protocol):
    """What a verdict needs from an estimate (:class:`attacks.estimate.DivergenceEstimate` has it)."""

    estimate: float

    def p_value(self, claim: float) -> float: ...

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]: ...


def holm_levels(p_values: Sequence[float], level: float) -> np.ndarray:
    """Holm's per-test levels: ``level / (m - k + 1)`` for the test with the k-th smallest p-value.

    Ties keep their input order (a stable sort), so the result is reproducible.
    """
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    levels = np.empty(p.size)
    levels[order] = level / (p.size - np.arange(p.size))
    return levels


def holm_rejections(p_values: Sequence[float], level: float) -> np.ndarray:
    """Holm's step-down procedure at family-wise level ``level``.

    Sort the p-values increasingly; reject the k-th while ``p_(k) <= level / (m - k + 1)``
    and stop at the first that is not (Holm 1979).  NaN p-values are never rejected.

    Returns
    -------
    numpy.ndarray of bool, shape (m,)
        True where the hypothesis is rejected.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Found {level!r}.")
    p = np.where(np.isnan(np.asarray(p_values, dtype=float)), 1.0, np.asarray(p_values, dtype=float))
    order = np.argsort(p, kind="stable")
    below = p[order] <= level / (p.size - np.arange(p.size))
    n_rejected = p.size if below.all() else int(np.argmin(below))
    rejected = np.zeros(p.size, dtype=bool)
    rejected[order[:n_rejected]] = True
    return rejected


def samples_to_decide(n: int, estimate: float, ci_low: float, claim: float) -> int | None:
    """Samples per dataset at which the lower bound would clear the claim, if the estimate stays.

    The interval's half-width scales as 1/sqrt(n): it is ``estimate - ci_low`` at
    n, and it must shrink below ``estimate - claim``, so
    ``n_needed = n ((estimate - ci_low) / (estimate - claim))^2``, rounded up.
    None when that is not a finite number.
    """
    gap, half_width = estimate - claim, estimate - ci_low
    if not (gap > 0 and math.isfinite(half_width) and half_width > 0):
        return None
    return math.ceil(n * (half_width / gap) ** 2)


def assign_verdicts(rows: Sequence[dict], evidence: Mapping[str, Evidence | None], confidence: float) -> str:
    """Fill ``verdict``, ``note``, ``ci_low`` and ``ci_high`` of every row in place; return the overall verdict.

    Parameters
    ----------
    rows : sequence of dict
        Results rows (DESIGN.md schema plus ``task`` and ``error``) with at least
        ``task``, ``estimate``, ``claim``, ``refutes_claim``, ``n_samples``,
        ``error`` and ``note``.  An estimate of +inf means unbounded.
    evidence : mapping
        Task id -> its estimate (p-values and intervals), None for rows
        without one (errors, unbounded).
    confidence : float
        The audit's confidence: the family-wise error rate is ``1 - confidence``.

    Returns
    -------
    str
        ``"pass"``, ``"violation"`` or ``"inconclusive"``.
    """
    level = 1.0 - confidence
    family = [row for row in rows if row["refutes_claim"] and not row["error"]]
    p_values = [_p_value(row, evidence[row["task"]]) for row in family]
    rejected = holm_rejections(p_values, level) if family else np.zeros(0, dtype=bool)
    stop_level = level / max(len(family) - int(rejected.sum()), 1)  # the level of the step that stopped
    for row, row_level, reject in zip(family, holm_levels(p_values, level), rejected):
        _judge(row, evidence[row["task"]], row_level if reject else stop_level, bool(reject))
    for row in rows:
        if row["error"]:
            row.update(verdict="inconclusive", ci_low=math.nan, ci_high=math.nan)
            row["note"] = _join(row["note"], f"error: {row['error']}")
        elif not row["refutes_claim"]:
            row["verdict"] = "info"
            _set_interval(row, evidence[row["task"]], confidence)
    verdicts = {row["verdict"] for row in rows}
    if verdicts & {"violation", "unbounded"}:
        return "violation"
    return "inconclusive" if "inconclusive" in verdicts else "pass"


def exit_code(rows: Sequence[dict], verdict: str) -> int:
    """2 if any task failed, else 1 for a violation, else 0 (DESIGN.md, "Contract: command line")."""
    if any(row["error"] for row in rows):
        return EXIT_ERROR
    return EXIT_VIOLATION if verdict == "violation" else EXIT_PASS


def _p_value(row: dict, evidence: Evidence | None) -> float:
    if row["estimate"] == math.inf:
        return 0.0
    if evidence is None or math.isnan(row["estimate"]):
        return math.nan
    return float(evidence.p_value(row["claim"]))


def _judge(row: dict, evidence: Evidence | None, level: float, rejected: bool) -> None:
    estimate, claim = row["estimate"], row["claim"]
    if estimate == math.inf:
        row.update(verdict="unbounded", ci_low=math.inf, ci_high=math.inf)
        row["note"] = _join(row["note"], "unbounded: the outputs are separable, so every finite claim fails")
        return
    _set_interval(row, evidence, 1.0 - 2.0 * level)
    if math.isnan(estimate):
        row["verdict"] = "inconclusive"
        row["note"] = _join(row["note"], "the estimate is NaN")
    elif rejected:
        row["verdict"] = "violation"
    elif estimate > claim:
        row["verdict"] = "inconclusive"
        needed = samples_to_decide(row["n_samples"], estimate, row["ci_low"], claim)
        more = f"; about {needed} samples per dataset would decide it" if needed else ""
        row["note"] = _join(row["note"], f"estimate exceeds the claim but not at the family-wise level{more}")
    else:
        row["verdict"] = "pass"


def _set_interval(row: dict, evidence: Evidence | None, confidence: float) -> None:
    if evidence is None or math.isnan(row["estimate"]):
        row.update(ci_low=math.nan, ci_high=math.nan)
        return
    low, high = evidence.confidence_interval(confidence)
    row.update(ci_low=float(low), ci_high=float(high))


def _join(note: str | None, text: str) -> str:
    return f"{note}; {text}" if note else text
