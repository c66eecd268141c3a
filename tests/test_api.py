"""The Python API: run_audit's result object and its report."""

import json

import pandas as pd
import pytest

from audit import AuditResult, run_audit
from audit.results.schema import Row
from audit.theory import bounds

CONFIG = {
    "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
    "claims": [
        {"divergence": "renyi", "alpha": [2, 4], "function_class": "linear", "epsilon": 0.8},
        {"divergence": "dp", "function_class": "all", "epsilon": 1.0},
    ],
    "attacks": {"classes": ["linear"], "n_samples": 500},
    "run": {"seed": 1, "n_jobs": 1},
}
DESIGN_COLUMNS = [
    "pair", "direction", "function_class", "divergence", "alpha", "estimate", "ci_low", "ci_high",
    "n_samples", "claim", "claim_class", "refutes_claim", "theory_bound", "exact", "verdict", "note",
]


@pytest.fixture(scope="module")
def result():
    return run_audit(CONFIG, progress=False)


def test_result_fields(result):
    assert isinstance(result, AuditResult)
    assert result.verdict in ("pass", "inconclusive", "violation")
    assert result.exit_code == {"pass": 0, "inconclusive": 0, "violation": 1}[result.verdict]
    assert list(result.table.columns[: len(DESIGN_COLUMNS)]) == DESIGN_COLUMNS
    # the default policy (best): one row per claim and Renyi order (renyi 2, renyi 4, dp)
    assert len(result.table) == 3 and set(result.table["policy"]) == {"best"}
    assert result.seed == 1 and result.versions["numpy"]


def test_rows_are_the_table_typed(result):
    """``AuditResult.rows`` reads the table as typed rows; their records rebuild the table exactly."""
    rows = result.rows
    assert len(rows) == len(result.table) and all(isinstance(row, Row) and row.verdict for row in rows)
    table = result.table.drop(columns="held_out_scores")
    rebuilt = pd.DataFrame([row.to_record() for row in rows], columns=table.columns)
    pd.testing.assert_frame_equal(rebuilt, table)
    assert {claim["strongest_task"] for claim in result.claims} <= {row.task for row in rows if row.refutes_claim}


def test_write_lays_out_the_report(result, tmp_path):
    result.write(tmp_path)
    for name in ("report.md", "results.json", "results.csv"):
        assert (tmp_path / name).is_file()
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["verdict"] == result.verdict and len(payload["rows"]) == len(result.table)


def test_overrides_and_bounds_are_exported():
    assert callable(bounds.laplace_linear_renyi_bound)
    seeded = run_audit(CONFIG, seed=2, progress=False)
    assert seeded.seed == 2 and seeded.config["run"]["seed"] == 2


def test_resume_needs_an_out_dir():
    with pytest.raises(ValueError, match="out_dir"):
        run_audit(CONFIG, resume=True)


def test_importing_the_api_loads_neither_scikit_learn_nor_scipy_stats():
    """Issue 33: imports follow the layers; the attacks (scikit-learn) and the exact values' quadrature
    (scipy.stats, whose import parses every distribution's docstring) come with the run, not with the import."""
    import subprocess
    import sys

    code = ("import sys, audit.commands.api\n"
            "heavy = [m for m in ('sklearn', 'scipy.stats') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_kl_audit_of_the_built_in_laws_loads_neither_scikit_learn_nor_scipy_stats():
    """Issue 33: a kl audit of the built-in Laplace and Gaussian mechanisms (default classes) computes its exact
    values from :mod:`audit.theory.laws` (the closed forms, ``theory_bound``, to 1e-9) without loading scipy.stats
    or scikit-learn."""
    import subprocess
    import sys

    code = ("import math, sys\n"
            "from audit import run_audit\n"
            "for name, params in (('laplace', {'epsilon': 1.0}), ('gaussian', {'sigma': 1.0})):\n"
            "    config = {'mechanism': {'name': name, 'params': params}, 'attacks': {'n_samples': 1000},\n"
            "              'claims': [{'divergence': 'kl', 'function_class': 'linear', 'epsilon': 0.5}]}\n"
            "    row = run_audit(config, progress=False).table.iloc[0]\n"
            "    assert math.isclose(row['exact'], row['theory_bound'], rel_tol=1e-9), (name, row['exact'])\n"
            "heavy = [m for m in ('sklearn', 'scipy.stats') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True)
