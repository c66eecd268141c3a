"""A claim typed by hand, stated for neighbours, carried to pairs k records apart (group privacy).

A ``[[claims]]`` entry the user types bounds neighbouring datasets (one
record apart).  When ``[neighbours] distance`` lists several distances, each
pair k records apart is judged against the claim at k, from the rule that
holds for any mechanism satisfying the claim (docs/theory.md section 1,
"Pairs at several distances"):

- ``dp`` (ε, δ): (kε, k e^{(k-1)ε} δ) (Dwork and Roth 2014, Theorem 2.2 for
  δ = 0; the chain of k neighbours D_0, ..., D_k gives δ (e^{kε} - 1) / (e^ε - 1)
  <= k e^{(k-1)ε} δ).  The chain holds set by set, so a claim over a class of
  sets holds at k over the same class.
- ``ipm``: kε (the triangle inequality of an integral probability metric
  over any one class).
- ``zcdp`` ρ: k²ρ (Bun and Steinke 2016, Proposition 1.9), over ``function_class
  = "all"`` only: its proof is the weak triangle inequality of the Rényi
  divergence itself.
- ``gdp`` μ: kμ (Dong, Roth and Su 2022, group privacy of
  μ-GDP), ``"all"`` only.

``kl``, ``renyi`` and ``profile`` claims, and restricted zCDP or Gaussian-DP
claims, have no such rule and are refused (:func:`group_claim` raises).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from attacks.classes import All, parse_function_class
from attacks.vocabulary import DP, GDP, IPM, ZCDP, divergence_kind

RULES = {DP: "(k·ε, k·e^((k−1)ε)·δ)", IPM: "k·ε", ZCDP: "k²·ρ (function_class = \"all\")",
         GDP: "k·μ (function_class = \"all\")"}
"""The divergences a hand-typed claim can be carried to k records apart, and the rule (for messages and docs)."""
_WHOLE_LAW = (ZCDP, GDP)
"""Rules proved for the whole law only (the divergence itself, not a restriction to a class)."""


def group_epsilon(kind: type, epsilon: float, k: int) -> float:
    """The claimed value at k records apart of a claim of ``kind`` stated at 1 (module docstring)."""
    return epsilon * k * k if kind is ZCDP else epsilon * k


def group_delta(epsilon: float, delta: float, k: int) -> float:
    """δ of an (ε, δ)-DP claim at k records apart: k e^{(k-1)ε} δ (module docstring)."""
    return 0.0 if delta == 0.0 else min(k * math.exp((k - 1) * epsilon) * delta, 1.0)


def group_claim(table: Mapping[str, Any], k: int, path: str) -> dict:
    """The ``[[claims]]`` entry ``table`` (stated for neighbours) at k records apart.

    Raises ``ValueError`` naming the field, the value and the fix where no
    sound rule carries the claim to k (module docstring).
    """
    if k == 1:
        return dict(table)
    name = table.get("divergence")
    try:
        kind = divergence_kind(name)
    except (KeyError, ValueError, TypeError):
        kind = None
    accepted = ", ".join(f"{rule_kind.name}: {rule}" for rule_kind, rule in RULES.items())
    if kind not in RULES:
        raise ValueError(f"{path}.divergence: a {name} claim typed by hand cannot be carried to pairs {k} records "
                         f"apart (no group-privacy rule holds for it); audit one distance (neighbours.distance = 1), "
                         f"or use from = \"library\" or one of {accepted}. Found {name!r}.")
    if kind in _WHOLE_LAW and not _whole_law(table.get("function_class")):
        raise ValueError(f"{path}.function_class: the group-privacy rule of a {name} claim ({RULES[kind]}) holds for "
                         "the whole law only; use function_class = \"all\", or audit one distance "
                         f"(neighbours.distance = 1). Found {table.get('function_class')!r}.")
    if "accountant" in table:
        raise ValueError(f"{path}.accountant: an accountant's epsilon is stated for neighbours; audit one distance "
                         "(neighbours.distance = 1).")
    scaled = dict(table)
    epsilon = float(table.get("epsilon", 0.0))
    scaled["epsilon"] = group_epsilon(kind, epsilon, k)
    if "delta" in table:
        scaled["delta"] = group_delta(epsilon, float(table["delta"]), k)
    return scaled


def _whole_law(function_class: Any) -> bool:
    """Whether a claim's class is every test (``"all"``): the claim bounds the divergence itself."""
    try:
        return isinstance(parse_function_class(function_class), All)
    except (TypeError, ValueError):
        return False
