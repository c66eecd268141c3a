"""What a reviewer reads: reproducibility probed, --out kept clean and locked, rows in words, user text escaped.

The mechanisms are user functions ``f(dataset, n, rng)`` named
``test_report_trust:<function>`` (pytest puts this directory on sys.path).
"""

import fcntl
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import audit.commands.api
from audit import run_audit
from audit.commands.api import LOCK_FILE, output_directory, release_directory
from audit.commands.cli import main
from audit.report.figures import class_words, row_label
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import NeighbourPair
from audit.results.provenance import describe_audit, reproducibility_probe
from audit.report.audit_report import write_audit_report
from audit.report.summary import summary_table

from audit.results.schema import Row


def rows_of(table):
    """Typed rows of a results table (:meth:`audit.results.schema.Row.from_record`), as write_audit_report takes them."""
    return [Row.from_record(record) for record in table.to_dict(orient="records")]

ROOT = Path(__file__).resolve().parents[1]
PAIR = NeighbourPair("p0", np.array([[0.0]]), np.array([[1.0]]))


def seeded(dataset, n, rng):
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def global_state(dataset, n, rng):
    return np.sum(dataset) + np.random.laplace(0.0, 1.0, size=n)  # ignores rng


def failing(dataset, n, rng):
    raise RuntimeError("no")


def _config(function="seeded", **claim):
    return {
        "mechanism": {"callable": f"test_report_trust:{function}"},
        "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}],
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 2.0, **claim}],
        "attacks": {"classes": ["linear"], "n_samples": 400, "policy": "every"},
        "run": {"seed": 0, "n_jobs": 1},
    }


# --- the seedability probe ---------------------------------------------------


@pytest.mark.parametrize(("function", "expected"), [(seeded, True), (global_state, False), (failing, None)])
def test_the_probe_draws_twice_with_one_seed(function, expected):
    assert reproducibility_probe(make_mechanism(callable=function), PAIR, timeout=30) is expected


def test_a_mechanism_that_ignores_rng_is_reported_not_reproducible(tmp_path):
    result = run_audit(_config("global_state"), out_dir=tmp_path, progress=False)
    document = json.loads((tmp_path / "results.json").read_text())
    mechanism = document["audited"]["mechanism"]
    assert mechanism["reproducible"] is False and mechanism["seedable"] is False
    assert document["versions"]["mechanism_seedable"] is False
    report = (tmp_path / "report.md").read_text()
    assert "**Not reproducible:**" in report and "ignores the rng" in report
    assert "reproducible bit for bit" not in report and result.audited["mechanism"]["reproducible"] is False
    honest = describe_audit(make_mechanism(callable=seeded), {}, {}, probe=PAIR)["mechanism"]
    assert honest["reproducible"] is True and honest["seedable"] is True


# --- --out: cleared, refused when foreign, locked, no symlinks followed --------


def test_a_run_clears_its_earlier_artefacts(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "renyi_alpha4.png").write_bytes(b"old")  # an older version's figure
    (tmp_path / "figures" / "renyi_alpha4.svg").write_text("<svg/>")
    (tmp_path / "report.html").write_text("an earlier PASS")
    (tmp_path / "tasks.jsonl").write_text("{}\n")
    output_directory(tmp_path, resume=True)
    release_directory(tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [LOCK_FILE, "figures", "tasks.jsonl"]  # kept to resume
    output_directory(tmp_path)
    release_directory(tmp_path)
    assert not (tmp_path / "tasks.jsonl").exists()


def test_a_directory_of_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(ValueError, match="holds files capaudit did not write \\(thesis.tex\\)"):
        output_directory(tmp_path)
    config = tmp_path / "audit.toml"  # the config itself beside: refused too, and nothing is written there
    config.write_text("[mechanism]\nname = 'laplace'\n[[claims]]\ndivergence = 'kl'\nfunction_class = 'linear'\n"
                      "epsilon = 1.0\n")
    assert main(["run", str(config), "--out", str(tmp_path)]) == 2
    assert "did not write" in capsys.readouterr().err and sorted(p.name for p in tmp_path.iterdir()) == [
        "audit.toml", "thesis.tex"]


def test_a_second_run_into_a_locked_directory_is_refused(tmp_path):
    output_directory(tmp_path)
    release_directory(tmp_path)
    with open(tmp_path / LOCK_FILE) as other:  # another run holds the lock (flock is per open file)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="being written by another capaudit run"):
            run_audit(_config(), out_dir=tmp_path, progress=False)
        assert audit.commands.api.write_failure(tmp_path, "x") is None  # nor is its report overwritten
    run_audit(_config(), out_dir=tmp_path, progress=False)  # released: the directory is free again


def test_symbolic_links_inside_the_directory_are_not_followed(tmp_path):
    target, elsewhere = tmp_path / "target.md", tmp_path / "elsewhere"
    target.write_text("keep me")
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").symlink_to(target)
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)
    run_audit(_config(), out_dir=out, progress=False)
    assert target.read_text() == "keep me" and not list(elsewhere.iterdir())
    assert not (out / "report.md").is_symlink() and not (out / "figures").is_symlink()


