"""Row verdicts, per-claim summaries and the overall verdict of an audit, family-wise error controlled by Holm.

A row compares one attack's estimate with one claim.  It can refute the claim
only when the attack's class is contained in the claim's class (docs/theory.md
section 3; :meth:`attacks.classes.FunctionClass.is_contained_in`); other rows
are ``"info"``.  The refuting rows that ran (no ``error``) form one family of
one-sided tests of H0: "the estimand <= the claim", tested with Holm's
step-down procedure at family-wise level ``1 - confidence`` (Holm, "A simple
sequentially rejective multiple test procedure", Scand. J. Statist. 1979), so
that the probability of reporting any false violation is at most
``1 - confidence`` for the whole audit, not per row.

Rows whose interval cannot be trusted.  An estimate with a ``caveat``
(:attr:`attacks.evidence.Evidence.caveat`, e.g. a few held-out
terms carry the objective) enters the family with p = 1 rather than leaving
it.  The family keeps its size m, so the levels of the other rows do not
depend on which rows the data flagged; a p-value of 1 is valid under any
hypothesis, so Holm's guarantee holds whatever the caveats' dependence on the
data (dropping the rows would make m random and the other rows' levels
data-dependent).  Such a row is always ``"inconclusive"`` with the caveat as
its note and no interval: a witness whose held-out terms are dominated by a
few samples misjudges the estimate in both directions (a kernel KL estimate
of -37.9 where the truth is 0.37), so an estimate below the claim is no more
evidence for the claim than one above it is against it.

Row verdicts:

* ``"info"``: the attack class is not contained in the claim's class.
* A +inf estimate (an attack's score on a finite, e.g. separable, sample) is
  an error of its row, never a violation: a finite sample never proves an
  infinite divergence (:data:`INFINITE_ESTIMATE`).
* ``"violation"``: Holm rejects H0 (equivalently ``p_adjusted <= 1 - confidence``).
* ``"inconclusive"``: not rejected although the point estimate exceeds the
  claim (the data lean against the claim, but not at the family-wise level;
  the note gives the row's Holm-adjusted p-value); or the estimate has a
  caveat; or it is NaN; or the task failed (``error`` set).  A NaN estimate
  is never a pass.
* ``"inconclusive"`` too: not rejected although its held-out outputs are
  :func:`separated` (its set holds every output of P and none of Q, or its
  binned held-out scores put every output of P above every output of Q).
  Such data show the largest value these sample sizes allow, the row's
  :func:`row_ceiling` X, and are as likely under an infinite divergence: they
  refute a claim below X but support none, and no data of these sizes refute
  one above X (:func:`separation_note` says so in words; a finite sample never
  proves infinity, and more outputs raise X only like ln n).
* ``"inconclusive"`` too: a search in rounds (``stop`` neither None nor
  ``"fixed"``: :mod:`attacks.sequential`) not rejected on a claim at or above
  its row's :func:`row_ceiling`: no round may decide a pass there
  (:func:`attacks.sequential.decide`), so the search ran to its limit without
  ruling the claim out (:func:`ceiling_note` says so).  A fixed design's row
  above its ceiling may pass, with a detectable excess of +inf.
* ``"pass"``: not rejected, the estimate is at most the claim and neither of the two above holds.

A claim that is exactly tight (the estimand equals the claim, e.g. pure
epsilon-DP of a Laplace over thresholds) reads ``"inconclusive"`` whenever
some row's estimate lands above it, which no sample size prevents; the
report therefore no longer extrapolates a sample size that "would decide"
but states what this audit could detect (:func:`detectable_excess`).

Rows are typed (:class:`audit.results.schema.Row`) and never changed in place:
:func:`assign_verdicts` returns new rows (:func:`dataclasses.replace`) with
these columns filled on every one: ``verdict``, ``note``, ``ci_low``, ``ci_high``,
``p_adjusted`` (Holm-adjusted p-value, :func:`holm_adjusted`; NaN outside
the family) and ``detectable_excess`` (:func:`detectable_excess` at the level
Holm tests a lone false hypothesis at, ``(1 - confidence) / m``; NaN outside
the family, +inf for a row that cannot reject: a caveat, a NaN estimate, or a
claim at or above the row's :func:`row_ceiling`).

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
So a table's ``ci_low`` exceeds the claim exactly on the violations.  A row
with a caveat has no interval (NaN).  An ``"info"`` row's interval is the
plain two-sided ``confidence`` interval.

On-average claims (:mod:`audit.results.on_average`): their per-pair rows cannot
refute them (``refutes_claim`` false, ``"info"``); one aggregate row per
(attack class, direction), the mean over pairs with its t interval, enters
Holm's family like any refuting row.

Claims (:func:`summarize_claims`): one summary per claim (:func:`claim_key`:
divergence, alpha, claim class, claimed value, delta, on_average), with the
verdict ``"violation"`` (a row refutes it), ``"untested"`` (no refuting row
ran: every one failed, or the audit had no class contained in the claim's),
``"inconclusive"`` (a refuting row is) or ``"pass"``, the strongest row
(smallest adjusted p-value), its adjusted p-value, the claim's detectable
excess (the smallest over its rows) and a note (why it is untested, or the
:func:`separation_note` of an inconclusive row).  The same rule over the refuting rows of
one layer (:attr:`attacks.classes.FunctionClass.layer`) gives the claim's
``value_verdict`` and ``representation_verdict`` (``"not audited"`` when no
class of that layer ran on it): what the mechanism computes and how it stores
it, judged apart.  The claim's verdict is a violation when either layer's
is, and the rows of both layers form one Holm family, so the audit-wide
error guarantee covers both.

Overall: ``"violation"`` if any row is a violation; else
``"inconclusive"`` if any row is inconclusive, any claim is untested, or
there are no rows; else ``"pass"``.  Exit codes (:func:`exit_code`): 2 when
any task failed or a claim is untested or there are no rows (the audit is
incomplete: docs/design.md reserves 2 for errors, and it wins over 1), else 1 for
a violation, else 0 (an inconclusive audit found no violation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from attacks.classes import LAYERS
from audit.results.schema import Row

EXIT_PASS, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2
CLAIM_VERDICTS = ("violation", "untested", "inconclusive", "pass")
NOT_AUDITED = "not audited"
LAYER_VERDICTS = CLAIM_VERDICTS + (NOT_AUDITED,)
"""A claim's verdict in one layer: a claim's verdicts, or ``"not audited"`` (no class of the layer ran on it)."""
INFINITE_ESTIMATE = (
    "the attack's estimate is +inf, but a finite sample never proves an infinite divergence: "
    "the attack's scoring is at fault"
)
SEPARATED = "the held-out outputs are separated"
"""How the note of a row that :func:`separated` judges begins (:func:`separation_note`)."""
ABOVE_CEILING = "the claim is at or above the ceiling"
"""How the note of a search in rounds on a claim at or above its row's ceiling begins (:func:`ceiling_note`)."""


