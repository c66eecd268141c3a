"""Lower bounds on KL and Renyi divergences from the counts of one event (the data processing inequality).

For any event S of the outputs, the map x -> 1_S(x) is post-processing, so
by the data processing inequality every f-divergence and every Renyi
divergence of P and Q is at least that of Bernoulli(p) and Bernoulli(q),
p = P(S), q = Q(S) (docs/theory.md section 7).  Restricted to a class H it
holds for every H that contains the affine maps a 1_S + b of the event's
indicator (the sets of ``threshold``, ``atoms`` and ``floatbits``, every
event for ``all``; a witness's level set where the witness takes two values):
their restricted divergence is at least the binary divergence of S.

The binary divergences (closed forms, :func:`binary_divergence`)::

    KL:           d(p, q) = p log(p / q) + (1 - p) log((1 - p) / (1 - q)),
    Renyi (a>1):  d(p, q) = log(p^a q^(1 - a) + (1 - p)^a (1 - q)^(1 - a)) / (a - 1).

Both are jointly convex in (p, q) (KL as an f-divergence; Renyi as an
increasing function of the convex alpha-divergence), zero on the diagonal
p = q, increasing in p and decreasing in q where p > q (and the reverse
where p < q).  Their minimum over a box [p_low, p_high] x [q_low, q_high]
is therefore at the box's point closest to the diagonal
(:func:`box_minimum`): 0 when the intervals overlap, d(p_low, q_high) when
the box lies below p = q's upper side (p_low > q_high), d(p_high, q_low)
when above.  Their maximum over a box is at one of its corners
(:func:`box_maximum`).

The lower bound (:func:`event_divergence_bound`) at confidence ``level`` is
that minimum over the box of exact Clopper-Pearson (1934) bounds, each at
confidence 1 - (1 - level) / 2 (Bonferroni): with the event oriented before
the data (S is where P is expected to put more mass than Q, as the attack
sets of :mod:`attacks.adversary` are), P(S) >= p_low and Q(S) <= q_high
together with probability at least ``level``, and then d(p, q) >=
d(p_low, q_high) whenever p_low > q_high, by the monotonicity above.  It
rests on nothing but each count being binomial.  It is finite: a finite
sample never proves an infinite divergence; its ceiling
(:func:`event_divergence_ceiling`), the bound at complete separation
(k_p = n_p, k_q = 0), is about log(n / log(2 / (1 - level))): for KL at 95 %, 3.04 at 100
held-out outputs per law, 7.20 at 5 000.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import rel_entr

from attacks.binomial_ratio import clopper_pearson_bounds, smoothed_proportion, split_p_value
from attacks.vocabulary import KL, Divergence, Renyi


def binary_divergence(p, q, divergence: Divergence):
    """The KL or Renyi divergence of Bernoulli(p) from Bernoulli(q) (module docstring), vectorised.

    0 log 0 = 0; +inf where q (or 1 - q) is 0 and p (or 1 - p) is not.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    match divergence:
        case KL():
            value = rel_entr(p, q) + rel_entr(1.0 - p, 1.0 - q)
        case Renyi(alpha=alpha):
            value = np.logaddexp(_power_term(p, q, alpha), _power_term(1.0 - p, 1.0 - q, alpha)) / (alpha - 1.0)
        case _:
            raise ValueError(f"divergence must be kl or renyi (a binary divergence). Found {divergence}.")
    value = np.maximum(value, 0.0)  # rounding near the diagonal
    return float(value) if value.ndim == 0 else value


def _power_term(p: np.ndarray, q: np.ndarray, alpha: float) -> np.ndarray:
    """log(p^alpha q^(1 - alpha)): -inf where p = 0, +inf where q = 0 < p."""
    with np.errstate(divide="ignore", invalid="ignore"):
        term = alpha * np.log(p) + (1.0 - alpha) * np.log(q)
    return np.where(p == 0.0, -np.inf, np.where(q == 0.0, np.inf, term))


def box_minimum(p_low, p_high, q_low, q_high, divergence: Divergence):
    """The minimum of the binary divergence over [p_low, p_high] x [q_low, q_high] (module docstring).

    The box's point closest to the diagonal: 0 where the two intervals meet,
    d(p_low, q_high) where p_low > q_high, d(p_high, q_low) where p_high < q_low.
    Vectorised.
    """
    p_low, p_high, q_low, q_high = np.broadcast_arrays(*(np.asarray(x, dtype=float)
                                                          for x in (p_low, p_high, q_low, q_high)))
    above = binary_divergence(p_low, np.minimum(q_high, p_low), divergence)
    below = binary_divergence(p_high, np.maximum(q_low, p_high), divergence)
    value = np.where(p_low > q_high, above, np.where(p_high < q_low, below, 0.0))
    return float(value) if value.ndim == 0 else value


