"""The DP-Sniper benchmark's own logic: graded attack sets, the statistics a check offers, a quick run.

The benchmark is run by hand (README); these tests pin what its numbers rest on.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from attacks import pooled_ratio

_SPEC = importlib.util.spec_from_file_location("bench_suite", Path(__file__).parents[1] / "benchmarks" / "bench_suite.py")
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_suite"] = bench  # dataclasses look their module up there
_SPEC.loader.exec_module(bench)

COUPLED = bench.Sampling(coupled=True)


@pytest.fixture(scope="module")
def shifted_laplace():
    """Coupled outputs X ~ Laplace(0, 4) and Y = X + 1 (2-D, second coordinate noise), and a DP attack on them."""
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.laplace(0.0, 4.0, 200_000), rng.normal(size=200_000)])
    y = x + np.array([1.0, 0.0])
    adversary = bench.fit_attack("threshold", x[:100_000], y[:100_000], 1_000_000, COUPLED, rng)
    return x, y, adversary


def test_graded_sets_hold_their_share_of_the_training_outputs(shifted_laplace):
    """Cuts ascend; set k of the grade holds 2^(-k/8) of P's training outputs down to 100 of them; the
    fitted set is among them at index ``fitted``."""
    x, _, adversary = shifted_laplace
    train = x[:100_000]
    attack = bench.graded_attack(adversary, train)
    assert np.all(np.diff(attack.cuts) > 0)
    np.testing.assert_array_equal(attack.levels(train) > attack.fitted, adversary.witness(train) > 0)
    held = np.array([(attack.levels(train) > k).mean() for k in range(attack.cuts.size)])
    graded = np.delete(held, attack.fitted)
    expected = bench.GRADE_STEP ** np.arange(1, graded.size + 1)
    np.testing.assert_allclose(graded, expected, rtol=0, atol=1.5 / train.shape[0] + 1e-12)
    assert graded[-1] * train.shape[0] >= bench.GRADE_FLOOR > graded[-1] * bench.GRADE_STEP * train.shape[0]


def test_pools_weigh_a_usable_set_and_its_usable_subsets(shifted_laplace):
    """One pool per start S_j, its weights on S_j and usable sets below it only, the deepest pools skipped
    when they would weigh one set."""
    x, y, adversary = shifted_laplace
    attack = bench.graded_attack(adversary, x[:100_000])
    moments = attack.moments(x[100_000:], y[100_000:])
    usable = pooled_ratio.usable_sets(moments, 0.0, True, bench.MIN_COUNT)
    pools = bench.Statistic.pools(moments, COUPLED)
    for start, pool in pools.items():
        support = np.flatnonzero(pool.weights)
        assert pool.pooled and usable[support].all() and support[0] >= start and usable[start]
        assert pool.weights.sum() == pytest.approx(1.0)
    assert min(pools) == np.flatnonzero(usable)[0] and len(pools) >= 10


@pytest.mark.parametrize("name, truth", [("laplace", 0.1), ("report_noisy_max_3", 0.25)])
def test_quick_audit_bounds_the_true_epsilon(name, truth):
    """Quick budget: the 95% bound at most 1.5 standard errors above the true epsilon (a 0.1% event for a
    valid bound; the error is read off the spread of the two levels) and within 0.02 below it (power)."""
    row = bench.audit(name, bench.QUICK, COUPLED, seed=0)
    (level_a, level_b), (bound_a, bound_b) = bench.LEVELS, row.bounds
    error = (bound_b - bound_a) / (norm.ppf(level_a) - norm.ppf(level_b))
    assert 0 < error < 0.01, error
    assert truth - 0.02 <= bound_a <= truth + 1.5 * error, (bound_a, error)


def test_quick_run_writes_its_table(tmp_path):
    out = tmp_path / "bench.md"
    bench.main(["--quick", "--mechanisms", "laplace", "--out", str(out)])
    header, rule, row = out.read_text().splitlines()
    assert header.split("|")[1].strip() == "mechanism" and row.split("|")[1].strip() == "laplace"
    assert 0.09 <= float(row.split("|")[3]) <= 0.11  # the 90% bound


def test_a_fitted_set_is_offered_alone_only_when_no_pool_starts_from_it(shifted_laplace):
    """A pool from the fitted set has no smaller log-ratio and no larger variance, so it replaces the set
    alone; with too few counts to pool, the fitted set alone is what is left."""
    x, y, adversary = shifted_laplace
    attack = bench.graded_attack(adversary, x[:100_000])
    many, few = attack.moments(x[100_000:], y[100_000:]), attack.moments(x[100_000:100_500], y[100_000:100_500])
    assert attack.fitted in bench.Statistic.pools(many, COUPLED) and not bench.Statistic.pools(few, COUPLED)
    assert bench.select([attack], [many], 100_000, 1_000_000, COUPLED)[1].pooled
    index, statistic = bench.select([attack], [few], 500, 1_000_000, COUPLED)
    np.testing.assert_array_equal(statistic.weights, np.eye(attack.cuts.size)[attack.fitted])
