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


# ---------------------------------------------------------------- the whole path: a set chosen on training outputs


def _masses_threshold(adversary, shift_p, shift_q):
    """Exact P(S), Q(S) of a threshold attack's set under Lap(shift_p, 1) and Lap(shift_q, 1): the score is an
    increasing affine map of the output (a x + b), so S is a half-line {x > x*} or {x < x*}."""
    from scipy.stats import laplace

    b, a_plus_b = adversary.discriminant(np.array([[0.0], [1.0]]))
    cut = (adversary.threshold_ - b) / (a_plus_b - b)
    tail = laplace.sf if adversary.side_ == 1 else laplace.cdf
    return tail(cut, loc=shift_p), tail(cut, loc=shift_q)


def _masses_points(adversary, points_p, points_q):
    """Exact P(S), Q(S) of a set over laws with atoms: ``points_*`` maps each atom to its probability (a
    continuous part puts no mass on the finite set an atoms attack finds)."""
    def mass(points):
        if not points:
            return 0.0
        values = np.array(list(points), dtype=float)[:, None]
        return float(np.dot(adversary.witness(values) > 0, list(points.values())))
    return mass(points_p), mass(points_q)


def _path_coverage(law: str, n: int, seeds: int) -> dict:
    """Per divergence of DIVERGENCES, the share of seeds whose held-out event bound is at most the exact binary
    divergence of the set fitted (for KL) on the other half: randomized response at epsilon 2 (atoms), Laplace
    shift 1 (threshold), a point mass of probability 0.05 against Lap(1, 1) (atoms).  The Renyi bounds are
    computed on the same held-out counts: a set chosen without them."""
    from attacks.estimate import estimate_divergence

    covered = dict.fromkeys(DIVERGENCES, 0)
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        if law == "randomized_response":
            p = np.exp(2.0) / (1 + np.exp(2.0))
            x_p, x_q = (rng.random(n) < p).astype(float), (rng.random(n) < 1 - p).astype(float)
            result = estimate_divergence(x_p, x_q, "atoms", "kl", random_state=seed)
            truth = _masses_points(result.adversary, {1.0: p, 0.0: 1 - p}, {1.0: 1 - p, 0.0: p})
        elif law == "laplace":
            x_p, x_q = rng.laplace(1.0, 1.0, n), rng.laplace(0.0, 1.0, n)
            result = estimate_divergence(x_p, x_q, "threshold", "kl", random_state=seed)
            truth = _masses_threshold(result.adversary, 1.0, 0.0)
        else:
            x_p = np.where(rng.random(n) < 0.05, 0.0, rng.laplace(0.0, 1.0, n))
            x_q = rng.laplace(1.0, 1.0, n)
            result = estimate_divergence(x_p, x_q, "atoms", "kl", random_state=seed)
            truth = _masses_points(result.adversary, {0.0: 0.05}, {})
        counts = [result.details[key] for key in ("k_p", "n_p", "k_q", "n_q")]
        assert result.lower_bound(0.95) == event_divergence_bound(*counts, KL(), 0.95)
        for divergence in DIVERGENCES:
            bound = event_divergence_bound(*counts, divergence, 0.95)
            covered[divergence] += bound <= binary_divergence(*truth, divergence) + 1e-12
    return {divergence: count / seeds for divergence, count in covered.items()}


@pytest.mark.parametrize("law", ["randomized_response", "laplace", "point_mass"])
def test_the_fitted_sets_bound_covers_its_exact_divergence(law):
    """Light version of the slow test below: 40 seeds at n = 200 outputs per law (100 held out); at least 36
    covered for each divergence (P(fewer | coverage 0.95) = 0.05)."""
    assert min(_path_coverage(law, 200, 40).values()) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("n", [200, 1000, 10_000])
@pytest.mark.parametrize("law", ["randomized_response", "laplace", "point_mass"])
def test_the_fitted_sets_bound_covers_its_exact_divergence_over_500_seeds(law, n):
    """n outputs per dataset (half train, half held out), 500 seeds: coverage of the exact binary divergence of
    the fitted set at least 0.95 for KL and Renyi of orders 2, 4 and 10 (nominal)."""
    assert min(_path_coverage(law, n, 500).values()) >= 0.95
