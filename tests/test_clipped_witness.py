"""A kl / renyi witness confirmed with its clipped betting bound beside the delta method (attacks.clipped_witness).

The estimand of a :class:`ClippedWitnessEstimate` is max(theta_delta, theta_clipped): the objective of the
witness and of its clip, each at most the divergence restricted to a class closed under clipping.  For a fixed
(not fitted) witness both are computed by quadrature, so coverage is checked against them directly.
"""

from __future__ import annotations

import functools
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attacks.candidates import Candidate, Target
from attacks.clipped_witness import ClippedWitnessEstimate, StreamedWitness, clipped_serves, start_betting
from attacks.held_out import witness_estimate
from attacks.witness_moments import WitnessMoments
from audit import run_audit
from audit.engine.store import evidence_from_record
from audit.theory.exact import restricted_divergence

LAPLACE_KL = {
    "mechanism": {"name": "laplace", "params": {"epsilon": 2.0}},
    "claims": [{"divergence": "kl", "function_class": "all", "epsilon": 5.0},
               {"divergence": "kl", "function_class": "linear", "epsilon": 5.0}],
    "attacks": {"classes": ["linear"], "n_samples": 3_000},
    "run": {"seed": 0, "n_jobs": 1},
}
COLUMNS = ["function_class", "claim_class", "estimate", "ci_low", "ci_high", "interval", "verdict", "p_adjusted"]
QUADRATURE = np.linspace(-40.0, 41.0, 400_001)
LAWS = {"laplace": (stats.laplace(0, 0.5), stats.laplace(1, 0.5)), "gaussian": (stats.norm(0, 1), stats.norm(1, 1))}
SLOPE = {"kl": 0.6, "renyi": 0.5}  # kl: h = -0.6 x (e^h has a finite variance under Q); renyi: g = 1 - 0.5 x


def _witness(divergence: str, x: np.ndarray) -> np.ndarray:
    return -SLOPE["kl"] * x if divergence == "kl" else 1.0 - SLOPE["renyi"] * x


@functools.cache
def _densities(law: str) -> tuple[np.ndarray, np.ndarray]:
    """The two laws' densities on :data:`QUADRATURE` times its step."""
    step = QUADRATURE[1] - QUADRATURE[0]
    return tuple(side.pdf(QUADRATURE) * step for side in LAWS[law])


def _objective(law: str, divergence: str, f: np.ndarray) -> float:
    p, q = _densities(law)
    if divergence == "kl":
        return float(p @ f - np.log(q @ np.exp(f)))
    return float(2.0 * np.log(p @ f) - np.log(q @ np.abs(f) ** 2.0))


def _estimate(law: str, divergence: str, n: int, seed: int, blocks: int = 1) -> ClippedWitnessEstimate:
    """The estimate of the fixed witness on n confirm outputs (its slope, range and windows from n training
    outputs), fed in ``blocks`` blocks."""
    p, q = LAWS[law]
    target = Target(divergence, ("linear",), alpha=None if divergence == "kl" else 2.0, claim_class="all")
    rng = np.random.default_rng(seed)
    train_p, train_q, x_p, x_q = (law_.rvs(n, random_state=rng) for law_ in (p, q, p, q))
    betting = start_betting(target, _witness(divergence, train_p), _witness(divergence, train_q), n)
    summary = None
    for part_p, part_q in zip(np.array_split(x_p, blocks), np.array_split(x_q, blocks)):
        w_p, w_q = _witness(divergence, part_p), _witness(divergence, part_q)
        block = StreamedWitness.block(WitnessMoments.from_values(w_p, w_q, divergence, target.alpha, tail=n),
                                      betting, w_p, w_q)
        summary = block if summary is None else summary + block
    return ClippedWitnessEstimate(witness_estimate(summary.moments, target, "linear", False), summary.fed())


def _estimand(law: str, divergence: str, evidence: ClippedWitnessEstimate) -> float:
    """max(theta_delta, theta_clipped) of the fixed witness and of its clip, by quadrature."""
    scale = evidence.betting.rescaling
    clipped = np.clip(scale.slope * _witness(divergence, QUADRATURE), scale.lo, scale.hi)
    return max(_objective(law, divergence, _witness(divergence, QUADRATURE)), _objective(law, divergence, clipped))


