"""The Gaussian-DP route: the GDP conversion in closed form, the threshold tests, mu_low's coverage, the report."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from attacks.gdp_route import (ASSUMPTION, QUADRATURE_NODES, clopper_pearson_upper, exact_mu_lower_bound,
                               exact_p_value, mu_lower_bound, threshold_tests)
from audit import run_audit
from audit.mechanisms import make_mechanism
from audit.report.gdp_route import route_applies, targeted_test
from audit.theory.tradeoff import gaussian_profile, gdp_epsilon, gdp_mu


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0, 4.0])
def test_gdp_profile_at_zero_is_the_total_variation(mu):
    # delta_mu(0) = Phi(mu / 2) - Phi(-mu / 2) = 2 Phi(mu / 2) - 1, the total variation of N(0, 1) and N(mu, 1)
    assert gaussian_profile(0.0, mu) == pytest.approx(2.0 * norm.cdf(mu / 2.0) - 1.0, rel=1e-12)
    assert gdp_epsilon(mu, 2.0 * norm.cdf(mu / 2.0) - 1.0 + 1e-12) == 0.0


@pytest.mark.parametrize("mu, epsilon", [(0.5, 0.3), (1.0, 1.0), (2.0, 5.0), (2.0, 9.0)])
def test_gdp_epsilon_and_gdp_mu_invert_the_closed_form_profile(mu, epsilon):
    # DRS Cor. 2.13 written out: delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2)
    delta = norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)
    assert gdp_epsilon(mu, delta) == pytest.approx(epsilon, abs=1e-8)
    assert gdp_mu(epsilon, delta) == pytest.approx(mu, rel=1e-8)


def test_clopper_pearson_upper_matches_scipy_exact_interval():
    for count, n in [(0, 50), (7, 50), (32, 200), (199, 200)]:
        expected = binomtest(count, n).proportion_ci(0.99, method="exact").high  # two-sided 0.99: one-sided 0.995
        assert float(clopper_pearson_upper(count, n, 0.005)) == pytest.approx(expected, rel=1e-9)
    assert float(clopper_pearson_upper(50, 50, 0.01)) == 1.0


def test_threshold_tests_count_scores_at_order_statistics_with_nan_as_infinity():
    p = np.array([0.0, 1.0, 2.0, 3.0, np.nan])
    q = np.array([1.5, -1.0, 0.5, np.nan])  # sorted: -1, 0.5, 1.5, inf
    tests = threshold_tests(p, q, fractions=(0.5, 0.25))  # ranks round(0.5 * 4) = 2, round(0.75 * 4) = 3
    assert tests == {"n_p": 5, "n_q": 4, "ranks": [2, 3], "p_counts": [1, 2]}  # p <= 0.5: 1; p <= 1.5: 2


def test_mu_lower_bound_is_the_formula_at_bonferroni_levels():
    tests = [{"n_p": 200, "n_q": 150, "ranks": [120, 140], "p_counts": [25, 60]}]
    level = 0.05 / 4  # two tests, two error rates each
    expected = max(norm.ppf(1 - float(clopper_pearson_upper(k, 200, level)))
                   - norm.ppf(float(clopper_pearson_upper(150 - j, 150, level))) for j, k in [(120, 25), (140, 60)])
    bound = mu_lower_bound(tests, 0.95)
    assert bound.mu_low == pytest.approx(expected, rel=1e-12) and bound.tests == 2
    assert mu_lower_bound([{"n_p": 10, "n_q": 10, "ranks": [5], "p_counts": [10]}], 0.95).mu_low == 0.0


def test_exact_p_value_matches_a_monte_carlo_of_the_gaussian_shift_at_h0():
    # the model at the boundary of H0(mu0 = 1): Q = N(0, 1), P = N(1, 1), S = {x > t_j}, t_j the j-th smallest of
    # n_q = 20 draws of Q (j = 15: k_q = 5), so Q(S) ~ Beta(6, 15) and P(S) = Phi(Phi^-1(Q(S)) + 1) exactly; p(1) is
    # P(at least k_p of n_p = 20 draws of P in S).  200 000 runs: se <= 0.0012, tolerance 5 se plus the sum's 1 / m
    rng = np.random.default_rng(4)
    runs, n_p, n_q, k_q, mu0 = 200_000, 20, 20, 5, 1.0
    t = np.sort(rng.normal(0.0, 1.0, (runs, n_q)), axis=1)[:, n_q - k_q - 1]
    counts = (rng.normal(mu0, 1.0, (runs, n_p)) > t[:, None]).sum(axis=1)
    for k_p in (8, 12, 16):
        simulated = float(np.mean(counts >= k_p))
        tolerance = 5.0 * math.sqrt(simulated * (1.0 - simulated) / runs)
        assert exact_p_value(mu0, k_p, n_p, k_q, n_q) == pytest.approx(simulated, abs=tolerance + 1.0 / QUADRATURE_NODES)


def test_exact_p_value_increases_in_mu0_and_its_bound_inverts_it():
    k_p, n_p, k_q, n_q, level = 150, 200, 30, 200, 0.05
    p_values = [exact_p_value(mu0, k_p, n_p, k_q, n_q) for mu0 in np.linspace(0.0, 3.0, 13)]
    # non-decreasing (equal only where the tail is below the sum's last node, 1 / m), across the level
    assert all(a <= b and (a < b or b < 2.0 / QUADRATURE_NODES) for a, b in zip(p_values, p_values[1:]))
    assert p_values[0] < level < p_values[-1]
    mu_low = exact_mu_lower_bound(k_p, n_p, k_q, n_q, level)
    assert exact_p_value(mu_low, k_p, n_p, k_q, n_q) <= level < exact_p_value(mu_low + 2e-4, k_p, n_p, k_q, n_q)
    assert exact_mu_lower_bound(100, 200, 100, 200, level) == 0.0  # as many of P as of Q in S: mu0 = 0 stands
    # one test at the whole level, no split: above the Clopper-Pearson pair at half of it each, below the oracle
    test = {"n_p": n_p, "n_q": n_q, "ranks": [n_q - k_q], "p_counts": [n_p - k_p]}
    assert mu_lower_bound([{**test, "exact": True}], 1 - level).mu_low == mu_low
    assert mu_lower_bound([test], 1 - level).mu_low < mu_low < norm.ppf(k_p / n_p) - norm.ppf(k_q / n_q)
    two = mu_lower_bound([{**test, "exact": True}, {**test, "exact": True}], 1 - level)  # two tasks: level / 2 each
    assert two.mu_low == exact_mu_lower_bound(k_p, n_p, k_q, n_q, level / 2) and two.exact and two.tests == 2


def _coverage_misses(mu: float, n: int, seeds: int, seed: int) -> int:
    """Seeds whose mu_low exceeds the true mu of N(mu, 1) against N(0, 1), from n scores per side."""
    rng = np.random.default_rng(seed)
    misses = 0
    for _ in range(seeds):
        tests = threshold_tests(rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n))
        misses += mu_lower_bound([tests], 0.9).mu_low > mu
    return misses


def test_mu_low_covers_the_gaussian_shift():
    # at confidence 0.9 a miss rate of 10 % gives about 20 of 200; more than 32 has probability < 0.4 % (binomial)
    assert _coverage_misses(2.0, 200, 200, seed=1) <= 32


def test_mu_low_is_close_at_a_large_sample():
    rng = np.random.default_rng(3)
    tests = threshold_tests(rng.normal(2.0, 1.0, 20_000), rng.normal(0.0, 1.0, 20_000))
    assert 1.85 < mu_lower_bound([tests], 0.95).mu_low < 2.0  # CP half-widths ~ 0.01 in the rates: ~ 0.07 in mu


def test_report_puts_the_route_beside_the_verdict(tmp_path):
    config = {
        "mechanism": {"name": "gaussian"},
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0, "delta": 1e-5}],
        "attacks": {"classes": ["linear"], "n_samples": 400, "confidence": 0.95},
        "run": {"seed": 0, "n_jobs": 1},
    }
    result = run_audit(config, out_dir=tmp_path, progress=False)
    route = json.loads((tmp_path / "results.json").read_text())["gdp_route"]
    assert route["assumption"] == ASSUMPTION
    [dp] = route["claims"]
    assert dp["label"] == "(1, 1e-05)-DP"
    assert dp["claimed_mu"] == pytest.approx(gdp_mu(1.0, 1e-5)) and dp["tests"] >= 1 and dp["ceiling"] > 0
    assert dp["gdp_epsilon_low"] == pytest.approx(gdp_epsilon(dp["gdp_mu_low"], 1e-5))
    # the test chosen from the claim: its mu_low is the formula at its bounds, split over the tasks
    assert dp["gdp_mu_low"] == pytest.approx(norm.ppf(1 - dp["type_one_upper"]) - norm.ppf(dp["type_two_upper"]))
    assert dp["verdict"] in {"violation", "pass", "inconclusive"}  # the nonparametric verdict, kept
    assert [c["verdict"] for c in result.claims if c["divergence"] == "dp"] == [dp["verdict"]]
    assert ASSUMPTION in (tmp_path / "report.md").read_text()


def test_a_canary_rows_route_is_the_exact_test_at_the_whole_level(tmp_path):
    # one task, a declared class: mu_low is the exact test's at level 0.05 on the test chosen from the claim
    params = {"mu": 2.0, "steps": 1}
    d, d_prime = make_mechanism("dp_gd_logistic", params).default_pairs()[0]
    config = {"mechanism": {"name": "dp_gd_logistic", "params": params},
              "pairs": [{"d": d.tolist(), "d_prime": d_prime.tolist()}],
              "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 10.0, "delta": 1e-5}],
              "attacks": {"classes": ["canary"], "n_samples": 200, "confidence": 0.95}, "run": {"seed": 0, "n_jobs": 1}}
    run_audit(config, out_dir=tmp_path, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    [entry], [row] = results["gdp_route"]["claims"], results["rows"]
    test = targeted_test(row["held_out_scores"]["gdp_tests"], entry["claimed_mu"])
    [j], [count] = test["ranks"], test["p_counts"]
    assert entry["exact"] and entry["type_one_upper"] is None and entry["tests"] == 1
    assert entry["gdp_mu_low"] == pytest.approx(exact_mu_lower_bound(200 - count, 200, 200 - j, 200, 0.05), abs=1e-12)
    assert entry["gdp_mu_low"] > mu_lower_bound([test], 0.95).mu_low  # the Clopper-Pearson pair on the same counts
    assert "exact test (200, 200; 1)" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_true_gdp_claims_gdp_route_refutes_in_at_most_5_percent_of_seeds(tmp_path):
    # the built-in DP-GD at its claimed mu = 2, 200 fits per side, audited over 20 seeds: the route reads
    # mu_low > 2 (a false refutation under its own assumption) in at most 1 of 20
    refuted = 0
    for seed in range(20):
        config = {"mechanism": {"name": "dp_gd_logistic", "params": {"mu": 2.0, "steps": 1}},
                  "claims": [{"divergence": "gdp", "function_class": "all", "epsilon": 2.0}],
                  "attacks": {"classes": ["linear"], "n_samples": 200, "confidence": 0.95},
                  "run": {"seed": seed, "n_jobs": 1}}
        run_audit(config, out_dir=tmp_path / str(seed), progress=False)
        route = json.loads((tmp_path / str(seed) / "results.json").read_text())["gdp_route"]
        refuted += route["claims"][0]["gdp_exceeds_claim"]
    assert refuted <= 1


@pytest.mark.slow
@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_exact_mu_low_covers_the_gaussian_shift_at_the_routes_confidence(mu):
    # the exact test (a declared score) at confidence 0.95, 200 scores per side, the test nearest b = Phi(-mu / 2):
    # misses ~ Binomial(300, <= 0.05), mean 15; more than 26 has probability < 0.3 %
    rng = np.random.default_rng(int(mu))
    fraction = float(norm.cdf(-mu / 2.0))
    misses = 0
    for _ in range(300):
        tests = threshold_tests(rng.normal(mu, 1.0, 200), rng.normal(0.0, 1.0, 200), fractions=(fraction,))
        misses += mu_lower_bound([{**tests, "exact": True}], 0.95).mu_low > mu
    assert misses <= 26


@pytest.mark.slow
def test_mu_low_coverage_over_many_seeds():
    # 2 000 seeds at confidence 0.9: misses ~ Binomial(2000, <= 0.1); 230 is 2.2 sd above 200
    assert _coverage_misses(1.0, 500, 2000, seed=2) <= 230


def test_route_applies_to_gdp_claims_and_to_delta_claims_of_gaussian_mechanisms():
    dp = {"divergence": "dp", "delta": 1e-5}
    assert route_applies({"mechanism": {"name": "gaussian"}}, [dp])
    assert not route_applies({"mechanism": {"name": "laplace"}}, [dp])
    assert not route_applies({"mechanism": {"name": "gaussian"}}, [{"divergence": "dp", "delta": 0.0}])
    assert route_applies({"mechanism": {"name": "laplace"}}, [{"divergence": "gdp", "delta": 0.0}])
    # DP-SGD (Poisson sampling): a mixture of Gaussian shifts, read through the route as its audits do
    assert route_applies({"mechanism": {"name": "dp_gd_logistic", "params": {"sampling_rate": 0.01}}}, [dp])