def holm_levels(p_values: Sequence[float], level: float) -> np.ndarray:
    """Holm's per-test levels: ``level / (m - k + 1)`` for the test with the k-th smallest p-value.

    Ties keep their input order (a stable sort), so the result is reproducible.
    """
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    levels = np.empty(p.size)
    levels[order] = level / (p.size - np.arange(p.size))
    return levels


def holm_adjusted(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values: ``max_{j <= k} min(1, (m - j + 1) p_(j))`` for the k-th smallest.

    The smallest family-wise level at which Holm's step-down procedure (Holm
    1979) rejects each hypothesis: it rejects at level ``a`` exactly the
    hypotheses whose adjusted p-value is at most ``a``.  NaN p-values count
    as 1.

    Returns
    -------
    numpy.ndarray of float, shape (m,)
    """
    p = np.asarray(p_values, dtype=float)
    p = np.where(np.isnan(p), 1.0, p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(p.size)
    adjusted[order] = np.maximum.accumulate(np.minimum(1.0, (p.size - np.arange(p.size)) * p[order]))
    return adjusted


def holm_rejections(p_values: Sequence[float], level: float) -> np.ndarray:
    """Holm's step-down procedure at family-wise level ``level``.

    Sort the p-values increasingly; reject the k-th while ``p_(k) <= level / (m - k + 1)``
    and stop at the first that is not (Holm 1979): the hypotheses whose
    :func:`holm_adjusted` p-value is at most ``level``.  NaN p-values are never rejected.

    Returns
    -------
    numpy.ndarray of bool, shape (m,)
        True where the hypothesis is rejected.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Found {level!r}.")
    return holm_adjusted(p_values) <= level


