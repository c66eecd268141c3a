"""The rows engine's runner (every config here sets engine = "rows"): task plan, seeds independent of n_jobs, tasks.jsonl and resume, estimate records, mechanism errors, unbounded rows.

The mechanisms below are plain functions following the user-mechanism
protocol ``f(dataset, n, rng) -> (n, d)``; configs name them as
``test_runner:<function>`` (pytest puts this directory on sys.path).
"""

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit import bounds, run_audit
from audit.config import load_config
from attacks.estimate import estimate_divergence
from attacks.estimate import DivergenceEstimate
from audit.plan import PROCESS_BASELINE, estimate_memory, plan_tasks
from audit.store import TASKS_FILE, line_checksum

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


def _config(function="laplace_sum", claims=None, classes=("linear",), n_samples=400, **params):
    return {
        "mechanism": {"callable": f"test_runner:{function}", "params": params},
        "pairs": PAIRS,
        "claims": claims or [{"divergence": "kl", "function_class": "linear", "epsilon": 0.5}],
        "attacks": {"engine": "rows", "classes": list(classes), "n_samples": n_samples},
        "run": {"seed": 5, "n_jobs": 1},
    }


def test_plan_crosses_pairs_directions_classes_and_claim_divergences():
    claims = [
        {"divergence": "kl", "function_class": "linear", "epsilon": 0.5},
        {"divergence": "renyi", "alpha": [2, 4], "function_class": "poly2", "epsilon": 0.5},
        {"divergence": "renyi", "alpha": [2], "function_class": "all", "epsilon": 0.9},  # shares renyi 2's tasks
        {"divergence": "dp", "function_class": "all", "epsilon": 1.0},
    ]
    config = load_config(_config(claims=claims, classes=("threshold", "linear")))
    tasks = plan_tasks(config, ["p0", "p1"])
    # linear: kl, renyi 2, renyi 4, dp; threshold: dp only (it estimates ipm and dp)
    assert len(tasks) == 2 * 2 * (4 + 1)
    assert len({task.id for task in tasks}) == len(tasks)
    assert "p1|Q|P|linear|renyi|4|0" in {task.id for task in tasks}


@pytest.fixture(scope="module")
def one_job_table():
    return run_audit(_parallel_config(), n_jobs=1, progress=False).table


def _parallel_config():
    claims = [{"divergence": "renyi", "alpha": [2], "function_class": "poly2", "epsilon": 0.5}]
    return _config(claims=claims, classes=("linear", "poly2"))


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_same_rows_with_one_and_two_jobs(one_job_table, backend):
    two = run_audit(_parallel_config(), n_jobs=2, backend=backend, progress=False).table
    pd.testing.assert_frame_equal(one_job_table, two)
    assert len(two) == 2 * 2


def test_resume_redoes_nothing_finished(tmp_path):
    claims = [{"divergence": "kl", "function_class": "poly2", "epsilon": 0.5}]
    config = _config(claims=claims, classes=("linear", "poly2"))
    full = run_audit(config, out_dir=tmp_path / "full", progress=False)
    out = tmp_path / "interrupted"
    run_audit(config, out_dir=out, progress=False)
    lines = (out / TASKS_FILE).read_text().splitlines()
    assert len(lines) == 4
    # an interrupted run: two finished tasks and half a line being written
    (out / TASKS_FILE).write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2] + "\n")
    resumed = run_audit(config, out_dir=out, resume=True, progress=False)
    after = [line for line in (out / TASKS_FILE).read_text().splitlines() if line.endswith("}")]
    assert after[:2] == lines[:2]  # kept verbatim: their seconds would differ had they been redone
    assert len(after) == 4
    assert {json.loads(line)["task"] for line in after} == {json.loads(line)["task"] for line in lines}
    kept = {json.loads(line)["task"] for line in lines[:2]}
    assert (resumed.table["resumed"] == resumed.table["task"].isin(kept)).all()  # the rows read back are marked
    pd.testing.assert_frame_equal(resumed.table.drop(columns="resumed"), full.table.drop(columns="resumed"))


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
    assert not rebuilt.unbounded
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


