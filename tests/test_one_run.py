"""One-run auditing at delta = 0: the bound inverts the p-value, its ceiling, validity on randomized response."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attacks.one_run import guess_from_scores, one_run_ceiling, one_run_lower_bound, one_run_p_value


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