def assign_verdicts(rows: Sequence[Row], confidence: float) -> list[Row]:
    """The judged rows: ``verdict``, ``note``, ``ci_low``, ``ci_high``, ``p_adjusted`` and ``detectable_excess`` filled.

    The rows are not changed: each judged row is a new :class:`audit.results.schema.Row`
    (:func:`dataclasses.replace`), in the order given; a +inf estimate also gets its ``error``
    (:data:`INFINITE_ESTIMATE`).  The module
    docstring gives the rules; :func:`overall_verdict` reads the audit's verdict off the result.

    Parameters
    ----------
    rows : sequence of Row
        Results rows before verdicts (:func:`audit.engine.run.run_engine`'s, the aggregates of
        :func:`audit.results.on_average.aggregate_rows` among them), each with its ``evidence``
        (:class:`attacks.evidence.Evidence`: p-values, intervals, ``caveat``),
        None for rows without one (errors).
    confidence : float
        The audit's confidence: the family-wise error rate is ``1 - confidence``.

    Returns
    -------
    list of Row
    """
    level = 1.0 - confidence
    judged = [_infinite_checked(row) for row in rows]
    family = [index for index, row in enumerate(judged) if row.refutes_claim and not _failed(row)]
    p_values = [_p_value(judged[index]) for index in family]
    rejected = holm_rejections(p_values, level) if family else np.zeros(0, dtype=bool)
    stop_level = level / max(len(family) - int(rejected.sum()), 1)  # the level of the step that stopped
    first_level = level / max(len(family), 1)  # the level Holm tests a lone false hypothesis at
    adjusted = holm_adjusted(p_values)
    for index, row_level, reject, row_adjusted in zip(family, holm_levels(p_values, level), rejected, adjusted):
        row = replace(judged[index], p_adjusted=float(row_adjusted))
        ceiling = row_ceiling(row, confidence)
        row = replace(row, **_judgement(row, row_level if reject else stop_level, bool(reject), ceiling))
        judged[index] = replace(row, detectable_excess=_row_detectable_excess(row, first_level, ceiling))
    for index, row in enumerate(judged):
        if _failed(row):
            judged[index] = replace(row, verdict="inconclusive", ci_low=math.nan, ci_high=math.nan,
                                    note=_join(row.note, f"error: {row.error}"), **_OUTSIDE_FAMILY)
        elif not row.refutes_claim:
            judged[index] = replace(row, verdict="info", **_interval(row, confidence), **_OUTSIDE_FAMILY)
    return judged


