"""audit.report: results.json schema, NaN/inf handling, report order, figures."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit.report import ROW_COLUMNS, SCHEMA_VERSION, load_results, write_audit_report

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
        "refutes_claim": verdict in ("violation", "unbounded"),
        "theory_bound": extra.pop("theory_bound", NAN),
        "exact": extra.pop("exact", NAN),
        "verdict": verdict,
        "note": note,
        "task": f"{pair}/{function_class}/{divergence}/{alpha}",
        "error": None,
    }


@pytest.fixture
def table():
    return pd.DataFrame(
        [
            _row("p0", "linear", "renyi", 4.0, 0.40, (0.38, 0.42), 0.5, "linear", "pass", theory_bound=0.73, exact=0.41),
            _row("p0", "poly2", "renyi", 4.0, 0.61, (0.58, 0.64), 0.5, "poly2", "violation", "lower bound 0.58 > 0.5"),
            _row("p0", "poly3", "renyi", 4.0, 0.52, (0.49, 0.55), 0.5, "poly2", "info", exact=0.6407),
            _row("p0", "mlp", "kl", NAN, 0.30, (0.25, 0.35), 0.28, "all", "inconclusive", "80000 samples would decide"),
            _row("p1", "linear", "kl", NAN, INF, (50.0, INF), 0.28, "all", "unbounded", "samples separable"),
        ]
    )


@pytest.fixture
def written(tmp_path, table):
    config = {"mechanism": {"name": "laplace"}, "attacks": {"confidence": 0.95, "n_samples": 20000}}
    report = write_audit_report(
        tmp_path, table=table, verdict="violation", seed=3, seconds=1.5, versions={"capaudit": "0.1.0"}, config=config
    )
    return tmp_path, report


def test_results_json_has_the_contract_schema_and_is_strict_json(written, table):
    out, _ = written
    text = (out / "results.json").read_text()
    document = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert set(document) == {"schema_version", "verdict", "seed", "seconds", "versions", "config", "audited", "pairs", "rows"}
    assert document["schema_version"] == SCHEMA_VERSION
    assert document["verdict"] == "violation" and document["seed"] == 3
    assert len(document["rows"]) == len(table)
    for row in document["rows"]:
        assert list(row)[: len(ROW_COLUMNS)] == list(ROW_COLUMNS)
    unbounded = next(r for r in document["rows"] if r["verdict"] == "unbounded")
    assert unbounded["estimate"] == "inf" and unbounded["ci_high"] == "inf" and unbounded["ci_low"] == 50.0
    assert unbounded["alpha"] is None and unbounded["theory_bound"] is None and unbounded["exact"] is None


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
    assert np.isinf(csv.loc[csv["verdict"] == "unbounded", "estimate"]).all()


def test_report_puts_the_verdict_first_then_violations(written):
    _, report = written
    text = report.read_text()
    heading_lines = [line for line in text.splitlines() if line.startswith("## ")]
    assert heading_lines[0] == "## Verdict: **VIOLATION**"
    assert heading_lines[1].startswith("## Violations (1)")
    violations = text.index("## Violations")
    assert text.index("lower bound 0.58 > 0.5") > violations
    assert text.index("80000 samples would decide") < text.index("## Results per claim")
    assert "0.61 [0.58, 0.64]" in text and "inf [50, inf]" in text
    assert "Holm" in text and "0.95" in text and "|t|" in text


def test_figures_are_written_and_embedded(written):
    out, report = written
    pngs = sorted(path.name for path in (out / "figures").glob("*.png"))
    assert pngs == ["kl.png", "renyi_alpha4.png"]
    for name in pngs:
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(figures/{name})" in report.read_text()


@pytest.mark.parametrize(
    "change,match",
    [({"verdict": "maybe"}, "verdict"), ({"drop": "exact"}, "exact")],
)
def test_bad_input_is_rejected_by_name(tmp_path, table, change, match):
    verdict = change.get("verdict", "pass")
    if "drop" in change:
        table = table.drop(columns=change["drop"])
    with pytest.raises(ValueError, match=match):
        write_audit_report(tmp_path, table=table, verdict=verdict, seed=0, seconds=0.0, versions={}, config={})


@pytest.mark.parametrize("seedable", [True, False])
def test_report_says_when_the_mechanism_cannot_be_seeded(tmp_path, table, seedable):
    config = {"attacks": {"confidence": 0.95}}
    path = write_audit_report(
        tmp_path, table=table, verdict="pass", seed=0, seconds=0.1,
        versions={"mechanism_seedable": seedable}, config=config,
    )
    assert ("Not reproducible bit for bit" in path.read_text()) is (not seedable)
