"""The DP-Sniper benchmark (benchmarks/bench_suite.py), a thin driver over ``run_audit``, and what its numbers rest on.

The benchmark is run by hand (docs/benchmarks.md); these tests run its quick budget through the driver, pin its
samples-per-input accounting against DP-Sniper's, and policy best's graded sets and pools
(attacks/staged.py) that its report-noisy-max bounds come from.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from attacks import Adversary, pooled_ratio
from attacks.budget import StageSizes
from attacks.held_out import GRADE_FLOOR, GRADE_STEP, graded_attack
from attacks.selection import MIN_COUNT, _pools
from attacks.staged import MAX_FINALISTS

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("bench_suite")


@pytest.fixture(scope="module")
def shifted_laplace():
    """Coupled outputs X ~ Laplace(0, 4) and Y = X + 1 (2-D, second coordinate noise), and a DP attack on them."""
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.laplace(0.0, 4.0, 200_000), rng.normal(size=200_000)])
    y = x + np.array([1.0, 0.0])
    adversary = Adversary("threshold", "dp", dp_eval_size=1_000_000, coupled=True, random_state=0)
    adversary.fit(np.vstack([x[:100_000], y[:100_000]]), np.r_[np.zeros(100_000), np.ones(100_000)])
    return x, y, adversary


def test_graded_sets_hold_their_share_of_the_training_outputs(shifted_laplace):
    """Cuts ascend; set k of the grade holds 2^(-k/8) of P's training outputs down to 100 of them; the
    fitted set is among them at index ``fitted``."""
    x, _, adversary = shifted_laplace
    train = x[:100_000]
    attack = graded_attack(adversary, train)
    assert np.all(np.diff(attack.cuts) > 0)
    np.testing.assert_array_equal(attack.levels(train) > attack.fitted, adversary.witness(train) > 0)
    held = np.array([(attack.levels(train) > k).mean() for k in range(attack.cuts.size)])
    graded = np.delete(held, attack.fitted)
    expected = GRADE_STEP ** np.arange(1, graded.size + 1)
    np.testing.assert_allclose(graded, expected, rtol=0, atol=1.5 / train.shape[0] + 1e-12)
    assert graded[-1] * train.shape[0] >= GRADE_FLOOR > graded[-1] * GRADE_STEP * train.shape[0]


def test_pools_weigh_a_usable_set_and_its_usable_subsets(shifted_laplace):
    """One pool per start S_j, its weights on S_j and usable sets below it only, the deepest pools skipped
    when they would weigh one set."""
    x, y, adversary = shifted_laplace
    attack = graded_attack(adversary, x[:100_000])
    moments = attack.moments(x[100_000:], y[100_000:])
    usable = pooled_ratio.usable_sets(moments, 0.0, True, MIN_COUNT)
    pools = _pools(moments, 0.0, True)
    for start, weights in pools.items():
        support = np.flatnonzero(weights)
        assert support.size > 1 and usable[support].all() and support[0] >= start and usable[start]
        assert weights.sum() == pytest.approx(1.0)
    assert min(pools) == np.flatnonzero(usable)[0] and len(pools) >= 10


@pytest.mark.parametrize("name", list(bench.DPSNIPER))
def test_budget_spends_at_most_a_tenth_of_dpsniper_samples_per_input(name):
    """With the most finalists the engine keeps, the stage sizes run_audit derives from the chosen n_samples
    draw at most a tenth of DP-Sniper's 210.7 M outputs on any input, and not much less (one more thousandth
    of budget would exceed it)."""
    pairs, target = bench.n_pairs(name), bench.TARGET_FRACTION * bench.DPSNIPER_SAMPLES

    def drawn(n_samples: int) -> int:
        sizes = vars(StageSizes.from_budget(n_samples, bench.STAGES))
        return bench.samples_per_input(pairs, MAX_FINALISTS, sizes)

    n_samples = bench.budget(pairs)
    assert drawn(n_samples) <= target < drawn(int(n_samples * 1.001))


@pytest.mark.parametrize("name, truth", [("laplace", 0.1), ("report_noisy_max_3", 0.25)])
def test_quick_audit_bounds_the_true_epsilon(name, truth):
    """Quick budget through run_audit: the 90 % bound at most 1.5 standard errors above the true epsilon
    (the estimate 2.8 errors above it: a 0.3 % event for a valid bound; the error is read off the bound's
    distance to the estimate) and within 0.02 below it (power: some 7 errors)."""
    row = bench.audit(name, quick=True, coupled=True, seed=0)
    error = (row["estimate"] - row["bound"]) / norm.ppf(bench.CONFIDENCE)
    assert 0 < error < 0.01, error
    assert truth - 0.02 <= row["bound"] <= truth + 1.5 * error, (row["bound"], error)


def test_quick_run_writes_its_table(tmp_path):
    out = tmp_path / "bench.md"
    bench.main(["--quick", "--mechanisms", "laplace", "--out", str(out)])
    header, rule, row = out.read_text().splitlines()
    assert header.split("|")[1].strip() == "mechanism" and row.split("|")[1].strip() == "laplace"
    assert 0.09 <= float(row.split("|")[2]) <= 0.11  # the 90% bound


def test_pair_label_follows_the_direction():
    pair = {"d": [[0.0], [1.0]], "d_prime": [[0.0], [0.0]]}
    assert bench.pair_label(pair, "P|Q") == "[0.,1.] vs [0.,0.]"
    assert bench.pair_label(pair, "Q|P") == "[0.,0.] vs [0.,1.]"
