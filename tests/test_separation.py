"""Separated held-out outputs and the ceilings: a claim no data of these sizes can refute never reads pass on data
that show the largest value the sizes allow (audit.results.verdicts: row_ceiling, separated; attacks.ceilings)."""

import io
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from attacks import binomial_ratio, paired_ratio
from attacks.binomial_ratio import log_ratio_bound
from attacks.ceilings import set_ceiling
from attacks.divergences import UNSEEN_SHARE, unseen_mass_bound, variational_bound
from attacks.estimate import DivergenceEstimate
from attacks.event_divergence import event_divergence_ceiling
from attacks.pooled_ratio import EventMoments, pooled_log_ratio, pooled_lower_bound
from attacks.held_out import PooledEstimate
from attacks.vocabulary import DP, IPM, KL, divergence_of
from audit.commands.api import run_audit
from audit.commands.cli import _summary
from audit.results.schema import Row
from audit.results.verdicts import SEPARATED, assign_verdicts, row_ceiling, separated


def _witness_row(claim: float, p_counts: list[int], q_counts: list[int], estimate: float = 4.0) -> Row:
    """A kl witness row on 1000 held-out outputs per law, its scores binned as ``p_counts``, ``q_counts``."""
    evidence = DivergenceEstimate(estimate, 1000, 1000, "linear", "kl", None, adversary=None, standard_error=0.05,
                                  details={"log_unseen_ratio": estimate + 0.5, "n_q": 1000,
                                           "scores": {"edges": list(range(len(p_counts) + 1)), "p": p_counts,
                                                      "q": q_counts}})
    return Row(task="t", estimate=estimate, claim=claim, refutes_claim=True, n_samples=2000, divergence="kl",
               claim_class="linear", function_class="linear", pair="p0", direction="P|Q", evidence=evidence)


def test_the_witness_ceiling_is_minus_log_of_the_unseen_mass_and_bounds_every_lower_bound():
    row = _witness_row(30.0, [0, 500, 500], [500, 500, 0])
    ceiling = -math.log(unseen_mass_bound(1000, UNSEEN_SHARE * 0.05))
    assert row_ceiling(row, 0.95) == pytest.approx(ceiling)
    assert ceiling == pytest.approx(math.log(1000 / math.log(200)), abs=0.01)  # u ~ log(1 / error) / n
    # log r is at least the estimate (the largest weight is at least the mean on P), so the bound stays below it
    bounds = [variational_bound(e, se, e + gap, 1000, 0.95) for e in (0.5, 5.0, 50.0, 500.0)
              for se in (0.0, 0.1) for gap in (0.0, 1.0)]
    assert max(bounds) < ceiling


def test_the_count_ceilings_are_the_bounds_at_complete_separation():
    event = DivergenceEstimate(1.0, 800, 800, "threshold", "kl", None, adversary=None, event=True,
                               details={"k_p": 700, "n_p": 800, "k_q": 3, "n_q": 900})
    dp = DivergenceEstimate(1.0, 800, 800, "threshold", "dp", None, adversary=None, delta=1e-3,
                            details={"k_p": 700, "n_p": 800, "k_q": 3, "n_q": 900})
    rows = [Row(task="t", estimate=1.0, claim=9.0, refutes_claim=True, n_samples=1600, divergence=evidence.divergence,
                claim_class="all", function_class="threshold", delta=evidence.delta, pair="p0", direction="P|Q",
                evidence=evidence)
            for evidence in (event, dp)]
    assert row_ceiling(rows[0], 0.9) == pytest.approx(event_divergence_ceiling(800, 900, KL(), 0.9))
    assert row_ceiling(rows[1], 0.9) == pytest.approx(log_ratio_bound(800, 800, 0, 900, 1e-3, 0.9, lower=True))
    assert not any(separated(row) for row in rows)  # 3 outputs of Q fall in the set


@pytest.mark.parametrize(("p_counts", "q_counts", "expected"), [
    ([0, 0, 400, 600], [700, 300, 0, 0], True),
    ([0, 0, 400, 600], [700, 299, 0, 1], False),  # one output of Q among those of P
    ([0, 1, 400, 599], [700, 300, 0, 0], False),  # one output of P shares a bin with those of Q
    ([600, 400, 0, 0], [0, 0, 300, 700], False),  # separated the wrong way: Q's outputs above P's
])
def test_separation_is_read_off_the_held_out_scores(p_counts, q_counts, expected):
    assert separated(_witness_row(30.0, p_counts, q_counts)) is expected


