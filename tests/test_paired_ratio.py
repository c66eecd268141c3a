"""The bounds on log((P(S) - delta) / Q(S)) and on P(S) - Q(S) from coupled pairs, attacks.paired_ratio.

Coverage is computed exactly, by summing the multinomial probabilities of
every outcome (n11, n10, n01, n00) whose bound lies at or below the truth:
no Monte Carlo error.  The procedure is the combined one: the paired score
bound where ``score_applies`` (``difference_score_applies``), which asks for
``MIN_DISCORDANT`` discordant pairs besides the marginal counts, the
Clopper-Pearson split on the marginal counts elsewhere.  Because Z(theta)
falls with theta (tested), the score bound lies at or below log(theta_0)
exactly when Z(theta_0) <= z_level, so one statistic per outcome decides.
The pure score bound dips below nominal with few discordant pairs (0.9317 at
three to eight, 0.944 at ten to twenty); from thirty the combined ratio
procedure measured at least 0.9495 (0.9902 at 0.99) on WIDE_GRID and the
difference one 0.9470 (0.9876) on grids of n = 50 to 150 pairs (shift-like,
independent and half coupled pairs, delta 0 and 0.01), so the tests ask for
``level - TOLERANCE``.
"""

import functools

import numpy as np
import pytest
from scipy import linalg, stats

from attacks import binomial_ratio
from attacks.paired_ratio import (
    contrast,
    difference_bound,
    difference_p_value,
    difference_score_applies,
    log_ratio_bound,
    p_value,
    paired_counts,
    projected_lower_bound,
    restricted_mle,
    score_applies,
    score_statistic,
)

LEVEL = 0.95
# How far below nominal the exact coverage may lie (the score bound's own dip; module docstring).
TOLERANCE = {0.95: 0.005, 0.99: 0.003}


@functools.lru_cache(maxsize=4)
def outcomes(n: int) -> np.ndarray:
    """Every (n11, n10, n01, n00) summing to n."""
    grid = np.array([(i, j, k) for i in range(n + 1) for j in range(n + 1 - i) for k in range(n + 1 - i - j)])
    return np.column_stack([grid, n - grid.sum(axis=1)])


