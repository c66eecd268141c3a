"""Faults never read as a verdict: exit 2 with one line and no traceback, rows kept, report written.

The mechanisms below follow the user-mechanism protocol ``f(dataset, n, rng)``
and misbehave only on datasets that sum to more than 0, so that in the
two-pair config pair ``p0`` (d' = [[1]]) fails and pair ``p1`` (d' = [[0], [0]],
a record 0 added) finishes; configs name them ``test_faults:<function>`` (pytest puts this
directory on sys.path).
"""

import importlib.util
import json
import math
import multiprocessing.connection
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import audit.commands.api
import audit.engine.memory
import audit.engine.run
import audit.inputs.neighbours
import audit.engine.progress
import audit.report.audit_report
import attacks.held_out
import audit.sampling.sampler
import audit.engine.store
from audit import run_audit
from audit.commands.api import AuditError
from audit.commands.cli import main
from audit.config.load import ConfigError, load_config
from audit.engine.run import NO_STATISTIC
from audit.engine.store import TASKS_FILE
from attacks.sequential import ROUND_STRIDE

ROOT = Path(__file__).resolve().parents[1]


def _healthy(dataset, n, rng):
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def exits_0(dataset, n, rng):
    if np.sum(dataset) > 0:
        sys.exit(0)
    return _healthy(dataset, n, rng)


def exits_message(dataset, n, rng):
    if np.sum(dataset) > 0:
        sys.exit("msg")
    return _healthy(dataset, n, rng)


def kills_its_process(dataset, n, rng):
    if np.sum(dataset) > 0:
        os._exit(3)
    return _healthy(dataset, n, rng)


def hangs(dataset, n, rng):
    if np.sum(dataset) > 0:
        time.sleep(600)
    return _healthy(dataset, n, rng)


def out_of_memory(dataset, n, rng):
    if np.sum(dataset) > 0:
        raise MemoryError
    return _healthy(dataset, n, rng)


def too_deep(dataset, n, rng):
    if np.sum(dataset) > 0:
        return too_deep(dataset, n, rng)
    return _healthy(dataset, n, rng)


def huge(dataset, n, rng):
    return 1e300 * _healthy(dataset, n, rng)


def laplace(dataset, n, rng):
    return _healthy(dataset, n, rng)


def raises(dataset, n, rng):
    if np.sum(dataset) > 0:
        raise ValueError("<b>boom</b> " + "x" * 320_000)  # user text: HTML and a 320 kB line
    return _healthy(dataset, n, rng)


def returns_scalar(dataset, n, rng):
    return 1.0 if np.sum(dataset) > 0 else _healthy(dataset, n, rng)


def returns_fewer(dataset, n, rng):
    return _healthy(dataset, n, rng)[: n - 1] if np.sum(dataset) > 0 else _healthy(dataset, n, rng)


def prints(dataset, n, rng):
    print("a line from the mechanism")
    return _healthy(dataset, n, rng)


def dies_in_a_worker(*args):
    """Stands for ``attacks.held_out._summary`` (a statistic's counts, in a worker): kills the loky worker."""
    os._exit(7)


PAIRS = [{"d": [[0.0]], "d_prime": [[1.0]]}, {"d": [[0.0]], "d_prime": [[0.0], [0.0]]}]


POLICIES = ("best", "every")
ROWS = {"best": 1, "every": 4}
"""Rows of :func:`_config`: best, one per claim; every, pairs x directions x classes."""


def _config(function="laplace", policy="every", **run):
    return {
        "mechanism": {"callable": f"test_faults:{function}"},
        "pairs": PAIRS,
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 0.5}],
        "attacks": {"classes": ["linear"], "n_samples": 200, "policy": policy},
        "run": {"seed": 1, "n_jobs": 1, **run},
    }


def _toml(tmp_path: Path, config: dict) -> Path:
    """The config as TOML (only the shapes used here: flat tables of strings, numbers and lists)."""
    lines = [f'[mechanism]\ncallable = "{config["mechanism"]["callable"]}"']
    for pair in config["pairs"]:
        lines.append(f"[[pairs]]\nd = {pair['d']}\nd_prime = {pair['d_prime']}")
    for claim in config["claims"]:
        lines.append("[[claims]]\n" + "\n".join(f"{key} = {json.dumps(value)}" for key, value in claim.items()))
    for table in ("attacks", "run"):
        lines.append(f"[{table}]\n" + "\n".join(f"{key} = {json.dumps(value)}" for key, value in config[table].items()))
    path = tmp_path / "audit.toml"
    path.write_text("\n\n".join(lines) + "\n")
    return path


def _run(tmp_path, capsys, config, *extra):
    """``capaudit run`` in this process: (exit code, stderr, results.json or None)."""
    out = tmp_path / "out"
    code = main(["run", str(_toml(tmp_path, config)), "--out", str(out), "--quiet", *extra])
    err = capsys.readouterr().err
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    return code, err, results


