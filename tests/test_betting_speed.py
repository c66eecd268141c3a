"""The block update of the betting capital (attacks/betting.py) against a plain reference of Eq. 25 and 26 of
Waudby-Smith and Ramdas (JRSS-B 2024): the same numbers, to 1e-12 relative, on random streams fed in batches."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.betting import GRID, TRUNCATION, BernoulliBetting, BettingSequence, mean_lower_bound


def _reference(x: np.ndarray, design_level: float, means: np.ndarray, batches: list[int]) -> tuple:
    """(log capital, its running maximum) on ``means`` after ``x`` fed in ``batches``: one value at a time, the
    predictable plug-in bet of value i from the values before it, each batch's path its start plus the sum of its
    log factors in order (as the package sums within a block of at most 2 048 values)."""
    capital, peak, n, total, squares = np.zeros(means.size), np.zeros(means.size), 0, 0.0, 0.0
    for size in batches:
        for begin in range(0, size, 2_048):
            block, partial = x[n:n + min(2_048, size - begin)], np.zeros(means.size)
            for value in block:
                i = n + 1
                variance = (0.25 + squares) / i
                bet = np.sqrt(2.0 * np.log(1.0 / design_level) / (variance * i * np.log1p(i)))
                partial = partial + np.log1p(np.minimum(bet, TRUNCATION / means) * (value - means))
                peak = np.maximum(peak, capital + partial)
                total += value
                squares += (value - (0.5 + total) / (i + 1)) ** 2
                n = i
            capital = capital + partial
    return capital, peak


@pytest.mark.parametrize("law", ["uniform", "bernoulli"])
def test_block_update_equals_the_reference(law):
    """2 500 values in batches of 700, 1 800 (two blocks) and the rest: both capitals, their peaks and the bounds
    agree with the one-value-at-a-time reference to 1e-12 relative."""
    rng = np.random.default_rng(7)
    x = rng.random(2_500) if law == "uniform" else (rng.random(2_500) < 0.1).astype(float)
    batches = [700, 1_800]
    sequence = BettingSequence.start(0.05, extra_means=[0.3, 0.1])
    for begin, size in zip(np.cumsum([0, *batches[:-1]]), batches):
        sequence = sequence.update(x[begin:begin + size])
    capital, peak = _reference(x, 0.05, sequence.means, batches)
    mirror, mirror_peak = _reference(1.0 - x, 0.05, sequence.means, batches)
    for found, expected in ((sequence.log_capital, capital), (sequence.log_peak, peak),
                            (sequence.mirror_capital, mirror), (sequence.mirror_peak, mirror_peak)):
        np.testing.assert_allclose(found, expected, rtol=1e-12, atol=0.0)
    assert sequence.n == x.size and sequence.lower_bound(0.05) <= x.mean() <= sequence.upper_bound(0.05)


def test_bernoulli_mixture_and_refined_bound_read_the_same_capital():
    """The mixture's plug-in term and mean_lower_bound's peaks are the reference's capital too."""
    rng = np.random.default_rng(3)
    x = (rng.random(900) < 0.2).astype(float)
    mixture = BernoulliBetting.start(0.05).update(x)
    capital, _ = _reference(x, 0.05, GRID, [x.size])
    np.testing.assert_allclose(mixture.sequence.log_capital, capital, rtol=1e-12, atol=0.0)
    values = rng.beta(2.0, 5.0, 900)
    low = mean_lower_bound(values, 0.05)
    _, peak = _reference(values, 0.05, GRID, [values.size])
    grid_low = GRID[np.flatnonzero(peak >= np.log(20.0))[-1]]
    assert grid_low <= low < values.mean()


def test_threads_give_the_same_numbers():
    """A capital and its mirror fed on two threads, in blocks that cross a 2 048-value boundary: the same arrays,
    to the last bit, as on one."""
    x = np.random.default_rng(11).random(5_000)
    one, two = (BettingSequence.start(0.0125).update(x[:1_000], threads).update(x[1_000:], threads)
                for threads in (1, 2))
    assert one.to_record() == two.to_record()


def test_streamed_witness_fed_on_four_threads_equals_one():
    """A clipped witness's sequences (attacks/clipped_witness.py), three blocks added in drawing order and fed on
    four threads (P and Q at once, each capital and its mirror at once): the same record as on one thread, and
    the same as feeding the blocks one by one."""
    from attacks.candidates import Target
    from attacks.clipped_witness import StreamedWitness, start_betting

    rng = np.random.default_rng(5)
    target = Target("kl", ("linear",), alpha=None, claim_class="all")
    betting = start_betting(target, rng.laplace(0.0, 1.0, 500), rng.laplace(1.0, 1.0, 500), 3_000)
    blocks = [(rng.laplace(0.0, 1.0, 1_000), rng.laplace(1.0, 1.0, 1_000)) for _ in range(3)]
    fed = {}
    for threads in (1, 4):
        summary = None
        for w_p, w_q in blocks:
            block = StreamedWitness.block(0, betting, w_p, w_q, threads)
            summary = block if summary is None else summary + block
            assert summary.pending[0].size == w_p.size  # one block's values held at a time
        fed[threads] = summary.fed().to_record()
    by_hand = betting
    for w_p, w_q in blocks:
        by_hand = by_hand.update(*betting.rescaling.rescaled(w_p, w_q))
    assert fed[4] == fed[1] == by_hand.to_record()
    assert by_hand.n == 3_000