def test_the_demo_writes_outside_the_checkout_by_default(monkeypatch, capsys):
    seen = []

    def fake(config, out_dir, progress):
        seen.append(Path(out_dir))
        verdict = "pass" if config["mechanism"]["name"] == "noisy_hist_1" else "violation"
        return SimpleNamespace(verdict=verdict, rows=[], checks=(), theory=(), seconds=0.0,
                               exit_code=int(verdict == "violation"))

    monkeypatch.setattr(audit.commands.api, "run_audit", fake)
    assert main(["demo", "--quiet"]) == 1
    root = seen[0].parent
    assert root.parent == Path(tempfile.gettempdir()) and {path.name for path in seen} == {"correct", "buggy"}
    assert str(root) in capsys.readouterr().out.splitlines()[0]


# --- words a reviewer reads ----------------------------------------------------


def test_rows_are_named_in_words():
    assert row_label("p1", "Q|P", "poly2") == "pair p1, M(d') against M(d), polynomials of degree 2 (poly2)"
    assert row_label("average", "P|Q", "tree3") == "the mean over pairs, M(d) against M(d'), trees of depth 3 (tree3)"
    assert class_words("all") == "all functions (all)"


def _row(estimate, ci, claim=1.0, excess=0.21, verdict="pass", function_class="linear"):
    return {
        "pair": "p0", "direction": "P|Q", "function_class": function_class, "divergence": "kl", "alpha": math.nan,
        "estimate": estimate, "ci_low": ci[0], "ci_high": ci[1], "n_samples": 400, "claim": claim,
        "claim_class": "linear", "refutes_claim": True, "theory_bound": math.nan, "exact": math.nan,
        "verdict": verdict, "note": "", "task": f"p0|P|Q|{function_class}|kl||0", "error": None,
        "p_adjusted": 1.0, "detectable_excess": excess,
    }


def test_a_claim_consistent_with_equality_says_how_much_margin_passes(tmp_path):
    config = {"mechanism": {"name": "laplace"}, "attacks": {"confidence": 0.95},
              "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0,
                          "reason": "epsilon - 1 + exp(-epsilon) at <i>epsilon</i> = 1"}]}
    write_audit_report(tmp_path, rows=rows_of(pd.DataFrame([_row(0.98, (0.9, 1.1))])), verdict="pass", seed=0,
                       seconds=0.0, versions={"numpy": "2", "mechanism_library": None}, config=config)
    (claim,) = json.loads((tmp_path / "results.json").read_text())["claims"]
    assert claim["strongest_row"] == "pair p0, M(d) against M(d'), linear functions (linear)"
    assert "consistent with equality" in claim["note"] and "at least 0.21 (the detectable excess)" in claim["note"]
    assert "in 0.95 or more of audits" in claim["note"]
    report = (tmp_path / "report.md").read_text()
    assert "consistent with equality" in report and "p0|P|Q" not in report  # no raw task id
    assert "mechanism_library" not in report and "numpy 2" in report  # no "None" in the header
    assert "- (linear, KL) <= 1: epsilon - 1 + exp(-epsilon) at &lt;i>epsilon&lt;/i> = 1" in report
    separated = tmp_path / "separated"
    write_audit_report(separated, rows=rows_of(pd.DataFrame([_row(0.5, (0.4, 0.6))])), verdict="pass", seed=0,
                       seconds=0.0, versions={}, config=config)
    assert json.loads((separated / "results.json").read_text())["claims"][0]["note"] == ""


# --- user text: escaped, bounded; summary recurses and carries on ---------------


def test_user_text_never_splits_a_row_or_lands_as_html(tmp_path, capsys):
    label = "a|b\nc <script>alert(1)</script> " + "y" * 5000
    config = {"mechanism": {"name": "laplace", "params": {"label": label}}, "attacks": {"confidence": 0.95}}
    audited = {"mechanism": {"name": "laplace", "params": {"label": label}, "seedable": True}}
    out = tmp_path / "audits" / "one" / "deeper"
    write_audit_report(out, rows=rows_of(pd.DataFrame([_row(0.5, (0.4, 0.6))])), verdict="pass", seed=0, seconds=0.0,
                       versions={}, config=config, audited=audited)
    report = (out / "report.md").read_text()
    assert "<script>" not in re.sub(r"(`+).*?\1", "", report)  # only inside code spans
    assert max(map(len, report.splitlines())) < 2000  # the 5 000-character parameter is cut
    broken = tmp_path / "audits" / "two" / "results.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    assert main(["summary", str(tmp_path / "audits")]) == 2  # recursive, and the bad file does not stop it
    captured = capsys.readouterr()
    table = captured.out.strip().splitlines()
    cells = [len(re.findall(r"(?<!\\)\|", line)) for line in table]  # unescaped pipes: the cell borders
    assert len(table) == 4 and cells == [cells[0]] * 4
    assert "<script>" not in captured.out and "**unreadable**" in table[3]
    assert str(broken) in captured.err and len(captured.err.splitlines()) == 1


def test_summary_table_names_a_missing_directory(tmp_path):
    with pytest.raises(ValueError, match="no results.json there"):
        summary_table([tmp_path])


# --- smaller -------------------------------------------------------------------


def test_mechanisms_long_fits_the_terminal(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "110")
    assert main(["mechanisms", "--long"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "kind", "description", "parameters", "true", "privacy", "status"]
    assert max(map(len, lines)) <= 110  # was 350 columns


def test_report_and_summary_do_not_import_each_other():
    code = ("import sys, audit.report.audit_report; assert 'audit.report.summary' not in sys.modules; "
            "import audit.report.summary, inspect; assert 'audit.report.summary' not in inspect.getsource(audit.report.audit_report)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
