"""report.md as GitHub-flavoured markdown: tables parse back to results.json; the "What was audited" block.

The tables are read with markdown-it-py's GFM table rule, as GitHub renders
them: a cell with an unescaped ``|`` (the direction ``P|Q``) would split in
two and shift every later cell of its row.
"""

import hashlib
import json
import math
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from audit import run_audit
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import make_pairs
from audit.results.provenance import command_line, describe_audit, pair_records
from audit.report.audit_report import write_audit_report
from audit.results.verdicts import INFINITE_ESTIMATE
from audit.engine.plan import task_seed

from audit.results.schema import Row


def rows_of(table):
    """Typed rows of a results table (:meth:`audit.results.schema.Row.from_record`), as write_audit_report takes them."""
    return [Row.from_record(record) for record in table.to_dict(orient="records")]

markdown_it = pytest.importorskip("markdown_it")

NAN, INF = math.nan, math.inf


def _row(pair, direction, function_class, divergence, alpha, estimate, ci, claim, claim_class, verdict, note="", error=None):
    return {
        "pair": pair, "direction": direction, "function_class": function_class, "divergence": divergence,
        "alpha": alpha, "estimate": estimate, "ci_low": ci[0], "ci_high": ci[1], "n_samples": 20000,
        "claim": claim, "claim_class": claim_class, "refutes_claim": verdict == "violation",
        "theory_bound": 0.7324 if divergence == "renyi" else NAN, "exact": 0.6407 if function_class == "poly3" else NAN,
        "verdict": verdict, "note": note, "task": f"{pair}|{direction}|{function_class}|{divergence}|{alpha}",
        "error": error,
    }


TABLE = pd.DataFrame([
    _row("p0", "P|Q", "linear", "renyi", 4.0, 0.40, (0.38, 0.42), 0.5, "linear", "pass"),
    _row("p0", "Q|P", "poly2", "renyi", 4.0, 0.61, (0.58, 0.64), 0.5, "poly2", "violation", "lower bound 0.58 > 0.5 | Holm step 1"),
    _row("p0", "P|Q", "poly3", "renyi", 4.0, 0.52, (0.49, 0.55), 0.5, "poly2", "info"),
    _row("p1", "Q|P", "mlp", "kl", NAN, 0.30, (0.25, 0.35), 0.28, "all", "inconclusive", "80000 samples\nwould decide"),
    _row("p1", "P|Q", "linear", "kl", NAN, INF, (NAN, NAN), 0.28, "all", "inconclusive", "samples separable",
         error=INFINITE_ESTIMATE),
    _row("p1", "P|Q", "poly2", "kl", NAN, NAN, (NAN, NAN), 0.28, "all", "inconclusive", "task failed",
         error="ValueError: shape (3,) | (4,)\nsecond line"),
])
CONFIG = {"mechanism": {"name": "laplace"}, "attacks": {"confidence": 0.95, "n_samples": 20000}}


def _text(inline) -> str:
    """The rendered text of an inline token (code spans and emphasis included)."""
    return "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))


