"""attacks.tradeoff: the empirical trade-off curve's band covers the true curve at its confidence and can refute."""

import math

import numpy as np
import pytest
from scipy import stats

from attacks.estimate import score_histogram
from attacks.tradeoff import dkw_margin, tradeoff_curve
from audit.theory.tradeoff import gaussian_tradeoff

GRID = np.linspace(0.0, 1.0, 1001)


def gaussian_scores(seed: int, n: int, mu: float = 1.0) -> dict:
    """Held-out scores x of P = N(mu, 1) and Q = N(0, 1): the likelihood-ratio test's score, large on P."""
    rng = np.random.default_rng(seed)
    return score_histogram(rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n))


def test_band_covers_the_true_curve_at_its_confidence():
    """200 seeds of n = 2000: the band may dip below G_1 somewhere in at most 5 % of them.

    The tolerance is the binomial 0.999 quantile of 200 draws at 5 % (18); DKW is
    conservative, so fewer are expected.  A band at 1 - confidence per side would fail more often.
    """
    failures = sum(tradeoff_curve(gaussian_scores(seed, 2000), 0.95).below(lambda a: gaussian_tradeoff(a, 1.0), GRID)
                   is not None for seed in range(200))
    assert failures <= stats.binom(200, 0.05).ppf(0.999)


def test_band_refutes_a_claim_the_data_beat():
    """mu = 1 data against a 0.5-GDP claim: G_0.5 - G_1 reaches 0.19, the margins are 0.03: refuted at every seed."""
    for seed in range(5):
        crossing = tradeoff_curve(gaussian_scores(seed, 2000), 0.95).below(lambda a: gaussian_tradeoff(a, 0.5), GRID)
        assert crossing is not None and crossing[1] > 0.1


def test_band_tracks_the_curve():
    """At n = 20 000 the band sits within its margins (plus the binning's step) above G_1 at mid levels."""
    curve = tradeoff_curve(gaussian_scores(0, 20_000), 0.95)
    a = np.array([0.1, 0.3, 0.5, 0.7])
    gap = curve.band(a) - gaussian_tradeoff(a, 1.0)
    assert np.all(gap >= 0) and np.all(gap <= 2 * (curve.margin_p + curve.margin_q) + 0.02)
    assert curve.n_p == curve.n_q == 20_000


def test_margin_and_inputs():
    assert dkw_margin(1000, 0.025) == pytest.approx(math.sqrt(math.log(40) / 2000))
    with pytest.raises(ValueError, match="level"):
        dkw_margin(10, 0.7)
    with pytest.raises(ValueError, match="confidence"):
        tradeoff_curve(gaussian_scores(0, 100), 0.2)
    with pytest.raises(ValueError, match="counts"):
        tradeoff_curve({"edges": [0, 1], "p": [0], "q": [3]}, 0.95)
    trivial = tradeoff_curve({"edges": [0.0, 1.0, 2.0], "p": [5, 5], "q": [5, 5]}, 0.95)
    assert np.all(trivial.band(GRID) <= 1 - GRID + 1e-12)  # never above the trivial curve
