"""docs/schema: the JSON Schemas of the config and of results.json agree with the code.

The example configs validate and load; invalid configs are refused by both the
schema and :func:`audit.config.load.load_config`; results.json written by a real
audit and by the report writer validate.
"""

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from audit import run_audit
from audit.config.load import ConfigError, load_config
from audit.report.audit_report import write_audit_report

from audit.results.schema import Row


def rows_of(table):
    """Typed rows of a results table (:meth:`audit.results.schema.Row.from_record`), as write_audit_report takes them."""
    return [Row.from_record(record) for record in table.to_dict(orient="records")]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "docs" / "schema"
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


def _validator(name: str):
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, document) -> list[str]:
    return [error.message for error in validator.iter_errors(document)]


def test_schemas_are_valid_json_schemas():
    for path in SCHEMAS.glob("*.schema.json"):
        _validator(path.name)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_configs_validate_and_load(path, monkeypatch):
    monkeypatch.chdir(path.parent)
    with path.open("rb") as handle:
        assert _errors(_validator("config.schema.json"), tomllib.load(handle)) == []
    try:
        load_config(path)
    except ConfigError as error:  # an adapter example whose library is not installed here
        assert "install the extra" in str(error)


VALID = {
    "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
    "claims": [{"divergence": "renyi", "alpha": [2, 4], "function_class": "poly2", "epsilon": 0.5}],
    "attacks": {"classes": ["linear", "tree3"], "n_samples": 1000, "confidence": 0.9},
    "run": {"seed": 1, "n_jobs": -1, "backend": "threading"},
}


def _with(section: str, **fields):
    config = json.loads(json.dumps(VALID))
    if section == "claims":
        config["claims"][0].update(fields)
        config["claims"][0] = {key: value for key, value in config["claims"][0].items() if value is not None}
    else:
        config.setdefault(section, {}).update(fields)
    return config


INVALID = {
    "n_samples below 100": _with("attacks", n_samples=50),
    "confidence 1": _with("attacks", confidence=1.0),
    "train_fraction 0": _with("attacks", train_fraction=0.0),
    "class all attacked": _with("attacks", classes=["linear", "all"]),
    "unknown class": _with("attacks", classes=["cubic"]),
    "coupled as a string": _with("attacks", coupled="yes"),
    "alpha 1": _with("claims", alpha=[1]),
    "renyi without alpha": _with("claims", alpha=None),
    "kl with alpha": _with("claims", divergence="kl"),
    "delta on renyi": _with("claims", delta=1e-6),
    "negative epsilon": _with("claims", epsilon=-0.1),
    "unknown divergence": _with("claims", divergence="tv"),
    "n_jobs 0": _with("run", n_jobs=0),
    "negative seed": _with("run", seed=-1),
    "unknown backend": _with("run", backend="spark"),
    "unknown field": _with("run", workers=2),
    "pairs and neighbours": {**VALID, "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}], "neighbours": {"strategy": "random"}},
    "unknown strategy": {**VALID, "neighbours": {"strategy": "grid"}},
    "no claims": {key: value for key, value in VALID.items() if key != "claims"},
    "name and callable": {**VALID, "mechanism": {"name": "laplace", "callable": "m:f"}},
}


REPORTS = sorted((ROOT / "reports").glob("*/results.json"))


@pytest.mark.parametrize("path", REPORTS, ids=lambda path: path.parent.name)
def test_the_committed_example_reports_validate(path):
    """Every results.json the tool wrote under reports/ keeps the public contract (an on-average audit's mean rows,
    with null staged columns, once did not)."""
    assert _errors(_validator("results.schema.json"), json.loads(path.read_text())) == []


def test_a_valid_config_passes_both():
    assert _errors(_validator("config.schema.json"), VALID) == []
    load_config(VALID)


@pytest.mark.parametrize("name", INVALID)
def test_invalid_configs_are_refused_by_the_schema_and_the_loader(name):
    assert _errors(_validator("config.schema.json"), INVALID[name])
    with pytest.raises(ConfigError):
        load_config(INVALID[name])


def test_results_of_a_real_audit_validate(tmp_path):
    config = {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
        "neighbours": {"strategy": "extremes", "count": 1, "relation": "add-remove"},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 0.5},
                   {"divergence": "dp", "function_class": "threshold", "epsilon": 2.0, "delta": 1e-6}],
        "attacks": {"classes": ["linear", "threshold"], "n_samples": 400},
        "run": {"n_jobs": 1},
    }
    assert _errors(_validator("config.schema.json"), config) == []
    run_audit(config, progress=False, out_dir=tmp_path)
    document = json.loads((tmp_path / "results.json").read_text())
    assert _errors(_validator("results.schema.json"), document) == []
    assert _errors(_validator("config.schema.json"), document["config"]) == []
    assert document["pairs"][0]["relation"] == "add-remove"


def test_results_with_infinite_unknown_and_failed_rows_validate(tmp_path):
    row = {
        "pair": "p0", "direction": "P|Q", "function_class": "linear", "divergence": "kl", "alpha": math.nan,
        "estimate": math.inf, "ci_low": 3.0, "ci_high": math.inf, "n_samples": 1000, "claim": 0.5,
        "claim_class": "all", "refutes_claim": True, "theory_bound": math.nan, "exact": math.nan,
        "verdict": "inconclusive", "note": "samples separable", "task": "p0|P|Q|linear|kl",
        "error": "the attack's estimate is +inf",
    }
    failed = {**row, "estimate": math.nan, "ci_low": math.nan, "verdict": "inconclusive", "error": "ValueError: x"}
    write_audit_report(tmp_path, rows=rows_of(pd.DataFrame([row, failed])), verdict="inconclusive", seed=0, seconds=0.1,
                       versions={"capaudit": None, "mechanism_seedable": True}, config=VALID)
    document = json.loads((tmp_path / "results.json").read_text())
    assert _errors(_validator("results.schema.json"), document) == []
    document["rows"][0]["estimate"] = "infinity"
    assert _errors(_validator("results.schema.json"), document)


def test_summary_lines_validate(tmp_path):
    """--json-summary's line of an audit with a failed row, and of a run refused before any task, validate; a
    failed row counted as inconclusive (today's main before this schema) does not."""
    from audit.report.summary import json_summary

    row = {"pair": "p0", "direction": "P|Q", "function_class": "linear", "divergence": "kl", "alpha": math.nan,
           "estimate": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n_samples": 400, "claim": 0.5, "claim_class": "all",
           "refutes_claim": True, "verdict": "pass", "task": "p0|P|Q|linear|kl", "error": None}
    failed = {**row, "pair": "p1", "estimate": math.nan, "ci_low": math.nan, "verdict": "inconclusive",
              "error": "mechanism failed on pair p1"}
    line = json.loads(json_summary(pd.DataFrame([row, failed]), "error", 2, tmp_path / "report.md"))
    validator = _validator("summary.schema.json")
    assert _errors(validator, line) == []
    assert line["counts"] == {"pass": 1, "error": 1}
    assert _errors(validator, {"verdict": "error", "exit_code": 2, "error": "config 'x.toml' does not exist"}) == []
    assert _errors(validator, {**line, "counts": {"pass": 1, "inconclusive": 1}}) == []  # a count name it knows
    assert _errors(validator, {**line, "counts": {"failed": 1}})  # one it does not
    assert _errors(validator, {"verdict": "pass", "exit_code": 0, "error": "x"})  # an error line reads error
