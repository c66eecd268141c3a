"""audit.engine.checks: CBDP's theorems as audits (``[[checks]]``, docs/theory.md section 5).

Each check holds where its theorem applies (Laplace / Gaussian, small n),
flags its constructed counter-case (adaptive composition, a nonlinear map,
the threshold class for Thm 7), and reads "contradicted" when the theorem's
bound is made false (a mechanism whose stated output laws understate it).
The slow test counts false contradictions over seeds.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from audit import run_audit
from audit.commands.cli import main
from audit.engine.checks import (
    CHECK_VERDICTS,
    check_level,
    check_verdict,
    combine,
    generalization_gaps,
    run_check,
)
from audit.config.load import PROPERTIES, ConfigError, load_config
from audit.mechanisms.additive_noise import LaplaceMechanism
from audit.sampling.parallel import backend
from audit.results.schema import Row
from audit.engine.store import TASKS_FILE
from audit.theory.composition import theorem_bound

LAPLACE = {"name": "laplace", "params": {"epsilon": 1.0}}
GAUSSIAN = {"name": "gaussian", "params": {"sigma": 1.0}}
N = 600


def _config(*checks, n=N, seed=0, **extra):
    return {"mechanism": LAPLACE, "attacks": {"n_samples": n}, "run": {"seed": seed}, "checks": list(checks), **extra}


def _checks(config):
    """The config's checks run as the engine runs them (one unit each, in the run's backend), as results.json's
    ``checks`` entries."""
    config = load_config(config)
    with backend(config.run.backend, config.run.n_jobs):
        return [run_check(config, index).to_check_record() for index in range(len(config.checks))]


def _run(*checks, **options):
    return _checks(_config(*checks, **options))


def _verdict(verdict):
    """A check row with this verdict and nothing else (what :func:`combine` reads)."""
    return Row(pair="checks[0]", direction="P|Q", function_class="linear", divergence="kl", claim=0.5,
               claim_class="linear", verdict=verdict)


# --------------------------------------------------------------------------- pure functions


def test_theorem_bounds_are_the_theorems_right_hand_sides():
    assert theorem_bound("sequential", [0.2, 0.5]) == pytest.approx(0.7)
    assert theorem_bound("parallel", [0.2, 0.5]) == 0.5
    assert theorem_bound("convexity", [0.2, 0.5]) == 0.5
    assert theorem_bound("post-processing", [0.3]) == 0.3
    assert theorem_bound("pinsker", [0.01]) == pytest.approx(0.8)
    assert theorem_bound("generalization", [0.25]) == pytest.approx(4.0)
    assert math.isnan(theorem_bound("sequential", [0.2, math.nan]))


@pytest.mark.parametrize(
    ("low", "bound", "broken", "trusted", "expected"),
    [
        (0.3, 0.5, None, True, "holds"),
        (0.6, 0.5, None, True, "contradicted"),
        (0.6, 0.5, "adaptive", True, "hypothesis broken"),
        (0.1, 0.5, "adaptive", True, "hypothesis broken"),
        (0.6, 0.5, None, False, "inconclusive"),
        (math.nan, 0.5, None, True, "inconclusive"),
        (0.1, math.nan, None, True, "inconclusive"),
    ],
)
def test_check_verdict(low, bound, broken, trusted, expected):
    assert check_verdict(low, bound, broken, trusted) == expected


def test_levels_split_the_error_rate_over_checks_and_bounds():
    assert check_level(0.95, 2, 5) == pytest.approx(0.995)
    assert check_level(0.9, 1, 1) == pytest.approx(0.9)


def test_generalization_gap_is_the_query_difference():
    t, s, fresh = np.array([0.5]), np.array([0.2]), np.array([-0.2])
    # q_t(x) = (1 + t x) / 2: mean over S minus mean over S' = t (mean S - mean S') / 2
    assert generalization_gaps(t, s, fresh)[0] == pytest.approx(((1 + 0.5 * 0.2) - (1 - 0.5 * 0.2)) / 2 / 1)


def test_combine_verdicts_and_exit_codes():
    holds, contradicted = _verdict("holds"), _verdict("contradicted")
    assert combine(None, None, [holds]) == ("pass", 0)
    assert combine(None, None, [contradicted]) == ("violation", 1)
    assert combine("pass", 0, [_verdict("hypothesis broken")]) == ("pass", 0)
    assert combine("pass", 0, [_verdict("inconclusive")]) == ("inconclusive", 0)
    assert combine("pass", 0, [_verdict("error")]) == ("error", 2)
    assert combine("violation", 1, [holds]) == ("violation", 1)
    assert combine("pass", 2, [contradicted]) == ("error", 2)  # exit 2 always reads "error"


# --------------------------------------------------------------------------- the theorems hold where they apply


def test_each_check_holds_where_its_theorem_applies():
    rows = _run(
        {"property": "sequential", "mechanisms": [LAPLACE, GAUSSIAN]},
        {"property": "sequential", "divergence": "renyi", "alpha": 2},
        {"property": "parallel", "mechanisms": [LAPLACE, GAUSSIAN]},
        {"property": "post-processing", "map": [[2.0]]},
        {"property": "convexity", "mechanisms": [LAPLACE, GAUSSIAN], "weight": 0.3},
        {"property": "convexity", "divergence": "ipm"},
        {"property": "pinsker", "mechanisms": [{"name": "laplace", "params": {"epsilon": 0.1}}]},
    )
    assert [row["verdict"] for row in rows] == ["holds"] * len(rows), [(r["check"], r["note"]) for r in rows]
    sequential = rows[0]
    exact = {m["role"]: m["exact"] for m in sequential["measurements"]}
    # the parts' epsilon is their exact (linear, KL): Laplace (CBDP Table 1) and Gaussian 1 / (2 sigma^2)
    eps = math.sqrt(2.0) - 1 + math.log(1 - (math.sqrt(2.0) - 1) ** 2)
    assert exact["M1"] == pytest.approx(eps, rel=1e-4) and exact["M2"] == pytest.approx(0.5, rel=1e-4)
    assert sequential["bound"] == pytest.approx(eps + 0.5, rel=1e-4)


def test_generalization_gap_matches_its_closed_form():
    """With little noise and no clipping the gap is E[t mean(S)] / 2 = Var(mean(S)) / 2 = 1 / (2 m)."""
    (row,) = _run({"property": "generalization", "n_records": 10,
                   "mechanisms": [{"name": "gaussian", "params": {"sigma": 0.5, "sensitivity": 2.0}}]}, n=4000)
    assert row["verdict"] == "holds"
    gap = row["measurements"][-1]
    sd = (gap["high"] - gap["low"]) / 2 / stats.norm.ppf(row["level"])  # the standard error behind the bounds
    assert abs(gap["estimate"] - 1 / 20) < 4 * sd
    assert row["measurements"][0]["exact"] == pytest.approx(4 / (2 * 0.25))  # unrestricted KL of the worst pair


# --------------------------------------------------------------------------- constructed counter-cases are flagged


def test_counter_cases_are_flagged_not_contradictions():
    adaptive, square, threshold, tree = _run(
        {"property": "sequential", "mechanisms": [LAPLACE, GAUSSIAN], "adaptive": True},
        {"property": "post-processing", "map": "square"},
        {"property": "pinsker", "function_class": "threshold"},
        {"property": "sequential", "function_class": "tree2"},
    )
    assert [r["verdict"] for r in (adaptive, square, threshold, tree)] == ["hypothesis broken"] * 4
    assert "adaptive" in adaptive["note"] and "non-adaptive" in adaptive["note"]
    assert "nonlinear" in square["note"]
    assert "threshold" in threshold["note"] and "convex" in threshold["note"]
    assert "sum class" in tree["note"]


def test_a_false_bound_is_contradicted_with_its_evidence(monkeypatch):
    """Laplace output laws that overstate its noise make eps1 + eps2 false: the check must say so (exit 1)."""
    monkeypatch.setattr(LaplaceMechanism, "output_laws",
                        lambda self, d, d_prime: (stats.laplace(0.0, 100.0), stats.laplace(1.0, 100.0)))
    (row,) = _run({"property": "sequential"})
    assert row["verdict"] == "contradicted"
    assert row["measured_low"] > row["bound"]
    assert combine(None, None, [_verdict(row["verdict"])]) == ("violation", 1)


def test_a_contradicted_check_beside_passing_claims_makes_the_audit_a_violation(monkeypatch):
    monkeypatch.setattr(LaplaceMechanism, "output_laws",
                        lambda self, d, d_prime: (stats.laplace(0.0, 100.0), stats.laplace(1.0, 100.0)))
    config = _config({"property": "sequential"}, claims=[{"divergence": "kl", "function_class": "linear", "epsilon": 5.0}])
    config["attacks"]["classes"] = ["linear"]
    result = run_audit(config, progress=False)
    assert [claim["verdict"] for claim in result.claims] == ["pass"]
    assert [check.verdict for check in result.checks] == ["contradicted"]
    assert (result.verdict, result.exit_code) == ("violation", 1)


# --------------------------------------------------------------------------- config, results and report


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ({"property": "convexity", "divergence": "renyi", "alpha": 2}, "checks[0].divergence"),
        ({"property": "composition"}, "checks[0].property"),
        ({"property": "pinsker", "map": "square"}, "post-processing only"),
        ({"property": "sequential", "mechanisms": [LAPLACE]}, "checks[0].mechanisms"),
        ({"property": "convexity", "weight": 1.0}, "checks[0].weight"),
        ({"property": "post-processing"}, "checks[0].map"),
        ({"property": "post-processing", "map": "cube"}, "checks[0].map"),
        ({"property": "sequential", "function_class": "all"}, "checks[0].function_class"),
        ({"property": "sequential", "divergence": "renyi"}, "checks[0].alpha"),
        ({"property": "sequential", "adaptive": "yes"}, "checks[0].adaptive"),
        ({"property": "sequential", "d": [[0.0]]}, "d_prime"),
    ],
)
def test_invalid_checks_name_the_field(check, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(_config(check))


def test_a_config_needs_claims_or_checks():
    with pytest.raises(ConfigError, match=r"\[\[checks\]\]"):
        load_config({"mechanism": LAPLACE})


def sleeps_forever(dataset, n, rng):
    time.sleep(10**6)


def test_a_hanging_check_mechanism_exits_2_within_the_sample_timeout(tmp_path, capsys):
    """The checks sample in forked children like every audit: a hang costs its check, not the audit."""
    config = tmp_path / "hang.toml"
    config.write_text(
        '[mechanism]\ncallable = "test_checks:sleeps_forever"\n\n[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n'
        '[[checks]]\nproperty = "post-processing"\nmap = [[2.0]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n'
        "[attacks]\nn_samples = 200\n\n[run]\nsample_timeout = 2\n"
    )
    start = time.perf_counter()
    code = main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"])
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert seconds < 30, seconds  # one sample_timeout (2 s) plus start-up, not forever
    assert len(err) == 1 and "checks[0]" in err[0] and "sample_timeout" in err[0], err
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [check["verdict"] for check in document["checks"]] == ["error"]


def test_a_failing_check_is_an_error_row_not_a_verdict():
    (row,) = _run({"property": "post-processing", "map": [[1.0, 1.0]]})
    assert row["verdict"] == "error" and "column" in row["error"]
    assert combine(None, None, [_verdict(row["verdict"])]) == ("error", 2)


def test_checks_only_audit_writes_results_and_report(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    config = _config({"property": "sequential"}, {"property": "pinsker", "function_class": "threshold"}, n=400)
    result = run_audit(config, progress=False, out_dir=tmp_path)
    assert (result.verdict, result.exit_code) == ("pass", 0)
    document = json.loads((tmp_path / "results.json").read_text())
    assert [c["verdict"] for c in document["checks"]] == ["holds", "hypothesis broken"]
    assert document["rows"] == []
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs/schema/results.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(document)) == []
    entry = schema["properties"]["checks"]["items"]["properties"]
    assert entry["verdict"]["enum"] == list(CHECK_VERDICTS) and entry["property"]["enum"] == list(PROPERTIES)
    report = (tmp_path / "report.md").read_text()
    assert "## Property checks" in report and "No claims" in report


def test_a_part_on_its_default_pair_takes_the_bound_tables_exact_value():
    """(lin, KL) of a 2-D Gaussian shift is ||v||^2 / (2 sigma^2) = 1 exactly (CBDP appendix Thm 10): the part's eps
    is that value, not the upper confidence bound of a lower-bound estimator; on another pair it is unknown."""
    gaussian_2d = {"name": "gaussian", "params": {"sigma": 1.0, "sensitivity": [1.0, 1.0]}}
    check = {"property": "post-processing", "map": [[1.0, 1.0], [1.0, -1.0]], "mechanisms": [gaussian_2d]}
    other_pair = {**check, "d": [[0.0, 0.0], [0.0, 0.0]], "d_prime": [[0.0, 0.0], [0.5, 0.0]]}
    default, other = _run(check, other_pair)
    assert default["measurements"][0]["exact"] == pytest.approx(1.0) and default["bound"] == pytest.approx(1.0)
    assert other["measurements"][0]["exact"] is None
    assert other["bound"] == pytest.approx(other["measurements"][0]["high"])


def test_checks_draw_the_same_numbers_for_any_n_jobs():
    check = {"property": "sequential", "mechanisms": [LAPLACE, GAUSSIAN]}
    config = _config(check)
    one, two = (_checks({**config, "run": {"seed": 0, "n_jobs": jobs}}) for jobs in (1, 2))
    assert one == two


def test_checks_sample_on_a_dask_cluster_with_the_numbers_of_loky():
    pytest.importorskip("distributed", reason="the dask backend needs capaudit[dask]")
    config = _config({"property": "convexity", "mechanisms": [LAPLACE, GAUSSIAN]})
    loky, dask = (_checks({**config, "run": {"seed": 0, "n_jobs": 2, "backend": name}})
                  for name in ("loky", "dask"))
    assert dask == loky


def test_same_seed_same_numbers():
    check = {"property": "convexity", "mechanisms": [LAPLACE, GAUSSIAN]}
    first, second = _run(check, seed=3), _run(check, seed=3)
    assert first == second
    assert _run(check, seed=4)[0]["measured"] != first[0]["measured"]


# --------------------------------------------------------------------------- validity over seeds


@pytest.mark.slow
def test_true_theorems_are_rarely_contradicted_over_seeds():
    """A true theorem reads "contradicted" in at most 1 - confidence of audits.

    40 audits of six checks at n = 200 (the tight ones: the composed estimand
    reaches the bound); at a 5 % rate, 7 or more of 40 has probability < 0.05.
    """
    checks = (
        {"property": "sequential", "mechanisms": [LAPLACE, GAUSSIAN]},
        {"property": "sequential", "divergence": "renyi", "alpha": 2},
        {"property": "parallel", "mechanisms": [LAPLACE, GAUSSIAN]},
        {"property": "post-processing", "map": [[2.0]]},
        {"property": "convexity", "mechanisms": [LAPLACE, GAUSSIAN]},
        {"property": "pinsker", "mechanisms": [{"name": "laplace", "params": {"epsilon": 0.1}}]},
    )
    contradicted = sum(
        any(row["verdict"] == "contradicted" for row in _run(*checks, n=200, seed=seed)) for seed in range(40)
    )
    assert contradicted < 7


@pytest.mark.slow
def test_a_nonlinear_map_widens_the_class_beyond_the_bound():
    """y -> (y, y^2) makes a linear adversary a poly2 one: (poly2, Renyi 4) of Laplace is 0.627 > (linear) 0.411.

    The measured lower bound exceeds M's exact linear value (the conclusion fails without i o g in H),
    and the check says "hypothesis broken", not "contradicted".
    """
    (row,) = _run({"property": "post-processing", "map": "append-square", "divergence": "renyi", "alpha": 4},
                  n=20_000)
    assert row["verdict"] == "hypothesis broken"
    assert row["bound"] == pytest.approx(0.4106, abs=1e-3)
    assert row["measured_low"] > row["bound"] and "exceeds the bound" in row["note"]


# --------------------------------------------------------------------------- resume


def _written_checks(out):
    return [{key: value for key, value in check.items() if key != "resumed"}
            for check in json.loads((out / "results.json").read_text())["checks"]]


def test_resume_keeps_the_finished_checks_and_runs_the_others(tmp_path):
    """An audit cut after its first check (its line whole, the next torn): --resume reads the first check's row
    back and runs the second, and the checks are those of an uninterrupted run."""
    config = _config({"property": "post-processing", "map": [[2.0]]}, {"property": "convexity"}, n=200)
    full, cut = tmp_path / "full", tmp_path / "cut"
    run_audit(config, out_dir=full, progress=False)
    lines = (full / TASKS_FILE).read_text().splitlines()
    assert [json.loads(line)["check"] for line in lines] == ["checks[0]", "checks[1]"]
    cut.mkdir()
    (cut / TASKS_FILE).write_text(lines[0] + "\n" + lines[1][:40])
    resumed = run_audit(config, out_dir=cut, resume=True, progress=False)
    assert [check.resumed for check in resumed.checks] == [True, False]
    assert (cut / TASKS_FILE).read_text().splitlines()[0] == lines[0]  # kept verbatim
    assert _written_checks(cut) == _written_checks(full)


@pytest.mark.slow
def test_resume_after_kill_9_gives_the_checks_of_an_uninterrupted_run(tmp_path):
    """Each check is a unit of the engine: killed (SIGKILL) after the first check's row reached tasks.jsonl, the
    resumed audit keeps that row, runs the second, and writes the checks an uninterrupted run writes."""
    cut, marker = tmp_path / "cut", tmp_path / "killed"
    pair = {"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}
    config = {
        "mechanism": {"callable": "test_runner:killed_after_the_first_unit",
                      "params": {"watch": str(cut / TASKS_FILE), "marker": str(marker)}},
        "pairs": [pair], "attacks": {"n_samples": 200}, "run": {"seed": 0},
        "checks": [{"property": "post-processing", "map": [[2.0]], **pair},
                   {"property": "post-processing", "map": [[-3.0]], **pair}],
    }
    script = f"from audit.commands.api import run_audit; run_audit({config!r}, out_dir={str(cut)!r}, progress=False)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL and marker.exists(), killed.stderr.decode()[-2000:]
    [line] = (cut / TASKS_FILE).read_text().splitlines()  # the first check, whole
    assert json.loads(line)["check"] == "checks[0]"
    resumed = run_audit(config, out_dir=cut, resume=True, progress=False)
    assert [check.resumed for check in resumed.checks] == [True, False]
    run_audit(config, out_dir=tmp_path / "full", progress=False)  # the marker exists: never killed
    checks = _written_checks(cut)
    assert checks == _written_checks(tmp_path / "full") and [c["verdict"] for c in checks] == ["holds"] * 2
