"""The engine's contract under both policies (audit/engine/run.py): rows independent of n_jobs and backend, tasks.jsonl
and resume (after kill -9 too), estimate records, mechanism errors, deterministic releases; policy "every"'s rows.

The mechanisms below are plain functions following the user-mechanism
protocol ``f(dataset, n, rng) -> (n, d)``; configs name them as
``test_runner:<function>`` (pytest puts this directory on sys.path).
"""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit import run_audit
from audit.config.load import load_config
from attacks.event_divergence import EVENT_NOTE
from attacks.estimate import estimate_divergence
from attacks.estimate import DivergenceEstimate
from audit.engine.memory import PROCESS_BASELINE, estimate_memory
from audit.engine.store import TASKS_FILE, line_checksum
from audit.theory import bounds

PAIRS = [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}]


def laplace_sum(dataset, n, rng, epsilon=1.0):
    """The sum of the records plus Lap(1/epsilon): epsilon-DP for records in [0, 1]."""
    return np.sum(dataset) + rng.laplace(0.0, 1.0 / epsilon, size=n)


def exact_sum(dataset, n, rng):
    """A non-private release: the sum itself, n times."""
    return np.full(n, float(np.sum(dataset)))


def nan_on_d_prime(dataset, n, rng):
    out = rng.normal(size=n)
    return out if np.sum(dataset) == 0 else out * np.nan


def raises_on_d_prime(dataset, n, rng):
    if np.sum(dataset) > 0:
        raise ArithmeticError("boom on d_prime")
    return rng.normal(size=n)


def wider_on_d_prime(dataset, n, rng):
    return rng.normal(size=(n, 1 if np.sum(dataset) == 0 else 2))


POLICIES = ("best", "every")
POLICIES_LIGHT = ("best", pytest.param("every", marks=pytest.mark.slow))
"""For whole-audit tests whose policy-specific code other default tests reach: ``every`` in the slow suite."""
SECOND_PAIR = {"d": [[0.0], [0.0]], "d_prime": [[0.0], [2.0]]}


def _config(function="laplace_sum", claims=None, classes=("linear",), n_samples=400, policy="every", **params):
    return {
        "mechanism": {"callable": f"test_runner:{function}", "params": params},
        "pairs": PAIRS,
        "claims": claims or [{"divergence": "kl", "function_class": "linear", "epsilon": 0.5}],
        "attacks": {"policy": policy, "classes": list(classes), "n_samples": n_samples},
        "run": {"seed": 5, "n_jobs": 1},
    }


def test_every_policy_crosses_pairs_directions_classes_and_claims():
    """One row per pair x direction x class that estimates the divergence x claim on it; two claims on one
    divergence and order share their statistics (an estimate does not depend on the claimed value or class)."""
    claims = [
        {"divergence": "kl", "function_class": "linear", "epsilon": 0.5},
        {"divergence": "renyi", "alpha": [2, 4], "function_class": "all", "epsilon": 0.5},
        {"divergence": "renyi", "alpha": [2], "function_class": "linear", "epsilon": 0.9},  # shares renyi 2's
        {"divergence": "dp", "function_class": "all", "epsilon": 1.0},
    ]
    config = _config(claims=claims, classes=("threshold", "linear"))
    config["pairs"] = [*PAIRS, SECOND_PAIR]
    table = run_audit(config, progress=False).table
    # per pair and direction, each of linear and threshold (a set class: kl and renyi by its set's counts):
    # kl, renyi 2 (two claims), renyi 4, dp
    assert len(table) == 2 * 2 * (5 + 5) and table["error"].isna().all()
    assert set(table["policy"]) == {"every"} and table["n_confirm"].eq(200).all()
    statistics = table.drop_duplicates("task")
    assert len(statistics) == 2 * 2 * (4 + 4) and "p1|Q|P|linear|renyi|4|0" in set(statistics["task"])
    assert "p1|Q|P|threshold|kl||0" in set(statistics["task"])


def test_every_policy_splits_n_samples_by_train_fraction_into_fresh_train_and_confirm_samples():
    """train_fraction of n_samples trains each candidate (its own sample), the rest confirms it; no screen, no
    check; held_out_scores bin exactly the confirm sample."""
    config = _config(n_samples=1000)
    config["attacks"]["train_fraction"] = 0.3
    assert load_config(config).attacks.held_out == 700
    table = run_audit(config, progress=False).table
    assert (table["n_train"] == 300).all() and (table["n_confirm"] == 700).all()
    assert (table["n_screen"] == 0).all() and (table["n_check"] == 0).all()
    assert all(sum(scores["p"]) == sum(scores["q"]) == 700 for scores in table["held_out_scores"])


