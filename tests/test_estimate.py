"""Confidence bounds of DivergenceEstimate: consistency and coverage of the estimand.

The estimand is the population objective of the fitted witness. For a linear
witness h(x) = a x + b on Gaussian laws P = N(0, 1), Q = N(1, 1) it is known
in closed form (KL: b - log E_Q e^h = -a - a^2/2) or by quadrature (Renyi:
beta log|b| - log E_Q|a x + b|^beta), so coverage is checked without a
second sample.
"""

import numpy as np
import pytest
from scipy import integrate, stats

from attacks import estimate_divergence
from attacks.binomial_ratio import log_ratio_bound
from attacks.divergences import conjugate_exponent


def _estimand(result):
    h0, h1 = result.adversary.witness(np.array([[0.0], [1.0]]))
    slope, intercept = h1 - h0, h0
    if result.divergence == "kl":
        return -slope - slope**2 / 2
    beta = conjugate_exponent(result.alpha)
    moment, _ = integrate.quad(lambda x: abs(slope * x + intercept) ** beta * stats.norm.pdf(x, 1.0), -12, 14, limit=200)
    return beta * np.log(abs(intercept)) - np.log(moment)


def _gaussian_estimate(seed, divergence, alpha, n):
    rng = np.random.default_rng(seed)
    return estimate_divergence(rng.normal(0, 1, n), rng.normal(1, 1, n), "linear", divergence, alpha=alpha, random_state=seed)


def _coverage(divergence, alpha, n, repetitions):
    hits = 0
    for seed in range(repetitions):
        result = _gaussian_estimate(seed, divergence, alpha, n)
        low, high = result.confidence_interval(0.95)
        hits += low <= _estimand(result) <= high
    return hits / repetitions


@pytest.mark.parametrize("divergence, alpha", [("kl", None), ("renyi", 2.0)])
def test_interval_covers_estimand_light(divergence, alpha):
    """40 repetitions: a 95% interval covers >= 32 times unless coverage is badly off (P < 1e-3 at 95%)."""
    assert _coverage(divergence, alpha, n=4000, repetitions=40) >= 0.8


@pytest.mark.slow
@pytest.mark.parametrize("divergence, alpha", [("kl", None), ("renyi", 2.0), ("renyi", 4.0)])
def test_interval_coverage(divergence, alpha):
    """300 repetitions at nominal 95%: coverage >= 90% (binomial SE 1.3% at 95%)."""
    assert _coverage(divergence, alpha, n=10_000, repetitions=300) >= 0.90


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize(
    "function_class, divergence, alpha", [("linear", "kl", None), ("poly2", "renyi", 4.0), ("linear", "ipm", None), ("threshold", "dp", None)]
)
def test_p_value_consistent_with_lower_bound(function_class, divergence, alpha, coupled):
    rng = np.random.default_rng(11)
    samples_p = rng.laplace(0, 1, 6000)
    samples_q = samples_p + 1 if coupled else rng.laplace(1, 1, 6000)  # coupled: the same noise on each row
    result = estimate_divergence(samples_p, samples_q, function_class, divergence, alpha=alpha, random_state=11,
                                 coupled=coupled)
    for level in (0.8, 0.95, 0.99):
        bound = result.lower_bound(level)
        assert result.p_value(bound - 1e-6) <= 1 - level + 1e-6
        assert result.p_value(bound + 1e-3) > 1 - level
    low, high = result.confidence_interval(0.9)
    assert low == pytest.approx(result.lower_bound(0.95)) and low <= result.estimate <= high


def test_dp_bound_is_the_score_bound_and_tighter_than_bonferroni():
    rng = np.random.default_rng(12)
    result = estimate_divergence(rng.laplace(0, 1, 8000), rng.laplace(1, 1, 8000), "threshold", "dp", delta=0.01, random_state=12)
    k_p, n_p, k_q, n_q = (result.details[key] for key in ("k_p", "n_p", "k_q", "n_q"))
    assert result.estimate == pytest.approx(np.log(((k_p + 0.5) / (n_p + 1) - 0.01) / ((k_q + 0.5) / (n_q + 1))))
    assert result.lower_bound(0.95) == log_ratio_bound(k_p, n_p, k_q, n_q, 0.01, 0.95, lower=True)
    # the joint bound must beat two Clopper-Pearson bounds at Bonferroni-split levels, and stay below the estimate
    p_low = stats.binomtest(k_p, n_p).proportion_ci(0.95, "exact").low
    q_high = stats.binomtest(k_q, n_q).proportion_ci(0.95, "exact").high
    assert np.log((p_low - 0.01) / q_high) < result.lower_bound(0.95) < result.estimate
    assert result.delta == 0.01 and np.isnan(result.standard_error)


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5])
def test_bad_levels(level):
    result = _gaussian_estimate(0, "kl", None, 500)
    with pytest.raises(ValueError, match="level"):
        result.lower_bound(level)
