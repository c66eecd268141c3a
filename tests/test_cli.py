"""The capaudit command: run, demo, mechanisms; errors are one line on stderr and exit 2."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit.commands.cli import demo_configs, main

GOOD = """
[mechanism]
name = "laplace"
params = { epsilon = 1.0 }

[[claims]]
divergence = "dp"
function_class = "all"
epsilon = 1.0

[attacks]
classes = ["linear"]
n_samples = 400

[run]
n_jobs = 1
"""


def _write(tmp_path: Path, text: str, name: str = "audit.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('divergence = "dp"', 'divergence = "dpp"', "claims[0].divergence"),
        ("n_samples = 400", "n_samples = 5", "attacks.n_samples"),
        ('name = "laplace"', 'name = "laplase"', "mechanism.name"),
        ("[run]", "[run]\nbakend = 'loky'", "did you mean 'backend'"),
    ],
)
def test_config_errors_exit_2_without_traceback(tmp_path, capsys, old, new, expected):
    path = _write(tmp_path, GOOD.replace(old, new))
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_console_errors_have_no_traceback(tmp_path):
    """The real command line: a missing config is one line on stderr and exit 2."""
    done = subprocess.run(
        [sys.executable, "-m", "audit.commands.cli", "run", str(tmp_path / "missing.toml")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_bad_backend_option_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the ray extra were not installed
    path = _write(tmp_path, GOOD)
    assert main(["run", str(path), "--backend", "ray", "--out", str(tmp_path / "out")]) == 2
    assert "capaudit[ray]" in capsys.readouterr().err


def test_run_writes_the_report_and_resumes(tmp_path, capsys):
    """A true claim with room (Laplace is 1-DP, claimed 3-DP) passes: no attack set's ratio nears e^3 at 400 samples."""
    path = _write(tmp_path, GOOD.replace("epsilon = 1.0\n\n[attacks]", "epsilon = 3.0\n\n[attacks]"))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--seed", "3", "--n-jobs", "1"]) == 0
    assert json.loads((out / "results.json").read_text())["verdict"] == "pass"
    assert (out / "report.md").is_file()
    assert main(["run", str(path), "--out", str(out), "--seed", "3", "--resume"]) == 0
    assert str(out / "report.md") in capsys.readouterr().out


def test_mechanism_errors_exit_2(tmp_path, capsys):
    (tmp_path / "broken_mechanism.py").write_text(
        "def mechanism(dataset, n, rng):\n    raise RuntimeError('broken on purpose')\n"
    )
    text = GOOD.replace('name = "laplace"\nparams = { epsilon = 1.0 }', 'callable = "broken_mechanism:mechanism"')
    text += "\n[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n"
    path = _write(tmp_path, text)
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert "ERROR" in captured.out and "INCONCLUSIVE" not in captured.out  # exit 2 reads as an error
    assert "broken on purpose" in captured.err


def test_mechanisms_lists_the_registry(capsys):
    assert main(["mechanisms"]) == 0
    out = capsys.readouterr().out
    assert "laplace" in out and "noisy_hist_2" in out


def test_demo_configs_pass_correct_and_catch_buggy():
    """The demo's audits at a fifth of its sample size: still decisive (the buggy one is 2-DP vs 0.5 claimed)."""
    from audit import run_audit

    verdicts = {}
    for name, config in demo_configs().items():
        config["attacks"]["n_samples"] = 4000
        config["run"]["n_jobs"] = 1
        verdicts[name] = run_audit(config, progress=False).verdict
    assert verdicts == {"correct": "pass", "buggy": "violation"}


@pytest.mark.slow
def test_demo_command(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 1  # the buggy mechanism's violation
    out = capsys.readouterr().out
    assert "as expected" in out
    assert (tmp_path / "correct" / "report.md").is_file() and (tmp_path / "buggy" / "report.md").is_file()


def test_help_and_version_load_no_heavy_library():
    """`capaudit --help` stays fast: audit imports numpy, pandas and scikit-learn only when used."""
    code = (
        "import sys\nfrom audit.commands.cli import main\n"
        "for argv in (['--help'], ['--version']):\n"
        "    try:\n        main(argv)\n    except SystemExit as done:\n        assert done.code == 0\n"
        "heavy = [m for m in ('numpy', 'pandas', 'sklearn', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "exit codes: 0 pass or inconclusive, 1 violation, 2 error" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("capaudit ")


# What a tqdm bar prints on stderr, whatever its label: the percentage followed by the bar, e.g. "100%|█████|".
PROGRESS_BAR = re.compile(r"\d+%\|")


def test_quiet_and_debug_after_the_command(tmp_path, capsys):
    """Without --quiet the bar is drawn (at least when it closes); with --quiet (after the command) it is not."""
    path = _write(tmp_path, GOOD)
    assert main(["run", str(path), "--out", str(tmp_path / "loud")]) == 0
    assert PROGRESS_BAR.search(capsys.readouterr().err)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--debug"]) == 0
    assert not PROGRESS_BAR.search(capsys.readouterr().err)