def _assert_clean_error(code, err, expected):
    assert code == 2
    assert "Traceback" not in err
    assert expected in err
    assert all(line.startswith("capaudit") for line in err.strip().splitlines())  # one line per message


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("exits_0", "called sys.exit(0)"),
        ("exits_message", "called sys.exit('msg')"),
        ("kills_its_process", "exit code 3"),
        ("hangs", "run.sample_timeout = 1 s"),
        ("out_of_memory", "MemoryError"),
        ("too_deep", "RecursionError"),
    ],
)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_failing_mechanism_costs_its_pair_not_the_audit(tmp_path, capsys, function, expected, policy):
    start = time.perf_counter()
    code, err, results = _run(tmp_path, capsys, _config(function, policy, sample_timeout=1))
    _assert_clean_error(code, err, expected)
    assert all(expected in row["error"] for row in results["rows"] if row["pair"] == "p0")
    healthy = [row for row in results["rows"] if row["pair"] == "p1"]
    assert healthy and all(row["error"] is None for row in healthy)  # the healthy pair finished
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "results.csv").exists()
    assert time.perf_counter() - start < 60  # a hung pair costs one timeout, not the audit


@pytest.mark.parametrize("policy", POLICIES)
def test_outputs_near_overflow_are_a_clean_outcome(tmp_path, capsys, policy):
    code, err, results = _run(tmp_path, capsys, _config("huge", policy))
    assert code in (0, 2) and "Traceback" not in err  # error rows or an honest audit, never a violation
    assert results is not None and len(results["rows"]) == ROWS[policy]


def fails_in_the_pool(*args):
    """Stands for ``attacks.held_out._summary``: a failure of the pool itself, not of one attack's fit."""
    raise RuntimeError("the pool broke")


@pytest.mark.parametrize("policy", POLICIES)
def test_a_failing_pool_gives_error_rows(tmp_path, capsys, monkeypatch, policy):
    monkeypatch.setattr(attacks.held_out, "_summary", fails_in_the_pool)
    code, err, results = _run(tmp_path, capsys, _config(policy=policy, n_jobs=2, backend="threading"))
    _assert_clean_error(code, err, "the attack workers failed: RuntimeError: the pool broke")
    assert len(results["rows"]) == ROWS[policy] and all("the pool broke" in row["error"] for row in results["rows"])


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
def test_a_dead_loky_worker_gives_error_rows(tmp_path, capsys, monkeypatch, policy):
    """A worker process killed mid-task (TerminatedWorkerError); slow: loky starts fresh workers."""
    monkeypatch.setattr(attacks.held_out, "_summary", dies_in_a_worker)
    code, err, results = _run(tmp_path, capsys, _config(policy=policy, n_jobs=2, backend="loky"))
    _assert_clean_error(code, err, "the attack workers failed: TerminatedWorkerError")
    assert len(results["rows"]) == ROWS[policy]
    assert all("attack workers failed" in row["error"] for row in results["rows"])