def test_deterministic_release_gets_finite_bounds_not_infinity():
    """A finite sample never proves infinity: dp rows bound epsilon by the counts, kl / renyi rows cannot."""
    claims = [{"divergence": "renyi", "alpha": [2], "function_class": "poly2", "epsilon": 100.0},
              {"divergence": "dp", "function_class": "all", "epsilon": 3.0}]
    result = run_audit(_config("exact_sum", claims=claims, classes=("linear", "threshold")), progress=False)
    table = result.table
    assert np.isfinite(table["estimate"]).all() and "unbounded" not in set(table["verdict"])
    assert table["note"].str.contains("consistent with a deterministic release").all()
    renyi, dp = table[table["divergence"] == "renyi"], table[table["divergence"] == "dp"]
    assert set(renyi["verdict"]) == {"inconclusive"}  # no spread to measure: a caveat, never a violation
    # 200 held-out outputs each, none of D' in the set: Q(S) <= 1 - (a/2)^(1/200) at the row's level a,
    # so epsilon >= log(P_low / Q_up), about 3.6 at Holm's smallest level here; finite, above the claim 3.
    assert (dp["ci_low"] < np.log(200)).all()
    assert "violation" in set(dp["verdict"]) and result.exit_code == 1


def test_randomized_response_at_high_epsilon_is_not_a_false_violation():
    """At epsilon = 8 a 1 000-sample run repeats one output on each dataset about half the time."""
    violations = 0
    for seed in range(10):
        config = {
            "mechanism": {"name": "randomized_response", "params": {"epsilon": 8.0}},
            "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}],
            "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 8.0},
                       {"divergence": "kl", "function_class": "all", "epsilon": 8.0 * np.tanh(4.0)}],
            "attacks": {"engine": "rows", "classes": ["linear", "threshold"], "n_samples": 1000},
            "run": {"seed": seed, "n_jobs": 1},
        }
        violations += run_audit(config, progress=False).verdict == "violation"
    assert violations <= 2  # binom.ppf(0.99, 10, 0.05) = 2


def test_mechanism_errors_become_error_rows():
    config = _config("raises_on_d_prime")
    config["pairs"] = [*PAIRS, {"d": [[0.0], [0.0]], "d_prime": [[0.0], [0.0]]}]  # p1: d_prime sums to 0
    result = run_audit(config, progress=False)
    table = result.table.set_index("pair")
    assert table.loc["p0", "error"].str.contains("boom on d_prime").all()
    assert table.loc["p1", "error"].isna().all()  # the healthy pair still finished
    assert result.exit_code == 2 and result.verdict == "inconclusive"


@pytest.mark.parametrize("function", ["nan_on_d_prime", "wider_on_d_prime"])
def test_structural_outputs_are_evidence_not_errors(function):
    """NaN on d' only, or a wider output on d': an observable event (audit.structure), refuted at once."""
    config = _config(function)
    config["pairs"] = [*PAIRS, {"d": [[0.0], [0.0]], "d_prime": [[0.0], [0.0]]}]
    result = run_audit(config, progress=False)
    table = result.table.set_index("pair")
    assert table["error"].isna().all()
    assert (table.loc["p0", "verdict"] == "violation").any() and result.exit_code == 1


def test_exact_and_theory_columns_for_a_builtin():
    config = {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0}],
        "attacks": {"engine": "rows", "classes": ["linear"], "n_samples": 400},
    }
    table = run_audit(config, progress=False).table
    np.testing.assert_allclose(table["exact"], bounds.laplace_linear_kl(1.0), rtol=1e-3)  # symmetric law


def test_plan_that_does_not_fit_in_memory_is_refused():
    with pytest.raises(ValueError, match="memory"):
        run_audit(_config(n_samples=10**13), progress=False)


def test_memory_estimate_counts_processes_samples_and_features():
    # 1 process; 2 pairs x 2 datasets x 1000 x d=2 samples; 1 worker x 2 x 1000 rows x (7 + 0.7 C(4, 2)) words
    single = PROCESS_BASELINE + 8 * 2 * 1000 * 2 * 2 + 8 * 2 * 1000 * (7 + 0.7 * 6)
    assert estimate_memory(1000, 2, 2, ["linear", "poly2"], 1) == int(single)
    # 3 processes (main + 2 loky workers), each worker one task; threads share the main process
    assert estimate_memory(1000, 2, 2, ["linear", "poly2"], 2) == int(single + 2 * PROCESS_BASELINE + 8 * 2 * 1000 * 11.2)
    threads = estimate_memory(1000, 2, 2, ["linear", "poly2"], 2, backend="threading")
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
        "attacks": {"engine": "rows", "classes": ["linear"], "n_samples": 400},
    }
    table = run_audit(config, progress=False).table
    assert sorted(set(table["pair"])) == ["p0", "p1"] and len(table) == 4
