"""attacks/witness_moments.py: summaries of witness values, added over blocks, give the evidence of the values.

The reference is the array computation written out here from the primitives
of :mod:`attacks.divergences` (the objectives, their influence terms with
:func:`numpy.var`, Hill's index, Kish's size, the unseen ratio), the formulas
``weight_evidence`` used before it summarised; the tolerance 1e-9 relative
is far above the rounding of sums of a few thousand terms (~1e-13) and far
below any statistical difference.
"""

from __future__ import annotations

import numpy as np
import pytest

from attacks.adversary import witness_log_weights, witness_objective
from attacks.divergences import (
    donsker_varadhan_influence,
    effective_sample_size,
    log_unseen_ratio,
    renyi_influence,
    tail_count,
    tail_index,
)
from attacks.estimate import moments_evidence, weight_evidence
from attacks.witness_moments import WitnessMoments

RTOL = 1e-9
N = 5_000
BLOCKS = (1, 17, 600, 2_382)  # uneven cuts of N: single values, small and large blocks, a remainder
ORDERS = [("kl", None), ("renyi", 1.1), ("renyi", 2.0), ("renyi", 8.0)]


def witnesses(kind: str, divergence: str, rng: np.random.Generator, n_p: int = N,
              n_q: int = N) -> tuple[np.ndarray, np.ndarray]:
    """Coupled-looking witness values on P and Q (row i of both from one draw when n_p == n_q)."""
    z = rng.standard_normal(max(n_p, n_q))
    z_p, z_q = z[:n_p] + 0.3 * rng.standard_normal(n_p), z[:n_q]
    if kind == "gaussian":
        h_p, h_q = 0.5 + 0.4 * z_p, 0.4 * z_q
        return (h_p, h_q) if divergence == "kl" else (1.0 + h_p, 1.0 + h_q)
    if kind == "heavy":  # exp of Student-t(3): a few values carry the weights' mean
        t_p, t_q = rng.standard_t(3, n_p), rng.standard_t(3, n_q)
        return np.exp(0.3 * t_p + 0.1), np.exp(0.3 * t_q)
    if kind == "huge":  # exp(h) and |g|^11 overflow without the shifts
        return (700.0 + z_p, 699.0 + z_q) if divergence == "kl" else (1e200 * (1.5 + 0.2 * z_p), 1e200 * (1 + 0.2 * z_q))
    if kind == "paired":  # moves alike on both outputs of a pair: var(infl_P - infl_Q) ~ 1e-8 var(infl_P)
        h_p, h_q = 1e-4 * z[:n_p], 1e-4 * (z[:n_q] - 0.1)
        return (h_p, h_q) if divergence == "kl" else (1.0 + h_p, 1.0 + h_q)
    if kind == "constant":
        return np.full(n_p, 0.5), np.full(n_q, 0.25)
    raise ValueError(kind)


def blockwise(w_p, w_q, divergence, alpha, cuts=BLOCKS, reverse=False) -> WitnessMoments:
    """The sum of the summaries of the blocks cut at ``cuts`` (both samples cut alike), the last block first if
    ``reverse``."""
    tail = tail_count(w_q.size) + 1
    edges = np.cumsum((0,) + cuts)
    parts = [WitnessMoments.from_values(w_p[a:b], w_q[a:b], divergence, alpha, tail)
             for a, b in zip(edges[:-1], np.r_[edges[1:-1], max(w_p.size, w_q.size)])]
    total = parts[::-1][0] if reverse else parts[0]
    for part in (parts[-2::-1] if reverse else parts[1:]):
        total = total + part
    return total


def reference(w_p, w_q, divergence, alpha, coupled) -> dict:
    """The evidence from the arrays (module docstring)."""
    if divergence == "kl":
        infl_p, infl_q = donsker_varadhan_influence(w_p, w_q)
    else:
        infl_p, infl_q = renyi_influence(w_p, w_q, alpha)
    variance = np.var(infl_p - infl_q) / w_p.size if coupled else np.var(infl_p) / w_p.size + np.var(infl_q) / w_q.size
    log_p, log_q = witness_log_weights(w_p, divergence, alpha), witness_log_weights(w_q, divergence, alpha)
    return dict(objective=witness_objective(w_p, w_q, divergence, alpha), standard_error=np.sqrt(variance),
                tail_index=tail_index(log_q), effective_sample_size=effective_sample_size(np.exp(log_q - log_q.max())),
                log_unseen_ratio=log_unseen_ratio(log_p, log_q))


def summarised(moments: WitnessMoments, coupled: bool) -> dict:
    return dict(objective=moments.objective(), standard_error=moments.standard_error(coupled),
                tail_index=moments.tail_index(), effective_sample_size=moments.effective_sample_size(),
                log_unseen_ratio=moments.log_unseen_ratio())


