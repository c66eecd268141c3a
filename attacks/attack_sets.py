"""Attack sets S = {s (g - t) > 0} chosen on training scores g: the threshold t and the side s.

An ``ipm`` or ``dp`` attack thresholds a real-valued score g (the class's
estimate of log dP/dQ, the Neyman-Pearson score) and keeps one side
(:mod:`attacks.adversary`); :func:`best_ipm_set` maximises the training
P(S) - Q(S) (CBDP Def. 4), :func:`best_dp_set` the lower bound the set
would get on held-out samples (docs/theory.md section 7), and
:func:`best_event_set` the projected lower bound on the set's binary ``kl``
or ``renyi`` divergence (:mod:`attacks.event_divergence`).
"""

from __future__ import annotations

import numpy as np

from attacks import paired_ratio
from attacks.binomial_ratio import projected_lower_bound
from attacks.event_divergence import projected_event_bound
from attacks.vocabulary import KL, Renyi

# Confidence at which the DP attack set is chosen on the training split.
_DP_SELECTION_LEVEL = 0.95
# At most this many candidate thresholds per side for the DP attack set.
_DP_CANDIDATES = 1000


def _cut_points(g_p: np.ndarray, g_q: np.ndarray) -> np.ndarray:
    """Midpoints between consecutive distinct values of the pooled scores."""
    values = np.unique(np.concatenate([g_p, g_q]))
    return (values[:-1] + values[1:]) / 2 if values.size > 1 else values


def _mass_above(sorted_values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Number of sorted values strictly greater than each threshold."""
    return sorted_values.size - np.searchsorted(sorted_values, thresholds, side="right")


def best_ipm_set(g_p: np.ndarray, g_q: np.ndarray) -> tuple[float, int]:
    """Threshold t and side s maximising P_n(S) - Q_n(S), S = {s (g - t) > 0}."""
    thresholds = _cut_points(g_p, g_q)
    tpr = _mass_above(np.sort(g_p), thresholds) / g_p.size
    fpr = _mass_above(np.sort(g_q), thresholds) / g_q.size
    best = int(np.argmax(np.abs(tpr - fpr)))
    return float(thresholds[best]), 1 if tpr[best] >= fpr[best] else -1


def best_dp_set(g_p: np.ndarray, g_q: np.ndarray, delta: float, eval_size: int, coupled: bool) -> tuple[float, int]:
    """Threshold t and side s maximising the epsilon lower bound expected on ``eval_size`` held-out samples.

    The bound is the projected lower bound at 95% of the training counts of S
    (docs/theory.md section 7): :func:`attacks.binomial_ratio.projected_lower_bound`
    for independent samples, :func:`attacks.paired_ratio.projected_lower_bound`
    for coupled pairs (g_p[i], g_q[i]), whose outputs both lie above t exactly
    when their minimum does, and both below when their maximum does.
    """
    thresholds = _cut_points(g_p, g_q)
    if thresholds.size > _DP_CANDIDATES:
        thresholds = thresholds[np.linspace(0, thresholds.size - 1, _DP_CANDIDATES).astype(int)]
    above_p = _mass_above(np.sort(g_p), thresholds)
    above_q = _mass_above(np.sort(g_q), thresholds)
    sides = [(1, above_p, above_q), (-1, g_p.size - above_p, g_q.size - above_q)]
    if coupled:
        both = (_mass_above(np.sort(np.minimum(g_p, g_q)), thresholds),
                g_p.size - _mass_above(np.sort(np.maximum(g_p, g_q)), thresholds))
    best = (-np.inf, float(thresholds[0]), 1)
    for index, (side, k_p, k_q) in enumerate(sides):
        if coupled:
            counts = np.column_stack([both[index], k_p - both[index], k_q - both[index], g_p.size - k_p - k_q + both[index]])
            bound = paired_ratio.projected_lower_bound(counts, delta, _DP_SELECTION_LEVEL, eval_size)
        else:
            bound = projected_lower_bound(k_p, g_p.size, k_q, g_q.size, delta, _DP_SELECTION_LEVEL, eval_size)
        at = int(np.argmax(bound))
        if bound[at] > best[0]:
            best = (float(bound[at]), float(thresholds[at]), side)
    return best[1], best[2]


def best_event_set(g_p: np.ndarray, g_q: np.ndarray, divergence: KL | Renyi, eval_size: int) -> tuple[float, int]:
    """Threshold t and side s maximising the projected lower bound on the binary divergence of S = {s (g - t) > 0}
    were it counted on ``eval_size`` held-out samples per law (:func:`attacks.event_divergence.projected_event_bound`)."""
    thresholds = _cut_points(g_p, g_q)
    if thresholds.size > _DP_CANDIDATES:
        thresholds = thresholds[np.linspace(0, thresholds.size - 1, _DP_CANDIDATES).astype(int)]
    above_p, above_q = _mass_above(np.sort(g_p), thresholds), _mass_above(np.sort(g_q), thresholds)
    best = (-np.inf, float(thresholds[0]), 1)
    for side, k_p, k_q in [(1, above_p, above_q), (-1, g_p.size - above_p, g_q.size - above_q)]:
        bound = projected_event_bound(k_p, g_p.size, k_q, g_q.size, divergence, _DP_SELECTION_LEVEL, eval_size)
        at = int(np.argmax(bound))
        if bound[at] > best[0]:
            best = (float(bound[at]), float(thresholds[at]), side)
    return best[1], best[2]
