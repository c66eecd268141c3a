"""audit.results.schema: the typed results row, its column lists and its plain records."""

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from attacks.evidence import NormalEstimate
from audit.results.schema import (
    NUMERIC_COLUMNS,
    ON_AVERAGE_COLUMNS,
    ROW_COLUMNS,
    STAGE_SIZE_COLUMNS,
    STAGED_COLUMNS,
    TABLE_COLUMNS,
    TASK_COLUMNS,
    VERDICT_COLUMNS,
    CLAIM_COLUMNS,
    Row,
)

# The columns of results.json / results.csv before the typed row: they must not move.
WRITTEN = (
    "pair", "direction", "function_class", "divergence", "alpha", "estimate", "ci_low", "ci_high", "n_samples",
    "claim", "claim_class", "refutes_claim", "theory_bound", "exact", "verdict", "note",
    "p_adjusted", "detectable_excess", "task", "error", "resumed",
    "on_average", "pairs_averaged", "worst_case", "worst_case_low", "delta", "layer",
)
STAGED = ("policy", "n_screen", "n_train", "n_check", "n_confirm", "candidates", "finalists", "sets_pooled",
          "outputs_drawn", "rounds", "stop", "interval")


def _record(**extra):
    """A row before verdicts as a plain record (``Row.to_record`` of an engine's row)."""
    return {
        "pair": "p0", "direction": "P|Q", "function_class": "linear", "divergence": "renyi", "alpha": 2.0,
        "estimate": 0.31, "ci_low": math.nan, "ci_high": math.nan, "n_samples": 20000, "claim": 0.5,
        "claim_class": "all", "refutes_claim": True, "theory_bound": 0.7, "exact": math.nan, "verdict": None,
        "note": "", "p_adjusted": math.nan, "detectable_excess": math.nan, "task": "p0|P|Q|linear|renyi|2|0",
        "error": None, "resumed": False, "on_average": False,
        **{name: extra.pop(name) for name in ON_AVERAGE_COLUMNS if name in extra},
        "delta": 0.0, "layer": "value", **extra,
    }


def test_the_column_lists_are_the_fields_of_the_row_in_their_old_order():
    assert TABLE_COLUMNS == WRITTEN and STAGED_COLUMNS == STAGED and STAGE_SIZE_COLUMNS == STAGED[1:]
    assert ROW_COLUMNS + VERDICT_COLUMNS + TASK_COLUMNS + ON_AVERAGE_COLUMNS + CLAIM_COLUMNS == TABLE_COLUMNS
    assert NUMERIC_COLUMNS == ("alpha", "estimate", "ci_low", "ci_high", "n_samples", "claim", "theory_bound", "exact")
    fields = [field.name for field in dataclasses.fields(Row)]
    checks = ["checked", "theorem", "mechanisms", "level", "measurements"]  # a [[checks]] row's own: not in the table
    assert fields == [*WRITTEN, *STAGED, "d_in", *checks, "evidence"]  # internal, never written
    assert not set(checks) & set(Row(**_record()).to_record())


def test_a_check_row_reads_back_from_its_record_unchanged():
    """A check's tasks.jsonl record (results.json's ``checks`` entry) gives back its row: what --resume relies on."""
    row = Row(pair="checks[1]", direction="P|Q", task="checks[1]", function_class="linear", divergence="kl",
              n_samples=400, claim=0.7, claim_class="linear", estimate=0.3, ci_low=0.1,
              verdict="holds", checked="sequential", theorem="Thm 4", mechanisms=("laplace(epsilon=1.0)",) * 2,
              level=0.99, measurements=({"role": "M1", "estimate": 0.3, "low": 0.1, "high": 0.5, "exact": None,
                                         "caveat": None},))
    record = json.loads(json.dumps(row.to_check_record()))
    assert record["check"] == "checks[1]" and record["property"] == "sequential" and record["alpha"] is None
    assert (record["bound"], record["measured"], record["measured_low"]) == (0.7, 0.3, 0.1)
    assert Row.from_check_record(record) == row


def test_the_row_carries_its_evidence_but_never_writes_or_compares_it():
    row = Row.from_record({**_record(), "evidence": {"estimate": 0.31}})  # a record's plain evidence is not read
    assert row.evidence is None
    carried = dataclasses.replace(row, evidence=NormalEstimate(0.31, 0.1))
    assert carried == row and carried.evidence.lower_bound(0.5) == pytest.approx(0.31)
    assert "evidence" not in carried.to_record() and "evidence" not in repr(carried)


@pytest.mark.parametrize("extra", [
    {},
    {"pairs_averaged": 12, "worst_case": 0.9, "worst_case_low": 0.2, "on_average": True, "pair": "average"},
    dict(zip(STAGED, ("best", 5000, 20000, 20000, 55000, 12, 3, 4))),
], ids=["worst case", "on-average aggregate", "staged"])
def test_to_record_inverts_from_record_key_for_key(extra):
    """The record the engines build comes back with the same keys, order, values and types (so the same JSON)."""
    record = _record(**extra)
    row = Row.from_record(record)
    back = row.to_record()
    assert list(back) == list(record)
    assert json.dumps(back) == json.dumps(record)
    assert all(type(back[key]) is type(record[key]) for key in record)


def test_from_record_reads_older_tables_and_missing_cells_as_defaults():
    """A table of an older version: only ROW_COLUMNS, numpy scalars, NaN for missing cells, an extra column."""
    old = {key: value for key, value in _record().items() if key in ROW_COLUMNS}
    old.update(n_samples=np.float64(1000.0), refutes_claim=np.True_, note=math.nan, held_out_scores=None)
    row = Row.from_record(old)
    assert row.n_samples == 1000 and type(row.n_samples) is int and row.refutes_claim is True and row.note == ""
    assert math.isnan(row.p_adjusted) and row.task is None and row.error is None and row.on_average is False
    assert row.policy is None and row.pairs_averaged is None
    # no aggregate fields (not an on-average row); the delta defaults to 0 and the layer follows the class
    assert list(row.to_record()) == [name for name in TABLE_COLUMNS if name not in ON_AVERAGE_COLUMNS[1:]]
    assert row.delta == 0.0 and row.layer == "value"
    assert Row.from_record({**old, "function_class": "floatbits"}).layer == "representation"


def test_a_table_round_trips_through_typed_rows():
    """pd.DataFrame of the records, as AuditResult.table is built, is the same table after from_record / to_record."""
    records = [_record(), _record(pair="average", on_average=True, pairs_averaged=3, worst_case=0.4,
                                  worst_case_low=0.1, error=None), _record(error="boom", estimate=math.nan)]
    table = pd.DataFrame(records, columns=TABLE_COLUMNS)
    rows = [Row.from_record(record) for record in table.to_dict(orient="records")]
    rebuilt = pd.DataFrame([row.to_record() for row in rows], columns=TABLE_COLUMNS)
    pd.testing.assert_frame_equal(rebuilt, table)


def test_from_record_names_a_missing_column():
    record = _record()
    del record["claim_class"]
    with pytest.raises(ValueError, match=r"\['claim_class'\]"):
        Row.from_record(record)


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Row.from_record(_record()).verdict = "pass"
