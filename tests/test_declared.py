"""The declared canary statistic: its class, its count bound on every output against the closed form, its audit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binom, norm

from attacks import Adversary
from attacks.candidates import Draw, Target
from attacks.classes import parse_function_class
from attacks.declared import claim_count, declared_estimate
from audit import run_audit
from audit.engine.declared import claim_curve
from audit.mechanisms import make_mechanism
from audit.theory.tradeoff import gdp_epsilon

DIRECTION = [0.0, 3.0]
"""A 2-D release shifted by mu along its second coordinate only (the declared direction, not of unit norm)."""


def shift_sampler(mu: float, seed: int):
    """Q = M(d) = N(0, I_2), P = M(d') = N(mu e_2, I_2): independent draws per (stage, chunk)."""
    def sample(pair, n, stage, chunk):
        rng = np.random.default_rng([seed, pair, chunk])
        return Draw(rng.normal(size=(n, 2)), rng.normal(size=(n, 2)) + [0.0, mu], False)
    return sample


def exact_log_ratio(mu: float, threshold: float, delta: float) -> float:
    """log((P(S) - delta) / Q(S)) of S = {x_2 > t} under N(mu, 1) against N(0, 1)."""
    return math.log((norm.sf(threshold - mu) - delta) / norm.sf(threshold))


@pytest.mark.parametrize("name, inside", [("linear", True), ("poly2", True), ("mlp", True), ("all", True),
                                          ("canary", True), ("tree3", False), ("threshold", False)])
def test_canary_is_one_member_of_the_linear_class(name, inside):
    assert parse_function_class("canary").is_contained_in(parse_function_class(name)) is inside
    assert not parse_function_class("linear").is_contained_in(parse_function_class("canary"))


def test_the_adversary_scores_the_declared_projection_without_fitting_a_direction():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(300, 2)) + [5.0, 0.0], rng.normal(size=(300, 2))]  # the shift is off the direction
    adversary = Adversary("canary", "kl", direction=DIRECTION).fit(X, np.r_[np.zeros(300), np.ones(300)])
    assert adversary.feature_map_.transform(X[:3])[:, 0] == pytest.approx(X[:3, 1])  # x . v / |v|
    with pytest.raises(ValueError, match="direction"):
        Adversary("canary", "dp").fit(X, np.r_[np.zeros(300), np.ones(300)])


@pytest.mark.parametrize("mu, delta", [(1.0, 0.0), (1.0, 1e-5)])
def test_declared_estimate_matches_the_closed_form_of_its_set(mu, delta):
    # every one of n outputs per dataset scored: S = {s > t_j}, k_q = n - j chosen from the claim; the estimate
    # is the smoothed log ratio of S's counts, whose closed form at the drawn threshold is exact_log_ratio
    n = 4000
    epsilon = gdp_epsilon(mu, 1e-5)
    target = Target("dp", ("canary",), delta=delta)
    candidate, estimate = declared_estimate(shift_sampler(mu, 1), 0, "canary", DIRECTION, target, n,
                                            claim_curve(epsilon, delta), 0.95)
    assert (candidate.direction, estimate.n, estimate.details["n_q"]) == ("Q|P", n, n)
    k_q = claim_count(n, claim_curve(epsilon, delta), delta, 0.95)
    assert estimate.details["k_q"] == k_q
    exact = exact_log_ratio(mu, estimate.details["threshold"], delta)
    p, q = norm.sf(estimate.details["threshold"] - mu), norm.sf(estimate.details["threshold"])
    spread = math.sqrt((1 - p) / (n * (p - delta)) + (1 - q) / (n * q))  # delta-method sd of the log ratio
    assert estimate.estimate == pytest.approx(exact, abs=4 * spread)
    assert estimate.lower_bound(0.95) <= exact
    assert estimate.details["scores"]["gdp_tests"]["n_p"] == n  # the Gaussian-DP route reads all n outputs


def test_claim_count_reads_a_tail_set_at_high_epsilon_and_the_claim_alone():
    # at (10, 1e-5) and 200 outputs the count bound is best on a far tail of Q, whatever the data say
    k = claim_count(200, claim_curve(10.0, 1e-5), 1e-5, 0.95)
    assert 0 <= k <= 5
    assert claim_count(200, claim_curve(0.5, 0.0), 0.0, 0.95) > k


