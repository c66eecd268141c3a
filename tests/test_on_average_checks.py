"""OAKL Lemmas 5 and 7 as ``[[checks]]`` (audit.engine.on_average_checks), and the mutual-information bound that an
on-average KL claim implies in results.json (OAKL Lemma 14 with Lemma 6).

The Gaussian-mean posterior has a closed-form on-average KL (audit.theory.gibbs), which is each part's epsilon; two
independent draws (M, M) on one dataset are a 2-D Gaussian shift whose KL is twice M's, so Lemma 7's bound is met
with equality and the linear class attains it.  The slow test counts false contradictions over seeds.
"""

import json
from pathlib import Path

import pytest

from audit import run_audit
from audit.config.load import ConfigError, load_config
from audit.engine.checks import run_check
from audit.mechanisms.gibbs import GaussianPosteriorMean
from audit.report.claims import information_bound
from audit.sampling.parallel import backend
from audit.theory.composition import theorem_bound

POSTERIOR = {"name": "gaussian_posterior_mean", "params": {"temperature": 16.0, "records": 20}}
EPSILON = GaussianPosteriorMean(temperature=16.0, records=20).on_average_kl()
"""gamma^2 Var_D / lambda = 0.617: the closed form each part's epsilon is."""


def _checks(*checks, n=2000, pairs=8, seed=0, **extra):
    """The checks run as the engine runs them, as results.json's ``checks`` entries."""
    entries = [{"n_pairs": pairs, **check} for check in checks]
    config = load_config({"mechanism": POSTERIOR, "attacks": {"n_samples": n}, "run": {"seed": seed},
                          "checks": entries, **extra})
    with backend(config.run.backend, config.run.n_jobs):
        return [run_check(config, index).to_check_record() for index in range(len(config.checks))]


def test_the_lemmas_bounds_are_the_parts_epsilon_and_their_sum():
    assert theorem_bound("on-average-post-processing", [0.3]) == 0.3
    assert theorem_bound("on-average-composition", [0.2, 0.5]) == pytest.approx(0.7)


def test_composition_meets_lemma_7_with_equality_and_post_processing_keeps_lemma_5():
    """Parts take the closed form; (M, M) is a 2-D Gaussian shift of KL 2 eps, the bound met with equality: the
    composed mean's interval holds it (the linear class attains a Gaussian shift's KL; each pair's witness shrinks
    toward 0, which biases the mean low).  h -> 2 h keeps eps: its lower bound stays below.  A nonlinear map is
    within Lemma 5 (any measurable g): not flagged."""
    composition, linear, square = _checks({"property": "on-average-composition"},
                                          {"property": "on-average-post-processing", "map": [[2.0]]},
                                          {"property": "on-average-post-processing", "map": "square", "n_pairs": 2,
                                           "n_samples": 200})
    assert composition["bound"] == pytest.approx(2 * EPSILON) and linear["bound"] == square["bound"] == EPSILON
    assert composition["note"] == "eps: M1 closed form, M2 closed form"
    assert [m["exact"] for m in composition["measurements"]] == [EPSILON, EPSILON, None]
    assert [c["verdict"] for c in (composition, linear, square)] == ["holds"] * 3
    composed = composition["measurements"][-1]
    assert composed["low"] <= 2 * EPSILON <= composed["high"], composed
    mapped = linear["measurements"][-1]  # the mean is a lower bound: each pair's witness shrinks toward 0
    assert mapped["low"] <= EPSILON and linear["measured_low"] == mapped["low"]


def test_a_false_claim_of_the_parts_is_contradicted():
    """Claimed on-average KLs far below the truth (``epsilons``) make the lemma's bound false: the composed mean's
    lower bound exceeds it, refuting a claim (the lemma is a theorem)."""
    (check,) = _checks({"property": "on-average-composition", "epsilons": [0.01, 0.01]})
    assert check["bound"] == pytest.approx(0.02) and "claimed" in check["note"]
    assert check["verdict"] == "contradicted" and check["measured_low"] > check["bound"]