@pytest.mark.parametrize(("p_counts", "q_counts", "verdict"), [
    ([0, 500, 500], [500, 500, 0], "pass"),  # overlapping: the estimate 4 is below the claim 30
    ([0, 0, 1000], [1000, 0, 0], "inconclusive"),  # separated: 30 is beyond the ceiling 5.24
])
def test_a_separated_row_below_its_claim_is_inconclusive_not_pass(p_counts, q_counts, verdict):
    (row,) = assign_verdicts([_witness_row(30.0, p_counts, q_counts)], 0.95)
    assert row.verdict == verdict
    assert row.detectable_excess == math.inf  # 30 >= 5.24: no data of these sizes refute it
    assert (SEPARATED in (row.note or "")) is (verdict == "inconclusive")


def _audit(mechanism, claims):
    config = {"mechanism": {"callable": mechanism}, "pairs": [{"d": [0.0], "d_prime": [1.0]}],
              "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": c} for c in claims],
              "attacks": {"n_samples": 2000, "classes": ["linear", "threshold"]}, "run": {"seed": 0}}
    return run_audit(config, progress=False)


def _separated_outputs(dataset, n, rng):
    """Outputs fully separated between the two datasets: every restricted KL is infinite."""
    return np.full(n, float(np.sum(dataset))) + rng.uniform(0.0, 0.1, n)


def _laplace(dataset, n, rng):
    """The Laplace mechanism at scale 1: KL of the pair exp(-1) + 1 - 1 = 0.368 (its linear restriction no more)."""
    return float(np.sum(dataset)) + rng.laplace(0.0, 1.0, n)


@pytest.fixture(scope="module")
def separated_audit():
    return _audit(_separated_outputs, [3.0, 30.0])


def test_separated_outputs_refute_a_claim_below_the_ceiling_and_leave_one_above_it_inconclusive(separated_audit):
    claims = {claim["claim"]: claim for claim in separated_audit.claims}
    assert claims[3.0]["verdict"] == "violation"
    assert claims[30.0]["verdict"] == "inconclusive"  # n = 2000 cannot show more than ~5: no pass, no violation
    assert claims[30.0]["detectable_excess"] == math.inf
    assert claims[30.0]["note"].startswith(SEPARATED)


def test_the_run_summary_says_why_a_separated_claim_is_open(separated_audit):
    stream = io.StringIO()
    _summary("audit", separated_audit, Path("out"), stream)
    lines = stream.getvalue().splitlines()
    assert any(line.startswith("  kl (linear) <= 30: inconclusive") and SEPARATED in line for line in lines)
    assert not any(line.startswith("  kl (linear) <= 3: violation") and SEPARATED in line for line in lines)


def test_a_correct_laplace_still_passes_below_and_above_the_ceiling():
    claims = {claim["claim"]: claim for claim in _audit(_laplace, [1.0, 30.0]).claims}
    assert claims[1.0]["verdict"] == claims[30.0]["verdict"] == "pass"
    assert math.isfinite(claims[1.0]["detectable_excess"])  # 1 is below the ceiling ~5: an excess is detectable
    assert claims[30.0]["detectable_excess"] == math.inf  # 30 is above it: none is
    assert claims[1.0]["note"] == claims[30.0]["note"] == ""


def _largest_set_bound(n: int, divergence, level: float, coupled: bool) -> float:
    """The largest lower bound of one set's counts over every outcome of n outputs per law (n pairs when coupled)."""
    if coupled:
        cells = [[a, b, c, n - a - b - c] for a, b, c in itertools.product(range(n + 1), repeat=3) if a + b + c <= n]
        if isinstance(divergence, DP):
            return max(paired_ratio.log_ratio_bound(c, divergence.delta, level, True) for c in cells)
        return max(2 * paired_ratio.difference_bound(c, level, True) for c in cells)
    counts = itertools.product(range(n + 1), repeat=2)
    if isinstance(divergence, DP):
        return max(binomial_ratio.log_ratio_bound(k_p, n, k_q, n, divergence.delta, level, True) for k_p, k_q in counts)
    return max(2 * binomial_ratio.difference_bound(k_p, n, k_q, n, level, True) for k_p, k_q in counts)


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize("divergence", [DP(0.0), DP(0.01), IPM()], ids=str)
def test_set_ceilings_are_the_largest_bound_of_any_counts(divergence, coupled):
    """Every outcome of 6 outputs per law (6 pairs): no count bound exceeds the ceiling, which separation attains."""
    assert _largest_set_bound(6, divergence, 0.9, coupled) == pytest.approx(set_ceiling(6, 6, divergence, 0.9, coupled))


