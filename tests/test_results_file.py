"""audit.results.files: results.json and results.csv hold the same numbers, NaN and infinities included."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit.results.files import json_text, json_value, load_results, write_results
from audit.results.schema import ROW_COLUMNS, Row

ROWS = [
    Row(pair="p0", direction="P|Q", function_class="linear", divergence="kl", estimate=0.25, ci_low=0.1,
        ci_high=0.4, n_samples=1000, claim=0.5, claim_class="all", verdict="pass", task="a"),
    Row(pair="p0", direction="Q|P", function_class="linear", divergence="dp", estimate=math.inf, ci_low=math.inf,
        ci_high=math.inf, n_samples=1000, claim=1.0, claim_class="all", verdict="unbounded", task="b",
        p_adjusted=0.0),
    Row(pair="p1", direction="P|Q", function_class="kernel", divergence="renyi", alpha=2.0, ci_low=-math.inf,
        claim=1.0, claim_class="all", verdict="inconclusive", error="boom", task="c"),
]


@pytest.fixture
def written(tmp_path):
    table = pd.DataFrame([row.to_record() for row in ROWS])
    table["held_out_scores"] = [{"edges": [0.0, 1.0], "p": [3], "q": [1]}, None, None]
    write_results(tmp_path, {"verdict": "pass", "seed": 1}, table)
    return tmp_path, table


def test_json_value_is_the_one_conversion():
    assert json_value(math.nan) is None and json_value(None) is None and json_value(pd.NA) is None
    assert json_value(math.inf) == "inf" and json_value(-np.inf) == "-inf"
    assert json_value(np.float64(0.5)) == 0.5 and type(json_value(np.int64(3))) is int
    assert json_value({1: [np.nan, (np.inf, 2)]}) == {"1": [None, ["inf", 2]]}
    assert json_text({"a": math.nan, "b": [math.inf]}, indent=None) == '{"a":null,"b":["inf"]}'


def test_results_json_is_strict_and_reads_back_the_same_rows(written):
    out, table = written
    document = json.loads((out / "results.json").read_text())  # strict JSON: no NaN / Infinity tokens
    assert "NaN" not in (out / "results.json").read_text() and "Infinity" not in (out / "results.json").read_text()
    assert document["verdict"] == "pass" and document["rows"][1]["estimate"] == "inf"
    assert document["rows"][2]["estimate"] is None and document["rows"][2]["ci_low"] == "-inf"
    loaded, meta = load_results(out)
    assert meta == {"verdict": "pass", "seed": 1}
    assert [Row.from_record(record) for record in loaded.to_dict(orient="records")] == ROWS


def test_results_csv_holds_the_numbers_of_results_json(written):
    out, _ = written
    loaded, _ = load_results(out)
    csv = pd.read_csv(out / "results.csv")
    assert "held_out_scores" not in csv.columns and "held_out_scores" in loaded.columns
    for column in ROW_COLUMNS:
        if pd.api.types.is_float_dtype(loaded[column]):
            np.testing.assert_array_equal(csv[column].to_numpy(float), loaded[column].to_numpy(float))
        else:
            assert _text(csv[column]) == _text(loaded[column])


def _text(column: pd.Series) -> list[str]:
    """A column's cells as text, a missing one as "" (how results.csv writes it)."""
    return ["" if pd.isna(value) else str(value) for value in column]


def test_a_failed_audit_writes_its_rows_through_the_same_writer(tmp_path):
    from audit.commands.api import write_failure

    assert write_failure(tmp_path, "the verdicts failed: boom", [row.to_record() for row in ROWS], seed=4)
    loaded, meta = load_results(tmp_path)
    assert meta["verdict"] == "error" and meta["error"] == "the verdicts failed: boom" and meta["seed"] == 4
    assert [Row.from_record(record) for record in loaded.to_dict(orient="records")] == ROWS
    csv = pd.read_csv(tmp_path / "results.csv")
    np.testing.assert_array_equal(csv["estimate"].to_numpy(float), [0.25, math.inf, math.nan])