def _parallel_config(policy):
    claims = [{"divergence": "renyi", "alpha": [2], "function_class": "poly2", "epsilon": 0.5},
              {"divergence": "dp", "function_class": "all", "epsilon": 1.0}]
    return _config(claims=claims, classes=("linear", "poly2", "threshold"), policy=policy)


@pytest.fixture(scope="module", params=POLICIES)
def one_job(request):
    return request.param, run_audit(_parallel_config(request.param), n_jobs=1, progress=False).table


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_same_rows_with_one_and_two_jobs(one_job, backend):
    policy, table = one_job
    two = run_audit(_parallel_config(policy), n_jobs=2, backend=backend, progress=False).table
    pd.testing.assert_frame_equal(table.drop(columns="seconds", errors="ignore"),
                                  two.drop(columns="seconds", errors="ignore"))
    assert len(two) == {"best": 2, "every": 2 * (3 + 3)}[policy]  # every: threshold on renyi too (its set's counts)


def _two_unit_config(policy):
    """Two units of work under either policy: two claims (best) or two pairs (every)."""
    claims = [{"divergence": "kl", "function_class": "poly2", "epsilon": 0.5},
              {"divergence": "dp", "function_class": "all", "epsilon": 1.0}]
    config = _config(claims=claims, classes=("linear", "threshold"), policy=policy)
    config["pairs"] = [*PAIRS, SECOND_PAIR]
    return config


def _first_unit_lines(lines: list[str]) -> list[str]:
    first = json.loads(lines[0])
    return lines[:first["search_records"]]


@pytest.mark.parametrize("policy", POLICIES_LIGHT)
def test_resume_redoes_nothing_finished(tmp_path, policy):
    config = _two_unit_config(policy)
    full = run_audit(config, out_dir=tmp_path / "full", progress=False)
    out = tmp_path / "interrupted"
    run_audit(config, out_dir=out, progress=False)
    lines = (out / TASKS_FILE).read_text().splitlines()
    kept_lines = _first_unit_lines(lines)
    assert 0 < len(kept_lines) < len(lines)
    # an interrupted run: the first unit finished, the second cut half-way through a line
    (out / TASKS_FILE).write_text("\n".join(kept_lines) + "\n" + lines[len(kept_lines)][:40] + "\n")
    resumed = run_audit(config, out_dir=out, resume=True, progress=False)
    after = [line for line in (out / TASKS_FILE).read_text().splitlines() if line.endswith("}")]
    assert after[:len(kept_lines)] == kept_lines  # kept verbatim: their seconds would differ had they been redone
    assert len(after) == len(lines)
    assert {json.loads(line)["task"] for line in after} == {json.loads(line)["task"] for line in lines}
    kept = {json.loads(line)["task"] for line in kept_lines}
    assert (resumed.table["resumed"] == resumed.table["task"].isin(kept)).all()  # the rows read back are marked
    pd.testing.assert_frame_equal(resumed.table.drop(columns=["resumed", "seconds"], errors="ignore"),
                                  full.table.drop(columns=["resumed", "seconds"], errors="ignore"))


def killed_after_the_first_unit(dataset, n, rng, watch="", marker=""):
    """Lap(1) plus the sum; kills the audit (its parent: samples are drawn in forked children) with SIGKILL on
    the first draw after a unit's records reached ``watch``, once (``marker``)."""
    if os.path.exists(watch) and os.path.getsize(watch) > 0 and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getppid(), signal.SIGKILL)
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def _rows(out: Path) -> list[str]:
    rows = json.loads((out / "results.json").read_text())["rows"]
    return [json.dumps({key: value for key, value in row.items() if key != "resumed"}, sort_keys=True)
            for row in rows]


@pytest.mark.parametrize("policy", POLICIES_LIGHT)
def test_resume_after_kill_9_gives_the_rows_of_an_uninterrupted_run(tmp_path, policy):
    cut, marker = tmp_path / "cut", tmp_path / "killed"
    config = _two_unit_config(policy)
    config["mechanism"] = {"callable": "test_runner:killed_after_the_first_unit",
                           "params": {"watch": str(cut / TASKS_FILE), "marker": str(marker)}}
    script = f"from audit.commands.api import run_audit; run_audit({config!r}, out_dir={str(cut)!r}, progress=False)"
    tests = str(Path(__file__).parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests, *sys.path]))
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL and marker.exists(), killed.stderr.decode()[-2000:]
    written = (cut / TASKS_FILE).read_text().splitlines()
    assert written and len(written) == json.loads(written[0])["search_records"]  # the first unit, whole
    resumed = run_audit(config, out_dir=cut, resume=True, progress=False)
    assert resumed.table["resumed"].any() and not resumed.table["resumed"].all()
    run_audit(config, out_dir=tmp_path / "full", progress=False)  # the marker exists: never killed
    assert _rows(cut) == _rows(tmp_path / "full")


