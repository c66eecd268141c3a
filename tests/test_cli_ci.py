"""The command line in CI: --strict, --json-summary, did-you-mean, narrow mechanisms, summary DIR..."""

import json
from pathlib import Path

import pytest

from audit.cli import main

CONFIG = """
[mechanism]
name = "laplace"
params = {{ epsilon = 1.0 }}

[[claims]]
divergence = "dp"
function_class = "all"
epsilon = {claim}

[attacks]
classes = ["linear"]
n_samples = 400
policy = "every"

[run]
n_jobs = 1
seed = 0
"""


def _config(tmp_path: Path, claim: float) -> Path:
    path = tmp_path / f"claim{claim}.toml"
    path.write_text(CONFIG.format(claim=claim))
    return path


@pytest.fixture(scope="module")
def inconclusive(tmp_path_factory):
    """Laplace at epsilon = 1 against its true claim 1.0 on 400 samples: estimates above 1, not decided."""
    tmp_path = tmp_path_factory.mktemp("cli")
    return _config(tmp_path, 1.0), tmp_path


def test_strict_turns_an_inconclusive_verdict_into_exit_3(inconclusive, capsys):
    config, tmp_path = inconclusive
    assert main(["run", str(config), "--out", str(tmp_path / "plain")]) == 0
    assert "INCONCLUSIVE" in capsys.readouterr().out
    assert main(["run", str(config), "--out", str(tmp_path / "strict"), "--strict"]) == 3


def test_strict_keeps_pass_and_violation_codes(tmp_path):
    assert main(["run", str(_config(tmp_path, 5.0)), "--out", str(tmp_path / "pass"), "--strict"]) == 0
    assert main(["run", str(_config(tmp_path, 0.1)), "--out", str(tmp_path / "violation"), "--strict"]) == 1


def test_json_summary_is_one_line_of_json_on_stdout(inconclusive, capsys):
    config, tmp_path = inconclusive
    out = tmp_path / "json"
    code = main(["run", str(config), "--out", str(out), "--strict", "--json-summary"])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    results = json.loads((out / "results.json").read_text())
    assert summary["verdict"] == results["verdict"] == "inconclusive" and summary["exit_code"] == code == 3
    assert summary["rows"] == len(results["rows"]) == sum(summary["counts"].values())
    assert summary["report"] == str(out / "report.md") and Path(summary["report"]).is_file()
    (strongest,) = summary["strongest"]  # one claim
    best = max(results["rows"], key=lambda row: row["ci_low"])
    assert strongest["ci_low"] == best["ci_low"] and strongest["direction"] == best["direction"]
    assert "INCONCLUSIVE" in captured.err  # the human line moves to stderr


def test_unknown_mechanism_suggests_the_nearest_name(tmp_path, capsys):
    config = tmp_path / "typo.toml"
    config.write_text(CONFIG.format(claim=1.0).replace('"laplace"', '"laplase"'))
    assert main(["run", str(config), "--out", str(tmp_path / "out")]) == 2
    assert "did you mean 'laplace'?" in capsys.readouterr().err


def test_mechanisms_is_narrow_by_default_and_long_on_request(capsys):
    assert main(["mechanisms"]) == 0
    narrow = capsys.readouterr().out.splitlines()
    assert narrow[0].split() == ["name", "description", "true", "privacy", "float-safe"]
    assert any(line.startswith("noisy_hist_2") and "1/epsilon" in line for line in narrow)
    assert main(["mechanisms", "--long"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == ["name", "kind", "description", "parameters", "true", "privacy", "float-safe", "status"]


def test_summary_tabulates_many_audits(inconclusive, tmp_path, capsys):
    config, audits = inconclusive
    violation = tmp_path / "violation"
    main(["run", str(_config(tmp_path, 0.1)), "--out", str(violation)])
    main(["run", str(config), "--out", str(tmp_path / "inconclusive")])
    capsys.readouterr()
    assert main(["summary", str(violation), str(tmp_path / "inconclusive" / "results.json")]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert len(table) == 4  # header, rule, two audits
    assert "strongest evidence per claim" in table[0]
    assert "laplace (epsilon=1.0)" in table[2] and "**violation**" in table[2] and "inconclusive" in table[3]
    assert "dp (all) <= 0.1: estimate" in table[2] and "against M(d" in table[2]
    assert main(["summary", str(tmp_path / "nowhere")]) == 2
    assert "no results.json" in capsys.readouterr().err


def test_json_summary_on_an_error_is_still_one_line(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.toml"), "--json-summary"]) == 2
    summary = json.loads(capsys.readouterr().out)
    assert summary["verdict"] == "error" and summary["exit_code"] == 2 and "does not exist" in summary["error"]
