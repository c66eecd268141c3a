"""Count bounds on KL and Renyi from one event (attacks/event_divergence.py): closed forms, the box minimum
against brute-force grids, the ceiling, and coverage over seeds against exact binary divergences."""

import numpy as np
import pytest
from scipy.stats import binom

from attacks.event_divergence import (
    binary_divergence,
    box_maximum,
    box_minimum,
    event_divergence_bound,
    event_divergence_ceiling,
    event_divergence_p_value,
    smoothed_event_divergence,
)
from attacks.vocabulary import KL, Renyi

DIVERGENCES = [KL(), Renyi(2.0), Renyi(4.0), Renyi(10.0)]


def _direct(p, q, divergence):
    """The binary divergence summed over the two outcomes, from its definition."""
    if isinstance(divergence, KL):
        return sum(a * np.log(a / b) for a, b in ((p, q), (1 - p, 1 - q)) if a > 0)
    alpha = divergence.alpha
    return np.log(sum(a**alpha * b ** (1 - alpha) for a, b in ((p, q), (1 - p, 1 - q)) if a > 0)) / (alpha - 1)


@pytest.mark.parametrize("divergence", DIVERGENCES, ids=str)
def test_binary_divergence_is_the_closed_form(divergence):
    for p, q in [(0.3, 0.1), (0.1, 0.3), (0.999, 1e-6), (0.5, 0.5), (0.0, 0.2), (1.0, 0.4)]:
        np.testing.assert_allclose(binary_divergence(p, q, divergence), _direct(p, q, divergence), rtol=1e-12,
                                   atol=1e-15)
    assert binary_divergence(0.2, 0.0, divergence) == np.inf and binary_divergence(0.0, 0.0, divergence) == 0.0


@pytest.mark.parametrize("divergence", DIVERGENCES, ids=str)
def test_box_minimum_and_maximum_match_a_brute_force_grid(divergence):
    """Over 300 random boxes, on either side of the diagonal and across it, the closed-form minimum equals the
    minimum over a 201 x 201 grid of the box (to the grid's resolution: the grid holds the corners, so the grid
    minimum is never below ours and exceeds it by at most the change over one cell) and the maximum a corner's."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        p_low, p_high = np.sort(rng.uniform(1e-3, 1 - 1e-3, 2))
        q_low, q_high = np.sort(rng.uniform(1e-3, 1 - 1e-3, 2))
        grid = binary_divergence(*np.meshgrid(np.linspace(p_low, p_high, 201), np.linspace(q_low, q_high, 201)),
                                 divergence)
        ours = box_minimum(p_low, p_high, q_low, q_high, divergence)
        assert ours <= grid.min() + 1e-12
        assert grid.min() - ours <= np.max(np.abs(np.diff(grid, axis=0))) + np.max(np.abs(np.diff(grid, axis=1)))
        np.testing.assert_allclose(box_maximum(p_low, p_high, q_low, q_high, divergence), grid.max(), rtol=1e-12)


def test_the_ceiling_grows_like_log_n_and_stays_finite():
    """At complete separation the bound is log(n / log(2 / 0.05)) to first order: 3.04 at n = 100, 7.20 at 5000
    (KL, 95 %); a finite sample never proves infinity."""
    for n, expected in [(100, 3.0437), (5000, 7.2009)]:
        assert event_divergence_ceiling(n, n, KL(), 0.95) == pytest.approx(expected, abs=1e-4)
    for divergence in DIVERGENCES:
        ceiling = event_divergence_ceiling(10_000, 10_000, divergence, 0.95)
        assert np.isfinite(ceiling) and abs(ceiling - np.log(10_000 / np.log(40))) < 0.5


def test_the_p_value_matches_the_bound():
    for claim in (0.5, 2.0, 3.0):
        p = event_divergence_p_value(90, 100, 3, 100, KL(), claim)
        for level in (0.9, 0.95, 0.99):
            assert (p <= 1 - level) == (event_divergence_bound(90, 100, 3, 100, KL(), level) >= claim)


def test_no_excess_of_p_bounds_nothing_and_the_point_estimate_is_finite():
    assert event_divergence_bound(10, 100, 12, 100, KL(), 0.95) == 0.0
    assert np.isfinite(smoothed_event_divergence(100, 100, 0, 100, Renyi(10.0)))


def _coverage(p, q, n, divergence, level=0.95):
    """Exact coverage of the lower bound: the probability, over the two binomial counts, that it is at most the
    true binary divergence."""
    k = np.arange(n + 1)
    bounds = event_divergence_bound(k[:, None], n, k[None, :], n, divergence, level)
    covered = bounds <= binary_divergence(p, q, divergence) + 1e-12
    return float(binom.pmf(k, n, p) @ covered @ binom.pmf(k, n, q))


@pytest.mark.parametrize("divergence", DIVERGENCES, ids=str)
@pytest.mark.parametrize("n", [200, 1000])
def test_exact_coverage_on_randomized_response_thresholds_and_a_point_mass(divergence, n):
    """Coverage computed exactly by enumerating both counts (no seeds): randomized response at epsilon 1 and 4
    (p = e^eps / (1 + e^eps), q = 1 - p), Laplace threshold sets {x > t} of Lap(0, 1) against Lap(1, 1), and a
    point mass of probability 0.3 against a continuous law (q = 0, infinite divergence)."""
    laplace_tail = lambda t, shift: 0.5 * np.exp(-(t - shift)) if t >= shift else 1 - 0.5 * np.exp(t - shift)
    cases = [(np.exp(1) / (1 + np.exp(1)), 1 / (1 + np.exp(1))), (np.exp(4) / (1 + np.exp(4)), 1 / (1 + np.exp(4))),
             (laplace_tail(0.5, 1.0), laplace_tail(0.5, 0.0)), (laplace_tail(2.0, 1.0), laplace_tail(2.0, 0.0)),
             (0.3, 0.0)]
    for p, q in cases:
        assert _coverage(p, q, n, divergence) >= 0.95


@pytest.mark.slow
@pytest.mark.parametrize("divergence", DIVERGENCES, ids=str)
def test_coverage_over_seeds_at_10000(divergence):
    """At n = 10 000 per law, over 500 seeds: the bound covers the exact binary divergence in at least 95 % of
    them (a binomial 95 % allowance below 0.95 would be 0.93; we ask the nominal rate itself)."""
    rng = np.random.default_rng(1)
    n = 10_000
    for p, q in [(np.exp(1) / (1 + np.exp(1)), 1 / (1 + np.exp(1))), (0.5 * np.exp(-1.0), 0.5 * np.exp(-2.0)),
                 (0.129, 0.0)]:
        k_p, k_q = rng.binomial(n, p, 500), rng.binomial(n, q, 500)
        covered = event_divergence_bound(k_p, n, k_q, n, divergence, 0.95) <= binary_divergence(p, q, divergence)
        assert covered.mean() >= 0.95
