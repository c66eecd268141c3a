"""attacks.divergences against closed forms (docs/theory.md sections 2 and 6)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from attacks.divergences import (
    alpha_divergence_from_renyi,
    check_alpha,
    donsker_varadhan,
    f_conjugate,
    f_generator,
    renyi_from_alpha_divergence,
    renyi_scale_optimized,
    variational_objective,
)


@pytest.mark.parametrize("divergence,alpha", [("kl", None), ("alpha", 2.0), ("alpha", 4.5), ("tv", None)])
def test_conjugate_is_the_legendre_transform(divergence, alpha):
    # f*(s) = sup_t s t - f(t), checked on a fine grid of t; grid error O(step^2) per unit curvature.
    t = np.linspace(-20, 20, 400_001)
    f = f_generator(t, divergence, alpha)
    for s in (-0.4, 0.0, 0.3, 0.45):
        assert_allclose(np.max(s * t - f), f_conjugate(s, divergence, alpha), atol=1e-6)


def test_renyi_alpha_conversion_round_trip():
    for alpha in (1.5, 2.0, 8.0):
        assert_allclose(renyi_from_alpha_divergence(alpha_divergence_from_renyi(0.37, alpha), alpha), 0.37)


def test_optimal_witnesses_reach_the_closed_forms():
    # A fine grid weighted by the densities stands in for the laws, so the only error is discretisation.
    x = np.linspace(-40, 40, 800_001)
    p = np.exp(-np.abs(x)) / 2
    q = np.exp(-np.abs(x - 1)) / 2
    log_ratio = -np.abs(x) + np.abs(x - 1)
    # KL: the witness log dP/dQ gives KL(P, Q) = eps - 1 + exp(-eps) at eps = 1 (docs/theory.md section 6).
    weights_p, weights_q = p / p.sum(), q / q.sum()
    dv = np.sum(weights_p * log_ratio) - np.log(np.sum(weights_q * np.exp(log_ratio)))
    assert_allclose(dv, np.exp(-1.0), rtol=1e-4)
    # The variational objective at h = 1 + log ratio equals the DV value (the optimal shift for KL).
    assert_allclose(
        np.sum(weights_p * (1 + log_ratio)) - np.sum(weights_q * f_conjugate(1 + log_ratio, "kl")), dv, rtol=1e-4
    )


def test_sample_objectives_on_constant_witness_are_zero():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=100), rng.normal(size=50)
    assert donsker_varadhan(np.zeros_like(a), np.zeros_like(b)) == 0.0
    assert renyi_scale_optimized(np.ones_like(a), np.ones_like(b), 3.0) == pytest.approx(0.0, abs=1e-12)
    # h = 1/(alpha - 1) = f'(1) is the best constant: objective 0 at P = Q.
    assert variational_objective(np.full(5, 1.0), np.full(5, 1.0), "alpha", 2.0) == pytest.approx(0.0)


@pytest.mark.parametrize("alpha", [1.0, 0.5, -2, float("nan"), "two"])
def test_bad_alpha_is_rejected_with_its_value(alpha):
    with pytest.raises(ValueError, match="alpha"):
        check_alpha(alpha)


def test_unknown_divergence_names_the_choices():
    with pytest.raises(ValueError, match="'kl', 'alpha', 'tv'"):
        f_conjugate(0.0, "hellinger")