@pytest.mark.parametrize("stage", ["assign_verdicts", "write_audit_report"])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_crash_after_the_tasks_keeps_the_rows(tmp_path, capsys, monkeypatch, stage, policy):
    def crash(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(audit.commands.api if stage == "assign_verdicts" else audit.report.audit_report, stage, crash)
    code, err, results = _run(tmp_path, capsys, _config(policy=policy))
    _assert_clean_error(code, err, "ZeroDivisionError: float division by zero")
    assert results["verdict"] == "error" and "ZeroDivisionError" in results["error"]
    assert len(results["rows"]) == ROWS[policy] and all(row["verdict"] is None for row in results["rows"])
    assert "**ERROR**" in (tmp_path / "out" / "report.md").read_text()
    assert "ERROR" in (tmp_path / "out" / "report.html").read_text()
    assert len((tmp_path / "out" / TASKS_FILE).read_text().splitlines()) == ROWS[policy]


def test_debug_shows_the_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(audit.commands.api, "assign_verdicts", lambda *args: 1 / 0)
    code, err, _ = _run(tmp_path, capsys, _config(), "--debug")
    assert code == 2 and "Traceback" in err and "ZeroDivisionError" in err


def _interrupted_run(tmp_path, capsys, monkeypatch, config, lines):
    """``capaudit run`` with Ctrl-C once tasks.jsonl holds ``lines`` lines: exit 130, the finished rows saved."""
    append = audit.engine.store.append

    def interrupted(path, record, estimate):
        if len(path.read_text().splitlines()) == lines:
            raise KeyboardInterrupt
        append(path, record, estimate)

    monkeypatch.setattr(audit.engine.store, "append", interrupted)
    code, err, results = _run(tmp_path, capsys, config)
    assert code == 130 and "interrupted" in err and "--resume" in err and "Traceback" not in err
    monkeypatch.undo()
    return results


def test_ctrl_c_exits_130_after_saving(tmp_path, capsys, monkeypatch):
    results = _interrupted_run(tmp_path, capsys, monkeypatch, _config(), 2)
    assert results["verdict"] == "error" and len(results["rows"]) >= 2
    code, err, results = _run(tmp_path, capsys, _config(), "--resume")
    assert code == 0 and len(results["rows"]) == 4
    assert sum(row["resumed"] for row in results["rows"]) == 2


def test_best_ctrl_c_exits_130_after_saving_the_finished_searches(tmp_path, capsys, monkeypatch):
    """Policy best writes a search's records as it finishes: Ctrl-C in the second search keeps the first."""
    config = _config(policy="best")
    config["claims"].append({"divergence": "ipm", "function_class": "linear", "epsilon": 2.0})
    config["attacks"].update(n_samples=400)
    results = _interrupted_run(tmp_path, capsys, monkeypatch, config, 1)
    assert results["verdict"] == "error" and [row["divergence"] for row in results["rows"]] == ["kl"]
    code, err, results = _run(tmp_path, capsys, config, "--resume")
    assert code == 0 and [(row["divergence"], row["resumed"]) for row in results["rows"]] == [("kl", True),
                                                                                            ("ipm", False)]


@pytest.mark.parametrize(
    ("out", "expected"),
    [("file", "is an existing file"), ("/proc/capaudit-test", "is not writable")],
)
def test_an_output_directory_that_cannot_hold_the_report(tmp_path, capsys, out, expected):
    if out == "file":
        out = tmp_path / "file"
        out.write_text("")
    code = main(["run", str(_toml(tmp_path, _config())), "--out", str(out), "--quiet"])
    _assert_clean_error(code, capsys.readouterr().err, expected)


def test_a_directory_is_not_a_config(tmp_path, capsys):
    code = main(["run", str(tmp_path), "--out", str(tmp_path / "out")])
    _assert_clean_error(code, capsys.readouterr().err, "is a directory")


def test_a_config_too_deep_to_parse(tmp_path, capsys):
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    code = main(["run", str(path), "--out", str(tmp_path / "out")])
    _assert_clean_error(code, capsys.readouterr().err, "nested too deeply")


def test_sample_timeout_must_be_positive():
    with pytest.raises(ConfigError, match="run.sample_timeout: must be a positive number"):
        load_config(_config(sample_timeout=0))
    assert load_config(_config()).run.sample_timeout == 600


def test_a_probe_at_an_infinite_record_is_a_violation_with_a_report(tmp_path, capsys):
    """The built-in Gaussian's exact law at the special-values probe's inf record is centred at inf: the trade-off
    panel draws no exact curve there instead of failing the report (exit 2 with no report.html), the outputs on
    d' (all inf) against d's (finite) are one event's counts, a violation of every member claim, and no published
    bound is compared on a pair outside the domain of its closed form."""
    path = tmp_path / "audit.toml"
    path.write_text('[mechanism]\nname = "gaussian"\nparams = { sigma = 1.0 }\n\n'
                    '[neighbours]\nstrategy = "search"\ncount = 1\ncandidates = 1\nscreen_samples = 200\n'
                    'probes = ["special_values"]\n\n'
                    '[[claims]]\ndivergence = "zcdp"\nfunction_class = "linear"\nepsilon = 1.0\n\n'
                    '[attacks]\nn_samples = 2000\n\n[run]\nseed = 0\n')
    out = tmp_path / "out"
    code = main(["run", str(path), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert any("inf" in json.dumps(pair["d_prime"]) for pair in results["pairs"])
    assert code == 1 and results["verdict"] == "violation" and err.count("\n") <= 1, err  # no RuntimeWarning either
    assert results["rows"] and all(row["verdict"] == "violation" for row in results["rows"])
    assert not any(entry["fails"] for entry in results["theory"])
    assert (out / "report.html").exists()


def returns_nan(dataset, n, rng):
    return np.full(n, np.nan)


def test_a_check_of_a_mechanism_returning_nan_says_so_in_the_users_terms(tmp_path, capsys):
    """A post-processing check's map meets NaN outputs: the error names them, not the structural encoding's columns
    ("the mechanism's outputs have 5 coordinate(s)"); a config of checks only runs (no claim, no unit)."""
    path = tmp_path / "audit.toml"
    path.write_text('[mechanism]\ncallable = "test_faults:returns_nan"\n\n[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n'
                    '[[checks]]\nproperty = "post-processing"\nmap = [[2.0]]\nd = [[0.0]]\nd_prime = [[1.0]]\n')
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    _assert_clean_error(code, capsys.readouterr().err, "returned outputs that are NaN, infinite")
    assert (tmp_path / "out" / "report.html").exists()


# --- tasks.jsonl: checksums, torn lines, resumed rows -----------------------


def test_an_edited_tasks_file_is_refused_on_resume(tmp_path, capsys):
    config = _config()
    run_audit(config, out_dir=tmp_path / "out", progress=False)
    path = tmp_path / "out" / TASKS_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["evidence"]["estimate"] = lines[1]["estimate"] = 0.0  # forged, plan hash kept
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, err, _ = _run(tmp_path, capsys, config, "--resume")
    _assert_clean_error(code, err, "line 2 was changed after capaudit wrote it")


def test_a_torn_last_line_is_not_glued_to_the_next_record(tmp_path):
    config = _config()
    full = run_audit(config, out_dir=tmp_path, progress=False)
    path = tmp_path / TASKS_FILE
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # no final newline: an interrupted write
    resumed = run_audit(config, out_dir=tmp_path, resume=True, progress=False)
    after = path.read_text().splitlines()
    assert len(after) == 4 and all(json.loads(line)["checksum"] for line in after)
    assert resumed.table["resumed"].tolist() == [True, True, False, False]
    assert resumed.table.drop(columns="resumed").equals(full.table.drop(columns="resumed"))
    again = run_audit(config, out_dir=tmp_path, resume=True, progress=False)  # all read back: same verdicts
    assert again.table["resumed"].all()
    assert again.table.drop(columns="resumed").equals(full.table.drop(columns="resumed"))


def test_run_audit_raises_audit_error_with_the_rows_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(audit.commands.api, "assign_verdicts", lambda *args: 1 / 0)
    with pytest.raises(AuditError, match=f"the verdicts failed: ZeroDivisionError.*saved in {tmp_path}"):
        run_audit(_config(), out_dir=tmp_path, progress=False)


# --- imports: a config runs only the code it names ---------------------------

TRAP = "import pathlib\npathlib.Path(__file__).with_suffix('.imported').write_text('')\n"


def test_adapters_never_import_from_the_config_folder_or_the_current_directory(tmp_path):
    """With OpenDP installed the config fails after the adapter is built; without it (the test extra alone), the
    adapter names the extra to install: in both cases the opendp.py beside the config is never imported."""
    opendp = importlib.util.find_spec("opendp") is not None
    (tmp_path / "opendp.py").write_text(TRAP)
    # no [[claims]]: the config fails right after the adapter (and its library) is built
    (tmp_path / "audit.toml").write_text('[mechanism]\nname = "opendp.laplace"\nparams = { scale = 1.0 }\n')
    done = subprocess.run(
        [sys.executable, "-m", "audit.commands.cli", "run", "audit.toml", "--out", "out", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    expected = "claims: missing required field" if opendp else "install the extra capaudit[opendp]"
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert not (tmp_path / "opendp.imported").exists()


def test_workers_of_a_builtin_never_import_from_the_current_directory(tmp_path):
    """``python -m`` puts the current directory first on sys.path: neither the audit nor its loky workers keep it."""
    for module in ("joblib", "cloudpickle"):
        (tmp_path / f"{module}.py").write_text(f"raise RuntimeError('{module}.py of the current directory imported')\n")
    (tmp_path / "audit.toml").write_text(
        '[mechanism]\nname = "laplace"\nparams = { epsilon = 1.0 }\n\n'
        '[[claims]]\ndivergence = "kl"\nfunction_class = "linear"\nepsilon = 0.5\n\n'
        '[attacks]\nclasses = ["linear"]\nn_samples = 400\npolicy = "every"\n\n[run]\nn_jobs = 2\nbackend = "loky"\n')
    done = subprocess.run(
        [sys.executable, "-m", "audit.commands.cli", "run", "audit.toml", "--out", "out", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert "current directory imported" not in done.stderr


def test_a_callable_is_imported_only_once_the_config_is_valid(tmp_path, capsys):
    (tmp_path / "trap_module.py").write_text(TRAP + "def f(dataset, n, rng):\n    return rng.normal(size=n)\n")
    path = tmp_path / "audit.toml"
    path.write_text('[mechanism]\ncallable = "trap_module:f"\n\n[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n'
                    '[[claims]]\ndivergence = "kl"\nfunction_class = "linear"\nepsilon = -1\n')
    code = main(["run", str(path), "--out", str(tmp_path / "out")])
    _assert_clean_error(code, capsys.readouterr().err, "claims[0].epsilon")
    assert not (tmp_path / "trap_module.imported").exists()


def test_a_callable_that_exits_at_import_is_a_config_error(tmp_path, capsys):
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    config = _config()
    config["mechanism"]["callable"] = "exits_at_import:f"
    path = _toml(tmp_path, config)
    code = main(["run", str(path), "--out", str(tmp_path / "out")])
    _assert_clean_error(code, capsys.readouterr().err, "mechanism.callable")


def test_run_audit_takes_a_function_object_and_records_its_name():
    config = _config()
    config["mechanism"]["callable"] = lambda dataset, n, rng: np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)
    result = run_audit(config, progress=False)
    assert result.exit_code == 0 and len(result.table) == 4
    name = result.config["mechanism"]["callable"]
    assert name == "test_faults:test_run_audit_takes_a_function_object_and_records_its_name.<locals>.<lambda>"


@pytest.mark.parametrize("policy", POLICIES)
def test_rows_do_not_depend_on_jobs_backend_or_fork(monkeypatch, policy):
    config = _config(policy=policy)
    config["pairs"] = [{"d": [[0.0]], "d_prime": [[float(i)]]} for i in range(1, 4)]
    one = run_audit(config, progress=False).table
    two = run_audit(config, n_jobs=2, backend="threading", progress=False).table  # loky: tests/test_runner.py
    assert two.equals(one)
    monkeypatch.setattr(audit.sampling.sampler, "FORK", False)  # Windows, macOS: sampled in this process
    assert run_audit(config, n_jobs=2, backend="threading", progress=False).table.equals(one)


def test_ctrl_c_while_a_pair_hangs_keeps_the_other_pairs(tmp_path, capsys, monkeypatch):
    """The main thread waits on the sampling children only: Ctrl-C there stops the audit at once."""
    wait = multiprocessing.connection.wait

    def interrupted_when_idle(objects, timeout=None):  # Ctrl-C half a second into a wait that finds nothing
        ready = wait(objects, timeout=0.5 if timeout is None else min(timeout, 0.5))
        if not ready and timeout != 0:  # a look without waiting (the sampler between attacks) is not idle
            raise KeyboardInterrupt
        return ready

    monkeypatch.setattr(multiprocessing.connection, "wait", interrupted_when_idle)
    config = _config("hangs", sample_timeout=300)
    config["pairs"] = PAIRS[::-1]  # p0 healthy, p1 hangs
    start = time.perf_counter()
    code, err, results = _run(tmp_path, capsys, config)
    assert code == 130 and "Traceback" not in err and time.perf_counter() - start < 60
    assert {row["pair"] for row in results["rows"]} == {"p0"} and len(results["rows"]) == 2


def test_a_hanging_mechanism_shows_on_the_terminal_before_the_timeout(tmp_path, capsys, monkeypatch):
    """The bar is drawn from the first mechanism call (the memory check's) and its heartbeat counts the seconds
    without outputs while a chunk runs: not a blank terminal until run.sample_timeout."""
    monkeypatch.setattr(audit.engine.progress, "HEARTBEAT", {True: 0.5, False: 0.5})
    code = main(["run", str(_toml(tmp_path, _config("hangs", sample_timeout=3))), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "first outputs (memory check)" in err
    assert "waiting on the mechanism for 2 s" in err  # a heartbeat before the 3 s timeout


def test_a_search_in_rounds_counts_against_its_most_outputs(tmp_path, capsys):
    """The bar's total is the most the rounds may draw (it stays put; a decided unit shrinks it to what it drew),
    and it says the round and the lower bound against the claim."""
    config = _config(policy="best")
    del config["attacks"]["n_samples"]  # rounds until decided
    code = main(["run", str(_toml(tmp_path, config)), "--out", str(tmp_path / "out")])
    bars = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if line.startswith("audit:")]
    totals = {re.search(r"/([0-9.]+[kM]?) ", line).group(1) for line in bars if "100%" not in line}  # not the end
    assert code in (0, 1) and len(totals) == 1, totals
    assert any(re.search(r"round 2 of at most \d+, lower bound -?[0-9.]+ vs claim 0.5", line) for line in bars), bars


def test_no_process_outlives_an_audit_killed_with_kill_9(tmp_path):
    """loky's workers watch the audit's process (audit.sampling.parallel): kill -9 of the audit leaves neither them nor the
    resource trackers they kept alive (4 processes stayed before); forked sampling children die with it too."""
    psutil = pytest.importorskip("psutil")  # in the test extra
    config = _config(policy="every", n_jobs=2, backend="loky")
    config["attacks"].update(classes=["linear", "poly3", "tree3"], n_samples=400_000)  # still running at the kill
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    audit_process = subprocess.Popen([sys.executable, "-m", "audit.commands.cli", "run", str(_toml(tmp_path, config)), "--out",
                                      str(tmp_path / "out"), "--quiet"], env=environment, stderr=subprocess.DEVNULL)
    def workers(processes):
        count = 0
        for process in processes:
            try:
                count += "popen_loky" in " ".join(process.cmdline())
            except psutil.Error:  # it ended meanwhile (a sampling child): not a worker
                continue
        return count

    parent, deadline, children, started = psutil.Process(audit_process.pid), time.monotonic() + 120, [], 0
    while time.monotonic() < deadline and started < 2:  # counted once a look: a child may end between two looks
        time.sleep(0.2)
        children = parent.children(recursive=True)
        started = workers(children)
    assert started >= 2, "the loky workers never started"
    audit_process.kill()
    audit_process.wait()
    _, alive = psutil.wait_procs(children, timeout=15)
    for process in alive:  # leave nothing behind, whatever the verdict
        process.kill()
    assert not [(process.pid, " ".join(process.cmdline())[:80]) for process in alive]


def test_a_bad_parameter_value_is_a_config_error(tmp_path, capsys):
    path = tmp_path / "audit.toml"
    path.write_text('[mechanism]\nname = "laplace"\nparams = { sensitivity = {} }\n\n'
                    '[[claims]]\ndivergence = "kl"\nfunction_class = "all"\nepsilon = 1.0\n')
    code = main(["run", str(path), "--out", str(tmp_path / "out")])
    _assert_clean_error(code, capsys.readouterr().err, "mechanism.name: mechanism 'laplace': sensitivity must be a positive number")


def test_a_config_error_replaces_an_earlier_report(tmp_path, capsys):
    """A failed run must not leave the previous run's PASS in --out to be read as its own."""
    code, _, results = _run(tmp_path, capsys, _config())
    assert code == 0 and results["verdict"] == "pass"
    config = _config()
    config["run"]["seed"] = -1
    code, err, results = _run(tmp_path, capsys, config)
    _assert_clean_error(code, err, "run.seed")
    assert results["verdict"] == "error" and "run.seed" in results["error"] and results["rows"] == []
    assert "run.seed" in (tmp_path / "out" / "report.html").read_text()


# --- fuzz: mutated configs end in a clean exit 2 or an audit -----------------

FUZZ_VALUES = [
    True, "1", "", "poly00", "poly२", 0, -1, 1, 2**63, 10**6, 0.5, 1.0000001, 0.999999, 1e308, -1e308,
    float("inf"), float("nan"), [], [0], [[1e308]], [[0.0], [1.0]], {}, {"epsilon": {}}, "laplace", "kl",
    "threshold", ["linear"], ["all"],
]
FUZZ_BASE = {
    "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
    "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}],
    "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0}],
    "attacks": {"classes": ["linear"], "n_samples": 100, "confidence": 0.9, "train_fraction": 0.5},
    "run": {"seed": 0, "n_jobs": 1, "sample_timeout": 30},
}


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(key)} = {_toml_value(item)}" for key, item in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return json.dumps(value)


def _to_toml(config: dict) -> str:
    blocks = []
    for section, content in config.items():
        entries = content if isinstance(content, list) else [content]
        header = f"[[{section}]]" if isinstance(content, list) else f"[{section}]"
        for entry in entries:
            blocks.append("\n".join([header, *(f"{key} = {_toml_value(item)}" for key, item in entry.items())]))
    return "\n\n".join(blocks) + "\n"


def _mutated(rng: np.random.Generator) -> dict:
    """The base config with one to three leaves replaced by odd values."""
    config = json.loads(json.dumps(FUZZ_BASE))
    for _ in range(rng.integers(1, 4)):
        section = str(rng.choice(list(config)))
        table = config[section][0] if isinstance(config[section], list) else config[section]
        table[str(rng.choice(list(table)))] = FUZZ_VALUES[rng.integers(len(FUZZ_VALUES))]
    return config


def _fuzz(tmp_path, capsys, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(count):
        path = tmp_path / f"fuzz{i}.toml"
        path.write_text(_to_toml(_mutated(rng)))
        code = main(["run", str(path), "--out", str(tmp_path / f"out{i}"), "--quiet"])
        err = capsys.readouterr().err
        assert code in (0, 1, 2) and "Traceback" not in err, (path.read_text(), err)
        if code == 2:
            assert err.strip() and all(line.startswith("capaudit") for line in err.strip().splitlines())
        if code == 1:  # a violation must come from held-out evidence, i.e. finished rows
            table = json.loads((tmp_path / f"out{i}" / "results.json").read_text())["rows"]
            assert any(row["verdict"] in ("violation", "unbounded") for row in table)


def test_mutated_configs_end_cleanly(tmp_path, capsys):
    _fuzz(tmp_path, capsys, count=30, seed=0)  # 200 in the slow test below


@pytest.mark.slow
def test_many_mutated_configs_end_cleanly(tmp_path, capsys):
    _fuzz(tmp_path, capsys, count=200, seed=1)


# --- a failure reads as ERROR everywhere ---------------------------------------


@pytest.mark.parametrize("policy", ["every", "best"])
@pytest.mark.parametrize("function", ["raises", "returns_scalar", "returns_fewer", "exits_0"])  # NaN is evidence (audit.sampling.structure)
def test_a_failure_reads_as_error_everywhere(tmp_path, capsys, function, policy):
    """Exit 2 is ERROR in report.md, results.json, the JSON line, stdout and summary; one bounded stderr line."""
    config = _config(function, policy)
    if function == "raises":  # raising on one dataset of a pair is evidence; on both it is the pair's error
        config["pairs"] = [{"d": [[1.0]], "d_prime": [[2.0]]}, PAIRS[1]]
    config["attacks"].update(n_samples=400)
    out = tmp_path / "out"
    code = main(["run", str(_toml(tmp_path, config)), "--out", str(out), "--quiet", "--json-summary"])
    captured = capsys.readouterr()
    (line,) = captured.out.splitlines()  # the JSON line only
    assert code == 2 and json.loads(line)["verdict"] == "error"
    assert json.loads((out / "results.json").read_text())["verdict"] == "error"
    report = (out / "report.md").read_text()
    assert "## Verdict: **ERROR**" in report and "INCONCLUSIVE" not in report
    errors = [text for text in captured.err.splitlines() if text.startswith("capaudit: error:")]
    assert len(errors) == 1 and "p0" in errors[0]  # one failure (pair p0), said once
    assert len(errors[0]) <= len("capaudit: error: ") + 400 and "Traceback" not in captured.err
    assert "audit of" in captured.err and "ERROR" in captured.err  # the human line, on stderr beside --json-summary
    assert "<b>" not in re.sub(r"`[^`]*`", "", report)  # user text never lands as raw HTML
    assert main(["summary", str(out)]) == 0 and "**error**" in capsys.readouterr().out


def test_no_figure_is_drawn_without_data(tmp_path):
    config = _config("raises")
    config["pairs"] = [{"d": [[1.0]], "d_prime": [[2.0]]}]  # a pair failing on both datasets: no row has an estimate
    result = run_audit(config, out_dir=tmp_path / "out", progress=False)
    assert result.verdict == "error" and result.exit_code == 2
    assert not list((tmp_path / "out" / "figures").iterdir())
    assert "## Figures" not in (tmp_path / "out" / "report.md").read_text()


def test_json_summary_is_one_line_when_the_mechanism_prints(tmp_path):
    """The mechanism prints in this process and in forked children: all of it goes to stderr."""
    config = _toml(tmp_path, _config("prints"))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    done = subprocess.run([sys.executable, "-m", "audit.commands.cli", "run", str(config), "--out", str(tmp_path / "out"),
                           "--quiet", "--json-summary"], capture_output=True, text=True, env=environment,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["verdict"] == "pass" and "a line from the mechanism" in done.stderr


# --- fault injection: stages x faults x backends -------------------------------

FAULT = {"stage": None, "kind": None}
"""The fault :func:`staged_fault` injects (``kind``) and the stage it injects it in (``stage``)."""
CURRENT = {"stage": None}
"""The stage whose outputs are being drawn: set in this process before the sampler forks its children."""

FAILURES = {
    "raise": "raised ValueError: injected failure",
    "exit": "called sys.exit('injected exit')",
    "die": "exit code 9",
    "hang": "run.sample_timeout = 2 s",
    "shape": "must return shape",
}
"""A mechanism's own failure -> what the one stderr line says of it."""
EVIDENCE = ("nan", "inf", "huge", "wide", "very_wide")
"""Outputs that are evidence (audit.sampling.structure), on both datasets: a verdict, never an error."""


def staged_fault(dataset, n, rng):
    """A Laplace sum that misbehaves in the stage ``FAULT`` names, on both datasets."""
    outputs = _healthy(dataset, n, rng)
    if CURRENT["stage"] != FAULT["stage"]:
        return outputs
    kind = FAULT["kind"]
    if kind == "raise":
        raise ValueError("injected failure")
    if kind == "exit":
        sys.exit("injected exit")
    if kind == "die":
        os._exit(9)
    if kind == "hang":
        time.sleep(600)
    if kind == "very_wide":  # 200 000 coordinates on d only
        return np.tile(outputs[:, None], (1, 200_000)) if np.sum(dataset) == 0 else outputs
    return {"nan": np.full(n, np.nan), "inf": np.full(n, np.inf), "huge": outputs * 1e308,
            "wide": np.tile(outputs[:, None], (1, 50)), "shape": outputs[: n - 1]}[kind]


@pytest.fixture
def inject(monkeypatch):
    """Sets the stage around each draw: the engine's (screen, train, check, confirm), the memory check's probe and
    the structure pilot; a forked child sees the stage its parent set."""
    pair_sampler = audit.engine.memory.pair_sampler  # opened after the memory check (audit.engine.memory.checked_sampler)

    def staged(*args, **kwargs):
        sample = pair_sampler(*args, **kwargs)

        def draw(pair, n, stage, chunk):  # a search in rounds: chunk r * ROUND_STRIDE + k of round r (from 0)
            CURRENT["stage"] = stage if FAULT["stage"] != "round2" else f"round{chunk // ROUND_STRIDE + 1}"
            try:
                return sample(pair, n, stage, chunk)
            finally:
                CURRENT["stage"] = None
        return draw

    def during(stage, function):
        def wrapped(*args, **kwargs):
            CURRENT["stage"] = stage
            try:
                return function(*args, **kwargs)
            finally:
                CURRENT["stage"] = None
        return wrapped

    monkeypatch.setattr(audit.engine.memory, "pair_sampler", staged)
    monkeypatch.setattr(audit.engine.memory, "check_memory", during("probe", audit.engine.memory.check_memory))
    monkeypatch.setattr(audit.engine.run, "fix_layout", during("pilot", audit.engine.run.fix_layout))
    monkeypatch.setattr(audit.inputs.neighbours, "screen_candidates", during("search", audit.inputs.neighbours.screen_candidates))
    monkeypatch.setattr(audit.engine.run, "run_check", during("checks", audit.engine.run.run_check))  # each check a unit

    def set_fault(stage, kind):
        FAULT.update(stage=stage, kind=kind)
    yield set_fault
    FAULT.update(stage=None, kind=None)


def _fault_config(stage, policy, n_jobs, backend):
    """Two pairs and a curve claim (gdp); the policy ``rounds`` is best without n_samples (a search in rounds); the
    search stage screens a [neighbours] search instead of the pairs, the checks stage runs a sequential check."""
    config = _config("staged_fault", "best" if policy == "rounds" else policy, sample_timeout=2, n_jobs=n_jobs,
                     backend=backend)
    config["pairs"] = [{"d": [[0.0]], "d_prime": [[1.0]]}, {"d": [[0.0]], "d_prime": [[2.0]]}]
    config["claims"] = [{"divergence": "gdp", "function_class": "linear", "epsilon": 3.0}]  # a curve claim
    config["attacks"].update(n_samples=2000)
    if policy == "rounds":  # a tight claim (KL of Lap(0, 1) against Lap(2, 1): 1 + e^-2): undecided after round 1
        del config["attacks"]["n_samples"]
        config["attacks"]["max_outputs"] = 200_000
        config["claims"] = [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0 + math.exp(-2.0)}]
    if stage == "search":
        del config["pairs"]
        config["neighbours"] = {"strategy": "search", "domain": {"low": [0.0], "high": [2.0]}, "count": 2,
                                "candidates": 2, "screen_samples": 100, "probes": []}
    if stage == "checks":
        config["checks"] = [{"property": "sequential", "d": [[0.0]], "d_prime": [[1.0]]}]
    return config


def _check_fault_cell(tmp_path, capsys, stage, kind, policy, n_jobs=1, backend="threading"):
    path = tmp_path / "audit.toml"
    path.write_text(_to_toml(_fault_config(stage, policy, n_jobs, backend)))
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "report.html").exists(), err
    if kind in FAILURES and stage not in ("pilot", "probe"):  # the pilot ignores failures; the probe's raise is an event
        assert code == 2 and len(lines) == 1 and FAILURES[kind] in lines[0], err
        errors = [row["error"] for row in results["rows"] if row["error"]]
        errors += [check["error"] for check in results.get("checks", []) if check["error"]]
        assert results["verdict"] == "error" and (errors or stage == "search")  # the search fails before any row
        # every failed pair's row names the mechanism's own failure, never the sampler's internals
        assert all(FAILURES[kind] in error for error in errors if not error.startswith(NO_STATISTIC)), errors
    elif kind in EVIDENCE and (kind != "very_wide" or stage == "pilot"):  # 200 000 coordinates a call past the
        assert code in (0, 1) and not lines, err                          # pilot: 1.6 GB a chunk, may time out
        assert results["verdict"] in ("pass", "violation", "inconclusive")
    else:
        assert code in (0, 1, 2) and len(lines) <= 1, err


STAGES = ("pilot", "probe", "search", "screen", "train", "check", "confirm", "round2", "checks")
LIGHT_CELLS = [
    ("round2", "raise", "rounds"), ("round2", "nan", "rounds"), ("search", "hang", "best"), ("search", "exit", "best"),
    ("checks", "exit", "best"),
    ("checks", "inf", "best"),
    ("screen", "raise", "best"), ("screen", "exit", "best"), ("check", "exit", "best"), ("train", "die", "best"),
    ("confirm", "shape", "best"), ("confirm", "hang", "best"), ("confirm", "nan", "best"), ("confirm", "huge", "best"),
    ("confirm", "wide", "every"), ("train", "raise", "every"), ("pilot", "very_wide", "best"),
]


@pytest.mark.parametrize(("stage", "kind", "policy"), LIGHT_CELLS)
def test_an_injected_fault_reads_as_itself(tmp_path, capsys, inject, stage, kind, policy):
    """Representative cells of the fault matrix, in threads (the default backend); the full matrix is slow."""
    inject(stage, kind)
    _check_fault_cell(tmp_path, capsys, stage, kind, policy)


@pytest.mark.parametrize(("stage", "bar"), [("pilot", "structure pilot"), ("search", "dataset search")])
def test_a_mechanism_hanging_before_the_engine_shows_on_the_terminal(tmp_path, capsys, monkeypatch, inject, stage,
                                                                      bar):
    """The structure pilot and the dataset search draw their own bar from their first call, with the heartbeat's
    seconds without an answer: a mechanism hanging there is not a blank terminal until run.sample_timeout."""
    monkeypatch.setattr(audit.engine.progress, "HEARTBEAT", {True: 0.5, False: 0.5})
    inject(stage, "hang")
    path = tmp_path / "audit.toml"
    config = _fault_config(stage, "every", 1, "threading")  # sample_timeout = 2
    config["attacks"]["n_samples"] = 200
    path.write_text(_to_toml({**config, "claims": _config()["claims"]}))  # kl: no curve to draw
    main(["run", str(path), "--out", str(tmp_path / "out")])
    shown = re.split(r"[\r\n]", capsys.readouterr().err)
    assert any(line.startswith(bar) and re.search(r"waiting on the mechanism for [12] s", line) for line in shown), shown


@pytest.mark.parametrize("kind", ["raise", "nan"])
def test_an_injected_fault_reads_as_itself_with_loky(tmp_path, capsys, inject, kind):
    inject("confirm", kind)
    _check_fault_cell(tmp_path, capsys, "confirm", kind, "best", n_jobs=2, backend="loky")


@pytest.mark.slow
@pytest.mark.parametrize(("n_jobs", "backend"), [(1, "threading"), (2, "threading"), (2, "loky")])
@pytest.mark.parametrize("policy", [*POLICIES, "rounds"])
@pytest.mark.parametrize("kind", [*FAILURES, *EVIDENCE])
@pytest.mark.parametrize("stage", STAGES)
def test_every_injected_fault_reads_as_itself(tmp_path, capsys, inject, stage, kind, policy, n_jobs, backend):
    if policy == "every" and stage in ("screen", "check", "round2"):
        pytest.skip(f"policy every has no {stage} stage")
    if stage == "round2" and policy != "rounds":
        pytest.skip(f"policy {policy} with n_samples has no round 2 (only a search in rounds has)")
    inject(stage, kind)
    _check_fault_cell(tmp_path, capsys, stage, kind, policy, n_jobs, backend)
