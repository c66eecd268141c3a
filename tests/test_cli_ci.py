"""The command line in CI: --strict, --json-summary, did-you-mean, narrow mechanisms, summary DIR..."""

import json
from pathlib import Path

import pytest

from audit.commands.cli import main

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
    assert header == ["name", "kind", "description", "parameters", "true", "privacy", "status"]


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


def always_raises(dataset, n, rng):
    raise ValueError("no outputs today")


ERROR_CONFIG = """
[mechanism]
callable = "test_cli_ci:always_raises"

[[pairs]]
d = [[0.0]]
d_prime = [[1.0]]

[[claims]]
divergence = "kl"
function_class = "linear"
epsilon = 0.5

[attacks]
classes = ["linear"]
n_samples = 200
policy = "every"

[run]
n_jobs = 1
seed = 0
"""


@pytest.fixture(scope="module")
def error_audit(tmp_path_factory):
    """An audit whose every task failed (the mechanism raises on both datasets): its --json-summary line and out."""
    tmp_path = tmp_path_factory.mktemp("error")
    config = tmp_path / "error.toml"
    config.write_text(ERROR_CONFIG)
    out = tmp_path / "out"
    return config, out


def test_json_summary_counts_failed_tasks_as_errors(error_audit, capsys):
    config, out = error_audit
    assert main(["run", str(config), "--out", str(out), "--quiet", "--json-summary"]) == 2
    summary = json.loads(capsys.readouterr().out)
    assert summary["verdict"] == "error"
    assert summary["counts"] == {"error": summary["rows"]} and summary["rows"] == 2  # P|Q and Q|P, both failed
    assert [row["verdict"] for row in summary["strongest"]] == ["error"]
    assert main(["summary", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()[2]
    assert "**error**" in table and ", error" in table and "inconclusive" not in table


@pytest.mark.parametrize("content, expected", [
    ('{"verdict": "pass"}', "not an audit's results: it needs a top-level object with 'verdict' and a 'rows' list"),
    ("[1, 2]", "not an audit's results"),
    ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ('{"schema_version": "7.0", "verdict": "pass", "rows": []}', "schema_version '7.0' is not readable"),
])
def test_summary_of_a_bad_results_file_is_one_clear_line(tmp_path, capsys, content, expected):
    bad = tmp_path / "bad" / "results.json"
    bad.parent.mkdir()
    bad.write_text(content)
    assert main(["summary", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("capaudit summary: error: ")
    assert expected in err[0] and "KeyError" not in err[0] and "Traceback" not in err[0]


def test_run_without_out_writes_under_the_ignored_out_folder(tmp_path, monkeypatch, capsys):
    """Not into the tracked reports/: `capaudit run CONFIG` writes out/<config name>, which .gitignore lists."""
    config = _config(tmp_path, 5.0)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(config), "--quiet"]) == 0
    assert (tmp_path / "out" / config.stem / "report.md").is_file() and not (tmp_path / "reports").exists()
    assert f"-> {Path('out') / config.stem / 'report.md'}" in capsys.readouterr().out
    root = Path(__file__).resolve().parents[1]
    assert "/out/" in (root / ".gitignore").read_text().splitlines()


def test_examples_and_readme_agree_on_where_reports_go():
    """Each example's header command writes to out/ (like the README's); reports/README.md regenerates the
    committed reports with an explicit --out reports/..."""
    root = Path(__file__).resolve().parents[1]
    for example in sorted((root / "examples").glob("*.toml")):
        commands = [line for line in example.read_text().splitlines() if line.lstrip("# ").startswith("capaudit run")]
        assert commands and all("--out out/" in line for line in commands), example.name
    readme = (root / "README.md").read_text()
    assert "--out reports/laplace" not in readme and "writes to the git-ignored `out/<config name>`" in readme
    assert "capaudit run examples/laplace.toml --out reports/laplace" in (root / "reports" / "README.md").read_text()


def test_a_missing_config_is_refused_before_the_audits_libraries_are_imported(tmp_path):
    """One line and exit 2, without importing pandas, SciPy or scikit-learn (1.4 CPU s before this check)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = ("import sys; from audit.commands.cli import main; code = main(['run', 'missing.toml']); "
            "print(code, sorted(m for m in ('pandas', 'scipy', 'sklearn', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(root), "PATH": ""}, timeout=60)
    assert done.stdout.split("\n")[0] == "2 []", done
    assert done.stderr == ("capaudit run: error: config file 'missing.toml' does not exist; give the path of a TOML "
                           "file, e.g. examples/laplace.toml.\n")
