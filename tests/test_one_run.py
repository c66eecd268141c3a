"""One-run auditing: the p-values against exact binomial sums (delta = 0 and delta > 0), the bounds invert them, the
ceiling, the f-DP bound on mu against its closed form at one guess, validity on randomized response and Gaussian
canaries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fractions import Fraction

from scipy.stats import norm

from attacks.one_run import guess_from_scores, one_run_bound, one_run_ceiling, one_run_lower_bound, one_run_p_value
from attacks.one_run_fdp import fdp_lower_bound, gdp_rejected, one_run_gdp_lower_bound, pure_dp_inverse_blow_up


def _tail(v: int, r: int, q: Fraction) -> Fraction:
    """P[Binomial(r, q) >= v], exactly (rational arithmetic)."""
    return sum((math.comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(max(v, 0), r + 1)), Fraction(0))


@pytest.mark.parametrize("correct, guesses, epsilon", [(7, 10, 0.5), (18, 20, 1.5), (40, 60, 0.3)])
def test_p_values_are_the_exact_binomial_expressions(correct, guesses, epsilon):
    """SNJ Thm 3.1: f(v) at delta = 0; f(v) + 2 m delta max_i (f(v - i) - f(v)) / i above it (exact sums)."""
    q = Fraction(1 / (1 + math.exp(-epsilon)))
    tail = _tail(correct, guesses, q)
    assert one_run_p_value(correct, guesses, epsilon) == pytest.approx(float(tail), rel=1e-10)
    m, delta = 100, 1e-4
    spread = max((_tail(correct - i, guesses, q) - tail) / i for i in range(1, correct + 1))
    expected = min(1.0, float(tail + 2 * m * Fraction(delta) * spread))
    assert one_run_p_value(correct, guesses, epsilon, delta, m) == pytest.approx(expected, rel=1e-9)


def test_the_delta_bound_is_where_its_p_value_reaches_the_level_and_tends_to_the_pure_one():
    bound = one_run_lower_bound(900, 1000, 0.95, 1e-5, 1000)
    assert one_run_p_value(900, 1000, bound, 1e-5, 1000) == pytest.approx(0.05, rel=1e-6)
    assert bound < one_run_lower_bound(900, 1000, 0.95)  # delta only weakens the evidence
    assert one_run_lower_bound(900, 1000, 0.95, 1e-15, 1000) == pytest.approx(one_run_lower_bound(900, 1000, 0.95),
                                                                               abs=1e-6)
    assert one_run_ceiling(500, 0.95, 1e-5, 1000) < one_run_ceiling(500, 0.95) == pytest.approx(5.1144, abs=1e-4)


@pytest.mark.parametrize("level", [0.6, 0.8, 0.95])
def test_one_right_guess_rejects_mu_below_twice_the_level_quantile(level):
    """m = c' = c = 1: one guess is right with probability at most Phi(mu / 2) under mu-GDP (the best test's
    accuracy at equal priors), so the claim is rejected at level tau exactly when Phi(mu / 2) < tau."""
    assert one_run_gdp_lower_bound(1, 1, 1, 1 - level) == pytest.approx(2 * norm.ppf(level), abs=1e-5)
    assert gdp_rejected(1, 1, 1, 2 * norm.ppf(level) - 1e-3, level)
    assert not gdp_rejected(1, 1, 1, 2 * norm.ppf(level) + 1e-3, level)


@pytest.mark.parametrize("correct, guesses, canaries", [(10, 10, 10), (500, 500, 1000), (90, 100, 100),
                                                        (450, 500, 1000), (46, 50, 500)])
def test_with_the_pure_dp_curve_the_fdp_bound_agrees_with_the_binomial_one(correct, guesses, canaries):
    """MMC's recursion with the epsilon-DP curve: SNJ's ceiling logit(0.05^(1/r)) exactly when every guess is
    right (1.052 at r = 10, 5.114 at r = 500), within 1.5 % below SNJ's exact binomial bound otherwise."""
    fdp = fdp_lower_bound(correct, guesses, canaries, 0.95, pure_dp_inverse_blow_up)
    binomial = one_run_lower_bound(correct, guesses, 0.95)
    if correct == guesses:
        assert fdp == pytest.approx(one_run_ceiling(guesses, 0.95), abs=1e-5)
    else:
        assert 0.985 * binomial <= fdp <= binomial


def test_the_mu_bound_grows_with_the_correct_guesses_and_vanishes_at_chance():
    bounds = [one_run_gdp_lower_bound(correct, 500, 1000, 0.95) for correct in (260, 300, 400, 450, 500)]
    assert bounds[0] == 0.0 and all(a < b for a, b in zip(bounds[1:], bounds[2:])) and bounds[1] > 0


