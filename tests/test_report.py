"""audit.report.audit_report: results.json schema, NaN/inf handling, report order, figures."""

import json
import math
from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest

from audit.report.audit_report import write_audit_report
from audit.results.schema import ROW_COLUMNS
from audit.results.files import SCHEMA_VERSION, load_results

from audit.results.schema import Row


def rows_of(table):
    """Typed rows of a results table (:meth:`audit.results.schema.Row.from_record`), as write_audit_report takes them."""
    return [Row.from_record(record) for record in table.to_dict(orient="records")]

NAN, INF = math.nan, math.inf


def _row(pair, function_class, divergence, alpha, estimate, ci, claim, claim_class, verdict, note="", **extra):
    return {
        "pair": pair,
        "direction": "P|Q",
        "function_class": function_class,
        "divergence": divergence,
        "alpha": alpha,
        "estimate": estimate,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "n_samples": 20000,
        "claim": claim,
        "claim_class": claim_class,
        "refutes_claim": verdict != "info",
        "theory_bound": extra.pop("theory_bound", NAN),
        "exact": extra.pop("exact", NAN),
        "verdict": verdict,
        "note": note,
        "task": f"{pair}/{function_class}/{divergence}/{alpha}",
        "error": None,
        "p_adjusted": extra.pop("p_adjusted", NAN),
        "detectable_excess": extra.pop("detectable_excess", NAN),
    }


@pytest.fixture
def table():
    return pd.DataFrame(
        [
            _row("p0", "linear", "renyi", 4.0, 0.40, (0.38, 0.42), 0.5, "linear", "pass", theory_bound=0.73, exact=0.41,
                 p_adjusted=1.0, detectable_excess=0.05),
            _row("p0", "poly2", "renyi", 4.0, 0.61, (0.58, 0.64), 0.5, "poly2", "violation", "lower bound 0.58 > 0.5",
                 p_adjusted=0.001, detectable_excess=0.06),
            _row("p0", "poly3", "renyi", 4.0, 0.52, (0.49, 0.55), 0.5, "poly2", "info", exact=0.6407),
            _row("p0", "mlp", "kl", NAN, 0.30, (0.25, 0.35), 0.28, "all", "inconclusive", "Holm-adjusted p = 0.2",
              p_adjusted=0.2, detectable_excess=0.09),
            _row("p1", "linear", "kl", NAN, INF, (50.0, INF), 0.28, "all", "violation", "samples separable"),
        ]
    )


@pytest.fixture
def written(tmp_path, table):
    config = {"mechanism": {"name": "laplace"}, "attacks": {"confidence": 0.95, "n_samples": 20000}}
    report = write_audit_report(
        tmp_path, rows=rows_of(table), verdict="violation", seed=3, seconds=1.5, versions={"capaudit": "0.1.0"}, config=config
    )
    return tmp_path, report


def test_results_json_has_the_contract_schema_and_is_strict_json(written, table):
    out, _ = written
    text = (out / "results.json").read_text()
    document = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert set(document) == {"schema_version", "verdict", "seed", "seconds", "versions", "config", "audited", "pairs", "claims", "outputs_drawn", "machine_dependent", "theory", "rows"}
    assert document["schema_version"] == SCHEMA_VERSION
    assert document["verdict"] == "violation" and document["seed"] == 3
    assert len(document["rows"]) == len(table)
    for row in document["rows"]:
        assert list(row)[: len(ROW_COLUMNS)] == list(ROW_COLUMNS)
    infinite = next(r for r in document["rows"] if r["function_class"] == "linear" and r["divergence"] == "kl")
    assert infinite["estimate"] == "inf" and infinite["ci_high"] == "inf" and infinite["ci_low"] == 50.0
    assert infinite["alpha"] is None and infinite["theory_bound"] is None and infinite["exact"] is None


def test_load_results_round_trips_values_nan_and_inf(written, table):
    out, _ = written
    loaded, meta = load_results(out)
    assert meta["config"]["attacks"]["confidence"] == 0.95 and meta["seconds"] == 1.5
    # Rows keep the writer's input order in results.json; only report.md sorts them.
    expected, loaded = table, loaded[table.columns]
    for column in ("alpha", "estimate", "ci_low", "ci_high", "claim", "theory_bound", "exact"):
        np.testing.assert_array_equal(loaded[column].to_numpy(float), expected[column].to_numpy(float))
    assert list(loaded["verdict"]) == list(expected["verdict"])
    assert list(loaded["task"]) == list(expected["task"])


def test_csv_has_one_line_per_row(written, table):
    out, _ = written
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == len(table) and list(csv.columns)[: len(ROW_COLUMNS)] == list(ROW_COLUMNS)
    assert np.isinf(csv.loc[(csv["function_class"] == "linear") & (csv["divergence"] == "kl"), "estimate"]).all()


def test_report_puts_the_verdict_first_then_violations(written):
    _, report = written
    text = report.read_text()
    heading_lines = [line for line in text.splitlines() if line.startswith("## ")]
    assert heading_lines[0] == "## Verdict: **VIOLATION**"
    assert heading_lines[1] == "## Claims"
    assert heading_lines[2].startswith("## Violations (2)")
    violations = text.index("## Violations")
    assert text.index("lower bound 0.58 > 0.5") > violations
    assert text.index("Holm-adjusted p = 0.2") < text.index("## Results per claim")
    assert "0.61 [0.58, 0.64]" in text and "inf [50, inf]" in text
    assert "Holm" in text and "0.95" in text and "|t|" in text


