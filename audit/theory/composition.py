"""The right-hand sides of CBDP's composition theorems, OAKL's Lemmas 5 and 7, and their hypotheses (docs/theory.md
sections 5 and 8).

``[[checks]]`` (:mod:`audit.engine.checks`) measure both sides of these theorems;
this module holds the statements and the bounds, as pure functions of the
parts' epsilons, and says when a restricted class leaves a theorem's
hypotheses (:func:`sum_class_hypothesis`, :func:`post_processing_hypothesis`).
OAKL is Wang, Lei and Fienberg, "On-Average KL-Privacy and its equivalence to
Generalization for Max-Entropy Mechanisms" (2016).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attacks.classes import LINEAR, parse_function_class
from audit.theory import bounds

THEOREMS = {
    "sequential": "CBDP Thm 4 (non-adaptive sequential composition): Gamma^(H1+H2)((M1, M2)) <= eps1 + eps2",
    "parallel": "CBDP Thm 3 (parallel composition, disjoint data): Gamma^(H1+H2)((M1(D1), M2(D2))) <= max(eps1, eps2)",
    "post-processing": "CBDP Thm 1 (post-processing, i o g in H): Gamma^I(g(M)) <= eps",
    "convexity": "CBDP Thm 2 (convexity, f-divergences): Gamma^H(lambda M1 + (1 - lambda) M2) <= max(eps1, eps2)",
    "pinsker": "CBDP Thm 7 (Pinsker-like): IPM^H <= 8 sqrt(KL^H)",
    "generalization": "CBDP Thm 6 (generalization): |E gap| <= 8 sqrt(eps), eps the (H, KL) parameter",
    "on-average-post-processing": "OAKL Lemma 5 (post-processing, any measurable g): E KL(g(M(Z)) || g(M(Z'))) "
                                  "<= E KL(M(Z) || M(Z')) = eps",
    "on-average-composition": "OAKL Lemma 7 (adaptive composition): E KL((M1, M2)(Z) || (M1, M2)(Z')) <= eps1 + eps2",
}
"""The statement of each property a check measures (docs/theory.md section 5)."""


def theorem_bound(prop: str, parts: Sequence[float]) -> float:
    """The right-hand side of the theorem from the parts' eps (or, for pinsker, KL^H).

    sequential: eps1 + eps2 (CBDP Thm 4); parallel, convexity: max(eps1, eps2)
    (Thms 3, 2); post-processing: eps of M (Thm 1); pinsker: 8 sqrt(KL^H)
    (Thm 7); generalization: 8 sqrt(eps) (Thm 6); on-average-post-processing:
    the mechanism's on-average KL (OAKL Lemma 5: the data-processing
    inequality pair by pair, then the expectation over pairs);
    on-average-composition: eps1 + eps2 (OAKL Lemma 7: the chain rule of KL
    pair by pair, M2's on-average KL at most eps2 for every output of M1).
    NaN when a part is NaN.
    """
    if prop not in THEOREMS:
        raise ValueError(f"property must be one of {tuple(THEOREMS)}. Found {prop!r}.")
    if not parts or any(math.isnan(value) for value in parts):
        return math.nan
    if prop in ("sequential", "on-average-composition"):
        return bounds.sequential_composition(*parts)
    if prop in ("parallel", "convexity"):
        return bounds.parallel_composition(*parts)
    if prop in ("post-processing", "on-average-post-processing"):
        return float(parts[0])
    if prop == "pinsker":
        return bounds.pinsker_ipm_bound(parts[0])
    return bounds.generalization_bound(parts[0])


def sum_class_hypothesis(function_class: str) -> str | None:
    """Why the class on a concatenated release is not the sum class H1 (+) H2 of CBDP Thms 3 and 4, None for linear,
    where it is."""
    if parse_function_class(function_class) == LINEAR:
        return None
    return (f"class {function_class!r} on the concatenated output is not the sum class H1 (+) H2 "
            "of the theorem (only linear is)")


def post_processing_hypothesis(map_: str | Sequence[Sequence[float]], function_class: str) -> str | None:
    """Why i o g leaves the class (CBDP Thm 1's hypothesis), None when it stays in it: a named map is nonlinear
    (post-processing widens the adversary's class, CBDP blog); a matrix needs a class closed under linear maps."""
    if isinstance(map_, str):
        return (f"map {map_!r} is nonlinear: i o g is not in {function_class!r} "
                "(post-processing widens the adversary's class, CBDP blog)")
    if not parse_function_class(function_class).closed_under_linear_maps:
        return f"class {function_class!r} is not closed under linear maps of its input: i o g is not in it"
    return None
