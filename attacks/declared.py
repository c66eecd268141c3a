"""A declared statistic confirmed on every output: the white-box canary statistic, no training split.

A class whose witness is fixed before the data (:attr:`attacks.classes.FunctionClass.declared`:
``canary``, s(x) = x . v / |v| for a direction v given by the config or by
the mechanism) needs no output to train it, so an audit of a ``dp`` claim
spends all ``n`` outputs per dataset of a pair on scoring it
(:func:`declared_estimate`).  Its law P is the pair's second dataset's
(P = M(d'), the side the declared direction is large on: direction
``Q|P``), Q the first's.

The set is S_j = {s > t_j}, t_j = the j-th smallest of Q's n scores (a score
that is not finite counts as +inf, as in :func:`attacks.gdp_route.threshold_tests`),
with k = n - j chosen from the claim alone before any output is drawn
(:func:`claim_count`): the count that maximises the lower bound the row would
get were the mechanism exactly at the claim, P(S) = ``claim_curve(Q(S))``.
Validity of its count bound: with X = F^-1(U) (quantile coupling),
Q(S_j) = 1 - F(t_j) <= 1 - U_(j) ~ Beta(n - j + 1, j) (equality for a
continuous F), and P(1 - U_(j) > u) = P(Binomial(n, u) <= n - j): exactly
the probability a fixed set's Q-count of n - j has at Q(S) = u, so the
Clopper-Pearson and score bounds of :func:`attacks.binomial_ratio.log_ratio_bound`
read k_q = n - j as they read a fixed set's count; given t_j the count of
P's independent scores in S_j is Binomial(n, P(S_j)).  So the row is a
held-out estimate of one fixed statistic, judged in Holm's family like any
other (:mod:`audit.results.verdicts`), and a lower bound for ``linear`` and
every class containing it (``canary`` is one member of it).

Its binned scores carry the Gaussian-DP route's threshold tests on all n
outputs per dataset (:func:`attacks.estimate.score_histogram`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attacks import binomial_ratio
from attacks.candidates import Candidate, Sampler, Target
from attacks.estimate import DivergenceEstimate, score_histogram
from attacks.features import declared_direction
from attacks.held_out import CHUNK, count_estimate
from attacks.vocabulary import DP, divergence_of

DIRECTION = "Q|P"
"""A declared statistic is large on M(d') (the dataset with the canary): P = M(d'), Q = M(d)."""
_COUNTS = 64
"""Candidate Q-counts k of :func:`claim_count`: 0 and about this many on a geometric grid up to n / 2."""


def claim_count(n: int, claim_curve: Callable[[np.ndarray], np.ndarray], delta: float, level: float) -> int:
    """The Q-count k = n - j of S_j, chosen before the data: the k whose lower bound on log((P(S) - delta) / Q(S))
    at ``level`` is largest when Q(S) = (k + 1) / (n + 1) (the mean of 1 - U_(j)) and n P(S) =
    n ``claim_curve(Q(S))`` outputs of P fall in S (rounded)."""
    counts = np.unique(np.r_[0, np.round(np.geomspace(1, max(n // 2, 1), _COUNTS))].astype(int))
    p_counts = np.round(n * np.clip(claim_curve((counts + 1.0) / (n + 1.0)), 0.0, 1.0)).astype(int)
    bounds = [binomial_ratio.log_ratio_bound(int(k_p), n, int(k), n, delta, level, True)
              for k_p, k in zip(p_counts, counts)]
    return int(counts[int(np.argmax(bounds))])


def declared_estimate(sample: Sampler, pair: int, function_class: str, direction, target: Target, n: int,
                      claim_curve: Callable[[np.ndarray], np.ndarray], level: float,
                      chunk: int = CHUNK) -> tuple[Candidate, DivergenceEstimate]:
    """The declared statistic of ``function_class`` on ``n`` outputs per dataset of ``pair`` (stage ``confirm``).

    Parameters
    ----------
    sample : Sampler
    pair : int
    function_class : str
        A declared class (``canary``).
    direction : sequence of float
        Its direction v, declared before the data.
    target : Target
        A ``dp`` target (its delta).
    n : int
        Outputs per dataset, all scored.
    claim_curve : callable
        Q(S) -> P(S) of a mechanism exactly at the claim (chooses k, :func:`claim_count`).
    level : float
        The confidence the projected bound of :func:`claim_count` is read at.
    chunk : int
        Outputs per dataset drawn at once.

    Returns
    -------
    (Candidate, DivergenceEstimate)
        The candidate (direction ``Q|P``) and the estimate of S_j's counts, ``details["scores"]`` the binned scores
        of all n outputs with the Gaussian-DP route's tests.

    Raises
    ------
    ValueError
        For a target that is not ``dp`` or coupled samples (the order-statistic argument needs independent ones).
    """
    if not isinstance(divergence_of(target), DP):
        raise ValueError(f"a declared statistic is scored on every output for divergence 'dp' only. "
                         f"Found {target.divergence!r}.")
    candidate = Candidate(pair, True, function_class)
    projection = declared_direction(direction)[-1].fit()  # the Projection: nothing to fit
    scores_p, scores_q = [], []
    for index, begin in enumerate(range(0, n, chunk)):
        draw = sample(pair, min(chunk, n - begin), "confirm", index)
        if draw.coupled:
            raise ValueError("a declared statistic scored on every output needs independent samples of the two "
                             "datasets; set attacks.coupled = false.")
        p, q = candidate.laws(draw)
        scores_p.append(projection.transform(p)[:, 0])
        scores_q.append(projection.transform(q)[:, 0])
    s_p = np.nan_to_num(np.concatenate(scores_p), nan=np.inf)
    s_q = np.sort(np.nan_to_num(np.concatenate(scores_q), nan=np.inf))
    k_q = claim_count(n, claim_curve, target.delta, level)
    threshold = s_q[n - k_q - 1]  # t_j, j = n - k_q
    k_p = int(np.count_nonzero(s_p > threshold))
    both = max(0, k_p + k_q - n)  # independent samples: only the margins are read
    estimate = count_estimate(np.array([both, k_p - both, k_q - both, n - k_p - k_q + both]), target,
                              function_class, False)
    scores = score_histogram(s_p, s_q, float(threshold), 1)
    return candidate, DivergenceEstimate(**{**estimate.__dict__, "details": {
        **estimate.details, "threshold": float(threshold), "side": 1, "scores": scores}})
