"""Betting confidence sequences (attacks/betting.py) and the anytime set bounds built on them (attacks/anytime_sets.py).

Coverage is checked against known means: a sequence's bound at its last value is its running intersection over
every earlier n (the capital's running maximum), so a stream whose final bound excludes the mean is one that
excluded it at some n: the count of such streams over seeds tests the time-uniform guarantee itself, and must stay
within the binomial(seeds, error) count's 0.999 quantile.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import beta, binom

from attacks.anytime_sets import AnytimeSetEstimate, estimand
from attacks.betting import GRID, BernoulliBetting, BettingSequence
from attacks.candidates import Target
from attacks.held_out import count_estimate
from audit.engine.store import evidence_from_record

ERROR = 0.1


def _streams(law: str, mean: float, seeds: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(12345)
    if law == "bernoulli":
        return [(rng.random(n) < mean).astype(float) for _ in range(seeds)]
    return [rng.beta(4 * mean, 4 * (1 - mean), n) for _ in range(seeds)]  # a continuous law with that mean


def _looked(x: np.ndarray, error: float) -> BernoulliBetting:
    """The indicators' mixture sequence, looked at after 20 values, then after half as many more as so far."""
    sequence, n = BernoulliBetting.start(error), 0
    while n < x.size:
        size = max(20, n // 2)
        sequence, n = sequence.update(x[n:n + size]), n + size
    return sequence


def _misses(law: str, mean: float, seeds: int, n: int, error: float, mixture: bool = False) -> tuple[int, int]:
    """(streams whose lower bound ever exceeded the mean, streams whose upper bound ever fell below it)."""
    low = high = 0
    for x in _streams(law, mean, seeds, n):
        sequence = _looked(x, error) if mixture else BettingSequence.start(error).update(x)
        low += sequence.lower_bound(error) > mean
        high += sequence.upper_bound(error) < mean
    return low, high


@pytest.mark.parametrize("law, mean", [("bernoulli", 0.5), ("bernoulli", 0.05), ("beta", 0.3)])
def test_each_one_sided_sequence_covers_the_mean_at_every_n(law, mean):
    """120 streams of 200 values: the lower (upper) bound exceeds (falls below) the mean at some n in at most the
    binomial(120, 0.1) count's 0.999 quantile (23) of them."""
    seeds = 120
    low, high = _misses(law, mean, seeds, 200, ERROR)
    assert max(low, high) <= binom.ppf(0.999, seeds, ERROR)


@pytest.mark.slow
@pytest.mark.parametrize("law, mean", [("bernoulli", 0.5), ("bernoulli", 0.01), ("bernoulli", 0.9),
                                       ("beta", 0.3), ("beta", 0.7)])
def test_each_one_sided_sequence_covers_the_mean_at_every_n_over_many_seeds(law, mean):
    """1 000 streams of 2 000 values, stopped at the first crossing (the running maximum of the capital)."""
    seeds = 1_000
    low, high = _misses(law, mean, seeds, 2_000, 0.05)
    assert max(low, high) <= binom.ppf(0.999, seeds, 0.05)


@pytest.mark.parametrize("mean", [0.5, 0.02])
def test_the_indicators_mixture_covers_the_mean_at_every_look(mean):
    """100 streams of 300 indicators, looked at 6 times: as for the plug-in sequence."""
    low, high = _misses("bernoulli", mean, 100, 300, ERROR, mixture=True)
    assert max(low, high) <= binom.ppf(0.999, 100, ERROR)


@pytest.mark.slow
@pytest.mark.parametrize("mean", [0.5, 0.05, 0.002, 0.999])
def test_the_indicators_mixture_covers_the_mean_at_every_look_over_many_seeds(mean):
    """1 000 streams of 5 000 indicators, about 10 looks each."""
    low, high = _misses("bernoulli", mean, 1_000, 5_000, 0.05, mixture=True)
    assert max(low, high) <= binom.ppf(0.999, 1_000, 0.05)


def test_the_mixture_bounds_a_rare_set_near_clopper_pearson():
    """A set of probability 0.001 at 10 000 outputs (11 ones) and a set no output fell in at 32 000: the mixture's
    99 % bounds within a factor 2 (lower) and 1.6 (upper) of Clopper-Pearson's fixed-n ones, where the plug-in
    sequence's lower bound is 3 times below."""
    x = (np.random.default_rng(0).random(10_000) < 0.001).astype(float)
    k, n = int(x.sum()), x.size
    mixture, plug_in = _looked(x, 0.01), BettingSequence.start(0.01).update(x)
    assert beta.ppf(0.01, k, n - k + 1) / 2 < mixture.lower_bound(0.01) < beta.ppf(0.01, k, n - k + 1)
    assert plug_in.lower_bound(0.01) < beta.ppf(0.01, k, n - k + 1) / 3
    assert beta.ppf(0.99, k + 1, n - k) < mixture.upper_bound(0.01) < 1.6 * beta.ppf(0.99, k + 1, n - k)
    none = _looked(np.zeros(32_000), 0.001)
    assert none.lower_bound(0.001) == 0.0 and 0.00022 < none.upper_bound(0.001) < 1.6 * 0.00022
    with pytest.raises(ValueError, match="0 or 1"):
        none.update([0.5])


def test_the_bounds_shrink_like_a_square_root_and_lie_on_the_grid():
    """At n = 10 000 fair coins the one-sided 95 % bounds are within three of Hoeffding's fixed-n half-widths
    (0.012) of the sample mean: a confidence sequence pays a log factor for holding at every n, and the grid one
    step (0.0125 at 1/2); they are grid points, and no wider than at n = 1 000."""
    x = (np.random.default_rng(1).random(10_000) < 0.5).astype(float)
    early, late = BettingSequence.start(0.05).update(x[:1_000]), BettingSequence.start(0.05).update(x)
    hoeffding = math.sqrt(math.log(1 / 0.05) / (2 * x.size))
    assert x.mean() - 3 * hoeffding < late.lower_bound(0.05) < 0.5 < late.upper_bound(0.05) < x.mean() + 3 * hoeffding
    assert late.lower_bound(0.05) >= early.lower_bound(0.05) and late.upper_bound(0.05) <= early.upper_bound(0.05)
    assert late.lower_bound(0.05) in GRID and 1.0 - late.upper_bound(0.05) in GRID


def test_a_sequence_fed_in_batches_is_the_sequence_fed_at_once_and_round_trips():
    x = np.random.default_rng(2).random(5_000)
    whole = BettingSequence.start(0.01).update(x)
    batched = BettingSequence.start(0.01).update(x[:37]).update(x[37:3_000]).update(x[3_000:])
    np.testing.assert_allclose(batched.log_peak, whole.log_peak, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(batched.mirror_peak, whole.mirror_peak, rtol=1e-12, atol=1e-9)
    back = BettingSequence.from_record(json.loads(json.dumps(whole.to_record())))
    assert (back.lower_bound(0.01), back.upper_bound(0.01)) == (whole.lower_bound(0.01), whole.upper_bound(0.01))


def test_values_out_of_range_and_bad_levels_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        BettingSequence.start(0.05).update([0.5, 1.5])
    with pytest.raises(ValueError, match="design_level"):
        BettingSequence.start(0.0)
    with pytest.raises(ValueError, match="error"):
        BettingSequence.start(0.05).lower_bound(1.0)


def _anytime(divergence: str, p: float, q: float, n: int, seed: int, delta: float = 0.0) -> AnytimeSetEstimate:
    rng = np.random.default_rng(seed)
    in_p, in_q = rng.random(n) < p, rng.random(n) < q
    cells = np.array([np.sum(in_p & in_q), np.sum(in_p & ~in_q), np.sum(~in_p & in_q), np.sum(~in_p & ~in_q)])
    counts = count_estimate(cells, Target(divergence, ("threshold",), delta=delta), "threshold", False)
    start = BernoulliBetting.start(0.025)
    looks = [0, 50, 100, 150, 225, 300]
    in_p_seq = in_q_seq = start
    for begin, end in zip(looks, looks[1:]):
        in_p_seq, in_q_seq = in_p_seq.update(in_p[begin:end]), in_q_seq.update(in_q[begin:end])
    return AnytimeSetEstimate(counts, in_p_seq, in_q_seq)


@pytest.mark.parametrize("divergence, p, q", [("dp", 0.5, 0.5 * math.exp(-1.0)), ("ipm", 0.6, 0.3)])
def test_the_set_bounds_cover_the_estimand_and_agree_with_their_p_values(divergence, p, q):
    """80 streams of 300 outputs per law, looked at 5 times: the 90 % lower bound of log(p / q) or 2 (p - q) exceeds
    the truth in at most the binomial(80, 0.1) count's 0.999 quantile; p_value(c) <= 0.1 exactly when
    lower_bound(0.9) >= c."""
    truth, seeds, misses = estimand(divergence, 0.0, p, q), 80, 0
    for seed in range(seeds):
        estimate = _anytime(divergence, p, q, 300, seed)
        low, high = estimate.confidence_interval(0.8)
        assert low <= estimate.lower_bound(0.9) + 1e-12 and low <= high
        misses += estimate.lower_bound(0.9) > truth
        for claim in (truth - 0.5, truth, estimate.lower_bound(0.9)):
            assert (estimate.p_value(claim) <= 0.1) == (estimate.lower_bound(0.9) >= claim)
    assert misses <= binom.ppf(0.999, seeds, ERROR)


def test_a_gross_ratio_is_refuted_from_a_few_hundred_outputs_and_the_estimate_round_trips():
    """p = 0.5, q = 0.5 e^-5 (epsilon 5): at 200 outputs per law the 99 % bound passes 1 (the exact binomial bound
    at that n, for comparison, is the Clopper-Pearson split: log(0.39 / 0.03) = 2.6)."""
    estimate = _anytime("dp", 0.5, 0.5 * math.exp(-5.0), 200, 0)
    cp = math.log(beta.ppf(0.005, 100, 101) / beta.ppf(0.995, 2, 199))
    assert 1.0 < estimate.lower_bound(0.99) < cp
    assert estimate.p_value(1.0) < 0.01 and estimate.caveat is None and estimate.n == 200
    back = evidence_from_record(json.loads(json.dumps(estimate.to_record())))
    assert isinstance(back, AnytimeSetEstimate)
    assert back.lower_bound(0.99) == estimate.lower_bound(0.99) and back.p_value(1.0) == estimate.p_value(1.0)
    assert back.estimate == estimate.estimate and back.details == estimate.details
