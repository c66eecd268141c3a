"""The score bound on log((P(S) - delta) / Q(S)) of attacks.binomial_ratio.

Coverage is computed exactly, by summing the binomial probabilities of every
pair of counts whose bound lies at or below the truth: no Monte Carlo error.
The bound is asymptotic; for ratio score intervals the coverage stays within
about one point of nominal from a few tens of expected counts on
(Miettinen and Nurminen 1985; Farrington and Manning 1990), so the tests ask
for at least 94% at nominal 95% (measured here: 0.9495 to 0.969).
"""

import numpy as np
import pytest
from scipy import stats

from attacks.binomial_ratio import log_ratio_bound, p_value, projected_lower_bound, restricted_mle, score_statistic

LEVEL = 0.95


def exact_coverage(p: float, q: float, n: int, delta: float) -> float:
    """P(lower bound <= log((p - delta) / q)) over all counts with probability above 1e-12."""
    truth = np.log((p - delta) / q)
    counts = np.arange(n + 1)
    mass_p, mass_q = stats.binom.pmf(counts, n, p), stats.binom.pmf(counts, n, q)
    return sum(
        mass_p[k_p] * mass_q[k_q]
        for k_p in counts[mass_p > 1e-12]
        for k_q in counts[mass_q > 1e-12]
        if log_ratio_bound(int(k_p), n, int(k_q), n, delta, LEVEL, lower=True) <= truth
    )


@pytest.mark.parametrize("p, q, n, delta", [(0.3, 0.2, 50, 0.0), (0.05, 0.02, 100, 0.0), (0.3, 0.1, 60, 0.05)])
def test_exact_coverage_of_the_lower_bound(p, q, n, delta):
    assert exact_coverage(p, q, n, delta) >= 0.94


@pytest.mark.slow
@pytest.mark.parametrize(
    "p, q, n, delta",
    [(0.1, 0.05, 60, 0.0), (0.5, 0.45, 80, 0.0), (0.02, 0.01, 200, 0.0), (0.9, 0.8, 50, 0.0), (0.2, 0.2, 60, 0.0),
     (0.5, 0.2, 80, 0.1), (0.06, 0.05, 150, 0.01)],
)
def test_exact_coverage_of_the_lower_bound_on_more_laws(p, q, n, delta):
    assert exact_coverage(p, q, n, delta) >= 0.94


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


def test_large_counts_agree_with_the_delta_method():
    """At 10^7 samples the score bound is psi_hat - z_level * SE(psi_hat) to within 1% of SE."""
    n, k_p, k_q = 10_000_000, 230_000, 210_000
    psi_hat = np.log(k_p / k_q)
    se = np.sqrt((1 - k_p / n) / k_p + (1 - k_q / n) / k_q)
    bound = log_ratio_bound(k_p, n, k_q, n, 0.0, LEVEL, lower=True)
    assert bound == pytest.approx(psi_hat - stats.norm.ppf(LEVEL) * se, abs=0.01 * se)
    upper = log_ratio_bound(k_p, n, k_q, n, 0.0, LEVEL, lower=False)
    assert upper == pytest.approx(psi_hat + stats.norm.ppf(LEVEL) * se, abs=0.01 * se)


def test_p_value_matches_the_bound():
    counts = (410, 2000, 300, 2000)
    bound = log_ratio_bound(*counts, 0.02, LEVEL, lower=True)
    assert p_value(*counts, 0.02, bound) == pytest.approx(1 - LEVEL, abs=1e-9)
    assert p_value(*counts, 0.02, bound - 0.01) < 1 - LEVEL < p_value(*counts, 0.02, bound + 0.01)


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
