"""The coverage benchmark's grid (benchmarks/bench_coverage.py): its exact values, and the lower bounds of
estimate_divergence at or below them in at least 95 % of seeds.

A cell fails when its count of covered seeds is significantly below 95 %: the one-sided binomial p-value of
H0 "coverage >= 95 %" is below 0.01 / (number of cells) (Bonferroni, so that honest intervals fail the whole test
with probability below 1 %).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from audit.theory import bounds

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import bench_coverage as bench  # noqa: E402

FAMILY_ERROR = 0.01


def _cell(name: str):
    (cell,) = bench.coverage_cells(keep=lambda cell: cell.name == name)
    return cell


@pytest.mark.parametrize(("name", "expected"), [
    ("laplace eps=1|n=200|linear kl", bounds.laplace_linear_kl(1.0)),  # CBDP appendix Theorem 9
    ("gaussian sigma=1|n=200|linear kl", bounds.gaussian_kl(1.0)),  # a linear witness attains the Gaussian KL
    ("gaussian sigma=1|n=200|linear renyi2", math.log(2.0)),  # log(m_P' M_Q^-1 m_P), audit.theory.exact
    ("laplace eps=1|n=200|threshold ipm", 2.0 * (1.0 - math.exp(-0.5))),  # 2 TV of Laplace laws one scale apart
    ("randomized_response eps=4|n=200|threshold dp", 4.0),
    ("gaussian sigma=1|n=200|threshold dp", bench.gaussian_dp_epsilon(1.0, 1e-3)),
    ("point mass|n=200|linear renyi10", 0.0),
])
def test_the_truths_are_the_exact_values(name, expected):
    assert bench.truth(_cell(name)) == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_the_flags_say_whether_the_clopper_pearson_interval_still_holds_95_percent():
    assert bench.flag(475, 500) == ""
    assert bench.flag(470, 500) == "*" and bench.coverage_interval(470, 500)[1] >= 0.95
    assert bench.flag(455, 500) == "**" and bench.coverage_interval(455, 500)[1] < 0.95


def test_one_cell_covers_at_few_seeds():
    """Laplace eps = 4, 200 outputs per law, dp over thresholds: the plug-in log-ratio of so few counts lands above
    epsilon in many seeds; the lower bound at 95 % stays at or below it in all but a binomial tail of 40 seeds,
    and is informative (positive on average: the pair is 4-DP, not 0)."""
    cell = _cell("laplace eps=4|n=200|threshold dp")
    truth = bench.truth(cell)
    results = [bench.estimate_divergence(*bench.samples(cell.label, cell.n, seed), "threshold", "dp", random_state=seed)
               for seed in range(40)]
    covered = sum(r.lower_bound(0.95) <= truth for r in results)
    assert covered > stats.binom.ppf(0.001, 40, 0.95)
    assert bench.covers(cell, truth, 0) == (results[0].lower_bound(0.95) <= truth, False)  # the benchmark's count
    assert np.mean([r.lower_bound(0.95) for r in results]) > 1.0
    assert sum(r.estimate > truth for r in results) >= 3  # a point estimate alone would miss


@pytest.mark.slow
def test_the_grid_at_200_outputs_covers_over_500_seeds():
    """The four base laws (Laplace, Gaussian, randomized response, point mass) at n = 200, every target."""
    cells = bench.coverage_cells((200,), lambda cell: cell.label in (
        "laplace eps=1", "gaussian sigma=1", "randomized_response eps=1", "point mass"))
    failures = []
    for cell in cells:
        record = bench.run_cell(cell, range(500))
        p_value = stats.binomtest(record["covered"], 500, 0.95, alternative="less").pvalue
        if p_value < FAMILY_ERROR / len(cells):
            failures.append(f"{cell.name}: {record['covered']}/500 covered (p = {p_value:.2g})")
    assert len(cells) == 24 and not failures, "\n".join(failures)