def _json_plain(value):
    """True when value is made of JSON's own types only (what json.loads gives back)."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _json_plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_json_plain(item) for item in value)
    return value is None or type(value) in (bool, int, float, str)


@pytest.mark.parametrize(
    ("function_class", "divergence", "params", "shift", "coupled"),
    [
        ("linear", "kl", {}, 1.0, False),
        ("poly2", "renyi", {"alpha": 4.0}, 1.0, False),
        ("threshold", "ipm", {}, 1.0, False),
        ("threshold", "dp", {"delta": 0.01}, 1.0, False),
        ("threshold", "dp", {}, 20.0, False),  # no held-out Q sample in the attack set: an infinite upper end
        ("linear", "kl", {}, 20.0, False),  # separable samples: a finite estimate, never unbounded
        ("linear", "kl", {}, 1.0, True),  # coupled: Q = P + shift row by row, paired standard error
        ("threshold", "dp", {"delta": 0.01}, 1.0, True),  # coupled: paired cells and score bounds
    ],
)
def test_estimate_record_round_trip_keeps_bounds_and_p_values(function_class, divergence, params, shift, coupled):
    rng = np.random.default_rng(3)
    samples_p = rng.normal(0, 1, 400)
    samples_q = samples_p + shift if coupled else rng.normal(shift, 1, 400)
    estimate = estimate_divergence(samples_p, samples_q, function_class, divergence, random_state=0,
                                   coupled=coupled, **params)
    record = estimate.to_record()
    assert _json_plain(record)
    rebuilt = DivergenceEstimate.from_record(json.loads(json.dumps(record)))
    assert rebuilt.adversary is None
    assert math.isfinite(rebuilt.estimate) and "unbounded" not in record
    assert rebuilt.coupled is coupled and ("cells" in rebuilt.details) == (coupled and divergence == "dp")
    claims = [-1.0, 0.0, 0.3, 1.0, 5.0]

    def evaluate(result):
        return ([result.lower_bound(level) for level in (0.5, 0.95, 0.999)],
                [result.confidence_interval(confidence) for confidence in (0.8, 0.95)],
                [result.p_value(claim) for claim in claims],
                result.estimate, result.standard_error)

    # exact equality (NaN equal to NaN): the record keeps every bit of the numbers the bounds read
    np.testing.assert_equal(evaluate(rebuilt), evaluate(estimate))
    assert rebuilt.details == estimate.details


def test_record_without_coupled_field_reads_as_independent():
    """tasks.jsonl lines written before coupled sampling existed resume as independent estimates."""
    rng = np.random.default_rng(4)
    estimate = estimate_divergence(rng.normal(0, 1, 400), rng.normal(1, 1, 400), "threshold", "dp", random_state=0)
    record = estimate.to_record()
    del record["coupled"]
    rebuilt = DivergenceEstimate.from_record(record)
    assert not rebuilt.coupled and rebuilt.lower_bound(0.95) == estimate.lower_bound(0.95)


def test_tasks_file_holds_plain_json_and_no_pickle(tmp_path):
    claims = [{"divergence": "kl", "function_class": "linear", "epsilon": 0.5},
              {"divergence": "dp", "function_class": "all", "epsilon": 1.0}]
    run_audit(_config(claims=claims, classes=("linear", "threshold")), out_dir=tmp_path, progress=False)
    lines = [json.loads(line) for line in (tmp_path / TASKS_FILE).read_text().splitlines()]
    assert {line["divergence"] for line in lines} == {"kl", "dp"}
    for line in lines:
        assert _json_plain(line)  # a pickle would be a base64 string, not an object of numbers
        assert isinstance(line["evidence"], dict) and line["evidence"]["divergence"] == line["divergence"]


def test_resume_refuses_evidence_that_is_not_an_object(tmp_path):
    run_audit(_config(), out_dir=tmp_path, progress=False)
    path = tmp_path / TASKS_FILE
    first, *rest = path.read_text().splitlines()
    pickled = dict(json.loads(first), evidence="gASVAAAA")
    pickled["checksum"] = line_checksum(pickled)  # a well-formed line, as an older version would write it
    path.write_text("\n".join([json.dumps(pickled), *rest]) + "\n")
    with pytest.raises(ValueError, match="line 1: evidence must be a JSON object"):
        run_audit(_config(), out_dir=tmp_path, resume=True, progress=False)


def test_resume_refuses_another_config(tmp_path):
    run_audit(_config(), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="different config"):
        run_audit(_config(epsilon=2.0), out_dir=tmp_path, resume=True, progress=False)


@pytest.mark.parametrize("policy", POLICIES)
def test_deterministic_release_gets_finite_bounds_not_infinity(policy):
    """A finite sample never proves infinity: dp rows bound epsilon by the counts, kl / renyi rows by the counts of
    the event that separates the two outputs (each witness takes one value per dataset), below its ceiling."""
    claims = [{"divergence": "renyi", "alpha": [2], "function_class": "poly2", "epsilon": 100.0},
              {"divergence": "dp", "function_class": "all", "epsilon": 3.0}]
    result = run_audit(_config("exact_sum", claims=claims, classes=("linear", "threshold"), policy=policy),
                       progress=False)
    table = result.table
    assert np.isfinite(table["estimate"]).all() and "unbounded" not in set(table["verdict"])
    assert table["note"].str.contains("consistent with a deterministic release").all()
    renyi, dp = table[table["divergence"] == "renyi"], table[table["divergence"] == "dp"]
    assert renyi["note"].str.startswith(EVENT_NOTE).all() and (renyi["ci_low"] < np.log(200)).all()
    # the claim, 100, is far above the ceiling (about 4 here): separated outputs neither refute nor support it
    assert set(renyi["verdict"]) <= {"inconclusive", "info"} and "inconclusive" in set(renyi["verdict"])
    assert renyi.loc[renyi["verdict"] == "inconclusive", "note"].str.contains("separated").all()
    # 200 held-out outputs each, none of D' in the set: Q(S) <= 1 - (a/2)^(1/200) at the row's level a,
    # so epsilon >= log(P_low / Q_up), about 3.6 at Holm's smallest level here; finite, above the claim 3.
    assert (dp["ci_low"] < np.log(200)).all()
    assert "violation" in set(dp["verdict"]) and result.exit_code == 1


@pytest.mark.parametrize("policy", POLICIES_LIGHT)
def test_randomized_response_at_high_epsilon_is_not_a_false_violation(policy):
    """At epsilon = 8 a 1 000-sample run repeats one output on each dataset about half the time."""
    violations = 0
    for seed in range(10):
        config = {
            "mechanism": {"name": "randomized_response", "params": {"epsilon": 8.0}},
            "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}],
            "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 8.0},
                       {"divergence": "kl", "function_class": "all", "epsilon": 8.0 * np.tanh(4.0)}],
            "attacks": {"policy": policy, "classes": ["linear", "threshold"], "n_samples": 1000},
            "run": {"seed": seed, "n_jobs": 1},
        }
        violations += run_audit(config, progress=False).verdict == "violation"
    assert violations <= 2  # binom.ppf(0.99, 10, 0.05) = 2


@pytest.mark.parametrize(
    ("function", "message"),
    [("raises_on_d_prime", "boom on d_prime")],
)
@pytest.mark.parametrize("policy", POLICIES)
def test_mechanism_errors_become_error_rows(function, message, policy):
    """A mechanism raising on every call of both datasets of p0 (on one dataset only it would be evidence:
    test_structural_outputs_are_evidence_not_errors)."""
    config = _config(function, policy=policy)
    config["pairs"] = [{"d": [[1.0], [0.0]], "d_prime": [[1.0], [1.0]]}, {"d": [[0.0], [0.0]], "d_prime": [[0.0], [0.0], [0.0]]}]
    result = run_audit(config, progress=False)
    table = result.table
    assert table.loc[table["pair"] == "p0", "error"].str.contains(message).all()
    assert table.loc[table["pair"] == "p1", "error"].isna().all()  # the healthy pair still finished
    assert table["pair"].eq("p1").any()
    assert result.exit_code == 2 and result.verdict == "error"  # exit 2 reads as an error


@pytest.mark.parametrize("function", ["nan_on_d_prime", "wider_on_d_prime", "raises_on_d_prime"])
def test_structural_outputs_are_evidence_not_errors(function):
    """NaN on d' only, a wider output on d', or a call raising on d' only: an observable event (audit.sampling.structure,
    audit.sampling.sampler.draw_pair_isolated), refuted at once.  Every call on d' raising, the outputs on d' are one
    value: a kl row has no spread to measure (a caveat, never a violation), a dp row has its exact count bound."""
    claims = [{"divergence": "dp", "function_class": "linear", "epsilon": 0.5}] if function.startswith("raises") else None
    config = _config(function, claims)
    config["pairs"] = [*PAIRS, {"d": [[0.0], [0.0]], "d_prime": [[0.0], [0.0], [0.0]]}]
    result = run_audit(config, progress=False)
    table = result.table.set_index("pair")
    assert table["error"].isna().all()
    assert (table.loc["p0", "verdict"] == "violation").any() and result.exit_code == 1


def test_exact_and_theory_columns_for_a_builtin():
    config = {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0}],
        "attacks": {"policy": "every", "classes": ["linear"], "n_samples": 400},
    }
    table = run_audit(config, progress=False).table
    np.testing.assert_allclose(table["exact"], bounds.laplace_linear_kl(1.0), rtol=1e-3)  # symmetric law
    assert table["theory_bound"].notna().all()


def test_plan_that_does_not_fit_in_memory_is_refused():
    with pytest.raises(ValueError, match="memory"):
        run_audit(_config(n_samples=10**13), progress=False)


def test_memory_estimate_counts_processes_samples_and_features():
    # 1 process; 2 pairs x 2 datasets x 1000 x d=2 samples; 1 worker x 2 x 1000 rows x (7 + 0.7 C(4, 2)) words
    single = PROCESS_BASELINE + 8 * 2 * 1000 * 2 * 2 + 8 * 2 * 1000 * (7 + 0.7 * 6)
    assert estimate_memory(1000, 2, 2, ["linear", "poly2"], 1) == int(single)
    # 3 processes (main + 2 loky workers), each worker one task; threads share the main process
    loky = estimate_memory(1000, 2, 2, ["linear", "poly2"], 2, backend="loky")
    assert loky == int(single + 2 * PROCESS_BASELINE + 8 * 2 * 1000 * 11.2)
    threads = estimate_memory(1000, 2, 2, ["linear", "poly2"], 2)  # the default backend
    assert threads == int(single + 8 * 2 * 1000 * 11.2)
    wide = estimate_memory(1000, 1, 1, ["kernel"], 1, class_params={"kernel": {"n_components": 400}})
    assert wide == int(PROCESS_BASELINE + 8 * 2 * 1000 + 8 * 2 * 1000 * (7 + 0.7 * 400))


def test_rows_follow_the_design_schema():
    result = run_audit(_config(), progress=False)
    row = result.table.iloc[0]
    assert row["pair"] == "p0" and row["direction"] in ("P|Q", "Q|P")
    assert row["claim_class"] == "linear" and bool(row["refutes_claim"])
    assert math.isnan(row["alpha"]) and row["n_samples"] == 400
    assert row["verdict"] in ("pass", "inconclusive")


def test_neighbours_table_generates_named_pairs():
    config = {
        "mechanism": {"name": "laplace"},
        "neighbours": {"strategy": "random", "count": 2},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0}],
        "attacks": {"policy": "every", "classes": ["linear"], "n_samples": 400},
    }
    table = run_audit(config, progress=False).table
    assert sorted(set(table["pair"])) == ["p0", "p1"] and len(table) == 4


def _import_graph() -> dict[str, set[str]]:
    """Module -> the audit and attacks modules it imports, at module level or inside functions (``from pkg import
    sub`` depends on the submodule only)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    paths = {".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
             for package in ("audit", "attacks") for path in (root / package).rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in paths:
                subs = {f"{node.module}.{alias.name}" for alias in node.names} & set(paths)
                deps |= subs or {node.module}
            elif isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names} & set(paths)
        graph[name] = deps - {name}
    return graph


def test_no_module_of_audit_or_attacks_sits_in_an_import_cycle():
    """No module reaches back to itself through its imports, module-level or inside functions (the adapters'
    package once did: it imported its submodules, which imported their base class from it)."""
    graph = _import_graph()

    def reachable(start):
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += graph[module]
        return seen

    assert {"audit.commands.api", "audit.engine.run", "attacks.staged", "audit.mechanisms.adapters"} <= set(graph)
    assert [module for module in graph if module in reachable(module)] == []
