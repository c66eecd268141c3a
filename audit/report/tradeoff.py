"""The evidence of report.md's "Trade-off curves" section and figures/tradeoff.svg, for curve claims (gdp, zcdp, profile).

For each curve claim (:mod:`audit.config.families`) and each attack class among the
rows of its members, the member row of that class with the smallest adjusted
p-value gives its held-out scores; their empirical trade-off curve and its
simultaneous upper confidence band (:mod:`attacks.tradeoff`, at the audit's
confidence) are drawn beside the trade-off function the claim implies and,
where the mechanism's output laws are known (a built-in with 1-D outputs:
``output_laws``), the exact curve T(P, Q) and the linear class's restricted
curve (:mod:`audit.theory.tradeoff`).  The band is evidence beside the
verdict, not part of it: the row is chosen after its p-value was seen, so its
band is not in Holm's family (docs/theory.md section 9).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attacks.tradeoff import TradeoffCurve, tradeoff_curve
from audit.config.families import Family, families
from audit.results.schema import Row, has_scores
from audit.theory.tradeoff import exact_tradeoff, linear_tradeoff

LEVELS = np.linspace(0.0, 1.0, 401)
"""Type-I errors at which curves are drawn and compared."""


@dataclass(frozen=True)
class ClassCurve:
    """One attack class's evidence on a curve claim: its strongest member row and that row's curve."""

    function_class: str
    task: str
    pair: str
    direction: str
    curve: TradeoffCurve
    crossing: tuple[float, float] | None


@dataclass(frozen=True)
class Panel:
    """A curve claim, its members' verdicts, each class's curve and the exact curves (None where unknown)."""

    family: Family
    members: list[dict[str, Any]]
    classes: list[ClassCurve]
    exact: np.ndarray | None
    linear: np.ndarray | None
    label: str = ""
    """The claim's line's label (:func:`audit.config.families.claim_summaries`: distinct for claims that read alike)."""


def tradeoff_panels(rows: Sequence[Row], config: Mapping[str, Any], pairs: Sequence[Mapping[str, Any]],
                    claims: Sequence[Mapping[str, Any]]) -> list[Panel]:
    """One :class:`Panel` per curve claim of ``config`` (none without curve claims).

    Parameters
    ----------
    rows : sequence of Row
        The judged rows (:class:`audit.results.schema.Row`), with their held-out scores.
    config : mapping
        The config as run (results.json ``config``).
    pairs : sequence of mapping
        results.json ``pairs`` (name, d, d_prime).
    claims : sequence of mapping
        results.json ``claims`` (:func:`audit.config.families.claim_summaries`): the members' verdicts.
    """
    confidence = float(config.get("attacks", {}).get("confidence", 0.95))
    lines = [claim for claim in claims if "members" in claim]
    panels = []
    for family, line in zip(families(config), lines):
        members = _member_rows(rows, family)
        classes = []
        for function_class in sorted({row.function_class for row in members}):
            row = min((row for row in members if row.function_class == function_class), key=_strongest_first)
            curve = tradeoff_curve(row.held_out_scores, confidence)
            classes.append(ClassCurve(function_class, row.task, row.pair, row.direction, curve,
                                      curve.below(family.tradeoff, LEVELS)))
        laws = _laws(config, pairs, classes[0]) if classes else None
        panels.append(Panel(family, line["members"], classes,
                            None if laws is None else exact_tradeoff(LEVELS, *laws),
                            None if laws is None else linear_tradeoff(LEVELS, *laws), line["label"]))
    return panels


def _strongest_first(row: Row) -> tuple[float, float]:
    """Sort key: the smallest adjusted p-value first (NaN last), then the largest estimate."""
    return (math.inf if math.isnan(row.p_adjusted) else row.p_adjusted,
            math.inf if math.isnan(row.estimate) else -row.estimate)


def _member_rows(rows: Sequence[Row], family: Family) -> list[Row]:
    """The rows of the family's members that can refute it (class contained in the claim's), ran and kept their scores."""
    keys = {(d, None if a is None else round(a, 9), c, round(e, 9), round(delta, 9))
            for d, a, c, e, delta, _ in family.member_keys()}

    def key(row: Row) -> tuple:
        alpha = None if math.isnan(row.alpha) else round(row.alpha, 9)
        return row.divergence, alpha, row.claim_class, round(row.claim, 9), round(row.delta, 9)

    return [row for row in rows if key(row) in keys and row.refutes_claim and has_scores(row.held_out_scores)]


def _laws(config: Mapping[str, Any], pairs: Sequence[Mapping[str, Any]], evidence: ClassCurve) -> tuple | None:
    """(P, Q) of a built-in mechanism at the row's pair, in the row's direction; None when unknown or centred at an
    infinite record (a probe pair's: no finite closed form)."""
    from audit.mechanisms import make_mechanism

    spec = config.get("mechanism", {})
    pair = next((p for p in pairs if p.get("name") == evidence.pair), None)
    if "name" not in spec or pair is None:
        return None
    try:
        laws = make_mechanism(spec["name"], dict(spec.get("params", {}))).output_laws(
            np.asarray(pair["d"], dtype=float), np.asarray(pair["d_prime"], dtype=float))
    except Exception:  # an adapter whose library is missing, an unknown name: no exact curve
        return None
    if laws is None or not all(np.isfinite(law.mean()) for law in laws):  # an infinite record: no finite curve
        return None
    return laws if evidence.direction == "P|Q" else laws[::-1]
