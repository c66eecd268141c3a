"""results.json and results.csv: their one writer and one reader, and the one place numbers are converted.

JSON has no infinity and no NaN.  In results.json a missing number (NaN,
None, ``pd.NA``) is written as ``null`` and an infinite one as the string
``"inf"`` (or ``"-inf"``), so that an infinite estimate or bound still
reads as infinite instead of vanishing into ``null`` (docs/results.md; the
``number`` of docs/schema/results.schema.json); :func:`json_value` is that
conversion and :func:`load_results` its inverse for the row columns.
results.csv holds the same rows (without ``held_out_scores``), written by
pandas: NaN as an empty cell, infinities as ``inf`` / ``-inf``, which
``pandas.read_csv`` reads back as the same floats.

The audit's report (:func:`audit.report.audit_report.write_audit_report`) and the
results of an audit that reached no verdict (:func:`audit.commands.api.write_failure`)
are written by :func:`write_results`; the summaries (:mod:`audit.report.summary`)
read them with :func:`load_results`.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audit.results.schema import (DISTANCE_COLUMNS, NUMERIC_COLUMNS, ROW_COLUMNS, STAGED_COLUMNS, TABLE_COLUMNS,
                                  VERDICT_COLUMNS, Row, column_order)

SCHEMA_VERSION = "1.0"
"""Version of results.json's layout: the minor part grows with added fields, the major with changed ones."""
RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
JSON_ONLY = ("held_out_scores",)
"""Row columns written to results.json only (the binned held-out scores: not a CSV cell)."""


def json_value(value: Any) -> Any:
    """``value`` as strict JSON: NaN, None and ``pd.NA`` -> null, +-inf -> "inf"/"-inf", numpy scalars -> Python ones.

    Mappings and sequences are converted item by item (keys become strings).
    """
    if isinstance(value, Mapping):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def json_text(document: Mapping[str, Any], indent: int | None = 2) -> str:
    """``document`` as strict JSON text (:func:`json_value`); values JSON cannot hold otherwise (TOML dates in
    a config) are written as text.  ``indent=None``: one line without spaces."""
    separators = None if indent is not None else (",", ":")
    return json.dumps(json_value(document), indent=indent, separators=separators, allow_nan=False, default=str)


def results_table(rows: Sequence[Row]) -> pd.DataFrame:
    """The rows as ``AuditResult.table`` and the results files hold them: :data:`audit.results.schema.TABLE_COLUMNS`,
    :data:`audit.results.schema.STAGED_COLUMNS` and ``d_in`` when a row carries them (NaN in the rows that do not), then
    ``held_out_scores`` (:attr:`audit.results.schema.Row.held_out_scores`, results.json only)."""
    records = [row.to_record() for row in rows]
    staged = [column for column in STAGED_COLUMNS + DISTANCE_COLUMNS if any(column in record for record in records)]
    table = pd.DataFrame(records, columns=[*TABLE_COLUMNS, *staged])
    table["held_out_scores"] = [row.held_out_scores for row in rows]
    return table


def write_results(out_dir: str | pathlib.Path, meta: Mapping[str, Any], table: pd.DataFrame) -> None:
    """Write ``out_dir/results.json`` (``meta``'s fields, then ``rows``: one object per table row) and
    ``out_dir/results.csv`` (the table's rows, without :data:`JSON_ONLY` columns)."""
    out_dir = pathlib.Path(out_dir)
    document = {**meta, "rows": table.to_dict(orient="records")}
    (out_dir / RESULTS_JSON).write_text(json_text(document) + "\n")
    table.drop(columns=list(JSON_ONLY), errors="ignore").to_csv(out_dir / RESULTS_CSV, index=False)


def load_results(path: str | pathlib.Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a results.json back into ``(table, meta)``.

    Parameters
    ----------
    path : str or Path
        A results.json file, or the directory holding one.

    Returns
    -------
    table : pandas.DataFrame
        One row per results row, schema columns first; ``null`` numbers are
        NaN and ``"inf"`` strings are infinite floats again.
    meta : dict
        ``schema_version``, ``verdict``, ``seed``, ``seconds``, ``versions``,
        ``config``, ``audited``, ``pairs``, ``claims`` and ``theory`` (results
        written before schema version 1.0 lack the first and the last three,
        those before the theory check ``theory``).

    Raises
    ------
    ValueError
        When the file is not JSON, not an audit's results (no ``verdict`` or
        ``rows`` list) or of a ``schema_version`` whose major part this version
        cannot read; the message says which.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / RESULTS_JSON
    document = _results_document(path.read_text())
    rows = document.pop("rows")
    table = pd.DataFrame(rows, columns=column_order(rows[0].keys() if rows else ROW_COLUMNS))
    for column in NUMERIC_COLUMNS + tuple(c for c in VERDICT_COLUMNS if c in table.columns):
        table[column] = pd.to_numeric(table[column].replace({"inf": math.inf, "-inf": -math.inf}), errors="raise")
    return table, document


def _results_document(text: str) -> dict[str, Any]:
    """The JSON object of a results.json's text, checked to be an audit's results of a readable schema version."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    fix = "give a results.json written by capaudit run"
    if not isinstance(document, dict) or not isinstance(document.get("rows"), list) or "verdict" not in document:
        raise ValueError(f"not an audit's results: it needs a top-level object with 'verdict' and a 'rows' list; {fix}")
    version = str(document.get("schema_version", SCHEMA_VERSION))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise ValueError(f"schema_version {version!r} is not readable by this capaudit (it reads "
                         f"{SCHEMA_VERSION.split('.')[0]}.x); use the capaudit version that wrote it")
    if not all(isinstance(row, dict) for row in document["rows"]):
        raise ValueError(f"not an audit's results: every entry of 'rows' must be an object; {fix}")
    return document
