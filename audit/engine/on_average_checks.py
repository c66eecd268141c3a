"""OAKL Lemmas 5 and 7 as ``[[checks]]``: on-average KL of a post-processed or composed release against its parts'.

OAKL is Wang, Lei and Fienberg, "On-Average KL-Privacy and its equivalence
to Generalization for Max-Entropy Mechanisms" (2016); docs/theory.md
section 8.  On-average KL privacy (OAKL Def. 2) is
E_{Z ~ D^n, z ~ D} KL(M(Z) || M([Z_-1, z])).

* ``on-average-post-processing`` (Lemma 5): for any measurable g,
  KL(g(M(Z)) || g(M(Z'))) <= KL(M(Z) || M(Z')) for every pair (data
  processing), so the on-average KL of g(M) is at most M's.
* ``on-average-composition`` (Lemma 7): (M1, M2) with M2 allowed to see
  M1's output; if M2(., h) is eps2-on-average KL private for every h, the
  chain rule of KL gives eps1 + eps2.  ``adaptive = true`` is
  :class:`audit.mechanisms.compose.Sequential`'s adaptive M2, which queries
  the data or a constant dataset according to M1's output: within the
  lemma (a constant query costs 0), unlike CBDP Thm 4.

Both sides are measured as an on-average claim is: K iid pairs (Z, Z'),
each pair's held-out estimate of the class's KL^H, averaged with the
Student-t interval over pairs (:meth:`audit.engine.checks._Context.averaged`,
:func:`audit.results.on_average.average_over_pairs`).  The pairs come from
the config's ``[neighbours] strategy = "on-average"`` table (its
``distribution`` and ``size``) when it has one, else from the first
mechanism's own data distribution (``sample_data`` and ``records``, the
built-in Gibbs mechanisms of :mod:`audit.mechanisms.gibbs`).

A part's eps is the check's ``epsilons`` when given (the parts' claimed
on-average KL: a contradiction then refutes a claim, the lemma being a
theorem), else its closed-form on-average KL (``mechanism.on_average_kl()``,
unrestricted) when the pairs are drawn from that mechanism's own D, else its
measured mean's upper confidence bound.  The lemmas bound the unrestricted
KL, which bounds KL^H for every class: with closed-form parts no hypothesis
on the class is needed (a nonlinear g, an adaptive M2 and any class are
within the lemmas).  With measured or claimed parts (a claim is about the
check's class) the bound is itself restricted, and the restricted
statements are CBDP's (Thm 1: i o g in H; Thm 4: the sum class,
non-adaptive) averaged over pairs: outside them the check is flagged
"hypothesis broken" (:mod:`audit.theory.composition`).

The runners return the pieces of the check's row
(:func:`audit.engine.checks._finish`): the level, the parts, the composed
measurements, the lemma's bound (:func:`audit.theory.composition.theorem_bound`)
the broken hypothesis, if any, and where the parts' eps come from.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.engine.plan import task_seed
from audit.inputs.data_distributions import make_sampler
from audit.inputs.pair_generators import on_average_pairs
from audit.mechanisms.compose import PostProcessed, Sequential
from audit.theory.composition import post_processing_hypothesis, sum_class_hypothesis, theorem_bound

Sides = tuple[float, list, list, float, "str | None", str]
"""What a runner returns: level, parts, composed measurements, the lemma's bound, the broken hypothesis (or None) and
where the parts' eps come from (:func:`eps_source`)."""


def check_pairs(ctx: Any, mechanism: Any) -> tuple[list[tuple[np.ndarray, np.ndarray]], bool]:
    """The check's ``n_pairs`` iid pairs Z ~ D^n, Z' = Z with its first record redrawn from D (OAKL Def. 2), and
    whether D is the mechanism's own (closed forms apply).

    D and n: ``[neighbours]``' ``distribution`` and ``size`` when its strategy is ``on-average``, else the
    mechanism's ``sample_data`` and ``records``.  Seeded by ``checks[i]|pairs``.
    """
    rng = np.random.default_rng(task_seed(ctx.config.run.seed, f"checks[{ctx.index}]|pairs"))
    neighbours = ctx.config.neighbours or {}
    if neighbours.get("strategy") == "on-average":
        sampler = make_sampler(neighbours["distribution"])
        return on_average_pairs(sampler, neighbours["size"], ctx.spec.n_pairs, rng), False
    if callable(getattr(mechanism, "sample_data", None)) and hasattr(mechanism, "records"):
        return on_average_pairs(mechanism.sample_data, mechanism.records, ctx.spec.n_pairs, rng), True
    raise ValueError(
        f"property {ctx.spec.property!r} draws pairs from a data distribution: mechanism {mechanism.name!r} has "
        'none; add [neighbours] strategy = "on-average" with distribution and size, or use a mechanism that '
        "carries one (gaussian_posterior_mean, laplace_truncated_mean, linear_regression_posterior)."
    )