def test_an_audit_of_the_canary_class_spends_every_fit_on_scoring():
    mechanism = make_mechanism("dp_gd_logistic", {"mu": 2.0, "steps": 1})
    d, d_prime = mechanism.default_pairs()[0]
    config = {"mechanism": {"name": "dp_gd_logistic", "params": {"mu": 2.0, "steps": 1}},
              "pairs": [{"d": d.tolist(), "d_prime": d_prime.tolist()}],
              "claims": [{"divergence": "dp", "function_class": "linear", "epsilon": 10.0, "delta": 1e-5}],
              "attacks": {"classes": ["canary"], "n_samples": 200}, "run": {"seed": 3}}
    result = run_audit(config, progress=False)
    [row] = result.rows
    assert (row.function_class, row.direction, row.n_confirm, row.n_train, row.verdict) == (
        "canary", "Q|P", 200, 0, "pass")
    assert row.ci_low <= gdp_epsilon(2.0, 1e-5)
    assert row.held_out_scores["gdp_tests"]["n_q"] == 200


def test_a_declared_direction_of_the_wrong_length_is_the_rows_error(tmp_path):
    config = {"mechanism": {"name": "dp_gd_logistic", "params": {"mu": 2.0, "steps": 1}},
              "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 10.0, "delta": 1e-5}],
              "attacks": {"classes": ["canary"], "n_samples": 100, "class_params": {"canary": {"direction": [1.0]}}},
              "run": {"seed": 0}}
    run_audit(config, out_dir=tmp_path, progress=False)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert rows and all("one per coordinate" in row["error"] for row in rows)


def test_without_n_samples_the_declared_unit_takes_its_share_of_max_outputs():
    # two units of equal weight share max_outputs = 4000 (audit.engine.shares): the canary, a fixed design, takes
    # its half of the whole whatever linear's search in rounds left, 1000 per dataset of the one pair; a Gaussian of
    # sigma 1 is (4.4, 1e-5)-DP, so the claim (1, 1e-5) is false
    config = {"mechanism": {"name": "gaussian", "params": {"sigma": 1.0}},
              "claims": [{"divergence": "dp", "function_class": "linear", "epsilon": 1.0, "delta": 1e-5}],
              "attacks": {"classes": ["canary", "linear"], "max_outputs": 4000,
                          "class_params": {"canary": {"direction": [1.0]}}}, "run": {"seed": 0}}
    rows = {row.function_class: row for row in run_audit(config, progress=False).rows}
    assert rows["linear"].outputs_drawn < 2000  # what it left does not flow to the fixed design
    assert (rows["canary"].n_confirm, rows["canary"].stop, rows["canary"].verdict) == (1000, "fixed", "violation")


@pytest.mark.slow
@pytest.mark.parametrize("mu, delta", [(1.0, 0.0), (2.0, 1e-5)])
def test_declared_lower_bound_covers_its_exact_estimand_over_seeds(mu, delta):
    # validity of the order-statistic count bound: over seeds, the 95% lower bound exceeds the exact
    # log((P(S_j) - delta) / Q(S_j)) of the drawn threshold in at most 5% of runs (up to binomial noise)
    n, seeds = 200, 400
    curve = claim_curve(gdp_epsilon(mu, 1e-5), delta)
    target = Target("dp", ("canary",), delta=delta)
    misses = 0
    for seed in range(seeds):
        _, estimate = declared_estimate(shift_sampler(mu, seed), 0, "canary", DIRECTION, target, n, curve, 0.95)
        misses += estimate.lower_bound(0.95) > exact_log_ratio(mu, estimate.details["threshold"], delta)
    assert misses <= binom.ppf(0.999, seeds, 0.05)


@pytest.mark.slow
def test_a_correct_learner_reads_no_violation_and_its_rows_cover_their_estimand_over_seeds():
    # dp_gd_logistic at one step (lr 0.1, C = 1) releases theta_3 = 0.1 (c + sigma Z) on the canary's feature,
    # c = 1 with the canary and 0 without, sigma = 1 / mu: a shift of mu in units of 0.1 sigma.  Over 20 seeds of
    # the engine at the true claim, at most one violation, and the row's 95% lower bound exceeds the exact
    # log((P(S) - delta) / Q(S)) of its drawn set in at most 4 (the 0.999 quantile of Binomial(20, 0.05))
    mu, delta = 1.0, 1e-5
    violations = misses = 0
    for seed in range(20):
        config = {"mechanism": {"name": "dp_gd_logistic", "params": {"mu": mu, "steps": 1}},
                  "claims": [{"divergence": "dp", "function_class": "linear", "epsilon": gdp_epsilon(mu, delta),
                              "delta": delta}],
                  "attacks": {"classes": ["canary"], "n_samples": 2000}, "run": {"seed": seed}}
        result = run_audit(config, progress=False)
        violations += result.verdict == "violation"
        row = next(row for row in result.rows if row.pair == "p0")
        exact = exact_log_ratio(mu, row.evidence.details["threshold"] / (0.1 / mu), delta)
        misses += row.ci_low > exact
    assert violations <= 1
    assert misses <= binom.ppf(0.999, 20, 0.05)
