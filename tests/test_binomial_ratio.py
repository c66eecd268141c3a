"""The bounds on log((P(S) - delta) / Q(S)) and on P(S) - Q(S) of attacks.binomial_ratio.

Coverage is computed exactly, by summing the binomial probabilities of every
pair of counts whose bound lies at or below the truth: no Monte Carlo error.
The procedure is the combined one: the score bound where ``score_applies``
(``difference_score_applies``) to the counts, the Clopper-Pearson split
elsewhere; the switch depends on the counts, so its coverage is enumerated,
not argued.  Where the score bound applies, Z falls with the parameter
(tested), so the bound lies at or below the truth exactly when Z(truth) <=
z_level and one statistic per outcome decides.  Score intervals for ratios and
differences stay within about half a point of nominal once the counts are
not tiny (Miettinen and Nurminen 1985; Farrington and Manning 1990): the
tests ask for at least ``level - TOLERANCE[level]`` (measured on WIDE_GRID,
n = 50 to 3000, Q(S) from 1e-10 to 0.6, log-ratios 0.05 to 20, delta 0 and
0.01: ratio 0.9493 at 0.95 and 0.9894 at 0.99; on the difference grid,
0.9487 and 0.9895).  The Clopper-Pearson split alone is exact (never below
nominal), so tiny counts, where it takes over, are not where the minimum lies.
"""

import numpy as np
import pytest
from scipy import stats

from attacks.binomial_ratio import (
    DIFFERENCE_END,
    clopper_pearson_bounds,
    clopper_pearson_difference_bound,
    clopper_pearson_log_ratio_bound,
    difference_bound,
    difference_p_value,
    difference_score_applies,
    log_ratio_bound,
    p_value,
    projected_lower_bound,
    restricted_mle,
    score_applies,
    score_statistic,
)

LEVEL = 0.95
# How far below nominal the exact coverage may lie (the score bound's own dip; module docstring).
TOLERANCE = {0.95: 0.003, 0.99: 0.002}