def _tables(markdown: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of a GFM document as (header cells, body rows of cells), as GitHub would render it."""
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(markdown)
    tables, current, row, in_head = [], None, None, False
    for token in tokens:
        if token.type == "table_open":
            current = ([], [])
        elif token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and row is not None and current is not None:
            row.append(_text(token))
        elif token.type == "tr_close":
            (current[0].extend if in_head else current[1].append)(row)
            row = None
        elif token.type == "table_close":
            tables.append(current)
            current = None
    return tables


def _number(value) -> str:
    """results.json's number as the report formats it: 4 significant digits, "-" for null, "inf"."""
    if value is None:
        return "-"
    if value in ("inf", "-inf"):
        return value
    return f"{value:.4g}"


def _claim_cells(row: dict) -> tuple:
    return (
        row["pair"], row["direction"], row["function_class"], _number(row["alpha"]),
        f"{_number(row['estimate'])} [{_number(row['ci_low'])}, {_number(row['ci_high'])}]",
        _number(row["theory_bound"]), _number(row["exact"]), f"{row['n_samples']}",
        _number(row.get("p_adjusted")), "failed" if row["error"] else row["verdict"],  # a failed row says so
    )


def _check_tables_match_results(out_dir) -> None:
    """Every table of report.md has its header's width, and the per-claim tables hold results.json's rows."""
    document = json.loads((out_dir / "results.json").read_text())
    tables = _tables((out_dir / "report.md").read_text())
    assert tables
    for header, body in tables:
        assert all(len(cells) == len(header) for cells in body), (header, body)
    claim_tables = [(header, body) for header, body in tables if header[-1] == "verdict"]
    claims = {(row["divergence"], row["claim_class"], row["claim"]) for row in document["rows"]}
    assert len(claim_tables) == len(claims)
    assert all(header == ["pair", "direction", "function class", "alpha", "estimate [CI]", "theory bound", "exact",
                          "n", "adjusted p", "verdict"] for header, _ in claim_tables)
    shown = Counter(tuple(cells) for _, body in claim_tables for cells in body)
    assert shown == Counter(_claim_cells(row) for row in document["rows"])
    [(header, body)] = [(header, body) for header, body in tables
                        if header[:5] == ["claim", "verdict", "values", "representation", "strongest row"]]
    assert [cells[4] for cells in body] == [claim["strongest_row"] or "-" for claim in document["claims"]]
    assert [cells[2:4] for cells in body] == [[claim["value_verdict"], claim["representation_verdict"]]
                                              for claim in document["claims"]]


def test_tables_parse_back_to_the_results_rows(tmp_path):
    write_audit_report(tmp_path, rows=rows_of(TABLE), verdict="violation", seed=0, seconds=1.0, versions={}, config=CONFIG)
    _check_tables_match_results(tmp_path)


def test_summary_and_error_tables_keep_pipes_and_newlines_in_one_cell(tmp_path):
    write_audit_report(tmp_path, rows=rows_of(TABLE), verdict="violation", seed=0, seconds=1.0, versions={}, config=CONFIG)
    tables = {}  # header -> the rows of every table with that header (violations, inconclusive, ...)
    for header, body in _tables((tmp_path / "report.md").read_text()):
        tables.setdefault(tuple(header), []).extend(body)
    summary = tables[("pair", "direction", "function class", "divergence", "estimate [CI]", "claim", "note")]
    assert ["p0", "Q|P", "poly2", "renyi, alpha=4", "0.61 [0.58, 0.64]", "0.5 (poly2)",
            "lower bound 0.58 > 0.5 | Holm step 1"] in summary
    assert ["p1", "Q|P", "mlp", "kl", "0.3 [0.25, 0.35]", "0.28 (all)", "80000 samples would decide"] in summary
    errors = tables[("pair", "direction", "function class", "divergence", "error")]  # the other tables' words
    assert errors == [["p1", "P|Q", "linear", "kl", INFINITE_ESTIMATE],
                      ["p1", "P|Q", "poly2", "kl", "ValueError: shape (3,) | (4,) second line"]]


def test_audited_block_names_a_library_mechanism_and_large_pairs(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["/venv/bin/capaudit", "run", "my audit.toml", "--out", "out"])
    config_path = tmp_path / "my audit.toml"
    config_path.write_text('[mechanism]\nname = "opendp.laplace"\n')
    mechanism = SimpleNamespace(
        name="opendp.laplace", params={"epsilon": 1.0, "n_jobs": 1}, library="opendp", library_version="0.12.1",
        seedable=False, true_privacy="1-DP (pure)",
    )
    audited = describe_audit(mechanism, config_path, {})
    small = SimpleNamespace(name="p0", d=np.array([[0.0], [0.0]]), d_prime=np.array([[0.0], [1.0]]))
    large = SimpleNamespace(name="p1", d=np.zeros((30, 2)), d_prime=np.r_[np.zeros((29, 2)), np.ones((1, 2))])
    far = SimpleNamespace(name="p2", d=np.array([[0.0], [0.0]]), d_prime=np.array([[1.0], [1.0]]))
    pairs = pair_records([small, large, far])
    write_audit_report(tmp_path, rows=rows_of(TABLE), verdict="violation", seed=0, seconds=1.0, versions={},
                       config=CONFIG, pairs=pairs, audited=audited)
    report = (tmp_path / "report.md").read_text()
    block = report.split("## What was audited", 1)[1].split("\n## ", 1)[0]
    assert ("`opendp.laplace` (`epsilon=1.0`, `n_jobs=1`); library: opendp 0.12.1, not seedable; "
            "true privacy: 1-DP (pure)") in block  # user text in code spans: never read as markdown or HTML
    assert "the mechanism's worst-case default pairs" in block
    assert "`p0`: d = `[[0], [0]]`, d' = `[[0], [1]]` (replace-one)" in block
    assert "`p1`: d: 30 records of 2 values, d': 30 records of 2 values, in results.json `pairs[1]` (replace-one)" in block
    assert "`p2`: d = `[[0], [0]]`, d' = `[[1], [1]]` (2 of 2 records differ)" in block
    assert f"sha256 `{hashlib.sha256(config_path.read_bytes()).hexdigest()}`" in block
    assert "`capaudit run 'my audit.toml' --out out`" in block
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["pairs"][1]["d_prime"][-1] == [1.0, 1.0] and document["audited"]["mechanism"]["seedable"] is False


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/capaudit", "run", "a.toml"], "capaudit run a.toml"),
    (["/src/audit/commands/cli.py", "demo"], "python -m audit.commands.cli demo"),
    (["/lib/pytest/__main__.py", "-q"], "python -m pytest -q"),
    (["-c"], "python -c"),
])
def test_command_line_reads_as_typed(argv, expected):
    assert command_line(argv) == expected


