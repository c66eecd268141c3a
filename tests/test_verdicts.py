"""Row verdicts, Holm's step-down, claim summaries and the overall verdict, on synthetic evidence."""

import math
from dataclasses import replace
import numpy as np
import pytest
from scipy.stats import norm

from attacks.evidence import NormalEstimate
from attacks.sequential import POWER, detectable_excess
from audit.results.verdicts import (
    CLAIM_VERDICTS,
    EXIT_ERROR,
    EXIT_PASS,
    EXIT_VIOLATION,
    INFINITE_ESTIMATE,
    assign_verdicts,
    exit_code,
    holm_adjusted,
    holm_levels,
    holm_rejections,
    overall_verdict,
    summarize_claims,
)
from audit.results.schema import Row


CAVEAT = "three held-out terms carry 90% of the objective"


def caveat_evidence(estimate: float, standard_error: float, caveat: str | None = CAVEAT) -> NormalEstimate:
    """Normal evidence whose interval the estimator flagged as untrustworthy."""
    return NormalEstimate(estimate, standard_error, caveat)


@pytest.mark.parametrize(
    ("p_values", "expected"),
    [
        # sorted 0.005 <= .05/4, 0.01 <= .05/3, 0.03 > .05/2: stop; 0.04 is not rejected although <= .05
        ([0.01, 0.04, 0.03, 0.005], [True, False, False, True]),
        ([0.001, 0.002, 0.003], [True, True, True]),  # .001 <= .05/3, .002 <= .025, .003 <= .05
        ([0.03, 0.03], [False, False]),  # 0.03 > .05/2 at the first step
        ([0.02, 0.02], [True, True]),  # 0.02 <= .05/2, then 0.02 <= .05
        ([0.3], [False]),
        ([0.04], [True]),
        ([0.001, math.nan, 0.2], [True, False, False]),  # NaN is never rejected
    ],
)
def test_holm_matches_hand_computation(p_values, expected):
    np.testing.assert_array_equal(holm_rejections(p_values, 0.05), expected)


def test_holm_levels_follow_the_ranks():
    np.testing.assert_allclose(holm_levels([0.01, 0.04, 0.03, 0.005], 0.05), [0.05 / 3, 0.05, 0.025, 0.0125])


def _row(task, estimate, claim, refutes=True, error=None, claim_class="all", function_class="linear"):
    return Row(task=task, estimate=estimate, claim=claim, refutes_claim=refutes, n_samples=1000, error=error,
               divergence="kl", claim_class=claim_class, function_class=function_class,
               pair="p0", direction="P|Q")


def _assign(rows, evidence, confidence):
    """:func:`assign_verdicts` of ``rows``, each carrying ``evidence[row.task]`` (as the engine's rows do)."""
    return assign_verdicts([replace(row, evidence=evidence[row.task]) for row in rows], confidence)


def _judge(rows, evidence, confidence):
    """The judged rows and the overall verdict."""
    judged = _assign(rows, evidence, confidence)
    return judged, overall_verdict(judged)


def test_row_verdicts_and_overall():
    rows = [
        _row("violation", 1.0, 0.5),
        _row("pass", 0.3, 0.5),
        _row("inconclusive", 0.55, 0.5),
        _row("info", 5.0, 0.5, refutes=False),
    ]
    evidence = {"violation": NormalEstimate(1.0, 0.05), "pass": NormalEstimate(0.3, 0.05),
                "inconclusive": NormalEstimate(0.55, 0.05), "info": NormalEstimate(5.0, 0.05)}
    rows, overall = _judge(rows, evidence, confidence=0.95)
    assert [row.verdict for row in rows] == ["violation", "pass", "inconclusive", "info"]
    assert overall == "violation" and exit_code(rows, overall) == EXIT_VIOLATION
    assert "Holm-adjusted p = " in rows[2].note and "samples" not in rows[2].note


def test_intervals_use_the_holm_level_of_each_row():
    """Three refuting rows: "a" is rejected at step 1 (level .05/3); the procedure stops at step 2
    (level .05/2), the level of every row not rejected, "c" included."""
    estimates = {"a": 1.0, "b": 0.6, "c": 0.2}
    rows = [_row(task, value, 0.5) for task, value in estimates.items()]
    evidence = {task: NormalEstimate(value, 0.1) for task, value in estimates.items()}
    rows = _assign(rows, evidence, confidence=0.95)
    assert [row.verdict for row in rows] == ["violation", "inconclusive", "pass"]
    for row, level in zip(rows, [0.05 / 3, 0.05 / 2, 0.05 / 2]):
        assert row.ci_low == pytest.approx(row.estimate - norm.isf(level) * 0.1, rel=1e-9)
        assert row.ci_high == pytest.approx(row.estimate + norm.isf(level) * 0.1, rel=1e-9)