def test_measured_parts_on_a_neighbours_distribution_flag_what_the_restricted_theorems_exclude():
    """A Gaussian sum query on [neighbours]' on-average pairs has no closed form here: the parts' epsilon is their
    measured upper bound, and an adaptive M2 or a nonlinear map leaves CBDP's restricted theorems (flagged)."""
    gaussian = [{"name": "gaussian", "params": {"sigma": 1.0, "sensitivity": 2.0}}] * 2
    config = load_config({
        "mechanism": gaussian[0], "attacks": {"n_samples": 400},
        "neighbours": {"strategy": "on-average", "count": 2, "size": 5, "distribution": {
            "name": "truncated-normal", "mean": 0.0, "std": 1.0, "low": -1.0, "high": 1.0}},
        "checks": [{"property": "on-average-composition", "mechanisms": gaussian, "n_pairs": 3, "adaptive": True},
                   {"property": "on-average-post-processing", "map": "square", "n_pairs": 3}]})
    with backend(config.run.backend, config.run.n_jobs):
        adaptive, square = (run_check(config, index).to_check_record() for index in range(2))
    assert all(m["exact"] is None for m in adaptive["measurements"] + square["measurements"])
    assert adaptive["bound"] == pytest.approx(sum(m["high"] for m in adaptive["measurements"][:2]))
    assert adaptive["verdict"] == square["verdict"] == "hypothesis broken"
    assert "non-adaptive" in adaptive["note"] and "nonlinear" in square["note"]


def test_a_mechanism_without_a_data_distribution_is_an_error_naming_the_fix():
    config = load_config({"mechanism": {"name": "laplace", "params": {"epsilon": 1.0}}, "attacks": {"n_samples": 200},
                          "checks": [{"property": "on-average-post-processing", "map": [[1.0]]}]})
    row = run_check(config, 0)
    assert row.verdict == "error" and "[neighbours]" in row.error and "on-average" in row.error


@pytest.mark.parametrize(("check", "message"), [
    ({"property": "on-average-composition", "n_pairs": 1}, "checks[0].n_pairs"),
    ({"property": "on-average-post-processing"}, "checks[0].map"),
    ({"property": "on-average-composition", "d": [[0.0]], "d_prime": [[1.0]]}, "takes no field 'd'"),
    ({"property": "on-average-composition", "divergence": "renyi", "alpha": 2}, "takes no field 'divergence'"),
    ({"property": "sequential", "n_pairs": 5}, "on-average-"),
    ({"property": "on-average-composition", "epsilons": [0.1]}, "checks[0].epsilons"),
    ({"property": "on-average-post-processing", "map": [[1.0]], "epsilons": [-0.1]}, r"checks[0].epsilons[0]"),
])
def test_invalid_on_average_checks_name_the_field(check, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config({"mechanism": POSTERIOR, "checks": [check]})


def test_same_seed_same_numbers():
    first, second = (_checks({"property": "on-average-post-processing", "map": [[1.0]]}, n=200, pairs=2)
                     for _ in range(2))
    assert first == second


# --------------------------------------------------------------------------- the mutual-information bound


def test_information_bound_is_n_epsilon_for_on_average_kl_claims_only():
    assert information_bound("kl", 0.1, True, 10) == pytest.approx(1.0)
    assert information_bound("kl", 0.1, False, 10) is None
    assert information_bound("renyi", 0.1, True, 10) is None
    assert information_bound("kl", 0.1, True, None) is None


def test_results_json_holds_the_mutual_information_an_on_average_claim_implies(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    config = {"mechanism": POSTERIOR, "attacks": {"n_samples": 400, "classes": ["linear"]},
              "neighbours": {"strategy": "on-average", "count": 3, "size": 10,
                             "distribution": {"name": "truncated-normal", "mean": 0.0, "std": 1.0, "low": -2.0,
                                              "high": 2.0}},
              "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 0.5, "on_average": True},
                         {"divergence": "kl", "function_class": "linear", "epsilon": 5.0}]}
    run_audit(config, progress=False, out_dir=tmp_path)
    document = json.loads((tmp_path / "results.json").read_text())
    bounds = {claim["on_average"]: claim.get("mutual_information_bound") for claim in document["claims"]}
    assert bounds == {True: pytest.approx(10 * 0.5), False: None}
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs/schema/results.schema.json").read_text())
    assert any(row["on_average"] and row["policy"] is None for row in document["rows"])  # the mean over pairs
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(document)) == []


# --------------------------------------------------------------------------- validity over seeds


@pytest.mark.slow
def test_true_lemmas_are_rarely_contradicted_over_seeds():
    """Lemma 7 met with equality (the hardest case for a lower bound): a contradiction in at most 1 - confidence of
    seeds, up to binomial noise (5 % of 30 seeds: at most 4 with probability 0.94)."""
    contradicted = sum(_checks({"property": "on-average-composition"}, n=1000, pairs=10, seed=seed)[0]["verdict"]
                       == "contradicted" for seed in range(30))
    assert contradicted <= 4, contradicted
