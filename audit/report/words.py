"""Claims, divergences and rows in words for report.md: the labels every section of the report shares.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from attacks.vocabulary import DP, divergence_kind
from audit.results.schema import Row
from audit.report.tables import format_number
from audit.results.verdicts import NOT_AUDITED


def claim_label(divergence: str, claim_class: Any, claim: Any, alpha: Any = None, delta: Any = None,
                d_in: Any = None) -> str:
    """A claim in words, e.g. ``(all, DP epsilon) <= 1 at delta=1e-06`` (delta shown when a dp claim has one), and
    ``for pairs at d_in = 2`` for a claim held at one of several distances."""
    kind = divergence_kind(divergence)
    order = f" alpha={format_number(alpha)}" if kind.has_order and alpha is not None and not pd.isna(alpha) else ""
    shown = kind is DP and isinstance(delta, (int, float)) and delta and not math.isnan(delta)
    slack = f" at delta={format_number(delta)}" if shown else ""
    distance = "" if d_in is None or pd.isna(d_in) else f" for pairs at d_in = {format_number(d_in)}"
    return f"({claim_class}, {kind.label}{order}) <= {format_number(claim)}{slack}{distance}"


def claim_title(divergence: str, claim_class: Any, claim: Any, on_average: bool = False, delta: Any = None,
                d_in: Any = None) -> str:
    label = claim_label(divergence, claim_class, claim, delta=delta, d_in=d_in)
    return f"Claim{' (on average)' if on_average else ''}: {label}"


def divergence_label(divergence: str, alpha: Any) -> str:
    return f"{divergence}, alpha={format_number(alpha)}" if divergence_kind(divergence).has_order else str(divergence)


def row_claim(row: Row) -> str:
    """The claim a row answers, in words (:func:`claim_label`, a dp claim's delta included)."""
    return claim_label(row.divergence, row.claim_class, row.claim, row.alpha, row.delta, row.d_in)


def summary_label(claim: Mapping[str, Any]) -> str:
    """A claim summary in words: a curve claim's label, else :func:`claim_label` (on average: said first)."""
    return claim.get("label") or ("on average: " if claim.get("on_average") else "") + claim_label(
        claim["divergence"], claim["claim_class"], claim["claim"], claim["alpha"], claim.get("delta", 0.0),
        claim.get("d_in"))


def bold_unless_pass(verdict: str) -> str:
    return verdict if verdict in ("pass", NOT_AUDITED) else f"**{verdict}**"


def with_interval(row: Row) -> str:
    return f"{format_number(row.estimate)} [{format_number(row.ci_low)}, {format_number(row.ci_high)}]"


def inline_code(text: Any) -> str:
    """``text`` as one GitHub-flavoured inline code span on one line (a fence longer than any run of backticks in it)."""
    text = " ".join(str(text).split())
    longest = max([0, *(len(part) for part in re.findall("`+", text))])
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"