def test_laplace_row_uses_the_betting_interval_and_covers_the_exact_value():
    """The `all` row of a Laplace pair (epsilon 2, 3 000 outputs) reads the betting bound, below the exact KL
    (1.1353) and above the `linear` row's delta-method bound at the same level (the clipped linear witness is
    nearer the log-likelihood ratio); the `linear` row keeps the delta method; n_jobs 1 and 2 give the same
    numbers, and the evidence survives its JSON record (a resumed run's)."""
    first = run_audit(LAPLACE_KL, seed=0, progress=False)
    table = first.table.set_index("claim_class")
    exact = restricted_divergence(stats.laplace(0, 0.5), stats.laplace(1, 0.5), "all", "kl")
    assert exact == pytest.approx(1.1353, abs=1e-4)
    assert table.loc["all", "interval"] == "betting CS" and table.loc["linear", "interval"] == "delta method"
    assert 0.0 < table.loc["all", "ci_low"] <= exact
    assert table.loc["all", "ci_low"] > table.loc["linear", "ci_low"]
    with joblib.parallel_backend("threading"):  # two workers without the processes' start-up (loky gives the same)
        second = run_audit({**LAPLACE_KL, "run": {"seed": 0, "n_jobs": 2}}, seed=0, progress=False)
    pd.testing.assert_frame_equal(first.table[COLUMNS], second.table[COLUMNS])
    [evidence] = [row.evidence for row in first.rows if row.claim_class == "all"]
    back = evidence_from_record(json.loads(json.dumps(evidence.to_record())))
    for level in (0.9, 0.99):
        assert back.lower_bound(level) == evidence.lower_bound(level)
    assert back.p_value(0.4) == evidence.p_value(0.4)


def test_p_value_agrees_with_the_lower_bound():
    """p_value(c) <= 1 - l exactly when lower_bound(l) >= c (both halves, the union bound included)."""
    evidence = _estimate("laplace", "kl", 1_000, seed=3)
    for level in (0.8, 0.95, 0.99, 0.999):
        bound = evidence.lower_bound(level)
        assert evidence.p_value(bound - 1e-9) <= 1.0 - level + 1e-12
        assert evidence.p_value(bound + 1e-6) > 1.0 - level


def test_blocks_fed_in_order_match_one_stream():
    """Blocks added in drawing order give the bounds of the whole sample fed at once (order-dependent capital)."""
    whole = _estimate("gaussian", "kl", 1_000, seed=5)
    blocked = _estimate("gaussian", "kl", 1_000, seed=5, blocks=4)
    assert blocked.lower_bound(0.95) == pytest.approx(whole.lower_bound(0.95), rel=1e-9)
    assert blocked.betting.n == 1_000


def test_which_rows_may_use_a_clipped_bound():
    assert clipped_serves(Target("kl", ("linear",), claim_class="all"), Candidate(0, False, "linear"))
    assert clipped_serves(Target("renyi", ("tree3",), alpha=2.0), Candidate(0, False, "tree3"))
    assert not clipped_serves(Target("kl", ("linear",), claim_class="linear"), Candidate(0, False, "linear"))
    assert not clipped_serves(Target("kl", ("linear",)), Candidate(0, False, "linear"))  # policy every: a linear row
    assert not clipped_serves(Target("dp", ("threshold",), claim_class="all"), Candidate(0, False, "threshold"))


@pytest.mark.slow
@pytest.mark.parametrize("n", [200, 1_000])
@pytest.mark.parametrize("law", sorted(LAWS))
@pytest.mark.parametrize("divergence", sorted(SLOPE))
def test_coverage_over_seeds(law, divergence, n):
    """At least 95 % of 300 seeds have the 95 % lower bound at or below the estimand max(theta_delta,
    theta_clipped), and both halves give some rows their bound (a rule that never used one would not test it)."""
    found = [_estimate(law, divergence, n, seed) for seed in range(300)]
    covered = [evidence.lower_bound(0.95) <= _estimand(law, divergence, evidence) for evidence in found]
    assert np.mean(covered) >= 0.95
    used = {evidence.interval(0.95) for evidence in found}
    assert "betting CS" in used
