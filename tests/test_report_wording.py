"""report.md says what the audit did in words that are true: deltas, stops, rows, sampling budgets, estimates."""

import math
import re
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from audit import run_audit
from audit.config.families import claim_summaries
from audit.report.audit_report import write_audit_report
from audit.results.schema import Row

ROOT = Path(__file__).resolve().parents[1]


def _row(**fields):
    base = dict(pair="p0", direction="P|Q", function_class="threshold", divergence="dp", alpha=math.nan,
                estimate=0.8, ci_low=0.6, ci_high=1.0, n_samples=20000, claim=1.0, claim_class="all",
                refutes_claim=True, verdict="pass", p_adjusted=1.0, detectable_excess=0.2,
                task="p0|P|Q|threshold|dp||1e-06")
    return Row(**{**base, **fields})


def _report(tmp_path, rows, config):
    write_audit_report(tmp_path, rows=rows, verdict="pass", seed=0, seconds=1.0, versions={"capaudit": None},
                       config=config)
    return (tmp_path / "report.md").read_text()


DP_CONFIG = {"mechanism": {"name": "laplace"},
             "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0, "delta": 1e-6}],
             "attacks": {"confidence": 0.95, "n_samples": 20000}}


def test_a_dp_claims_delta_is_shown_wherever_the_claim_is_named(tmp_path):
    report = _report(tmp_path, [_row(delta=1e-6)], DP_CONFIG)  # an engine row carries its claim's delta
    assert "(all, DP epsilon) <= 1 at delta=1e-06" in report.split("## Claims")[1].split("\n\n")[1]  # Claims table
    assert "### Claim: (all, DP epsilon) <= 1 at delta=1e-06" in report  # Results per claim
    assert "(all, DP epsilon) <= 1 |" not in report and "(all, DP epsilon) <= 1\n" not in report
    pure = {**DP_CONFIG, "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}]}
    assert "delta" not in _report(tmp_path, [_row(task="p0|P|Q|threshold|dp||0")], pure).split("## Method")[0]


SEQUENTIAL = dict(policy="best", n_screen=4000, n_train=4000, n_check=4000, n_confirm=244000, candidates=2,
                  finalists=1, sets_pooled=1, outputs_drawn=1_360_000, rounds=3, n_samples=256000)


def test_decided_is_never_said_beside_a_verdict_it_contradicts(tmp_path):
    config = {**DP_CONFIG, "attacks": {"confidence": 0.95}}  # no n_samples: a sequential audit
    inconclusive = _row(verdict="inconclusive", estimate=1.05, ci_low=0.95, stop="decided", **SEQUENTIAL)
    report = _report(tmp_path, [inconclusive], config)
    (line,) = [text for text in report.splitlines() if "stopped after" in text]
    assert "decided" not in line and "reads inconclusive, not pass" in line
    passing = _report(tmp_path, [_row(stop="decided", **SEQUENTIAL)], config)
    (line,) = [text for text in passing.splitlines() if "stopped after" in text]
    assert "decided, a pass" in line


def test_a_sequential_report_does_not_call_n_samples_a_budget_it_never_had(tmp_path):
    config = {**DP_CONFIG, "attacks": {"confidence": 0.95}}
    report = _report(tmp_path, [_row(stop="decided", **SEQUENTIAL)], config)
    assert "`n_samples` is one pair's budget" not in report
    assert "`n_samples` is unset: each search ran in rounds" in report  # Staged search
    assert "(policy best, `n_samples` unset): each search ran in rounds" in report  # Method
    fixed = _report(tmp_path, [_row(stop="fixed", **{**SEQUENTIAL, "rounds": 1})], DP_CONFIG)
    assert "`n_samples` is one pair's budget over four stages" in fixed and "unset" not in fixed


def test_the_method_does_not_call_a_log_of_means_unbiased(tmp_path):
    report = _report(tmp_path, [_row()], DP_CONFIG)
    method = report.split("## Method")[1]
    assert "unbiased estimate of a lower bound" not in method
    assert "unbiased for ipm" in method and "biased upward" in method
    theory = (ROOT / "docs" / "theory.md").read_text()
    assert "unbiased estimate\nof a lower bound" not in theory and "biased upward" in theory


def test_profile_tables_get_distinct_labels():
    config = {"claims": [
        {"divergence": "profile", "function_class": "all", "epsilons": [0.5, 1.0], "deltas": [0.1, 0.01]},
        {"divergence": "profile", "function_class": "all", "epsilons": [0.5, 2.0], "deltas": [0.1, 0.01]},
        {"divergence": "profile", "function_class": "all", "epsilons": [0.5, 2.0], "deltas": [0.1, 0.01]},
    ]}
    labels = [line["label"] for line in claim_summaries([], config)]
    assert labels[0] == "(all, privacy profile at 2 points (epsilon, delta) = (0.5, 0.1), (1, 0.01))"
    assert len(set(labels)) == 3  # the two identical tables are told apart by their place
    assert labels[1].endswith("[claim 2 of the config]") and labels[2].endswith("[claim 3 of the config]")


@pytest.fixture(scope="module")
def tradeoff_report(tmp_path_factory):
    """The Gaussian (sigma = 0.5) against a 1-GDP claim: the trade-off section and its figure."""
    out = tmp_path_factory.mktemp("tradeoff")
    config = {"mechanism": {"name": "gaussian", "params": {"sigma": 0.5}},
              "claims": [{"divergence": "gdp", "function_class": "all", "epsilon": 1.0}],
              "attacks": {"classes": ["linear"], "n_samples": 4000}, "run": {"seed": 0}}
    run_audit(config, progress=False, out_dir=out)
    return out


def test_the_tradeoff_section_names_rows_in_words(tradeoff_report):
    section = (tradeoff_report / "report.md").read_text().split("## Trade-off curves")[1].split("\n## ")[0]
    assert "staged|" not in section and "|linear|dp|" not in section
    assert "so their rows are dependent" in section  # members share one sample (issue 34 item 4)
    assert re.search(r"\| pair p0, M\(d'?\) against M\(d'?\), linear functions \(linear\) +\|", section)


def test_the_tradeoff_figure_zooms_on_the_deciding_region(tradeoff_report):
    svg = ElementTree.parse(tradeoff_report / "figures" / "tradeoff.svg").getroot()
    texts = ["".join(element.itertext()) for element in svg.iter() if element.tag.endswith("}text")]
    assert any("zoomed: a <= 0.1" in text for text in texts)
    assert "0.10" in texts and "0.02" in texts  # the zoomed panel's a axis: ticks within [0, 0.1]
    widths = {float(line.get("stroke-width", 0)) for line in svg.iter() if line.tag.endswith("}path")
              and line.get("stroke-dasharray") == "5,3" and line.get("stroke") != "#000000"}
    assert widths and min(widths) >= 1.5  # the empirical curves: dashed, in their class's colour, not hairlines


def test_explicit_pairs_farther_apart_are_judged_at_their_distance_and_d_equal_to_d_prime_is_refused(tmp_path, capsys):
    """Explicit pairs without a relation are audited at their own distance: a dp claim of 1 is carried to 2 on the
    pair two records apart (group privacy), which the report names and no warning flags; a pair with d' = d, whose
    rows could only pass, is refused (exit 2) naming it."""
    from audit.commands.cli import main

    head = '[mechanism]\nname = "laplace"\nparams = { epsilon = 1.0 }\n\n'
    tail = ('[[claims]]\ndivergence = "dp"\nfunction_class = "all"\nepsilon = 1.0\n\n'
            '[attacks]\nclasses = ["threshold"]\nn_samples = 400\npolicy = "every"\n\n[run]\nseed = 0\nn_jobs = 1\n')
    config = tmp_path / "far.toml"
    config.write_text(head + '[[pairs]]\nd = [[0.0], [0.0]]\nd_prime = [[1.0], [1.0]]\n\n'
                      '[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n' + tail)
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    assert "not neighbours" not in capsys.readouterr().out
    screen = (out / "report.md").read_text()
    assert "WARNING, pairs that are not neighbours" not in screen and "d_in = 2" in screen
    same = tmp_path / "same.toml"
    same.write_text(head + '[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n[[pairs]]\nd = [[0.0]]\nd_prime = [[0.0]]\n\n'
                    + tail)
    assert main(["run", str(same), "--out", str(tmp_path / "same"), "--quiet"]) == 2
    assert "pairs[1]: d and d_prime are one dataset" in capsys.readouterr().err


def test_query_answer_pairs_are_neighbours_under_the_mechanisms_own_notion():
    """DP-Sniper's report noisy max reads a vector of query answers of sensitivity 1 each: its pairs are
    neighbours when no answer moves by more than 1 (||q - q'||_inf <= 1), however many answers move, so its
    default pairs (p2: [1, 1, 1, 1, 1] against [2, 0, 0, 0, 0], 5 "records" apart) get no warning; answers 2
    apart do, and so do records 2 apart for a mechanism on records."""
    from types import SimpleNamespace

    from audit.mechanisms.registry import make_mechanism
    from audit.inputs.neighbours import make_pairs
    from audit.results.provenance import not_neighbours, pair_records

    noisy_max = make_mechanism("report_noisy_max_3", {"epsilon": 0.1})
    records = pair_records(make_pairs(None, noisy_max), noisy_max.input_relation)
    assert [2.0, 0.0, 0.0, 0.0, 0.0] in [record["d_prime"] for record in records]
    assert {record["relation"] for record in records} == {"query-answers"} and not_neighbours(records) == []
    far_answers = SimpleNamespace(name="p0", d=np.ones(5), d_prime=np.array([3.0, 1.0, 1.0, 1.0, 0.0]))
    [warning] = not_neighbours(pair_records([far_answers], "query-answers"))
    assert "p0's answers are 2 apart (inf-norm of d - d')" in warning and "may reach 2 epsilon" in warning
    [warning] = not_neighbours(pair_records([far_answers], "counts"))  # a histogram: one count moves by 1 in all
    assert "p0's counts are 3 apart (1-norm of d - d')" in warning
    two_records = SimpleNamespace(name="p1", d=np.array([[0.0], [0.0]]), d_prime=np.array([[1.0], [1.0]]))
    [warning] = not_neighbours(pair_records([two_records]))  # replace-one, 2 records differ: records counted
    assert "p1's datasets differ in 2 records" in warning