def _gaussian_canary_bounds(mu: float, seeds: int, m: int, share: float) -> np.ndarray:
    """The mu bounds of ``seeds`` seeds when each of ``m`` canaries' inclusion is seen as N(mu b_i, 1) (exactly
    mu-GDP in each bit) and the ``share`` of scores farthest from mu / 2 are guessed."""
    rng = np.random.default_rng(1)
    bounds = []
    for _ in range(seeds):
        included = rng.random(m) < 0.5
        scores = mu * included + rng.normal(size=m)
        keep = np.argsort(-np.abs(scores - mu / 2))[:round(share * m)]
        correct = int(np.sum((scores[keep] > mu / 2) == included[keep]))
        bounds.append(one_run_gdp_lower_bound(correct, len(keep), m, 0.95))
    return np.array(bounds)


def test_gaussian_canaries_are_seen_and_not_overstated_in_a_few_seeds():
    """20 seeds of 200 canaries at mu = 1: more than 4 over 1 has probability < 2 % at a 5 % error rate; at mu = 3
    the bound reads above 1 in most seeds (the test can fail both ways)."""
    assert np.sum(_gaussian_canary_bounds(1.0, 20, 200, 0.2) > 1.0) <= 4
    assert np.median(_gaussian_canary_bounds(3.0, 20, 200, 0.5)) > 1.2


@pytest.mark.slow
def test_gaussian_canaries_are_not_overstated():
    """200 seeds of 1000 canaries at mu = 1, guessing a fifth: at most 20 over (binomial at 5 %: P < 0.1 %)."""
    assert np.sum(_gaussian_canary_bounds(1.0, 200, 1000, 0.2) > 1.0) <= 20


@pytest.mark.parametrize("correct, guesses", [(70, 100), (95, 100), (900, 1000)])
def test_lower_bound_is_where_the_p_value_reaches_the_level(correct, guesses):
    epsilon = one_run_lower_bound(correct, guesses, 0.95)
    assert one_run_p_value(correct, guesses, epsilon) == pytest.approx(0.05, rel=1e-9)


def test_every_guess_right_gives_the_ceiling():
    # logit(0.05^(1/1000)) = 5.806: the 5.81 at m = 1000
    assert one_run_lower_bound(1000, 1000, 0.95) == pytest.approx(one_run_ceiling(1000, 0.95), rel=1e-12)
    success = 0.05 ** (1 / 1000)
    assert one_run_ceiling(1000, 0.95) == pytest.approx(math.log(success / (1 - success)), rel=1e-12)
    assert one_run_lower_bound(50, 100, 0.95) == 0.0  # a coin's rate shows nothing


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_a_dp_claims_reading_is_its_bound_beside_the_ceiling_of_its_canaries(delta):
    """At delta = 0 the ceiling is logit(0.05^(1/500)) = 5.11 (SNJ); the bound is the p-value's root, below it."""
    found = one_run_bound("dp", 450, 480, 500, 0.95, delta)
    assert found.ceiling == pytest.approx(one_run_ceiling(500, 0.95, delta, 500), rel=1e-12)
    assert one_run_p_value(450, 480, found.bound, delta, 500) == pytest.approx(0.05, rel=1e-6)
    assert 0.0 < found.bound < found.ceiling <= 5.1145


def test_a_gdp_claims_reading_is_the_fdp_bound_and_its_all_right_ceiling():
    found = one_run_bound("gdp", 1, 1, 1, 0.95)
    assert (found.bound, found.ceiling) == (0.0, 0.0)  # one right guess rejects nothing, not even at best
    found = one_run_bound("gdp", 180, 200, 400, 0.95)
    assert found.ceiling == one_run_gdp_lower_bound(400, 400, 400, 0.95)
    assert 0.0 < found.bound == one_run_gdp_lower_bound(180, 200, 400, 0.95) < found.ceiling


def test_guesses_are_the_scores_beyond_the_cut_offs():
    guessed = guess_from_scores(np.array([0.3, 5.0, -2.0, 0.1, 4.0, -1.0]), -0.5, 1.0)
    assert guessed.tolist() == [0, 1, -1, 0, 1, -1]


def test_randomized_response_canaries_are_not_overstated():
    """Each of 1000 canaries is included with probability 1/2 and seen through epsilon = 1 randomized response
    (an epsilon-DP view of each inclusion bit): the bound exceeds 1 in at most 5 % of 200 seeds (binomial: more
    than 20 has probability < 0.1 %)."""
    rng = np.random.default_rng(0)
    over = 0
    for _ in range(200):
        included = rng.random(1000) < 0.5
        seen = np.where(rng.random(1000) < 1 / (1 + math.e), ~included, included)
        guessed = guess_from_scores(seen.astype(float), 0.5, 0.5)
        correct = int(np.sum((guessed == 1) == included))
        over += one_run_lower_bound(correct, 1000, 0.95) > 1.0
    assert over <= 20