def summarize_claims(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One summary per claim (:func:`claim_key`) of rows judged by :func:`assign_verdicts`.

    Parameters
    ----------
    rows : sequence of Row
        Judged rows (``verdict``, ``p_adjusted``, ``detectable_excess`` set).

    Returns
    -------
    list of dict
        In the order the claims first occur, each with ``divergence``,
        ``alpha`` (NaN when not Renyi), ``claim_class``, ``claim``, ``delta``, ``on_average``,
        ``verdict`` (one of :data:`CLAIM_VERDICTS`), ``value_verdict`` and
        ``representation_verdict`` (one of :data:`LAYER_VERDICTS`), ``strongest_task`` (the
        refuting row with the smallest adjusted p-value, ties to the larger
        estimate; None when untested), its ``p_adjusted``,
        ``detectable_excess`` (smallest over the refuting rows that ran: the
        excess this audit detects with probability :data:`POWER`),
        ``refuting_rows`` (how many ran) and ``note``.
    """
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault(claim_key(row), []).append(row)
    return [_summarize_claim(key, members) for key, members in groups.items()]


def overall_verdict(rows: Sequence[Row]) -> str:
    """``"violation"``, ``"inconclusive"`` or ``"pass"`` from judged rows (module docstring)."""
    verdicts = {row.verdict for row in rows}
    if "violation" in verdicts:
        return "violation"
    untested = any(claim["verdict"] == "untested" for claim in summarize_claims(rows))
    return "inconclusive" if "inconclusive" in verdicts or untested or not rows else "pass"


def exit_code(rows: Sequence[Row], verdict: str) -> int:
    """2 if any task failed, a claim is untested or nothing ran, else 1 for a violation, else 0.

    docs/design.md, "Contract: command line": 2 is an error, and an audit that
    could not test a claim is incomplete.
    """
    incomplete = not rows or any(_failed(row) for row in rows)
    if incomplete or any(claim["verdict"] == "untested" for claim in summarize_claims(rows)):
        return EXIT_ERROR
    return EXIT_VIOLATION if verdict == "violation" else EXIT_PASS


_OUTSIDE_FAMILY = {"p_adjusted": math.nan, "detectable_excess": math.nan}
"""The verdict columns of a row outside Holm's family (failed, or ``info``)."""


def _infinite_checked(row: Row) -> Row:
    """``row``, with :data:`INFINITE_ESTIMATE` as its error when it ran and its estimate is +inf."""
    return replace(row, error=INFINITE_ESTIMATE) if row.estimate == math.inf and not _failed(row) else row


def _p_value(row: Row) -> float:
    """The row's p-value in Holm's family: 1 with a caveat, NaN (read as 1) without evidence."""
    evidence = row.evidence
    if evidence is None or math.isnan(row.estimate):
        return math.nan
    if evidence.caveat:
        return 1.0
    return float(evidence.p_value(row.claim))


def _judgement(row: Row, level: float, rejected: bool, ceiling: float) -> dict[str, Any]:
    """A refuting row's ``verdict``, ``note``, ``ci_low`` and ``ci_high``, judged at ``level`` (module docstring);
    ``ceiling``: :func:`row_ceiling` at the audit's confidence."""
    estimate, claim = row.estimate, row.claim
    caveat = None if row.evidence is None else row.evidence.caveat
    if caveat:
        return dict(verdict="inconclusive", ci_low=math.nan, ci_high=math.nan,
                    note=_join(row.note, f"interval not trusted: {caveat}"))
    interval = _interval(row, 1.0 - 2.0 * level)
    if math.isnan(estimate):
        return dict(verdict="inconclusive", note=_join(row.note, "the estimate is NaN"), **interval)
    if rejected:
        return dict(verdict="violation", note=row.note, **interval)
    # a search in rounds that never decided a pass on a claim no data of its sizes refute did not rule it out
    open_above = not separated(row) and row.stop not in (None, "fixed") and claim >= ceiling
    note = _join(row.note, separation_note(ceiling)) if separated(row) else row.note
    note = _join(note, ceiling_note(ceiling)) if open_above else note
    if estimate > claim:
        note = _join(note, "estimate exceeds the claim but not at the family-wise level "
                           f"(Holm-adjusted p = {row.p_adjusted:.3g})")
        return dict(verdict="inconclusive", note=note, **interval)
    return dict(verdict="inconclusive" if separated(row) or open_above else "pass", note=note, **interval)


def _row_detectable_excess(row: Row, level: float, ceiling: float) -> float:
    """Excess this row detects with probability POWER; +inf when it cannot reject (also a claim at or above the
    row's ``ceiling``, :func:`row_ceiling`, which no data of its sizes refute)."""
    from attacks.sequential import detectable_excess  # the sequential stop rule too; attacks load scikit-learn

    evidence = row.evidence
    if evidence is None or evidence.caveat or math.isnan(row.estimate) or row.claim >= ceiling:
        return math.inf
    return detectable_excess(evidence, level)


def row_ceiling(row: Row, confidence: float) -> float:
    """The largest lower bound at ``confidence`` that the row's sample sizes allow, NaN where none is known: its
    evidence's ``ceiling`` (:meth:`attacks.estimate.DivergenceEstimate.ceiling`: an event's counts, a ``dp`` set's
    independent counts, a ``kl`` or ``renyi`` witness; a sequential search's look at its spent confidence).

    No data of these sizes refute a claim at or above it (Holm never tests a
    row at a level more lenient than ``1 - confidence``), and it grows only
    like ln n: its evidence's ``ceiling`` (:mod:`attacks.ceilings`: a set's or
    event's counts at complete separation, for ``dp``, ``ipm``, ``kl`` and
    ``renyi``, independent or coupled; a ``kl`` or ``renyi`` witness's
    unseen-mass term; a pool of ``dp`` sets' log((1 - delta) n)), a
    sequential look's at its spent confidence.  NaN for evidence without one
    (an on-average aggregate's t interval) and for rows without evidence.
    """
    return math.nan if row.evidence is None else float(row.evidence.ceiling(confidence))


def separated(row: Row) -> bool:
    """The row's held-out outputs are completely separated: its attack set holds every output of P and none of
    Q (counts ``k_p = n_p``, ``k_q = 0``), or its binned held-out scores (:attr:`audit.results.schema.Row.held_out_scores`)
    put every output of P above every output of Q.  Such data show the largest value their sizes allow and are
    as likely under an infinite divergence: they refute no claim above :func:`row_ceiling` and support none."""
    details = getattr(row.evidence, "details", None)
    if not isinstance(details, dict):
        return False
    if {"k_p", "n_p", "k_q"} <= details.keys() and int(details["k_p"]) == int(details["n_p"]) > 0 == int(details["k_q"]):
        return True
    scores = row.held_out_scores
    if not scores or not scores.get("p") or not scores.get("q"):
        return False
    bins_p, bins_q = np.flatnonzero(scores["p"]), np.flatnonzero(scores["q"])
    return bool(bins_p.size and bins_q.size and bins_q[-1] < bins_p[0])


def separation_note(ceiling: float) -> str:
    """The note of a :func:`separated` row that is not rejected (:data:`SEPARATED`, then what it means)."""
    return f"{SEPARATED}: {_ceiling_words(ceiling)}"


def ceiling_note(ceiling: float) -> str:
    """The note of a search in rounds that is not rejected on a claim at or above its row's ceiling
    (:data:`ABOVE_CEILING`, then what it means): no round could decide a pass (:func:`attacks.sequential.decide`)."""
    return f"{ABOVE_CEILING}: {_ceiling_words(ceiling)}"


def _ceiling_words(ceiling: float) -> str:
    bound = f"{ceiling:.3g}" if math.isfinite(ceiling) else "a value that grows with the sample"
    return (f"at these sample sizes no bound can exceed {bound}, so a claim above it is neither refuted nor "
            "supported: more outputs raise it only like ln n")


def _interval(row: Row, confidence: float) -> dict[str, Any]:
    """``ci_low`` and ``ci_high``: the evidence's two-sided interval at ``confidence``, NaN without one; a staged
    row's ``interval`` (which interval ``ci_low`` is, :func:`attacks.sequential.interval_of`) at that level."""
    from attacks.sequential import interval_of  # attacks load scikit-learn

    evidence = row.evidence
    if evidence is None or math.isnan(row.estimate):
        return dict(ci_low=math.nan, ci_high=math.nan)
    low, high = evidence.confidence_interval(confidence)
    named = {} if row.interval is None else dict(interval=interval_of(evidence, (1.0 + confidence) / 2.0))
    return dict(ci_low=float(low), ci_high=float(high), **named)


def claim_key(row: Row) -> tuple:
    """What identifies the claim a row answers: (divergence, alpha or None, claim class, claimed value, delta,
    on_average, d_in); two claims that differ in any of these (e.g. only in delta, as the members of two gdp curves
    over one class at epsilon 0, or only in the distance they hold at) never share rows."""
    alpha = None if math.isnan(row.alpha) else row.alpha
    return row.divergence, alpha, row.claim_class, row.claim, row.delta, row.on_average, row.d_in


def _verdict_of(refuting: Sequence[Row]) -> str:
    """The verdict of a claim (or of one layer of it) from its refuting rows: violation, untested, inconclusive
    or pass (module docstring)."""
    verdicts = {row.verdict for row in refuting}
    if "violation" in verdicts:
        return "violation"
    if not any(not _failed(row) for row in refuting):
        return "untested"
    return "inconclusive" if "inconclusive" in verdicts else "pass"


def combined_verdict(verdicts: Iterable[str]) -> str:
    """The verdict of a claim made of parts (a curve claim's members, :mod:`audit.config.families`): ``"violation"`` when
    a part is one, :data:`NOT_AUDITED` when every part is, ``"untested"`` when every part is that or untested,
    else ``"inconclusive"`` when a part is, else ``"pass"``."""
    found = set(verdicts)
    if "violation" in found:
        return "violation"
    if found <= {NOT_AUDITED}:
        return NOT_AUDITED if found else "untested"
    if found <= {"untested", NOT_AUDITED}:
        return "untested"
    return "inconclusive" if "inconclusive" in found else "pass"


def layer_verdict(refuting: Sequence[Row], layer: str) -> str:
    """A claim's verdict in one layer (:data:`attacks.classes.LAYERS`) from its refuting rows of that layer,
    :data:`NOT_AUDITED` when the audit ran no class of the layer contained in the claim's class."""
    mine = [row for row in refuting if row.layer == layer]
    return _verdict_of(mine) if mine else NOT_AUDITED


def _summarize_claim(key: tuple, rows: Sequence[Row]) -> dict[str, Any]:
    divergence, alpha, claim_class, claim, delta, on_average, d_in = key
    refuting = [row for row in rows if row.refutes_claim]
    ran = [row for row in refuting if not _failed(row)]
    verdict = _verdict_of(refuting)
    summary = {
        "divergence": divergence,
        "alpha": math.nan if alpha is None else alpha,
        "claim_class": claim_class,
        "claim": claim,
        "delta": delta,
        "on_average": on_average,
        **({} if d_in is None else {"d_in": d_in}),
        "verdict": verdict,
        **{f"{layer}_verdict": layer_verdict(refuting, layer) for layer in LAYERS},
        "strongest_task": None,
        "p_adjusted": math.nan,
        "detectable_excess": math.nan,
        "refuting_rows": len(ran),
        "note": _untested_note(claim_class, refuting, rows) if verdict == "untested" else _separation_part(ran, verdict),
    }
    if ran:
        strongest = min(ran, key=lambda row: (_or(row.p_adjusted, 1.0), -_or(row.estimate, -math.inf)))
        summary.update(
            strongest_task=strongest.task,
            p_adjusted=strongest.p_adjusted,
            detectable_excess=min(_or(row.detectable_excess, math.inf) for row in ran),
        )
    return summary


def _untested_note(claim_class: str, refuting: Sequence[Row], rows: Sequence[Row]) -> str:
    if refuting:
        failed = sorted({row.function_class for row in refuting})
        return f"every attack that could refute it failed (classes {', '.join(failed)}); see the failed tasks"
    classes = sorted({row.function_class for row in rows})
    return (
        f"no attack class of the audit ({', '.join(classes)}) is contained in {claim_class!r}; "
        f"add one that is to [attacks] classes"
    )


def _separation_part(ran: Sequence[Row], verdict: str) -> str:
    """The :func:`separation_note` of the first inconclusive row that has one, for a claim that reads
    inconclusive; "" otherwise."""
    if verdict != "inconclusive":
        return ""
    parts = (part for row in ran if row.verdict == "inconclusive" for part in (row.note or "").split("; "))
    return next((part for part in parts if part.startswith(SEPARATED)), "")


def _failed(row: Row) -> bool:
    """The row's task failed: its ``error`` is a message (None or "" when it ran)."""
    return bool(row.error)


def _or(value: float, default: float) -> float:
    """``value``, ``default`` when it is NaN."""
    return default if math.isnan(value) else value


def _join(note: str | None, text: str) -> str:
    return f"{note}; {text}" if note else text

