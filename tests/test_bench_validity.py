"""The validity benchmark's cells and a sample of its riskiest ones: true claims rarely read "violation".

A correct mechanism audited with a claim at its true value must read
"violation" in at most 1 - confidence = 5 % of the seeds.  A cell fails when
its count of violations is significantly above 5 %: the one-sided binomial
p-value of H0 "rate <= 5 %" is below 0.01 / (number of cells) (Bonferroni, so
that a correct audit fails the whole test with probability below 1 %).
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from audit.theory import bounds

_SPEC = importlib.util.spec_from_file_location(
    "bench_validity", Path(__file__).parents[1] / "benchmarks" / "bench_validity.py"
)
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_validity"] = bench  # dataclasses look their module up there
_SPEC.loader.exec_module(bench)

FAMILY_ERROR = 0.01


def _cells(names: list[str]) -> list:
    cells = bench.validity_cells(lambda cell: cell.name in names)
    assert sorted(cell.name for cell in cells) == sorted(names)
    return cells


def _assert_valid(cells: list, seeds: int, family_size: int) -> None:
    """Every cell's false-violation count is not significantly above 5 % (module docstring).

    Only violations count: an audit that crashes or exits 2 is not a verdict (other tests hold those).
    """
    failures = []
    for cell in cells:
        outcomes = [bench.audit_once(cell, seed) for seed in range(seeds)]
        violations = sum(o["verdict"] == "violation" for o in outcomes)
        p_value = stats.binomtest(violations, seeds, bench.FALSE_RATE, alternative="greater").pvalue
        if p_value < FAMILY_ERROR / family_size:
            notes = {o["detail"] for o in outcomes if o["verdict"] == "violation"}
            failures.append(f"{cell.name}: {violations}/{seeds} violations (p = {p_value:.2g}); {sorted(notes)[:2]}")
    assert not failures, "\n".join(failures)


def test_claims_are_the_true_values():
    """Closed forms of docs/theory.md section 6 and the exact (linear, KL) of Laplace; the Gaussian's dp epsilon is
    the one at which the Balle-Wang delta equals the claimed delta."""
    names = ["laplace eps=1|n=1000|linear|kl|linear", "laplace eps=1|n=1000|kernel|kl|all",
             "laplace eps=1|n=1000|threshold|dp|all", "gaussian 1/sigma=1|n=1000|kernel|renyi10|all",
             "gaussian2d sigma=1 v=(1,1)|n=1000|linear|kl|linear", "gaussian 1/sigma=4|n=1000|threshold|dp|all"]
    claims = {cell.name: cell for cell in _cells(names)}
    assert claims[names[0]].claim == pytest.approx(bounds.laplace_linear_kl(1.0), rel=1e-6)
    assert claims[names[1]].claim == pytest.approx(math.exp(-1.0), rel=1e-12)
    assert claims[names[2]].claim == 1.0
    assert claims[names[3]].claim == pytest.approx(10 / 2, rel=1e-12)
    assert claims[names[4]].claim == pytest.approx(2 / 2, rel=1e-6)  # |v|^2 / (2 sigma^2), linear is exact
    gaussian = claims[names[5]]
    assert gaussian.delta == bench.GAUSSIAN_DELTA
    assert bench.gaussian_dp_delta(gaussian.claim, 0.25) == pytest.approx(bench.GAUSSIAN_DELTA, rel=1e-6)


def test_grid_covers_the_brief():
    names: list[str] = []
    bench.validity_cells(lambda cell: names.append(cell.name) or False)  # the names, without computing claims
    for text in ("laplace eps=0.1|", "gaussian 1/sigma=20|", "gaussian2d", "randomized_response eps=20|",
                 "|renyi2|", "|renyi10|", "|ipm|", "|dp|", "|kernel|", "|mlp|", "|tree3|"):
        assert any(text in name for name in names), text
    assert {"|n=1000|", "|n=20000|", "|n=100000|"} <= {name[name.index("|"):name.index("|", name.index("|") + 1) + 1]
                                                        for name in names}


def test_a_sequential_cell_drops_n_samples_and_stops_within_its_cap():
    """--sequential: the audit runs in rounds (no n_samples) until decided or max_outputs, and says why it stopped."""
    (fixed,) = _cells(["laplace eps=1|n=1000|threshold|dp|all"])
    cell = fixed.sequential(84_000)
    assert cell.name == "laplace eps=1|sequential<=84000|threshold|dp|all"
    attacks = cell.config(0)["attacks"]
    assert "n_samples" not in attacks and attacks["max_outputs"] == 84_000
    outcome = bench.audit_once(cell, 0)
    assert outcome["stop"] in ("violation", "decided", "output limit", "time limit")
    assert 8_000 <= outcome["outputs_drawn"] <= 84_000


# Issue 11's failing configs at small n (dp over thresholds and KL over all functions at eps = 8: finite samples
# that looked unbounded), and the tight claims of the report's "inconclusive" rule.
FAST_CELLS = [
    "laplace eps=8|n=1000|threshold|dp|all",
    "laplace eps=8|n=1000|kernel|kl|all",
    "laplace eps=1|n=1000|threshold|dp|all",
    "laplace eps=1|n=1000|linear|kl|linear",
]


def test_the_results_file_names_the_command_and_the_commit_it_ran_at(tmp_path):
    out = tmp_path / "validity.md"
    bench.main(["--seeds", "1", "--cells", "laplace eps=1|n=1000|threshold|dp|all", "--out", str(out)])
    header = out.read_text().splitlines()[2]
    assert header.startswith("Command: `python benchmarks/bench_validity.py --seeds 1 --cells")
    assert re.search(r"; code [0-9a-f]{7,}\+?\)", header), header


def test_true_claims_rarely_read_violation_in_risky_cells():
    """Ten seeds per cell: a cell fails with 4 or more violations of 10 (Bonferroni over four cells at 1 %)."""
    _assert_valid(_cells(FAST_CELLS), seeds=10, family_size=len(FAST_CELLS))


SLOW_CELLS = [
    name
    for label in ("laplace eps=8", "laplace eps=20", "gaussian 1/sigma=8", "gaussian 1/sigma=20",
                  "gaussian2d sigma=1 v=(1,1)", "randomized_response eps=8")
    for target in ("linear|kl|linear", "kernel|kl|all", "linear|renyi10|linear", "kernel|renyi10|all",
                   "threshold|ipm|threshold", "kernel|ipm|all", "threshold|dp|all", "kernel|dp|all")
    for name in [f"{label}|n=1000|{target}"]
    if not (label.startswith("randomized") and "kernel" in target) and not (label.startswith("gaussian2d")
                                                                            and "|dp|" in target)
]


# Measured on this code (benchmarks/results/bench_validity.md): randomized response at eps = 8 and n = 1000 gives
# 1000 identical outputs per dataset in about half the seeds, which the runner reads as a deterministic release.
DETERMINISTIC_LOOKING = pytest.mark.xfail(
    reason="the runner's deterministic-release check reads n identical outputs of a discrete mechanism at high "
    "epsilon as unbounded (a finite sample never proves infinity); issue 11",
    strict=False,
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=DETERMINISTIC_LOOKING) if name.startswith("randomized") and "ipm" not in name
     else name for name in SLOW_CELLS],
)
def test_true_claims_rarely_read_violation_in_the_riskiest_cells_of_the_grid(name):
    """The riskiest cells (high epsilon, n = 1000, kernel and alpha = 10, dp and ipm at zero counts), 40 seeds
    each: a cell fails with 9 or more violations of 40 (p < 0.01 / 42 under a 5 % rate, 42 cells)."""
    _assert_valid(_cells([name]), seeds=40, family_size=len(SLOW_CELLS))


@pytest.mark.slow
def test_an_excess_of_the_detectable_size_over_the_estimand_is_detected_with_the_stated_power():
    """The detectable excess speaks of the confirmed attack's estimand (:func:`attacks.sequential.detectable_excess`):
    what its fitted witness attains, below the restricted divergence when the fit is poor (at n = 1000 the
    staged search fits on 200 outputs per law).  Twenty audits at the true value give the median detectable
    excess and the mean estimate, which estimates the estimand (a held-out estimate is unbiased for its
    witness's objective); the claim lowered to that mean minus the excess, 60 more audits (fresh seeds) read
    violation at a rate not significantly below POWER = 0.8 (one-sided binomial p >= 0.01).  Measured: 48 / 60.
    Lowered from the true value (0.226) instead, 30 / 60: the excess is no power against the restricted
    divergence itself, and docs/validity.md says so with these numbers."""
    from attacks.sequential import POWER

    (cell,) = _cells(["laplace eps=1|n=1000|linear|kl|linear"])
    at_truth = [bench.audit_once(cell, seed) for seed in range(20)]
    excess = float(np.median([audit["detectable_excess"] for audit in at_truth]))
    estimand = float(np.mean([audit["max_estimate"] for audit in at_truth]))
    assert estimand < cell.claim  # the witness fitted on 200 outputs attains less than the restricted value
    lowered = replace(cell, claim=estimand - excess)
    caught = sum(bench.audit_once(lowered, 100 + seed)["verdict"] == "violation" for seed in range(60))
    assert stats.binomtest(caught, 60, POWER, alternative="less").pvalue >= 0.01, f"{caught} / 60 caught"
