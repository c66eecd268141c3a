"""A claim typed by hand, stated for pairs s records apart, carried to pairs k records apart (group privacy).

A ``[[claims]]`` entry the user types bounds every pair at most ``s`` apart
(its ``distance``: 1, neighbours, by default; a user-level claim, the records
one user owns).  A pair k apart is joined to the other dataset by a chain of
m = ⌈k / s⌉ pairs each at most s apart, and is judged against the claim
carried m steps, by the rule that holds for any mechanism satisfying it
(docs/theory.md section 1, "Pairs at several distances"):

- ``dp`` (ε, δ): (mε, m e^{(m-1)ε} δ) (Dwork and Roth 2014, Theorem 2.2 for
  δ = 0; the chain gives δ (e^{mε} - 1) / (e^ε - 1) <= m e^{(m-1)ε} δ).
  The chain holds set by set, so a claim over a class of sets holds at m over the same class.
- ``ipm``: mε (the triangle inequality of an integral probability metric
  over any one class).
- ``zcdp`` ρ: m²ρ (Bun and Steinke 2016, Proposition 1.9), over ``function_class
  = "all"`` only: its proof is the weak triangle inequality of the Rényi
  divergence itself.
- ``gdp`` μ: mμ (Dong, Roth and Su 2022, group privacy of
  μ-GDP), ``"all"`` only.

``kl``, ``renyi`` and ``profile`` claims, and restricted zCDP or Gaussian-DP
claims, have no such rule and are refused (:func:`group_claim` raises) at any
m > 1.  A carried value is rounded up (:func:`rounded_up`): never below the
rule's value, so rounding never turns a pass into a violation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

from attacks.classes import All, parse_function_class
from attacks.vocabulary import DP, GDP, IPM, ZCDP, divergence_kind

RULES = {DP: "(m·ε, m·e^((m−1)ε)·δ)", IPM: "m·ε", ZCDP: "m²·ρ (function_class = \"all\")",
         GDP: "m·μ (function_class = \"all\")"}
"""The divergences a hand-typed claim can be carried m steps, and the rule (for messages and docs)."""
_WHOLE_LAW = (ZCDP, GDP)
"""Rules proved for the whole law only (the divergence itself, not a restriction to a class)."""
DIGITS = 15
"""Significant digits a carried value is rounded up to (:func:`rounded_up`)."""


def steps(k: int, stated: int) -> int:
    """m = ⌈k / s⌉: the pairs at most ``stated`` apart in the shortest chain joining a pair ``k`` apart."""
    return -(-k // stated)


def rounded_up(exact: Fraction) -> float:
    """``exact`` as a float at or above it: rounded to :data:`DIGITS` significant digits where that float is not
    below it, else the smallest float that is not.

    A carried claim is a product such as 6 × 0.6 whose float, 3.5999999999999996, results.json would print while
    the report prints 3.6.  Rounded to 15 digits it is 3.6, and float 3.6 (3.600000000000000088...) is above
    6 × float(0.6) (3.599999999999999866...): the claim written is 3.6.  3 × 0.1 rounds to 0.3, whose float
    (0.299999999999999988...) is below 3 × float(0.1) (0.300000000000000016...): the claim written is the next
    float, 0.30000000000000004.  Never below the rule's value, so rounding cannot turn a pass into a violation;
    above it by at most 5 parts in 10¹⁵, which changes no verdict an interval from finite samples can resolve.
    """
    if exact <= 0:
        return float(exact)
    decimal = Context(prec=DIGITS).divide(Decimal(exact.numerator), Decimal(exact.denominator))
    for found in (float(decimal), float(exact)):
        if Fraction(found) >= exact:
            return found
    return math.nextafter(float(exact), math.inf)


def group_epsilon(kind: type, epsilon: float, m: int) -> float:
    """The claimed value carried m steps of a claim of ``kind`` (module docstring), rounded up (:func:`rounded_up`)."""
    return rounded_up(Fraction(epsilon) * (m * m if kind is ZCDP else m))


def group_delta(epsilon: float, delta: float, m: int) -> float:
    """δ of an (ε, δ)-DP claim carried m steps: m e^{(m-1)ε} δ (module docstring), rounded up, at most 1.

    e^{(m-1)ε} is a float within 10⁻¹⁵ of its value; the rule exceeds the chain's δ (e^{mε} - 1) / (e^ε - 1) by
    a relative (m - 1)(1 - e^{-ε}) / m or more, far beyond that for any ε above 10⁻¹⁴, and equals it at ε = 0,
    where the exponential is exactly 1.
    """
    if delta == 0.0:
        return 0.0
    if math.log(m) + (m - 1) * epsilon + math.log(delta) >= 0.0:  # at least 1 (and e^{(m-1)ε} may overflow)
        return 1.0
    return min(rounded_up(Fraction(m) * Fraction(math.exp((m - 1) * epsilon)) * Fraction(delta)), 1.0)


def group_claim(table: Mapping[str, Any], k: int, path: str, stated: int = 1) -> dict:
    """The ``[[claims]]`` entry ``table``, stated for pairs at most ``stated`` apart, at pairs ``k`` apart.

    The claim as typed where k <= ``stated``; else carried m = ⌈k / s⌉ steps.
    Raises ``ValueError`` naming the field, the value and the fix where no
    sound rule carries the claim that far (module docstring).
    """
    m = steps(k, stated)
    if m == 1:
        return dict(table)
    name = table.get("divergence")
    try:
        kind = divergence_kind(name)
    except (KeyError, ValueError, TypeError):
        kind = None
    accepted = ", ".join(f"{rule_kind.name}: {rule}" for rule_kind, rule in RULES.items())
    fix = (f"give {path}.distance = {k} if the claim is meant for pairs that far apart, or audit pairs at most "
           f"{stated} apart")
    if kind not in RULES:
        raise ValueError(f"{path}.divergence: a {name} claim typed by hand cannot be carried to pairs {k} records "
                         f"apart (it is stated for pairs at most {stated} apart, and no group-privacy rule holds for "
                         f"it); {fix}, or use from = \"library\" or one of {accepted}. Found {name!r}.")
    if kind in _WHOLE_LAW and not _whole_law(table.get("function_class")):
        raise ValueError(f"{path}.function_class: the group-privacy rule of a {name} claim ({RULES[kind]}) holds for "
                         f"the whole law only, and pairs {k} records apart need it; use function_class = \"all\", or "
                         f"{fix}. Found {table.get('function_class')!r}.")
    if "accountant" in table:
        raise ValueError(f"{path}.accountant: an accountant's epsilon is stated for neighbours, and pairs {k} records "
                         f"apart need it carried; audit pairs at most {stated} apart.")
    scaled = dict(table)
    epsilon = float(table.get("epsilon", 0.0))
    scaled["epsilon"] = group_epsilon(kind, epsilon, m)
    if "delta" in table:
        scaled["delta"] = group_delta(epsilon, float(table["delta"]), m)
    return scaled



def carried_tables(table: Mapping[str, Any], path: str, placed: Sequence[tuple[int, float | int, str]],
                   stated: int = 1) -> list[tuple[dict, float | int | None]]:
    """The ``[[claims]]`` entry ``table`` at each ``d_in`` of the audited pairs, and that ``d_in``.

    ``placed`` holds each pair (or each distance generated) as (k, its ``d_in``, its name for messages, "" for
    none).  ``[(table, None)]``, one claim for every pair, when no pair is farther than ``stated``; else the claim
    carried to each pair's k (:func:`group_claim`), one table per ``d_in``.  Raises ``ValueError`` naming the
    pair where no rule carries the claim, or where two pairs at one ``d_in`` (in the mechanism's input metric) need
    the claim carried a different number of steps.
    """
    if all(steps(k, stated) == 1 for k, _, _ in placed):
        return [(dict(table), None)]
    found: dict[float | int, tuple[dict, str]] = {}
    for k, d_in, name in placed:
        try:
            scaled = group_claim(table, k, path, stated)
        except ValueError as error:
            raise ValueError(f"{name}: {error}" if name else str(error)) from None
        if d_in in found and found[d_in][0] != scaled:
            raise ValueError(f"{name}: the pair is at d_in = {d_in} in the mechanism's input metric as {found[d_in][1]} "
                             f"is, but {k} records apart, where {path} carries to another value; audit the two pairs "
                             "in separate configs.")
        found[d_in] = (scaled, name)
    return [(found[d_in][0], d_in) for d_in in sorted(found)]


def _whole_law(function_class: Any) -> bool:
    """Whether a claim's class is every test (``"all"``): the claim bounds the divergence itself."""
    try:
        return isinstance(parse_function_class(function_class), All)
    except (TypeError, ValueError):
        return False