@pytest.mark.parametrize("kind", ["gaussian", "heavy", "huge", "paired", "constant"])
@pytest.mark.parametrize("divergence, alpha", ORDERS)
def test_blocks_added_give_the_evidence_of_the_values(kind, divergence, alpha):
    """Objective, standard errors (independent and coupled), tail index, effective size, unseen ratio and the
    caveat of the summed blocks equal the array computation; the tail index exactly (the same largest values)."""
    w_p, w_q = witnesses(kind, divergence, np.random.default_rng(7))
    moments = blockwise(w_p, w_q, divergence, alpha)
    assert moments.top_q.size == tail_count(N) + 1 and moments.n_p == moments.n_q == N
    for coupled in (False, True):
        expected, found = reference(w_p, w_q, divergence, alpha, coupled), summarised(moments, coupled)
        assert found["tail_index"] == expected.pop("tail_index")
        for name, value in expected.items():
            # 1e-15 absolute: the array's np.var of equal terms is round-off of their mean (6e-18), the summary's 0
            assert found[name] == pytest.approx(value, rel=RTOL, abs=1e-15), (name, coupled)
        summed, whole = moments_evidence(moments, coupled), weight_evidence(w_p, w_q, divergence, alpha, coupled)
        assert (summed["caveat"], summed["details"]["n_q"]) == (whole["caveat"], whole["details"]["n_q"])
        assert summed["standard_error"] == pytest.approx(whole["standard_error"], rel=RTOL, abs=1e-300)


def test_the_cases_reach_every_caveat():
    """The cases above are not all clean: a zero spread, a heavy kl tail and few effective terms each set theirs."""
    expected = {("constant", "kl", None): "the standard error is 0:", ("heavy", "kl", None): "heavy-tailed witness",
                ("heavy", "renyi", 1.1): "a few held-out samples carry the objective", ("gaussian", "kl", None): None}
    for (kind, divergence, alpha), start in expected.items():
        moments = blockwise(*witnesses(kind, divergence, np.random.default_rng(7)), divergence, alpha)
        caveat = moments_evidence(moments, True)["caveat"]
        assert caveat is None if start is None else caveat.startswith(start), (kind, divergence, caveat)


@pytest.mark.parametrize("divergence, alpha", ORDERS)
def test_block_order_changes_only_rounding(divergence, alpha):
    w_p, w_q = witnesses("gaussian", divergence, np.random.default_rng(3))
    forward, backward = (summarised(blockwise(w_p, w_q, divergence, alpha, reverse=reverse), True)
                         for reverse in (False, True))
    assert backward == pytest.approx(forward, rel=RTOL)


def test_unequal_samples_are_independent_only():
    """n_p != n_q, cut unevenly: the independent standard error equals the arrays'; no pairs, so coupled is refused."""
    w_p, w_q = witnesses("gaussian", "kl", np.random.default_rng(1), n_p=4_000, n_q=N)
    cut_q = np.r_[0, 1_000, 2_250, 3_500, N]
    parts = [WitnessMoments.from_values(w_p[1_000 * k:1_000 * (k + 1)], w_q[cut_q[k]:cut_q[k + 1]], "kl",
                                        tail=tail_count(N) + 1) for k in range(4)]
    total = parts[0] + parts[1] + parts[2] + parts[3]
    assert total.standard_error(False) == pytest.approx(reference(w_p, w_q, "kl", None, False)["standard_error"],
                                                        rel=RTOL)
    with pytest.raises(ValueError, match="row-aligned pairs"):
        total.standard_error(True)


def test_a_summary_too_short_in_the_tail_is_refused():
    w_p, w_q = witnesses("gaussian", "kl", np.random.default_rng(2))
    moments = WitnessMoments.from_values(w_p[:100], w_q[:100], "kl") + WitnessMoments.from_values(w_p, w_q, "kl",
                                                                                                  tail=5)
    with pytest.raises(ValueError, match="tail=tail_count"):
        moments.tail_index()
    with pytest.raises(ValueError, match="divergence must be one of"):
        WitnessMoments.from_values(w_p, w_q, "dp")


def test_the_separating_event_of_a_witness_with_one_value_per_law():
    """kl: h = 9 on P, 2 on Q gives {h > 5.5}; renyi: g = -3 on P, +-1 on Q gives {-(g + 2) > 0}; a spread of
    one part in 1e6, or a renyi |g_P| below |g_Q|, gives none (blocks added keep it)."""
    kl = WitnessMoments.from_values(np.full(50, 9.0), np.full(40, 2.0), "kl")
    assert kl.separating_event() == (5.5, 1)
    assert (kl + WitnessMoments.from_values(np.full(30, 9.0), np.full(30, 2.0), "kl")).separating_event() == (5.5, 1)
    renyi = WitnessMoments.from_values(np.full(50, -3.0), np.r_[np.ones(20), -np.ones(20)], "renyi", 2.0)
    assert renyi.separating_event() == pytest.approx((-2.0, -1))
    assert WitnessMoments.from_values(9.0 + 1e-6 * np.arange(50), np.full(40, 2.0), "kl").separating_event() is None
    assert WitnessMoments.from_values(np.full(50, 0.5), np.full(40, 2.0), "renyi", 2.0).separating_event() is None
