"""Row verdicts, Holm's step-down and the overall verdict, on synthetic evidence."""

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import norm

from audit.verdicts import (
    EXIT_ERROR,
    EXIT_PASS,
    EXIT_VIOLATION,
    assign_verdicts,
    exit_code,
    holm_levels,
    holm_rejections,
    samples_to_decide,
)


@dataclass(frozen=True)
class NormalEvidence:
    """An estimate with a normal sampling distribution: the evidence protocol of audit.verdicts."""

    estimate: float
    standard_error: float

    def p_value(self, claim: float) -> float:
        return float(norm.sf((self.estimate - claim) / self.standard_error))

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        half = norm.ppf(0.5 + confidence / 2) * self.standard_error
        return self.estimate - half, self.estimate + half


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


def _row(task, estimate, claim, refutes=True, error=None):
    return {"task": task, "estimate": estimate, "claim": claim, "refutes_claim": refutes,
            "n_samples": 1000, "error": error, "note": ""}


def test_row_verdicts_and_overall():
    rows = [
        _row("violation", 1.0, 0.5),
        _row("pass", 0.3, 0.5),
        _row("inconclusive", 0.55, 0.5),
        _row("info", 5.0, 0.5, refutes=False),
    ]
    evidence = {"violation": NormalEvidence(1.0, 0.05), "pass": NormalEvidence(0.3, 0.05),
                "inconclusive": NormalEvidence(0.55, 0.05), "info": NormalEvidence(5.0, 0.05)}
    overall = assign_verdicts(rows, evidence, confidence=0.95)
    assert [row["verdict"] for row in rows] == ["violation", "pass", "inconclusive", "info"]
    assert overall == "violation" and exit_code(rows, overall) == EXIT_VIOLATION
    assert "samples per dataset would decide" in rows[2]["note"]


def test_intervals_use_the_holm_level_of_each_row():
    """Three refuting rows: "a" is rejected at step 1 (level .05/3); the procedure stops at step 2
    (level .05/2), the level of every row not rejected, "c" included."""
    estimates = {"a": 1.0, "b": 0.6, "c": 0.2}
    rows = [_row(task, value, 0.5) for task, value in estimates.items()]
    evidence = {task: NormalEvidence(value, 0.1) for task, value in estimates.items()}
    assign_verdicts(rows, evidence, confidence=0.95)
    assert [row["verdict"] for row in rows] == ["violation", "inconclusive", "pass"]
    for row, level in zip(rows, [0.05 / 3, 0.05 / 2, 0.05 / 2]):
        assert row["ci_low"] == pytest.approx(row["estimate"] - norm.isf(level) * 0.1, rel=1e-9)
        assert row["ci_high"] == pytest.approx(row["estimate"] + norm.isf(level) * 0.1, rel=1e-9)


def test_ci_low_exceeds_the_claim_exactly_on_violations():
    """p-values .03, .04, .045 (claim .5, standard error .1): none is rejected (.03 > .05/3), although
    the last is below its own step's level .05; at that level its ci_low would be 0.505 > 0.5."""
    p_values = {"x": 0.03, "y": 0.04, "z": 0.045}
    estimates = {task: 0.5 + norm.isf(p) * 0.1 for task, p in p_values.items()}
    rows = [_row(task, value, 0.5) for task, value in estimates.items()]
    evidence = {task: NormalEvidence(value, 0.1) for task, value in estimates.items()}
    assign_verdicts(rows, evidence, confidence=0.95)
    assert [row["verdict"] for row in rows] == ["inconclusive"] * 3
    assert all(row["ci_low"] <= 0.5 for row in rows)
    assert rows[2]["ci_low"] == pytest.approx(estimates["z"] - norm.isf(0.05 / 3) * 0.1, rel=1e-9)


def test_info_rows_use_the_plain_confidence():
    rows = [_row("x", 1.0, 0.5, refutes=False)]
    assign_verdicts(rows, {"x": NormalEvidence(1.0, 0.1)}, confidence=0.9)
    assert rows[0]["ci_low"] == pytest.approx(1.0 - norm.isf(0.05) * 0.1)


@pytest.mark.parametrize("claim", [0.0, 0.5, 10.0])
def test_nan_estimate_is_never_pass(claim):
    rows = [_row("nan", math.nan, claim)]
    overall = assign_verdicts(rows, {"nan": NormalEvidence(math.nan, 0.1)}, confidence=0.95)
    assert rows[0]["verdict"] == "inconclusive" and overall == "inconclusive"
    assert "NaN" in rows[0]["note"]


def test_unbounded_row_is_a_violation_and_info_stays_info():
    rows = [_row("sep", math.inf, 100.0), _row("sep-info", math.inf, 100.0, refutes=False)]
    overall = assign_verdicts(rows, {"sep": None, "sep-info": None}, confidence=0.95)
    assert [row["verdict"] for row in rows] == ["unbounded", "info"]
    assert overall == "violation" and "unbounded" in rows[0]["note"]


def test_error_rows_make_the_audit_inconclusive_and_exit_2():
    rows = [_row("ok", 0.1, 0.5), _row("bad", math.nan, 0.5, error="mechanism 'f' raised ValueError: boom")]
    overall = assign_verdicts(rows, {"ok": NormalEvidence(0.1, 0.05), "bad": None}, confidence=0.95)
    assert [row["verdict"] for row in rows] == ["pass", "inconclusive"]
    assert "boom" in rows[1]["note"]
    assert overall == "inconclusive" and exit_code(rows, overall) == EXIT_ERROR


def test_error_wins_over_violation_in_the_exit_code():
    rows = [_row("v", 2.0, 0.5), _row("bad", math.nan, 0.5, error="boom")]
    overall = assign_verdicts(rows, {"v": NormalEvidence(2.0, 0.01), "bad": None}, confidence=0.95)
    assert overall == "violation" and exit_code(rows, overall) == EXIT_ERROR


def test_all_pass_exits_0():
    rows = [_row("a", 0.1, 0.5), _row("b", 0.2, 0.5)]
    overall = assign_verdicts(rows, {"a": NormalEvidence(0.1, 0.05), "b": NormalEvidence(0.2, 0.05)}, 0.95)
    assert overall == "pass" and exit_code(rows, overall) == EXIT_PASS


def test_samples_to_decide_clears_the_claim():
    """At n_needed the half-width, shrunk by sqrt(n / n_needed), is at most the gap estimate - claim."""
    n, estimate, ci_low, claim = 1000, 0.6, 0.4, 0.5
    needed = samples_to_decide(n, estimate, ci_low, claim)
    assert needed == 4000  # half-width 0.2 must halve to 0.1: 4 times the samples
    assert (estimate - ci_low) * math.sqrt(n / needed) <= estimate - claim + 1e-12
    assert samples_to_decide(n, 0.4, 0.3, 0.5) is None