def test_figures_are_written_and_embedded(written):
    out, report = written
    svgs = sorted(path.name for path in (out / "figures").iterdir())
    assert svgs == ["kl.svg", "renyi_alpha4.svg"]
    for name in svgs:
        assert ElementTree.parse(out / "figures" / name).getroot().tag == "{http://www.w3.org/2000/svg}svg"
        assert f"(figures/{name})" in report.read_text()


@pytest.mark.parametrize(
    "change,match",
    [({"verdict": "maybe"}, "verdict"), ({"drop": "claim"}, "claim")],
)
def test_bad_input_is_rejected_by_name(tmp_path, table, change, match):
    verdict = change.get("verdict", "pass")
    if "drop" in change:
        table = table.drop(columns=change["drop"])
    with pytest.raises(ValueError, match=match):
        write_audit_report(tmp_path, rows=rows_of(table), verdict=verdict, seed=0, seconds=0.0, versions={}, config={})


@pytest.mark.parametrize("seedable", [True, False])
def test_report_says_when_the_mechanism_cannot_be_seeded(tmp_path, table, seedable):
    config = {"attacks": {"confidence": 0.95}}
    path = write_audit_report(
        tmp_path, rows=rows_of(table), verdict="pass", seed=0, seconds=0.1,
        versions={"mechanism_seedable": seedable}, config=config,
    )
    assert ("Not reproducible bit for bit" in path.read_text()) is (not seedable)


def test_results_json_summarises_each_claim(written):
    """Claims (linear, renyi 4) <= .5, (poly2, renyi 4) <= .5 and (all, kl) <= .28 (the poly3 row is info, the
    mlp row inconclusive and the linear kl row, infinite, a violation)."""
    out, _ = written
    claims = json.loads((out / "results.json").read_text())["claims"]
    by_class = {claim["claim_class"]: claim for claim in claims}
    assert [claim["claim_class"] for claim in claims] == ["linear", "poly2", "all"]
    assert by_class["linear"]["verdict"] == "pass" and by_class["linear"]["detectable_excess"] == 0.05
    assert by_class["poly2"]["verdict"] == "violation" and by_class["poly2"]["strongest_task"] == "p0/poly2/renyi/4.0"
    assert by_class["poly2"]["p_adjusted"] == 0.001 and by_class["poly2"]["alpha"] == 4.0
    assert by_class["all"]["verdict"] == "violation" and by_class["all"]["alpha"] is None
    _, meta = load_results(out)
    assert meta["claims"] == claims


def test_report_shows_the_claims_with_adjusted_p_and_detectable_excess(written):
    _, report = written
    text = report.read_text()
    claims = text[text.index("## Claims"):text.index("## Violations")]
    assert "(poly2, Renyi alpha=4) <= 0.5" in claims and "**violation**" in claims
    assert "detectable excess (80% power)" in claims and "0.05" in claims and "0.001" in claims
    assert "untested" in text  # the Method section explains the claim verdicts


def test_an_untested_claim_is_reported_with_its_reason(tmp_path, table):
    failed = table.iloc[[0]].assign(error="attack linear/renyi failed: boom", verdict="inconclusive",
                                    refutes_claim=True,
                                    estimate=NAN, p_adjusted=NAN, detectable_excess=NAN)
    report = write_audit_report(tmp_path, rows=rows_of(failed), verdict="inconclusive", seed=0, seconds=0.1, versions={},
                                config={"attacks": {"confidence": 0.95}})
    (claim,) = json.loads((tmp_path / "results.json").read_text())["claims"]
    assert claim["verdict"] == "untested" and claim["strongest_task"] is None and "classes linear" in claim["note"]
    assert "**untested**" in report.read_text()


def test_an_audit_writes_its_claims_and_adjusted_p_values(tmp_path):
    """Through run_audit: a claim far above the truth passes with adjusted p = 1 (Holm's cap), one far below is
    violated; the claims in results.json match AuditResult.claims and the rows' p_adjusted column."""
    from audit import run_audit

    config = {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 5.0},
                   {"divergence": "kl", "function_class": "linear", "epsilon": 0.01}],
        "attacks": {"classes": ["linear"], "n_samples": 4000, "confidence": 0.95},
        "run": {"seed": 0, "n_jobs": 1},
    }
    result = run_audit(config, progress=False)
    result.write(tmp_path)
    claims = json.loads((tmp_path / "results.json").read_text())["claims"]
    assert [(c["claim"], c["verdict"]) for c in claims] == [(5.0, "pass"), (0.01, "violation")]
    assert claims[0]["p_adjusted"] == 1.0 and 0 < claims[0]["detectable_excess"] < 5.0
    rows = result.table.set_index("task")
    assert claims[1]["p_adjusted"] == rows.loc[rows["claim"] == 0.01, "p_adjusted"].min() <= 0.05
    assert [c["verdict"] for c in result.claims] == ["pass", "violation"]


def test_method_notes_read_the_policy_and_sample_size_off_the_rows(tmp_path, table):
    """A config that leaves policy and n_samples to their defaults: the report reads them off the rows."""
    staged = table.assign(policy="best", n_screen=5000, n_train=20000, n_check=20000, n_confirm=55000,
                          candidates=12, finalists=3, sets_pooled=1, n_samples=100000)
    report = write_audit_report(tmp_path, rows=rows_of(staged), verdict="violation", seed=3, seconds=1.5, versions={},
                                config={"mechanism": {"name": "laplace"}, "attacks": {}})
    method = report.read_text().split("## Method")[1]
    assert "Samples (policy best): 100000 outputs per dataset" in method