def likely_outcomes(cells, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The outcomes of probability above 1e-13 under the multinomial law of the four cells, and their probabilities."""
    counts = outcomes(n)
    mass = stats.multinomial.pmf(counts, n, cells)
    keep = mass > 1e-13
    return counts[keep], mass[keep]


def marginals(counts: np.ndarray) -> tuple:
    n = counts.sum(axis=1)
    return counts[:, 0] + counts[:, 1], n, counts[:, 0] + counts[:, 2], n


def exact_coverage(cells: tuple, n: int, delta: float, level: float = LEVEL) -> float:
    """P(lower bound <= log((p - delta) / q)) of the combined procedure under the multinomial law of the cells."""
    cells = np.asarray(cells)
    p, q = cells[0] + cells[1], cells[0] + cells[2]
    theta = (p - delta) / q
    counts, mass = likely_outcomes(cells, n)
    score = score_applies(counts, delta)
    covered = binomial_ratio.clopper_pearson_log_ratio_bound(*marginals(counts), delta, level, lower=True) <= np.log(theta)
    covered[score] = score_statistic(counts[score], delta, theta) <= stats.norm.ppf(level)
    return float(mass[covered].sum())


def exact_difference_coverage(cells: tuple, n: int, level: float = LEVEL) -> float:
    """P(lower bound <= p - q) of the combined difference procedure."""
    cells = np.asarray(cells)
    difference = cells[1] - cells[2]
    counts, mass = likely_outcomes(cells, n)
    score = difference_score_applies(counts)
    covered = binomial_ratio.clopper_pearson_difference_bound(*marginals(counts), level, lower=True) <= difference
    covered[score] = score_statistic(counts[score], difference, 1.0) <= stats.norm.ppf(level)
    return float(mass[covered].sum())


def coupled_law(p: float, q: float, coupling: str) -> tuple:
    """Cells with marginals p and q: ``shift`` (no only-Y pairs), ``independent`` (pi11 = p q) or ``half`` between."""
    both = {"shift": min(p, q), "independent": p * q, "half": (min(p, q) + p * q) / 2}[coupling]
    return both, p - both, q - both, 1 - p - q + both


# (cells, n, delta): coupled like a shifted release (no only-Y pairs), strongly and weakly coupled, a ratio
# below one, delta > 0, few discordant pairs, and tiny or zero counts of Q at a large ratio.
LAWS = [
    ((0.20, 0.06, 0.0, 0.74), 170, 0.0),
    ((0.06, 0.24, 0.14, 0.56), 50, 0.0),
    ((0.4, 0.1, 0.15, 0.35), 50, 0.0),
    ((0.3, 0.05, 0.05, 0.6), 120, 0.05),
    ((0.25, 0.08, 0.02, 0.65), 50, 0.0),
    ((0.02, 0.02, 0.01, 0.95), 120, 0.0),
    (coupled_law(0.4, 0.4 * np.exp(-8), "shift"), 60, 0.0),
    (coupled_law(0.3, 0.01, "independent"), 80, 0.01),
]
MORE_LAWS = [
    ((0.25, 0.08, 0.02, 0.65), 160, 0.0),
    ((0.03, 0.03, 0.01, 0.93), 250, 0.0),
    ((0.3, 0.2, 0.05, 0.45), 80, 0.1),
    ((0.15, 0.05, 0.01, 0.79), 220, 0.02),
    ((0.15, 0.05, 0.01, 0.79), 80, 0.02),
]
WIDE_GRID = [(coupled_law(delta + q * np.exp(log_ratio), q, coupling), n, delta)
             for n in (50, 120) for q in (1e-9, 0.01, 0.1, 0.4) for log_ratio in (0.05, 0.3, 1, 3, 20)
             for delta in (0.0, 0.01) for coupling in ("shift", "independent", "half")
             if delta + q * np.exp(log_ratio) <= 1]


@pytest.mark.parametrize("cells, n, delta", LAWS)
def test_exact_coverage_of_the_lower_bound(cells, n, delta):
    assert exact_coverage(cells, n, delta) >= LEVEL - TOLERANCE[LEVEL]


@pytest.mark.slow
@pytest.mark.parametrize("cells, n, delta", MORE_LAWS)
def test_exact_coverage_of_the_lower_bound_on_more_laws(cells, n, delta):
    assert exact_coverage(cells, n, delta) >= LEVEL - TOLERANCE[LEVEL]


@pytest.mark.slow
@pytest.mark.parametrize("level", [0.95, 0.99])
def test_exact_coverage_on_the_wide_grid(level):
    coverage = [exact_coverage(cells, n, delta, level) for cells, n, delta in WIDE_GRID]
    assert min(coverage) >= level - TOLERANCE[level], WIDE_GRID[int(np.argmin(coverage))]


@pytest.mark.parametrize("cells, n", [(coupled_law(0.6, 0.3, "shift"), 100), (coupled_law(1.0, 0.0, "shift"), 60),
                                      (coupled_law(0.4, 0.3, "half"), 120), (coupled_law(0.5, 0.45, "independent"), 60)])
def test_exact_coverage_of_the_difference_bound(cells, n):
    assert exact_difference_coverage(cells, n) >= LEVEL - TOLERANCE[LEVEL]


@pytest.mark.slow
@pytest.mark.parametrize("level", [0.95, 0.99])
def test_exact_coverage_of_the_difference_bound_on_a_wide_grid(level):
    grid = [(coupled_law(q + gap, q, coupling), n) for n in (50, 120) for q in (0.0005, 0.05, 0.3, 0.5, 0.8)
            for gap in (0.0, 0.02, 0.1, 0.3, 0.6, 0.99) for coupling in ("shift", "independent", "half") if q + gap <= 1]
    coverage = [exact_difference_coverage(cells, n, level) for cells, n in grid]
    assert min(coverage) >= level - TOLERANCE[level], grid[int(np.argmin(coverage))]


def test_zero_counts_use_the_clopper_pearson_split_of_the_marginals():
    """Every pair only-X (separable coupled outputs): the bounds are the binomial ones of (n, n, 0, n), finite below."""
    counts = (0, 300, 0, 0)
    assert log_ratio_bound(counts, 0.0, LEVEL, lower=True) == binomial_ratio.log_ratio_bound(300, 300, 0, 300, 0.0, LEVEL, True)
    assert np.isfinite(log_ratio_bound(counts, 0.0, LEVEL, lower=True))
    assert 0.95 < difference_bound(counts, LEVEL, lower=True) < 1.0


@pytest.mark.parametrize("counts", [(300, 110, 20, 1570), (30, 4, 0, 66), (0, 12, 0, 88)])
def test_p_value_matches_the_bound_on_both_sides_of_the_switch(counts):
    for level in (0.9, 0.95, 0.999):
        bound = log_ratio_bound(counts, 0.02, level, lower=True)
        assert p_value(counts, 0.02, bound) == pytest.approx(1 - level, rel=1e-7)
        assert p_value(counts, 0.02, bound - 0.01) < 1 - level < p_value(counts, 0.02, bound + 0.01)
        difference = difference_bound(counts, level, lower=True)
        assert difference_p_value(counts, difference) == pytest.approx(1 - level, rel=1e-7)


def test_the_statistic_decides_the_bound():
    """The shortcut of exact_coverage: bound <= log(theta) exactly when Z(theta) <= z_level."""
    rng = np.random.default_rng(0)
    z = stats.norm.ppf(LEVEL)
    for counts in rng.multinomial(60, [0.2, 0.1, 0.03, 0.67], size=20):
        bound = log_ratio_bound(counts, 0.0, LEVEL, lower=True)
        for theta in (1.5, 2.5, 4.0):
            assert (bound <= np.log(theta)) == (score_statistic(counts, 0.0, theta) <= z)


@pytest.mark.parametrize("counts", [(30, 12, 3, 55), (0, 7, 0, 93), (0, 0, 7, 93), (500, 40, 0, 9460), (5, 0, 0, 5)])
@pytest.mark.parametrize("delta", [0.0, 0.05])
def test_restricted_mle_is_the_constrained_maximum(counts, delta):
    """Feasible, and no feasible step in any direction raises the likelihood (concave: local is global)."""
    counts = np.asarray(counts, dtype=float)

    def loglik(x):
        return float(np.sum(np.where(counts > 0, counts * np.log(np.clip(x, 1e-300, None)), 0.0)))

    for theta in (0.5, 1.3, 4.0):
        a = contrast(theta, delta)
        cells = restricted_mle(counts, delta, theta)
        assert cells.sum() == pytest.approx(1.0, abs=1e-12)
        assert cells @ a == pytest.approx(0.0, abs=1e-12)
        assert np.all(cells >= 0.0)
        feasible_directions = linalg.null_space(np.vstack([np.ones(4), a]))  # 4 x 2
        for angle in np.linspace(0, 2 * np.pi, 72, endpoint=False):
            step = feasible_directions @ [np.cos(angle), np.sin(angle)]
            for size in (1e-3, 1e-5):
                moved = cells + size * step
                if np.all(moved >= 0.0):
                    assert loglik(moved) <= loglik(cells) + 1e-9


def test_restricted_mle_keeps_its_digits_at_extreme_ratios():
    """An empty boundary cell receives lambda g / n, not 1 - (a sum near 1): at theta = e^50 that is 7e-2 / (theta + 1)."""
    theta = np.exp(50.0)
    cells = restricted_mle([0, 7, 0, 93], 0.0, theta)
    assert cells[2] == pytest.approx(0.07 / (theta + 1.0), rel=1e-9)


@pytest.mark.parametrize("counts", [(30, 10, 3, 57), (0, 7, 0, 93), (2000, 500, 0, 7500), (40, 10, 25, 25)])
@pytest.mark.parametrize("delta", [0.0, 0.1])
def test_score_statistic_falls_with_theta(counts, delta):
    z = [float(score_statistic(counts, delta, theta)) for theta in np.exp(np.linspace(-4, 4, 161))]
    assert np.all(np.diff(z) <= 1e-9)


def delta_method_se(counts) -> float:
    """Standard error of log(p_hat / q_hat) from the pairs: the variance of the influence 1{X}/p - 1{Y}/q."""
    n = sum(counts)
    both, only_x, only_y = (c / n for c in counts[:3])
    p, q = both + only_x, both + only_y
    return float(np.sqrt((p * (1 - p) / p**2 + (1 - q) / q - 2 * (both - p * q) / (p * q)) / n))


def test_large_counts_agree_with_the_delta_method():
    """At 10^7 pairs the score bound is psi_hat -+ z_level SE(psi_hat) to within 1% of SE."""
    counts = (200_000, 30_000, 10_000, 9_760_000)
    psi_hat = np.log(230_000 / 210_000)
    se = delta_method_se(counts)
    z = stats.norm.ppf(LEVEL)
    assert log_ratio_bound(counts, 0.0, LEVEL, lower=True) == pytest.approx(psi_hat - z * se, abs=0.01 * se)
    assert log_ratio_bound(counts, 0.0, LEVEL, lower=False) == pytest.approx(psi_hat + z * se, abs=0.01 * se)


def test_coupling_tightens_the_bound_and_independence_does_not():
    """Same marginals (p = 0.23, q = 0.21, 10^7 pairs): coupled pairs (few discordant) give a bound
    several times closer to psi_hat than independent samples; independent pairs give the binomial bound."""
    n, k_p, k_q = 10_000_000, 2_300_000, 2_100_000
    psi_hat = np.log(k_p / k_q)
    unpaired = binomial_ratio.log_ratio_bound(k_p, n, k_q, n, 0.0, LEVEL, lower=True)
    coupled = log_ratio_bound((k_q, k_p - k_q, 0, n - k_p), 0.0, LEVEL, lower=True)
    assert psi_hat - coupled < (psi_hat - unpaired) / 3
    both = round(k_p * k_q / n)  # pi11 = p q: pairs carry no coupling
    independent = log_ratio_bound((both, k_p - both, k_q - both, n - k_p - k_q + both), 0.0, LEVEL, lower=True)
    assert independent == pytest.approx(unpaired, abs=0.01 * (psi_hat - unpaired))


def test_projected_lower_bound_is_the_delta_method_at_both_sizes():
    counts = np.array([200_000, 30_000, 10_000, 9_760_000])
    n, n_eval = counts.sum(), 4 * counts.sum()
    smoothed = (counts[:3] + 0.25) / (n + 1.0)
    psi = np.log((smoothed[0] + smoothed[1]) / (smoothed[0] + smoothed[2]))
    se_one_pair = delta_method_se(counts) * np.sqrt(n)
    expected = psi - stats.norm.ppf(LEVEL) * se_one_pair * np.sqrt(1 / n + 1 / n_eval)
    assert projected_lower_bound(counts, 0.0, LEVEL, n_eval) == pytest.approx(expected, rel=1e-4)
    assert projected_lower_bound([0, 0, 5, 95], 0.0, LEVEL, 100) < 0.0
    assert projected_lower_bound([3, 0, 0, 97], 0.5, LEVEL, 100) == -np.inf


def test_paired_counts():
    in_x = np.array([1, 1, 0, 0, 1], dtype=bool)
    in_y = np.array([1, 0, 1, 0, 1], dtype=bool)
    assert paired_counts(in_x, in_y).tolist() == [2, 1, 1, 1]
    with pytest.raises(ValueError, match="same shape"):
        paired_counts(in_x, in_y[:3])


@pytest.mark.parametrize("counts", [(1, 2, 3), (1, -2, 3, 4), (0, 0, 0, 0)])
def test_bad_counts_are_refused(counts):
    with pytest.raises(ValueError, match="counts must be four non-negative counts"):
        log_ratio_bound(counts, 0.0, LEVEL, lower=True)