def test_ci_low_exceeds_the_claim_exactly_on_violations():
    """p-values .03, .04, .045 (claim .5, standard error .1): none is rejected (.03 > .05/3), although
    the last is below its own step's level .05; at that level its ci_low would be 0.505 > 0.5."""
    p_values = {"x": 0.03, "y": 0.04, "z": 0.045}
    estimates = {task: 0.5 + norm.isf(p) * 0.1 for task, p in p_values.items()}
    rows = [_row(task, value, 0.5) for task, value in estimates.items()]
    evidence = {task: NormalEstimate(value, 0.1) for task, value in estimates.items()}
    rows = _assign(rows, evidence, confidence=0.95)
    assert [row.verdict for row in rows] == ["inconclusive"] * 3
    assert all(row.ci_low <= 0.5 for row in rows)
    assert rows[2].ci_low == pytest.approx(estimates["z"] - norm.isf(0.05 / 3) * 0.1, rel=1e-9)


def test_info_rows_use_the_plain_confidence():
    rows = [_row("x", 1.0, 0.5, refutes=False)]
    rows = _assign(rows, {"x": NormalEstimate(1.0, 0.1)}, confidence=0.9)
    assert rows[0].ci_low == pytest.approx(1.0 - norm.isf(0.05) * 0.1)


@pytest.mark.parametrize("claim", [0.0, 0.5, 10.0])
def test_nan_estimate_is_never_pass(claim):
    rows = [_row("nan", math.nan, claim)]
    rows, overall = _judge(rows, {"nan": NormalEstimate(math.nan, 0.1)}, confidence=0.95)
    assert rows[0].verdict == "inconclusive" and overall == "inconclusive"
    assert "NaN" in rows[0].note


def test_error_rows_make_the_audit_inconclusive_and_exit_2():
    rows = [_row("ok", 0.1, 0.5), _row("bad", math.nan, 0.5, error="mechanism 'f' raised ValueError: boom")]
    rows, overall = _judge(rows, {"ok": NormalEstimate(0.1, 0.05), "bad": None}, confidence=0.95)
    assert [row.verdict for row in rows] == ["pass", "inconclusive"]
    assert "boom" in rows[1].note
    assert overall == "inconclusive" and exit_code(rows, overall) == EXIT_ERROR


def test_error_wins_over_violation_in_the_exit_code():
    rows = [_row("v", 2.0, 0.5), _row("bad", math.nan, 0.5, error="boom")]
    rows, overall = _judge(rows, {"v": NormalEstimate(2.0, 0.01), "bad": None}, confidence=0.95)
    assert overall == "violation" and exit_code(rows, overall) == EXIT_ERROR


def test_all_pass_exits_0():
    rows = [_row("a", 0.1, 0.5), _row("b", 0.2, 0.5)]
    rows, overall = _judge(rows, {"a": NormalEstimate(0.1, 0.05), "b": NormalEstimate(0.2, 0.05)}, 0.95)
    assert overall == "pass" and exit_code(rows, overall) == EXIT_PASS