def box_maximum(p_low, p_high, q_low, q_high, divergence: Divergence):
    """The maximum of the binary divergence over the box: a convex function's, at one of the four corners."""
    corners = [binary_divergence(p, q, divergence) for p in (p_low, p_high) for q in (q_low, q_high)]
    value = np.maximum.reduce([np.asarray(corner) for corner in corners])
    return float(value) if value.ndim == 0 else value


def event_divergence_bound(k_p, n_p, k_q, n_q, divergence: Divergence, level: float, lower: bool = True):
    """One-sided confidence bound at ``level`` on the binary divergence of an event with counts k_p of n_p, k_q of n_q.

    Lower: :func:`box_minimum` over [p_low, 1] x [0, q_high], the one-sided
    Clopper-Pearson bounds of an event oriented toward P, each at confidence
    1 - (1 - level) / 2 (module docstring); 0 where the counts show no excess
    of P.  Upper: :func:`box_maximum` over the two-sided Clopper-Pearson
    intervals, each end at confidence 1 - (1 - level) / 4 (+inf when a count
    of Q is 0 or n_q and P's is not).  A lower bound on the divergence of
    every class containing the event's indicator (data processing
    inequality).  Vectorised over counts.
    """
    if lower:
        split = 1.0 - (1.0 - level) / 2.0
        p_low, _ = clopper_pearson_bounds(k_p, n_p, split)
        _, q_high = clopper_pearson_bounds(k_q, n_q, split)
        return box_minimum(p_low, 1.0, 0.0, q_high, divergence)
    split = 1.0 - (1.0 - level) / 4.0
    return box_maximum(*clopper_pearson_bounds(k_p, n_p, split), *clopper_pearson_bounds(k_q, n_q, split), divergence)


def event_divergence_p_value(k_p: int, n_p: int, k_q: int, n_q: int, divergence: Divergence, claim: float) -> float:
    """One-sided p-value of H0: d(P(S), Q(S)) <= claim, consistent with :func:`event_divergence_bound`:
    p <= 1 - level exactly when the lower bound at ``level`` reaches the claim."""
    return split_p_value(lambda level: event_divergence_bound(k_p, n_p, k_q, n_q, divergence, level), claim)


def event_divergence_ceiling(n_p, n_q, divergence: Divergence, level: float):
    """The largest lower bound n_p and n_q outputs can give: :func:`event_divergence_bound` at k_p = n_p, k_q = 0.

    About log(n / log(2 / (1 - level))) for n_p = n_q = n; no mechanism, however far from its claim, is shown
    further from it by the counts of one event at these sizes.
    """
    return event_divergence_bound(n_p, n_p, 0, n_q, divergence, level)


def smoothed_event_divergence(k_p, n_p, k_q, n_q, divergence: Divergence):
    """The binary divergence of the proportions smoothed by a half count, (k + 1/2) / (n + 1): a finite point
    estimate (:func:`attacks.binomial_ratio.smoothed_proportion`).  Vectorised."""
    return binary_divergence(smoothed_proportion(k_p, n_p), smoothed_proportion(k_q, n_q), divergence)


def projected_event_bound(k_p, n_p, k_q, n_q, divergence: Divergence, level: float, n_eval: int):
    """A lower bound to choose an event by, before it is counted on ``n_eval`` fresh outputs per law.

    The lower bound (:func:`event_divergence_bound`) at the counts that P's
    one-sided lower Clopper-Pearson bound at ``level`` on the observed count
    and Q's observed proportion project to ``n_eval`` outputs: a rare event
    whose few counts of P show a large divergence (a winner's curse) wins only
    when those counts pin it down, while an event that Q's outputs never
    showed keeps the bound its separation promises.  Vectorised over counts.
    """
    mass_p, _ = clopper_pearson_bounds(k_p, n_p, level)
    mass_q = np.asarray(k_q, dtype=float) / np.asarray(n_q, dtype=float)
    return np.asarray(event_divergence_bound(mass_p * n_eval, n_eval, mass_q * n_eval, n_eval, divergence, level))


EVENT_NOTE = "bound from the counts of one event"
"""How the note of a ``kl`` or ``renyi`` row bounded by one event's counts begins (:func:`event_note`)."""


def event_note(evidence: Any, confidence: float) -> list[str]:
    """The note of a ``kl`` or ``renyi`` bound from one event's counts (:mod:`attacks.event_divergence`): the
    counts, the interval, and the ceiling at the audit's confidence that these sample sizes allow ([] for others)."""
    if not getattr(evidence, "event", False):
        return []
    k_p, n_p, k_q, n_q = (int(evidence.details[key]) for key in ("k_p", "n_p", "k_q", "n_q"))
    return [f"{EVENT_NOTE}: {k_p} of {n_p} outputs of P, {k_q} of {n_q} of Q; binary divergence over their "
            f"Clopper-Pearson intervals (data processing), ceiling {evidence.ceiling(confidence):.4g} at these sizes"]
