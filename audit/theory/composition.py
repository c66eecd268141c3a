"""The right-hand sides of CBDP's composition theorems and their kin (docs/theory.md section 5).

``[[checks]]`` (:mod:`audit.engine.checks`) measure both sides of these theorems;
this module holds the statements and the bounds, as pure functions of the
parts' epsilons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from audit.theory import bounds

THEOREMS = {
    "sequential": "CBDP Thm 4 (non-adaptive sequential composition): Gamma^(H1+H2)((M1, M2)) <= eps1 + eps2",
    "parallel": "CBDP Thm 3 (parallel composition, disjoint data): Gamma^(H1+H2)((M1(D1), M2(D2))) <= max(eps1, eps2)",
    "post-processing": "CBDP Thm 1 (post-processing, i o g in H): Gamma^I(g(M)) <= eps",
    "convexity": "CBDP Thm 2 (convexity, f-divergences): Gamma^H(lambda M1 + (1 - lambda) M2) <= max(eps1, eps2)",
    "pinsker": "CBDP Thm 7 (Pinsker-like): IPM^H <= 8 sqrt(KL^H)",
    "generalization": "CBDP Thm 6 (generalization): |E gap| <= 8 sqrt(eps), eps the (H, KL) parameter",
}
"""The statement of each property a check measures (docs/theory.md section 5)."""


def theorem_bound(prop: str, parts: Sequence[float]) -> float:
    """The right-hand side of the theorem from the parts' eps (or, for pinsker, KL^H).

    sequential: eps1 + eps2 (CBDP Thm 4); parallel, convexity: max(eps1, eps2)
    (Thms 3, 2); post-processing: eps of M (Thm 1); pinsker: 8 sqrt(KL^H)
    (Thm 7); generalization: 8 sqrt(eps) (Thm 6).  NaN when a part is NaN.
    """
    if prop not in THEOREMS:
        raise ValueError(f"property must be one of {tuple(THEOREMS)}. Found {prop!r}.")
    if not parts or any(math.isnan(value) for value in parts):
        return math.nan
    if prop == "sequential":
        return bounds.sequential_composition(*parts)
    if prop in ("parallel", "convexity"):
        return bounds.parallel_composition(*parts)
    if prop == "post-processing":
        return float(parts[0])
    if prop == "pinsker":
        return bounds.pinsker_ipm_bound(parts[0])
    return bounds.generalization_bound(parts[0])