@pytest.mark.slow
@pytest.mark.parametrize(("n", "coupled"), [(60, False), (16, True)])
@pytest.mark.parametrize("divergence", [DP(0.0), DP(1e-3), IPM()], ids=str)
def test_set_ceilings_are_the_largest_bound_of_any_counts_where_score_bounds_apply(divergence, n, coupled):
    assert _largest_set_bound(n, divergence, 0.95, coupled) == pytest.approx(
        set_ceiling(n, n, divergence, 0.95, coupled))


def _set_row(divergence: str, evidence, delta: float = 0.0, stop: str | None = None, claim: float = 30.0) -> Row:
    return Row(task="t", estimate=float(evidence.estimate), claim=claim, refutes_claim=True, n_samples=2000,
               divergence=divergence, claim_class="all", function_class="threshold", delta=delta, pair="p0",
               direction="P|Q", evidence=evidence, stop=stop)


def _separated_set(divergence: str, coupled: bool, delta: float = 0.0) -> DivergenceEstimate:
    details = {"k_p": 1000, "n_p": 1000, "k_q": 0, "n_q": 1000, **({"cells": [0, 1000, 0, 0]} if coupled else {})}
    return DivergenceEstimate(1.0, 1000, 1000, "threshold", divergence, None, adversary=None, delta=delta,
                              coupled=coupled, details=details)


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize(("divergence", "delta", "claim"), [("dp", 0.0, 30.0), ("dp", 1e-3, 30.0), ("ipm", 0.0, 1.999)])
def test_separated_coupled_and_ipm_sets_give_their_ceiling_in_the_note(divergence, delta, claim, coupled):
    """Issue 34: coupled dp cells and ipm sets had no ceiling (NaN), so their separated rows' notes gave none."""
    evidence = _separated_set(divergence, coupled, delta)
    row = _set_row(divergence, evidence, delta, claim=claim)
    ceiling = row_ceiling(row, 0.95)
    assert ceiling == pytest.approx(evidence.lower_bound(0.95))  # separation gives the ceiling itself
    assert ceiling == pytest.approx(set_ceiling(1000, 1000, divergence_of(evidence), 0.95, coupled))
    (judged,) = assign_verdicts([row], 0.95)
    assert judged.verdict == "inconclusive" and judged.detectable_excess == math.inf
    assert f"no bound can exceed {ceiling:.3g}" in judged.note


def test_a_pool_of_dp_sets_stays_below_log_n():
    """A pooled Wald bound on n = 400 outputs per law: below log((1 - delta) n) however extreme the counts (one
    output of Q in each set, every output of P), at any level; its row's ceiling is that value."""
    n, delta = 400, 1e-3
    in_p = np.ones((n, 3), dtype=bool)
    in_q = np.zeros((n, 3), dtype=bool)
    in_q[:3, 0], in_q[:2, 1], in_q[:1, 2] = True, True, True  # nested sets of 3, 2 and 1 outputs of Q
    moments = EventMoments.from_memberships(in_p, in_q)
    weights = np.array([0.2, 0.3, 0.5])
    estimate, error = pooled_log_ratio(moments, weights, delta, coupled=False)
    pooled = PooledEstimate(estimate, error, n=n, weights=tuple(weights), delta=delta)
    assert pooled.ceiling(0.95) == pytest.approx(math.log((1 - delta) * n))
    assert max(pooled_lower_bound(moments, weights, delta, level, False) for level in (0.5, 0.9, 0.999)) < pooled.ceiling()
    assert row_ceiling(_set_row("dp", pooled, delta), 0.95) == pytest.approx(math.log((1 - delta) * n))
