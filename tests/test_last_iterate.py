"""audit.theory.last_iterate: the last-iterate heuristic for DP-SGD (Steinke et al., ICLR 2025)."""

import math

import numpy as np
import pytest
from scipy import stats

from audit.theory.last_iterate import last_iterate_delta, last_iterate_epsilon
from audit.theory.tradeoff import gaussian_profile, gdp_epsilon


def test_the_published_value():
    # Steinke et al. (ICLR 2025), quoted by issue 35: T = 1000, q = 0.01, sigma = 0.7, delta = 1e-5 -> 1.955.
    assert last_iterate_epsilon(1000, 0.01, 0.7, 1e-5) == pytest.approx(1.955, abs=5e-4)


@pytest.mark.parametrize(("steps", "sigma"), [(1, 1.0), (10, 2.0), (100, 5.0)])
def test_full_batch_is_the_gaussian_shift_of_composition(steps, sigma):
    # q = 1: K = T surely, N(T, T sigma^2) against N(0, T sigma^2) is (sqrt(T) / sigma)-GDP (DRS Cor. 3.3).
    mu = math.sqrt(steps) / sigma
    assert last_iterate_epsilon(steps, 1.0, sigma, 1e-5) == pytest.approx(gdp_epsilon(mu, 1e-5), rel=1e-8)
    assert last_iterate_delta(1.0, steps, 1.0, sigma) == pytest.approx(float(gaussian_profile(1.0, mu)), rel=1e-8)


def test_delta_is_the_hockey_stick_divergence_by_quadrature():
    # T = 20, q = 0.3, sigma = 1: the mixture's hockey-stick divergences integrated on a fine grid, both ways.
    steps, rate, sigma, epsilon = 20, 0.3, 1.0, 0.5
    scale = math.sqrt(steps) * sigma
    x = np.linspace(-12 * scale, steps + 12 * scale, 100_001)
    k = np.arange(steps + 1)
    p = stats.binom.pmf(k, steps, rate) @ stats.norm.pdf(x[None, :], k[:, None], scale)
    q = stats.norm.pdf(x, 0.0, scale)
    both = [np.clip(a - math.exp(epsilon) * b, 0.0, None).sum() * (x[1] - x[0]) for a, b in ((p, q), (q, p))]
    assert last_iterate_delta(epsilon, steps, rate, sigma) == pytest.approx(max(both), rel=1e-6)


def test_monotone_in_the_sampling_rate_and_below_composition():
    values = [last_iterate_epsilon(1000, rate, 0.7, 1e-5) for rate in (0.001, 0.01, 0.1)]
    assert values == sorted(values) and values[0] > 0.0
    assert last_iterate_epsilon(1000, 1e-6, 0.7, 0.5) == 0.0  # delta above the total variation


@pytest.mark.parametrize(("args", "word"), [((0, 0.1, 1.0, 1e-5), "steps"), ((10, 0.0, 1.0, 1e-5), "sampling_rate"),
                                            ((10, 0.1, -1.0, 1e-5), "noise_multiplier"), ((10, 0.1, 1.0, 1.0), "delta")])
def test_bad_parameters_name_the_field(args, word):
    with pytest.raises(ValueError, match=word):
        last_iterate_epsilon(*args)