def test_holm_adjusted_matches_hand_computation():
    """Sorted 0.005, 0.01, 0.03, 0.04: 4 x .005 = .02, 3 x .01 = .03, 2 x .03 = .06, then max(.06, .04)."""
    np.testing.assert_allclose(holm_adjusted([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm_adjusted([0.6, math.nan]), [1.0, 1.0])  # capped at 1; NaN counts as 1


@pytest.mark.parametrize("level", [0.01, 0.05, 0.2])
def test_holm_rejects_exactly_the_adjusted_p_values_at_most_the_level(level):
    """The step-down rule p_(k) <= level / (m - k + 1) for all j <= k, checked against the adjusted p-values."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.uniform(0, 0.1, size=rng.integers(1, 8)) ** rng.uniform(0.5, 2)
        order = np.argsort(p, kind="stable")
        below = p[order] <= level / (p.size - np.arange(p.size))
        n_rejected = p.size if below.all() else int(np.argmin(below))
        expected = np.zeros(p.size, dtype=bool)
        expected[order[:n_rejected]] = True
        np.testing.assert_array_equal(holm_rejections(p, level), expected)
        np.testing.assert_array_equal(holm_adjusted(p) <= level, expected)


def test_violation_exactly_when_the_adjusted_p_value_is_at_most_the_level():
    rng = np.random.default_rng(1)
    estimates = rng.normal(0.5, 0.15, size=12)
    rows = [_row(f"t{i}", value, 0.5) for i, value in enumerate(estimates)]
    evidence = {row.task: NormalEstimate(row.estimate, 0.05) for row in rows}
    rows = _assign(rows, evidence, confidence=0.95)
    for row in rows:
        assert (row.verdict == "violation") == (row.p_adjusted <= 0.05)
        assert (row.verdict == "violation") == (row.ci_low > 0.5)


def test_a_caveat_row_is_inconclusive_with_p_1_and_keeps_the_family_size():
    """The caveat row's estimate is far above the claim: still no violation.  It stays in Holm's family with
    p = 1, so the trusted row "b" (p = 0.03) is judged at .05/2 and not rejected; dropped, it would be."""
    rows = [_row("flagged", 9.0, 0.5), _row("b", 0.5 + norm.isf(0.03) * 0.1, 0.5)]
    evidence = {"flagged": caveat_evidence(9.0, 0.01), "b": NormalEstimate(rows[1].estimate, 0.1)}
    rows, overall = _judge(rows, evidence, confidence=0.95)
    assert [row.verdict for row in rows] == ["inconclusive", "inconclusive"]
    assert "interval not trusted: three held-out terms" in rows[0].note
    assert math.isnan(rows[0].ci_low) and math.isnan(rows[0].ci_high)
    assert rows[0].p_adjusted == 1.0 and rows[0].detectable_excess == math.inf
    assert rows[1].p_adjusted == pytest.approx(0.06)
    assert rows[1].ci_low == pytest.approx(rows[1].estimate - norm.isf(0.025) * 0.1)
    assert overall == "inconclusive" and exit_code(rows, overall) == EXIT_PASS


def test_a_caveat_row_below_the_claim_is_not_a_pass():
    rows = [_row("flagged", -37.9, 0.5)]
    rows, overall = _judge(rows, {"flagged": caveat_evidence(-37.9, 0.1)}, confidence=0.95)
    assert rows[0].verdict == "inconclusive" and overall == "inconclusive"


def test_evidence_with_caveat_none_is_trusted():
    rows = [_row("a", 2.0, 0.5)]
    rows = _assign(rows, {"a": caveat_evidence(2.0, 0.1, caveat=None)}, confidence=0.95)
    assert rows[0].verdict == "violation"


@pytest.mark.parametrize("evidence", [None, NormalEstimate(math.inf, math.nan)], ids=["no evidence", "an attack's inf"])
def test_an_infinite_estimate_is_an_error_not_a_violation(evidence):
    """A finite sample never proves an infinite divergence: with or without an attack's score, +inf is an error."""
    rows = [_row("sep", math.inf, 12.0), _row("ok", 0.1, 12.0)]
    rows, overall = _judge(rows, {"sep": evidence, "ok": NormalEstimate(0.1, 0.05)}, confidence=0.95)
    assert rows[0].verdict == "inconclusive" and rows[0].error == INFINITE_ESTIMATE
    assert overall == "inconclusive" and exit_code(rows, overall) == EXIT_ERROR


def test_a_claim_whose_refuting_rows_all_failed_is_untested_not_a_pass():
    """Claim (linear, KL) <= 0.5: its only refuting attack failed; the kernel row is info and passes nothing."""
    rows = [
        _row("lin", math.nan, 0.5, error="attack linear/kl failed: boom", claim_class="linear"),
        _row("ker", 0.1, 0.5, refutes=False, claim_class="linear", function_class="kernel"),
        _row("all", 0.1, 0.7, claim_class="all"),
    ]
    rows, overall = _judge(rows, {"lin": None, "ker": NormalEstimate(0.1, 0.05), "all": NormalEstimate(0.1, 0.05)},
                              confidence=0.95)
    claims = {claim["claim_class"]: claim for claim in summarize_claims(rows)}
    assert all(claim["verdict"] in CLAIM_VERDICTS for claim in claims.values())
    assert claims["linear"]["verdict"] == "untested" and claims["linear"]["strongest_task"] is None
    assert "classes linear" in claims["linear"]["note"] and claims["linear"]["refuting_rows"] == 0
    assert claims["all"]["verdict"] == "pass" and claims["all"]["strongest_task"] == "all"
    assert overall == "inconclusive" and exit_code(rows, overall) == EXIT_ERROR


def test_a_claim_no_attack_class_can_refute_is_untested_and_exits_2():
    rows = [_row("tree", 0.1, 0.5, refutes=False, claim_class="linear", function_class="tree3")]
    rows, overall = _judge(rows, {"tree": NormalEstimate(0.1, 0.05)}, confidence=0.95)
    (claim,) = summarize_claims(rows)
    assert claim["verdict"] == "untested" and "tree3" in claim["note"] and "'linear'" in claim["note"]
    assert overall == "inconclusive" and exit_code(rows, overall) == EXIT_ERROR


def test_no_rows_is_not_a_pass():
    assert overall_verdict(_assign([], {}, confidence=0.95)) == "inconclusive"
    assert exit_code([], "inconclusive") == EXIT_ERROR


def test_claim_summary_names_the_strongest_row_and_the_smallest_detectable_excess():
    """Two claims on the same rows' divergence; the one at 0.5 is refuted by "a" (p adjusted over the family of
    four refuting rows), the one at 3.0 passes; its detectable excess is that of the row with the smallest error."""
    rows = [_row("a", 1.0, 0.5), _row("b", 0.4, 0.5), _row("a3", 1.0, 3.0), _row("b3", 0.4, 3.0)]
    errors = {"a": 0.1, "b": 0.02, "a3": 0.1, "b3": 0.02}
    evidence = {row.task: NormalEstimate(row.estimate, errors[row.task]) for row in rows}
    rows = _assign(rows, evidence, confidence=0.95)
    low, high = summarize_claims(rows)
    assert (low["claim"], low["verdict"], low["strongest_task"]) == (0.5, "violation", "a")
    assert low["p_adjusted"] == pytest.approx(4 * norm.sf(5.0))
    level = 0.05 / 4  # Holm tests a lone false hypothesis first, at the level of a family of four
    expected = (norm.isf(level) + norm.ppf(POWER)) * 0.02
    assert low["detectable_excess"] == pytest.approx(expected) == high["detectable_excess"]
    assert (high["verdict"], high["p_adjusted"], high["refuting_rows"]) == ("pass", 1.0, 2)


@pytest.mark.parametrize("level", [0.05, 0.05 / 12])
def test_detectable_excess_is_detected_with_the_stated_power(level):
    """A normal estimate centred at claim + detectable_excess exceeds its one-sided bound at ``level`` with
    probability POWER; 4000 draws estimate it within 4 binomial standard errors (sqrt(.8 .2 / 4000) = .0063)."""
    standard_error, claim = 0.07, 1.0
    excess = detectable_excess(NormalEstimate(0.0, standard_error), level)
    assert excess == pytest.approx((norm.isf(level) + norm.ppf(POWER)) * standard_error)
    draws = np.random.default_rng(2).normal(claim + excess, standard_error, size=4000)
    rejected = np.mean([NormalEstimate(x, standard_error).p_value(claim) <= level for x in draws])
    assert abs(rejected - POWER) <= 4 * math.sqrt(POWER * (1 - POWER) / draws.size)


def test_detectable_excess_is_infinite_without_a_finite_interval():
    assert detectable_excess(NormalEstimate(-math.inf, 0.1), 0.05) == math.inf
    assert detectable_excess(NormalEstimate(1.0, math.inf), 0.05) == math.inf


def test_rows_outside_the_family_have_no_adjusted_p():
    rows = [_row("info", 0.3, 0.5, refutes=False), _row("bad", math.nan, 0.5, error="boom")]
    rows = _assign(rows, {"info": NormalEstimate(0.3, 0.05), "bad": None}, confidence=0.95)
    assert all(math.isnan(row.p_adjusted) and math.isnan(row.detectable_excess) for row in rows)


def test_assign_verdicts_returns_new_rows_and_leaves_its_input_alone():
    rows = [_row("v", 2.0, 0.5), _row("info", 0.3, 0.5, refutes=False), _row("bad", math.nan, 0.5, error="boom")]
    judged = _assign(rows, {"v": NormalEstimate(2.0, 0.01), "info": NormalEstimate(0.3, 0.05), "bad": None},
                             confidence=0.95)
    assert [row.verdict for row in judged] == ["violation", "info", "inconclusive"]
    assert all(row.verdict is None and row.note == "" and math.isnan(row.ci_low) for row in rows)
    assert [row.task for row in judged] == ["v", "info", "bad"]
