"""audit.mechanisms.compose: composed mechanisms against the laws of their parts and closed forms."""

import math

import numpy as np
import pytest
from scipy import stats

from attacks.estimate import estimate_divergence
from audit.mechanisms import CallableMechanism, make_mechanism
from audit.mechanisms.compose import Mixture, Parallel, PostProcessed, Sequential, apply_map
from audit.theory import bounds
from audit.theory.table import LaplaceShift, theory_bound

LAPLACE = make_mechanism("laplace", {"epsilon": 1.0})
GAUSSIAN = make_mechanism("gaussian", {"sigma": 1.0})
ZERO, ONE = np.zeros((2, 1)), np.array([[0.0], [1.0]])


def _constant(value):
    return CallableMechanism(f"constant {value}", lambda dataset, n, rng: np.full(n, float(value)))


def test_sequential_is_both_releases_from_one_generator():
    out = Sequential(LAPLACE, GAUSSIAN).sample(ONE, 50, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    expected = np.hstack([LAPLACE.sample(ONE, 50, rng), GAUSSIAN.sample(ONE, 50, rng)])
    np.testing.assert_array_equal(out, expected)


def test_sequential_laplaces_add_their_kl():
    """Independent coordinates: KL adds (CBDP appendix Thm 11), and so does (lin, KL), since the
    log-MGF of a product separates: 2 x 0.2260 (CBDP appendix Thm 9)."""
    composed = Sequential(LAPLACE, LAPLACE)
    assert composed.theory_law == LaplaceShift(1.0, (1.0, 1.0))
    assert theory_bound(composed.theory_law, "all", "kl") == pytest.approx(2 * bounds.laplace_kl(1.0))
    assert theory_bound(composed.theory_law, "linear", "kl") == pytest.approx(2 * bounds.laplace_kl(1.0))  # d > 1
    linear = 2 * bounds.laplace_linear_kl(1.0)
    rng = np.random.default_rng(3)
    n = 20_000
    p, q = composed.sample(ZERO, n, rng), composed.sample(ONE, n, rng)
    estimate = estimate_divergence(p, q, "linear", "kl", random_state=0)
    low, high = estimate.confidence_interval(0.999)
    standard_error = (high - low) / (2 * stats.norm.ppf(0.9995))
    # The held-out witness is a lower-bound estimator: at most the value, and within 4 standard errors of it.
    assert estimate.lower_bound(0.999) <= linear
    assert abs(estimate.estimate - linear) < 4 * standard_error, (estimate.estimate, standard_error)


def test_sequential_has_no_product_law_across_scales_or_when_adaptive():
    assert Sequential(LAPLACE, make_mechanism("laplace", {"epsilon": 0.5})).theory_law is None
    assert Sequential(LAPLACE, LAPLACE, adaptive=True).theory_law is None
    assert Sequential(LAPLACE, GAUSSIAN).theory_law is None


def test_adaptive_sequential_queries_the_data_only_when_the_first_release_is_non_negative():
    sign = CallableMechanism("sign", lambda dataset, n, rng: rng.choice([-1.0, 1.0], size=n))
    total = CallableMechanism("sum", lambda dataset, n, rng: np.full(n, float(np.sum(dataset))))
    out = Sequential(sign, total, adaptive=True).sample(np.array([[2.0], [3.0]]), 400, np.random.default_rng(0))
    np.testing.assert_array_equal(out[:, 1], np.where(out[:, 0] >= 0, 5.0, 0.0))
    assert 0 < np.mean(out[:, 0] > 0) < 1


def test_parallel_releases_each_block_and_builds_one_pair_per_block():
    composed = Parallel(LAPLACE, GAUSSIAN, split=2)
    data = np.array([[0.0], [1.0], [3.0]])
    out = composed.sample(data, 30, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    np.testing.assert_array_equal(out, np.hstack([LAPLACE.sample(data[:2], 30, rng), GAUSSIAN.sample(data[2:], 30, rng)]))
    (d, in_d1), (_, in_d2) = Parallel.pairs((ZERO, ONE), (ZERO, ONE))
    np.testing.assert_array_equal(d, np.zeros((4, 1)))
    np.testing.assert_array_equal(in_d1, [[0.0], [1.0], [0.0], [0.0]])
    np.testing.assert_array_equal(in_d2, [[0.0], [0.0], [0.0], [1.0]])
    with pytest.raises(ValueError, match="split"):
        composed.sample(data[:2], 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="split"):
        Parallel(LAPLACE, GAUSSIAN, split=0)


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_mixture_takes_each_output_from_the_first_with_its_weight(weight):
    n = 20_000
    out = Mixture(_constant(1), _constant(0), weight).sample(ZERO, n, np.random.default_rng(1))
    # A binomial proportion: within 5 standard errors (exact at the ends).
    assert abs(out.mean() - weight) <= 5 * math.sqrt(weight * (1 - weight) / n)
    with pytest.raises(ValueError, match="same range"):
        Mixture(LAPLACE, Sequential(LAPLACE, LAPLACE)).sample(ZERO, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="weight"):
        Mixture(LAPLACE, LAPLACE, 1.5)


def test_post_processing_maps_every_output():
    y = np.array([[1.0, 2.0], [-1.0, 3.0]])
    np.testing.assert_allclose(apply_map(y, [[1.0, 1.0]]), [[3.0], [2.0]])
    np.testing.assert_allclose(apply_map(y, "square"), y**2)
    np.testing.assert_allclose(apply_map(y, "append-square"), np.hstack([y, y**2]))
    with pytest.raises(ValueError, match="2 column"):
        apply_map(y, [[1.0]])
    with pytest.raises(ValueError, match="map"):
        PostProcessed(LAPLACE, "cube")
    out = PostProcessed(LAPLACE, [[2.0], [-1.0]]).sample(ONE, 20, np.random.default_rng(4))
    np.testing.assert_array_equal(out, LAPLACE.sample(ONE, 20, np.random.default_rng(4)) * [2.0, -1.0])


def test_composed_mechanisms_are_seedable_when_their_parts_are():
    unseeded = make_mechanism("laplace", {"epsilon": 1.0})
    unseeded.seedable = False
    assert Sequential(LAPLACE, GAUSSIAN).seedable and Mixture(LAPLACE, GAUSSIAN).seedable
    assert not Sequential(LAPLACE, unseeded).seedable and not PostProcessed(unseeded, "square").seedable