def closed_form(mechanism: Any, own_data: bool) -> float | None:
    """The mechanism's on-average KL in closed form (``on_average_kl()``, OAKL Def. 2, unrestricted) when the
    pairs come from its own D and it has one, else None."""
    method = getattr(mechanism, "on_average_kl", None)
    return float(method()) if own_data and callable(method) else None


def same_data(first: Any, second: Any) -> bool:
    """Whether two mechanisms carry the same data distribution: as many records, and the same records drawn
    from one seed."""
    if getattr(first, "records", None) != getattr(second, "records", None) or not all(
            callable(getattr(m, "sample_data", None)) for m in (first, second)):
        return False
    draws = [m.sample_data(64, np.random.default_rng(0)) for m in (first, second)]
    return draws[0].shape == draws[1].shape and bool(np.array_equal(*draws))


def parts_epsilon(ctx: Any, parts: list) -> list[float]:
    """The parts' eps: the check's ``epsilons`` (claimed) when given, else each part's closed form or upper bound."""
    return list(ctx.spec.epsilons) if ctx.spec.epsilons is not None else [part.upper() for part in parts]


def eps_source(ctx: Any, parts: list) -> str:
    """Where the lemma's bound comes from, for the row's note: claimed, closed form or measured, per part."""
    if ctx.spec.epsilons is not None:
        return "eps: the parts' claimed on-average KL (epsilons)"
    return "eps: " + ", ".join(f"{part.role} {'closed form' if part.exact is not None else 'measured upper bound'}"
                               for part in parts)


def restricted(ctx: Any, parts: list) -> bool:
    """Whether the bound is restricted to the class (claimed or measured parts), so CBDP's hypotheses apply."""
    return ctx.spec.epsilons is not None or any(part.exact is None for part in parts)


def on_average_post_processing(ctx: Any) -> Sides:
    """OAKL Lemma 5: M and g(M) on the same pairs; the bound is M's on-average KL (module docstring)."""
    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    pairs, own = check_pairs(ctx, mechanism)
    level = ctx.level(2)
    part = ctx.averaged(mechanism, pairs, "M", level, exact=closed_form(mechanism, own))
    composed = ctx.averaged(PostProcessed(mechanism, spec.map), pairs, "g(M)", level)
    broken = post_processing_hypothesis(spec.map, spec.function_class) if restricted(ctx, [part]) else None
    return (level, [part], [composed], theorem_bound(spec.property, parts_epsilon(ctx, [part])), broken,
            eps_source(ctx, [part]))


def on_average_composition(ctx: Any) -> Sides:
    """OAKL Lemma 7: M1, M2 and (M1, M2) on the same pairs; the bound is eps1 + eps2 (module docstring)."""
    spec = ctx.spec
    first, second = (m.build() for m in spec.mechanisms)
    pairs, own = check_pairs(ctx, first)
    level = ctx.level(3)
    parts = [ctx.averaged(first, pairs, "M1", level, exact=closed_form(first, own)),
             ctx.averaged(second, pairs, "M2", level, exact=closed_form(second, own and same_data(first, second)))]
    composed = ctx.averaged(Sequential(first, second, adaptive=spec.adaptive), pairs, "(M1, M2)", level)
    broken = None
    if restricted(ctx, parts):
        broken = sum_class_hypothesis(spec.function_class)
        if spec.adaptive:
            broken = ("adaptive, with a part's eps measured on the class: OAKL Lemma 7 bounds the unrestricted KL, "
                      "and the restricted composition (CBDP Thm 4) is non-adaptive") + (f"; {broken}" if broken else "")
    return (level, parts, [composed], theorem_bound(spec.property, parts_epsilon(ctx, parts)), broken,
            eps_source(ctx, parts))