def test_pair_relations():
    pairs = [
        SimpleNamespace(name="p0", d=np.array([[0.0]]), d_prime=np.array([[1.0]])),
        SimpleNamespace(name="p1", d=np.array([[0.0]]), d_prime=np.array([[0.0], [2.0]])),
        SimpleNamespace(name="p2", d=np.array([[0.0], [0.0]]), d_prime=np.array([[1.0], [1.0]])),
    ]
    assert [pair["relation"] for pair in pair_records(pairs)] == ["replace-one", "add-remove", None]


def test_audit_saves_generated_pairs_and_opens_with_what_was_audited(tmp_path, monkeypatch):
    """A real audit on pairs from [neighbours]: the saved pairs are the generated ones, the tables parse back."""
    monkeypatch.setattr("sys.argv", ["capaudit", "run", "audit.toml"])
    config = tmp_path / "audit.toml"
    config.write_text(
        '[mechanism]\nname = "laplace"\nparams = { epsilon = 1.0 }\n'
        '[neighbours]\nstrategy = "random"\ncount = 2\ndomain = { low = [0.0], high = [1.0], size = 3 }\n'
        '[[claims]]\ndivergence = "kl"\nfunction_class = "linear"\nepsilon = 0.5\n'
        '[attacks]\nclasses = ["linear"]\nn_samples = 500\npolicy = "every"\n[run]\nseed = 7\nn_jobs = 1\n'
    )
    run_audit(config, progress=False, out_dir=tmp_path / "out")
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    expected = make_pairs(
        {"strategy": "random", "count": 2, "domain": {"low": [0.0], "high": [1.0], "size": 3}},
        make_mechanism("laplace", {"epsilon": 1.0}),
        np.random.default_rng(task_seed(7, "neighbours")),
    )
    assert [pair["name"] for pair in document["pairs"]] == [pair.name for pair in expected]
    for saved, pair in zip(document["pairs"], expected):
        np.testing.assert_array_equal(saved["d"], pair.d)
        np.testing.assert_array_equal(saved["d_prime"], pair.d_prime)
        assert saved["relation"] == "replace-one"
    assert {row["pair"] for row in document["rows"]} == {pair.name for pair in expected}
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.index("## Verdict") < report.index("## What was audited") < report.index("## Results per claim")
    assert ("`laplace` (`epsilon=1.0`, `sensitivity=1.0`); library: capaudit built-in, seedable (two draws with "
            "the same seed agreed bit for bit)") in report
    assert "generated by `[neighbours]` strategy 'random', relation replace-one" in report
    assert f"`{config}`, sha256 `{hashlib.sha256(config.read_bytes()).hexdigest()}`" in report
    assert "**Command:** `capaudit run audit.toml`" in report
    _check_tables_match_results(tmp_path / "out")