def outcomes(p: float, q: float, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts (k_p, k_q) on a grid holding every pair of probability above 1e-13, and their probabilities."""
    counts = np.arange(n + 1)
    mass_p, mass_q = stats.binom.pmf(counts, n, p), stats.binom.pmf(counts, n, q)
    keep_p, keep_q = mass_p > 1e-13, mass_q > 1e-13
    k_p, k_q = np.meshgrid(counts[keep_p], counts[keep_q], indexing="ij")
    return k_p, k_q, np.outer(mass_p[keep_p], mass_q[keep_q])


def exact_coverage(p: float, q: float, n: int, delta: float, level: float = LEVEL) -> float:
    """P(lower bound <= log((p - delta) / q)) for the combined procedure."""
    truth = np.log((p - delta) / q)
    k_p, k_q, mass = outcomes(p, q, n)
    covered = clopper_pearson_log_ratio_bound(k_p, n, k_q, n, delta, level, lower=True) <= truth
    for i, j in np.argwhere(score_applies(k_p, n, k_q, n, delta)):
        covered[i, j] = score_statistic(int(k_p[i, j]), n, int(k_q[i, j]), n, delta, np.exp(truth)) <= stats.norm.ppf(level)
    return float(mass[covered].sum())


def exact_difference_coverage(p: float, q: float, n: int, level: float = LEVEL) -> float:
    """P(lower bound <= p - q) for the combined difference procedure."""
    k_p, k_q, mass = outcomes(p, q, n)
    covered = clopper_pearson_difference_bound(k_p, n, k_q, n, level, lower=True) <= p - q
    for i, j in np.argwhere(difference_score_applies(k_p, n, k_q, n)):
        covered[i, j] = score_statistic(int(k_p[i, j]), n, int(k_q[i, j]), n, p - q, 1.0) <= stats.norm.ppf(level)
    return float(mass[covered].sum())


def law(log_ratio: float, expected_q: float, n: int, delta: float = 0.0) -> tuple[float, float, int, float]:
    """(p, q, n, delta) with Q(S) = expected_q / n and log((p - delta) / q) = log_ratio."""
    q = expected_q / n
    return delta + q * np.exp(log_ratio), q, n, delta


def law_of_p(log_ratio: float, p: float, n: int, delta: float = 0.0) -> tuple[float, float, int, float]:
    """(p, q, n, delta) with P(S) = p and log((p - delta) / q) = log_ratio (large ratios: Q(S) far below 1 / n)."""
    return p, (p - delta) * np.exp(-log_ratio), n, delta


# Large counts (the score bound), zero and tiny counts of Q at ratios up to e^20, counts near the switch.
LAWS = [(0.3, 0.2, 50, 0.0), (0.05, 0.02, 100, 0.0), (0.3, 0.1, 60, 0.05), law(5.0, 0.4, 200), law_of_p(20.0, 0.5, 1000),
        law(2.0, 10.0, 300, 0.01), law(0.3, 30.0, 50), law(3.0, 1.0, 100, 0.01)]
WIDE_GRID = [law(log_ratio, expected_q, n, delta)
             for n in (50, 200, 1000, 3000) for expected_q in (0.1, 1, 3, 10, 30, 100)
             for log_ratio in (0.05, 0.3, 1, 3, 8) for delta in (0.0, 0.01)
             if delta + expected_q / n * np.exp(log_ratio) <= 1 and (n < 3000 or expected_q <= 3)] + [
    law_of_p(log_ratio, p, n, delta) for n in (50, 1000, 3000) for log_ratio in (8, 12, 20) for p in (0.05, 0.5, 1.0)
    for delta in (0.0, 0.01)]


@pytest.mark.parametrize("p, q, n, delta", LAWS)
def test_exact_coverage_of_the_lower_bound(p, q, n, delta):
    assert exact_coverage(p, q, n, delta) >= LEVEL - TOLERANCE[LEVEL]


@pytest.mark.slow
@pytest.mark.parametrize("level", [0.95, 0.99])
def test_exact_coverage_on_the_wide_grid(level):
    coverage = [exact_coverage(*point, level=level) for point in WIDE_GRID]
    assert min(coverage) >= level - TOLERANCE[level], WIDE_GRID[int(np.argmin(coverage))]


DIFFERENCE_LAWS = [(0.3, 0.2, 60), (1.0, 0.0, 100), (0.999, 0.001, 500), (0.5, 0.5, 80), (0.12, 0.02, 200)]


@pytest.mark.parametrize("p, q, n", DIFFERENCE_LAWS)
def test_exact_coverage_of_the_difference_bound(p, q, n):
    assert exact_difference_coverage(p, q, n) >= LEVEL - TOLERANCE[LEVEL]


@pytest.mark.slow
@pytest.mark.parametrize("level", [0.95, 0.99])
def test_exact_coverage_of_the_difference_bound_on_a_wide_grid(level):
    grid = [(q + gap, q, n) for n in (50, 200, 1000) for q in (0.0005, 0.01, 0.1, 0.3, 0.5, 0.8)
            for gap in (0.0, 0.02, 0.1, 0.3, 0.6, 0.9, 0.99) if q + gap <= 1]
    coverage = [exact_difference_coverage(*point, level=level) for point in grid]
    assert min(coverage) >= level - TOLERANCE[level], grid[int(np.argmin(coverage))]


def test_zero_counts_give_the_closed_form_of_the_clopper_pearson_split():
    """k_q = 0 of n_q: Q(S) <= 1 - (alpha / 2)^(1 / n_q); k_p = n_p: P(S) >= (alpha / 2)^(1 / n_p)."""
    n, alpha = 500, 1 - LEVEL
    high_q, low_p = 1 - (alpha / 2) ** (1 / n), (alpha / 2) ** (1 / n)
    bound = log_ratio_bound(n, n, 0, n, 0.0, LEVEL, lower=True)
    assert bound == pytest.approx(np.log(low_p / high_q), rel=1e-10)
    assert bound == pytest.approx(np.log(n / -np.log(alpha / 2)), abs=0.02)  # finite, growing like log n
    assert log_ratio_bound(n, n, 0, n, 0.0, LEVEL, lower=False) == np.inf
    assert difference_bound(n, n, 0, n, LEVEL, lower=True) == pytest.approx(low_p - high_q, rel=1e-10)
    assert difference_bound(n, n, 0, n, LEVEL, lower=False) == 1.0


def test_clopper_pearson_bounds_are_scipys_exact_one_sided_intervals():
    for k, n in [(0, 40), (3, 40), (17, 40), (40, 40)]:
        low, high = clopper_pearson_bounds(k, n, 0.975)
        assert low == pytest.approx(stats.binomtest(k, n, alternative="greater").proportion_ci(0.975, "exact").low, abs=1e-12)
        assert high == pytest.approx(stats.binomtest(k, n, alternative="less").proportion_ci(0.975, "exact").high, abs=1e-12)


@pytest.mark.parametrize("counts", [(40, 1000, 0, 1000), (3, 50, 1, 50), (400, 1000, 100, 1000), (500, 500, 0, 500)])
def test_no_lower_bound_is_infinite_from_finite_counts(counts):
    for level in (0.5, 0.95, 0.9999):
        assert log_ratio_bound(*counts, 0.0, level, lower=True) < np.inf
        assert -1.0 <= difference_bound(*counts, level, lower=True) < 1.0


@pytest.mark.parametrize("counts", [(410, 2000, 300, 2000), (40, 1000, 3, 1000), (8, 50, 0, 50)])
def test_p_value_matches_the_bound_on_both_sides_of_the_switch(counts):
    """p_value(c) <= 1 - level exactly when the lower bound at level is >= c (score or Clopper-Pearson)."""
    for level in (0.9, 0.95, 0.999):
        bound = log_ratio_bound(*counts, 0.02, level, lower=True)
        assert p_value(*counts, 0.02, bound) == pytest.approx(1 - level, rel=1e-7)
        assert p_value(*counts, 0.02, bound - 0.01) < 1 - level < p_value(*counts, 0.02, bound + 0.01)
        difference = difference_bound(*counts, level, lower=True)
        assert difference_p_value(*counts, difference) == pytest.approx(1 - level, rel=1e-7)
        assert difference_p_value(*counts, difference - 0.01) < 1 - level < difference_p_value(*counts, difference + 0.01)


def test_separable_counts_bound_the_difference_below_one():
    """All of P and none of Q in S (separable held-out samples): the bound is below 1, the old normal one was 1."""
    low = difference_bound(200, 200, 0, 200, LEVEL, lower=True)
    assert 0.95 < low < 1.0 and difference_p_value(200, 200, 0, 200, DIFFERENCE_END) > 0.0


def test_restricted_mle_is_farrington_mannings_root():
    """For delta = 0 the constrained maximum is the smaller root of A q^2 + B q + C (Farrington and Manning 1990)."""
    k_p, n_p, k_q, n_q, theta = 37, 120, 21, 150, 1.4
    a, b, c = theta * (n_p + n_q), -(theta * n_p + k_p + n_q + theta * k_q), k_p + k_q
    root = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)
    assert restricted_mle(k_p, n_p, k_q, n_q, 0.0, theta) == pytest.approx(root, rel=1e-12)


@pytest.mark.parametrize("counts", [(30, 100, 10, 100), (5, 50, 0, 50), (2200, 10_000, 2000, 10_000), (50, 100, 20, 90)])
@pytest.mark.parametrize("delta", [0.0, 0.1])
def test_score_statistic_falls_with_theta(counts, delta):
    z = [score_statistic(*counts, delta, theta) for theta in np.exp(np.linspace(-4, 4, 161))]
    assert np.all(np.diff(z) <= 1e-12)


@pytest.mark.parametrize("counts", [(30, 100, 10, 100), (60, 100, 40, 100), (2200, 10_000, 2000, 10_000), (15, 80, 70, 90)])
def test_difference_score_statistic_falls_with_the_difference(counts):
    """The shortcut of exact_difference_coverage: Z(d) of H0: p - q = d falls as d grows."""
    z = [score_statistic(*counts, d, 1.0) for d in np.linspace(-0.99, 0.99, 199)]
    assert np.all(np.diff(z) <= 1e-9)


def test_large_counts_agree_with_the_delta_method():
    """At 10^7 samples the score bound is psi_hat - z_level * SE(psi_hat) to within 1% of SE."""
    n, k_p, k_q = 10_000_000, 230_000, 210_000
    psi_hat = np.log(k_p / k_q)
    se = np.sqrt((1 - k_p / n) / k_p + (1 - k_q / n) / k_q)
    bound = log_ratio_bound(k_p, n, k_q, n, 0.0, LEVEL, lower=True)
    assert bound == pytest.approx(psi_hat - stats.norm.ppf(LEVEL) * se, abs=0.01 * se)
    upper = log_ratio_bound(k_p, n, k_q, n, 0.0, LEVEL, lower=False)
    assert upper == pytest.approx(psi_hat + stats.norm.ppf(LEVEL) * se, abs=0.01 * se)


def test_edge_counts():
    # no output of D' in S: the lower bound is finite (it cannot exceed log of n_q times P(S)), the upper one infinite
    low = log_ratio_bound(40, 1000, 0, 1000, 0.0, LEVEL, lower=True)
    assert 0 < low < np.log(40) and log_ratio_bound(40, 1000, 0, 1000, 0.0, LEVEL, lower=False) == np.inf
    # P(S) not above delta: nothing can be said from below
    assert log_ratio_bound(10, 1000, 5, 1000, 0.01, LEVEL, lower=True) == -np.inf


def test_projected_bound_adds_the_variances_at_both_sizes():
    k_p, k_q, n, n_eval = 2300, 2100, 100_000, 10_000_000
    p, q = (k_p + 0.5) / (n + 1), (k_q + 0.5) / (n + 1)
    variance = (1 - p) / p + (1 - q) / q
    expected = np.log(p / q) - stats.norm.ppf(LEVEL) * np.sqrt(variance * (1 / n + 1 / n_eval))
    assert projected_lower_bound(k_p, n, k_q, n, 0.0, LEVEL, n_eval) == pytest.approx(expected, rel=1e-12)


def test_projection_prefers_rare_strong_events_only_when_both_sizes_are_large():
    # a frequent weak event (ratio e^0.04 at mass 0.5) against a rare strong one (e^0.09 at mass 0.006)
    counts = np.array([0.5, 0.006])
    ratio = np.exp([0.04, 0.09])

    def choice(n: int, n_eval: int) -> int:
        return int(np.argmax(projected_lower_bound(counts * ratio * n, n, counts * n, n, 0.0, LEVEL, n_eval)))

    assert choice(100_000, 20_000_000) == 0  # the rare event's observed ratio is too uncertain
    assert choice(10_000_000, 100_000) == 0  # and it would be too uncertain on the evaluation samples
    assert choice(10_000_000, 20_000_000) == 1


def test_projection_does_not_chase_a_tail_of_a_few_counts():
    # one output of P and none of Q in S: a plug-in ratio of e^1.1 after smoothing, which proves nothing
    tail, body = projected_lower_bound(np.array([1, 60_000]), 10**6, np.array([0, 55_000]), 10**6, 0.0, LEVEL, 10**7)
    assert tail < 0 < body
    assert projected_lower_bound(5, 1000, 3, 1000, 0.01, LEVEL, 1000) == -np.inf
