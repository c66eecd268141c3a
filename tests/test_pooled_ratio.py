"""Lower bounds pooled over several attack sets, attacks.pooled_ratio, against exact theory.

The model is the shifted release: X ~ Laplace(0, b) on D and Y = X + 1 on D'
(coupled pairs), or Y ~ Laplace(1, b) drawn independently.  The attack sets
are S_k = {x <= t_k}.  For t_k <= 0 the log-ratio log(P(S_k) / Q(S_k)) is
exactly 1 / b; for t_k in (0, 1) it is smaller.  Every moment the module
counts is a Laplace probability: a product of memberships is
1{X <= min of the thresholds}, with Y <= t iff X <= t - 1 on coupled pairs.
So the covariance Sigma of the influence vector, and the delta-method
standard error of its estimate (a smooth function of the counted moments,
whose own covariance is again a matrix of Laplace probabilities), are exact
here; the statistical tests compare with them at a number of standard
errors stated in each test.
"""

import itertools

import numpy as np
import pytest
from scipy import stats

from attacks.paired_ratio import paired_counts
from attacks.pooled_ratio import (
    EventMoments,
    influence_covariance,
    log_ratios,
    min_variance_weights,
    pooled_log_ratio,
    pooled_lower_bound,
    usable_sets,
)

SHIFT = 1.0  # Y = X + 1: the release moves by one between D and D'
SCALE = 1.0  # Laplace scale b: every set {x <= t}, t <= 0, has log-ratio 1 / b
THRESHOLDS = np.array([-2.0, -1.0, 0.0, 0.5])  # three sets with log-ratio 1, one (t = 0.5) with log-ratio 0.832
WEIGHTS = np.array([0.15, 0.25, 0.3, 0.3])  # fixed in advance: the pooled log-ratio they weigh is 0.9495
MODES = [pytest.param(True, id="coupled"), pytest.param(False, id="independent")]


def cdf(c, scale: float = SCALE):
    return stats.laplace.cdf(c, scale=scale)


def draw(rng, size, coupled: bool, scale: float = SCALE):
    """Outputs of the model on D and D', each of shape ``size``."""
    x = rng.laplace(0.0, scale, size)
    y = x + SHIFT if coupled else rng.laplace(SHIFT, scale, size)
    return x, y


def moments_of(x, y, thresholds=THRESHOLDS) -> EventMoments:
    return EventMoments.from_memberships(x[:, None] <= thresholds, y[:, None] <= thresholds)


def replicate_moments(seed: int, replicates: int, n: int, coupled: bool, chunk: int = 250) -> list[EventMoments]:
    """Moments of ``replicates`` independent samples of n pairs, drawn ``chunk`` samples at a time."""
    rng = np.random.default_rng(seed)
    moments = []
    for begin in range(0, replicates, chunk):
        x, y = draw(rng, (min(chunk, replicates - begin), n), coupled)
        in_x, in_y = x[..., None] <= THRESHOLDS, y[..., None] <= THRESHOLDS
        moments.extend(EventMoments.from_memberships(a, b) for a, b in zip(in_x, in_y))
    return moments


def true_log_ratios(thresholds=THRESHOLDS, delta: float = 0.0, scale: float = SCALE) -> np.ndarray:
    return np.log((cdf(thresholds, scale) - delta) / cdf(thresholds - SHIFT, scale))


# ---------------------------------------------------------------- exact Sigma and the standard error of its estimate

def moment_layout(thresholds, coupled: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each moment the module counts, over n, as P(W <= cut) for a standard Laplace variable W: (law, cut) per moment.

    The moments are, in order, p (K), q (K), pp (K x K), qq (K x K) and, for
    coupled pairs, pq (K x K).  Coupled, every membership is one of X (law 0).
    Independent, those of Y are those of Y - 1 ~ Laplace(0, b) (law 1),
    independent of X; pq is then not used by the estimator.
    """
    t = np.asarray(thresholds, dtype=float)
    low = np.minimum.outer(t, t).ravel()
    y_law = 0 if coupled else 1
    parts = [(0, t), (y_law, t - SHIFT), (0, low), (y_law, low - SHIFT)]
    if coupled:
        parts.append((0, np.minimum.outer(t, t - SHIFT).ravel()))
    return np.concatenate([np.full(cuts.size, law) for law, cuts in parts]), np.concatenate([cuts for _, cuts in parts])


def sigma_of(moments: np.ndarray, k: int, delta: float, coupled: bool) -> np.ndarray:
    """Sigma = A C A' with C the covariance of the memberships (a, b) of one pair and A = [diag(1 / (p - delta)),
    -diag(1 / q)]: the docstring formula of influence_covariance written as the covariance of a linear map."""
    p, q = moments[:k], moments[k:2 * k]
    pp, qq = moments[2 * k:2 * k + k * k].reshape(k, k), moments[2 * k + k * k:2 * k + 2 * k * k].reshape(k, k)
    pq = moments[2 * k + 2 * k * k:].reshape(k, k) if coupled else np.outer(p, q)  # independent: no covariance
    cov_ab = pq - np.outer(p, q)
    c = np.block([[pp - np.outer(p, p), cov_ab], [cov_ab.T, qq - np.outer(q, q)]])
    a = np.hstack([np.diag(1.0 / (p - delta)), -np.diag(1.0 / q)])
    return a @ c @ a.T


def exact_sigma(thresholds, delta: float, coupled: bool, scale: float = SCALE) -> np.ndarray:
    _, cuts = moment_layout(thresholds, coupled)
    return sigma_of(cdf(cuts, scale), len(thresholds), delta, coupled)


def sigma_noise(thresholds, delta: float, coupled: bool, scale: float = SCALE) -> np.ndarray:
    """Covariance per pair of vec(Sigma_hat) (so divide by n): J C_m J', J the Jacobian of Sigma in the moments
    (central differences), C_m the covariance of the moments' indicators for one pair, by the delta method."""
    laws, cuts = moment_layout(thresholds, coupled)
    k, m = len(thresholds), cdf(cuts, scale)
    step = 1e-6
    jacobian = np.column_stack([
        (sigma_of(m + step * e, k, delta, coupled) - sigma_of(m - step * e, k, delta, coupled)).ravel() / (2 * step)
        for e in np.eye(m.size)
    ])
    same_law = laws[:, None] == laws[None, :]
    c_m = np.where(same_law, cdf(np.minimum.outer(cuts, cuts), scale) - np.outer(m, m), 0.0)
    return jacobian @ c_m @ jacobian.T


def test_exact_sigma_of_the_telescoping_mean():
    """A check of the theory helpers: coupled, t_k = -k (k < K = 6), the equal-weight mean telescopes to
    (log N(X <= 0) - log N(X <= -K)) / K, whose variance per pair is (1 / P(X <= -K) - 1 / P(X <= 0)) / K^2
    (nested sets); the single set {x <= 0} has (e^{1/b} - 1) / P(X <= 0).  Their ratio, "a third" in the
    module docstring, is 0.34 at b = 4 (epsilon = 1/4) but 6.5 at b = 1: equal weights only pay at small epsilon."""
    ratios = []
    for scale in (1.0, 4.0):
        tail = -np.arange(6.0)
        sigma = exact_sigma(tail, 0.0, True, scale)
        equal = np.full(6, 1 / 6)
        assert equal @ sigma @ equal == pytest.approx((1 / cdf(-6.0, scale) - 1 / 0.5) / 36, rel=1e-12)
        assert sigma[0, 0] == pytest.approx((np.exp(1 / scale) - 1) / 0.5, rel=1e-12)
        ratios.append(equal @ sigma @ equal / sigma[0, 0])
    assert ratios == pytest.approx([6.506, 0.3405], abs=5e-4)


# ---------------------------------------------------------------- EventMoments

def random_memberships(rng, n: int):
    """Memberships of five sets of different sizes, X and Y correlated but not identical."""
    u = rng.random((n, 1))
    in_x = u < [0.02, 0.1, 0.3, 0.5, 0.9]
    in_y = (u + 0.1 * rng.random((n, 1))) < [0.02, 0.1, 0.3, 0.5, 0.9]
    return in_x, in_y


def assert_same_moments(left: EventMoments, right: EventMoments):
    assert left.n == right.n
    for field in ("in_p", "in_q", "pp", "qq", "pq"):
        np.testing.assert_array_equal(getattr(left, field), getattr(right, field), err_msg=field)


def test_moments_of_a_sample_are_the_sum_of_its_chunks():
    in_x, in_y = random_memberships(np.random.default_rng(1), 1000)
    whole = EventMoments.from_memberships(in_x, in_y)
    edges = [0, 300, 301, 1000]
    chunks = [EventMoments.from_memberships(in_x[a:b], in_y[a:b]) for a, b in itertools.pairwise(edges)]
    assert_same_moments(whole, chunks[0] + chunks[1] + chunks[2])
    assert whole.in_p.tolist() == in_x.sum(axis=0).tolist()


def test_moments_of_different_sets_cannot_be_added():
    in_x, in_y = random_memberships(np.random.default_rng(1), 100)
    whole = EventMoments.from_memberships(in_x, in_y)
    fewer = EventMoments.from_memberships(in_x[:, :-1], in_y[:, :-1])
    with pytest.raises(ValueError, match=f"same {in_x.shape[1]} sets. Found {in_x.shape[1] - 1} sets"):
        whole + fewer


def test_cells_are_paired_counts():
    in_x, in_y = random_memberships(np.random.default_rng(2), 1000)
    moments = EventMoments.from_memberships(in_x, in_y)
    for k in range(in_x.shape[1]):
        np.testing.assert_array_equal(moments.cells(k), paired_counts(in_x[:, k], in_y[:, k]))


def test_counts_are_exact_over_several_blocks():
    """300_000 rows: two blocks of the float32 product (2^18 rows each), compared with integer products."""
    in_x, in_y = random_memberships(np.random.default_rng(3), 300_000)
    moments = EventMoments.from_memberships(in_x, in_y)
    ints_x, ints_y = in_x.astype(np.int64), in_y.astype(np.int64)
    np.testing.assert_array_equal(moments.pp, ints_x.T @ ints_x)
    np.testing.assert_array_equal(moments.qq, ints_y.T @ ints_y)
    np.testing.assert_array_equal(moments.pq, ints_x.T @ ints_y)
    assert moments.pp.dtype == np.int64


def test_counts_are_exact_beyond_float32_integers():
    """2^24 + 1 members: one float32 sum would round to 2^24; the block loop keeps every count (0.3 s)."""
    n = 2**24 + 1
    ones = np.ones((n, 1), dtype=bool)
    moments = EventMoments.from_memberships(ones, ones)
    assert moments.pp[0, 0] == moments.qq[0, 0] == moments.pq[0, 0] == n


@pytest.mark.parametrize("in_x, in_y", [
    (np.zeros((10, 3), bool), np.zeros((10, 2), bool)),
    (np.zeros((10, 3), bool), np.zeros((9, 3), bool)),
    (np.zeros(10, bool), np.zeros(10, bool)),
])
def test_memberships_of_the_wrong_shape_are_refused(in_x, in_y):
    with pytest.raises(ValueError, match="in_x and in_y must be boolean arrays of the same shape"):
        EventMoments.from_memberships(in_x, in_y)


@pytest.mark.parametrize("coupled", MODES)
def test_nested_counts_from_levels_equal_those_from_memberships(coupled):
    """Sets {x > c_k} for ascending cuts, some outputs exactly on a cut (rounded to 0.5): the same counts."""
    x, y = draw(np.random.default_rng(4), 20_000, coupled)
    x, y = np.round(2 * x) / 2, np.round(2 * y) / 2
    cuts = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 2.0, 7.0])
    levels = EventMoments.from_levels(np.searchsorted(cuts, x), np.searchsorted(cuts, y), cuts.size)
    assert_same_moments(levels, EventMoments.from_memberships(x[:, None] > cuts, y[:, None] > cuts))
    assert levels.n == x.size


@pytest.mark.parametrize("level_x, level_y", [
    (np.array([0, 1, 4]), np.array([0, 1, 2])),
    (np.array([0, -1, 2]), np.array([0, 1, 2])),
    (np.array([0.0, 1.0, 2.0]), np.array([0, 1, 2])),
    (np.array([0, 1, 2]), np.array([0, 1])),
])
def test_bad_levels_are_refused(level_x, level_y):
    with pytest.raises(ValueError, match="levels must lie in 0..n_sets=3|must be integer arrays of the same shape"):
        EventMoments.from_levels(level_x, level_y, 3)


# ---------------------------------------------------------------- influence_covariance

@pytest.mark.parametrize("coupled", MODES)
@pytest.mark.parametrize("delta", [0.0, 0.01])
def test_influence_covariance_matches_exact_theory(coupled, delta):
    """10^6 pairs: every entry of Sigma_hat within 5 delta-method standard errors of the exact Sigma.

    Sigma_hat is a smooth function of sample means of indicators, so it is
    asymptotically normal with the standard error of sigma_noise; its bias is
    O(1/n), a thousandth of that error here.  Ten distinct entries at 5 SE:
    a false alarm has probability under 1e-5.  The tolerance is under 5% of
    each diagonal entry (4.4% at t = -2, coupled), so a wrong term cannot pass:
    coupled, the cross-covariance term alone (2 / p at t = -2) exceeds Sigma.
    """
    n = 10**6
    x, y = draw(np.random.default_rng(10), n, coupled)
    estimate = influence_covariance(moments_of(x, y), delta, coupled)
    exact = exact_sigma(THRESHOLDS, delta, coupled)
    error = np.sqrt(np.diag(sigma_noise(THRESHOLDS, delta, coupled)) / n).reshape(exact.shape)
    assert np.all(5 * np.diag(error) < 0.05 * np.diag(exact))
    z = (estimate - exact) / error
    assert np.max(np.abs(z)) < 5, z


def test_independent_sigma_is_the_sum_of_two_covariances():
    """The closed form of the brief: Cov(a) / p p' + Cov(b) / q q' with Laplace probabilities, Y ~ Laplace(1, b)."""
    t = THRESHOLDS
    p, q = cdf(t), cdf(t - SHIFT)
    low = np.minimum.outer(t, t)
    expected = (cdf(low) - np.outer(p, p)) / np.outer(p, p) + (cdf(low - SHIFT) - np.outer(q, q)) / np.outer(q, q)
    np.testing.assert_allclose(exact_sigma(t, 0.0, False), expected, rtol=1e-12)


# ---------------------------------------------------------------- pooled_log_ratio

@pytest.mark.parametrize("coupled", MODES)
@pytest.mark.parametrize("delta", [0.0, 0.01])
def test_pooled_estimate_and_error_by_hand(coupled, delta):
    """The estimate is w . log((p_hat - delta) / q_hat); the error is the standard deviation of the plug-in
    influence sum_k w_k (a_ik / (p_hat_k - delta) - b_ik / q_hat_k) over the pairs (for independent samples
    the variances of the two parts add), over sqrt(n)."""
    n = 5000
    x, y = draw(np.random.default_rng(20), n, coupled)
    in_x, in_y = x[:, None] <= THRESHOLDS, y[:, None] <= THRESHOLDS
    p_hat, q_hat = in_x.mean(axis=0), in_y.mean(axis=0)
    estimate, error = pooled_log_ratio(EventMoments.from_memberships(in_x, in_y), WEIGHTS, delta, coupled)
    assert estimate == pytest.approx(WEIGHTS @ np.log((p_hat - delta) / q_hat), rel=1e-12)
    from_x, from_y = in_x @ (WEIGHTS / (p_hat - delta)), in_y @ (WEIGHTS / q_hat)
    variance = np.var(from_x - from_y) if coupled else np.var(from_x) + np.var(from_y)
    assert error == pytest.approx(np.sqrt(variance / n), rel=1e-9)


def check_error_matches_spread(coupled: bool, replicates: int, seed: int):
    """Sample variance of the estimate over the replicates against the mean squared reported error.

    The estimates are near normal (hundreds of counts per set), so their
    sample variance over R replicates is the variance times chi2(R - 1) / (R - 1);
    the ratio must lie between that law's 0.0005 and 0.9995 quantiles (a
    two-sided 0.001 test).  The mean squared error reported is itself
    estimated, with a relative noise of 2.9% (coupled) or 1.6% per replicate
    (delta method, sigma_noise): 0.2% over 200; it must be within 2% of the
    exact w' Sigma w / n, room left for its O(1/n) bias (measured under 0.2%).
    The mean estimate, less its second-order bias
    sum_k w_k ((1 - q_k) / q_k - (1 - p_k) / p_k) / 2n (1.3 standard errors
    of the mean at R = 4000, coupled), must be within 5 standard errors of the truth.
    """
    n = 20_000
    moments = replicate_moments(seed, replicates, n, coupled)
    results = np.array([pooled_log_ratio(m, WEIGHTS, 0.0, coupled) for m in moments])
    estimates, errors = results[:, 0], results[:, 1]
    ratio = estimates.var(ddof=1) / np.mean(errors**2)
    dof = replicates - 1
    assert stats.chi2.ppf(0.0005, dof) / dof < ratio < stats.chi2.ppf(0.9995, dof) / dof, ratio
    sigma = exact_sigma(THRESHOLDS, 0.0, coupled)
    assert np.mean(errors**2) == pytest.approx(WEIGHTS @ sigma @ WEIGHTS / n, rel=0.02)
    p, q = cdf(THRESHOLDS), cdf(THRESHOLDS - SHIFT)
    bias = WEIGHTS @ ((1 - q) / q - (1 - p) / p) / (2 * n)
    assert abs(estimates.mean() - bias - WEIGHTS @ true_log_ratios()) < 5 * np.sqrt(np.mean(errors**2) / replicates)


@pytest.mark.parametrize("coupled", MODES)
def test_error_matches_the_spread_over_replicates(coupled):
    check_error_matches_spread(coupled, 200, seed=30)


@pytest.mark.slow
@pytest.mark.parametrize("coupled", MODES)
def test_error_matches_the_spread_over_many_replicates(coupled):
    check_error_matches_spread(coupled, 4000, seed=31)


# ---------------------------------------------------------------- coverage of pooled_lower_bound

LEVELS = (0.9, 0.95)


def coverage(coupled: bool, replicates: int, seed: int) -> dict[float, float]:
    """Fraction of replicates (n = 20_000 pairs each) whose bound at each level lies at or below the truth."""
    truth = WEIGHTS @ true_log_ratios()
    moments = replicate_moments(seed, replicates, 20_000, coupled)
    return {level: np.mean([pooled_lower_bound(m, WEIGHTS, 0.0, level, coupled) <= truth for m in moments])
            for level in LEVELS}


def check_coverage(coupled: bool, replicates: int, seed: int):
    """Within 3 standard errors of a proportion, 3 sqrt(level (1 - level) / R), of each level.

    With 20_000 pairs the smallest weighted set holds some 500 outputs of D'
    (and, coupled, 850 separated pairs), where the Wald bound's own error is
    a fraction of a point.  Measured (level 0.9, 0.95): 1000 replicates,
    coupled 0.918, 0.964, independent 0.904, 0.953; 10_000 replicates,
    coupled 0.8977, 0.9492, independent 0.9031, 0.9488.
    """
    measured = coverage(coupled, replicates, seed)
    for level, fraction in measured.items():
        assert abs(fraction - level) <= 3 * np.sqrt(level * (1 - level) / replicates), measured


@pytest.mark.parametrize("coupled", MODES)
def test_coverage_of_the_pooled_bound(coupled):
    """400 replicates: within 0.045 of 0.9 and 0.033 of 0.95 (the slow test runs 10 000)."""
    check_coverage(coupled, 400, seed=40)


@pytest.mark.slow
@pytest.mark.parametrize("coupled", MODES)
def test_coverage_of_the_pooled_bound_on_many_replicates(coupled):
    """10_000 replicates: within 0.009 of 0.9 and 0.0065 of 0.95."""
    check_coverage(coupled, 10_000, seed=41)


def test_pooled_bound_is_the_estimate_less_z_errors():
    x, y = draw(np.random.default_rng(50), 20_000, True)
    moments = moments_of(x, y)
    estimate, error = pooled_log_ratio(moments, WEIGHTS, 0.0, True)
    z = stats.norm.ppf(0.95)
    assert pooled_lower_bound(moments, WEIGHTS, 0.0, 0.95, True) == pytest.approx(estimate - z * error, rel=1e-12)


# ---------------------------------------------------------------- min_variance_weights

# Two sets in the tail (t = -8: some 17 outputs of D, 6 of D' in 10^5; t = -40: none) are not usable at min_count 100.
GENERIC = np.array([0.5, 0.0, -1.0, -2.0, -3.0, -8.0, -40.0])
GENERIC_USABLE = np.array([True] * 5 + [False] * 2)
KKT_TOLERANCE = 1e-6  # NNLS solves the problem exactly but for the ridge of 1e-9 (measured spread 1e-8)


@pytest.fixture(scope="module", params=MODES)
def generic_moments(request):
    coupled = request.param
    x, y = draw(np.random.default_rng(60), 100_000, coupled)
    return moments_of(x, y, GENERIC), coupled


def test_min_variance_weights_solve_the_quadratic_program(generic_moments):
    """On the simplex, zero off the usable sets, KKT of min w' Sigma_hat w: the gradient 2 Sigma_hat w equal
    (to KKT_TOLERANCE) on the support and not smaller off it; no worse than any single set or equal weights."""
    moments, coupled = generic_moments
    weights = min_variance_weights(moments, 0.0, coupled, min_count=100)
    usable = usable_sets(moments, 0.0, coupled, 100)
    np.testing.assert_array_equal(usable, GENERIC_USABLE)
    assert np.all(weights >= 0.0) and weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(weights[~usable] == 0.0)
    sigma, w = influence_covariance(moments, 0.0, coupled)[np.ix_(usable, usable)], weights[usable]
    gradient = 2 * sigma @ w
    support = w > 1e-6  # smaller weights are the solver's round-off
    level = gradient[support].mean()
    assert np.ptp(gradient[support]) <= KKT_TOLERANCE * level, (w, gradient)
    assert np.all(gradient[~support] >= (1 - KKT_TOLERANCE) * level), (w, gradient)
    variance = w @ sigma @ w
    equal = np.full(w.size, 1 / w.size)
    assert variance <= (1 + 1e-6) * min(np.diag(sigma).min(), equal @ sigma @ equal)


@pytest.mark.parametrize("coupled", MODES)
def test_min_variance_weights_skip_sets_with_an_infinite_estimate(coupled):
    """min_count = 0: a set holding outputs of D but none of D' (estimate +inf) gets no weight."""
    x, y = draw(np.random.default_rng(62), 100_000, coupled)
    in_x = np.column_stack([x[:, None] <= THRESHOLDS, x <= -1])
    in_y = np.column_stack([y[:, None] <= THRESHOLDS, np.zeros(x.size, dtype=bool)])
    moments = EventMoments.from_memberships(in_x, in_y)
    assert log_ratios(moments, 0.0)[-1] == np.inf and not usable_sets(moments, 0.0, coupled, 0)[-1]
    weights = min_variance_weights(moments, 0.0, coupled, min_count=0)
    assert weights[-1] == 0.0 and weights.sum() == pytest.approx(1.0, abs=1e-12)


def test_min_variance_weights_among_a_mask_are_those_of_its_sets(generic_moments):
    """``among`` weighs only the sets it allows: the weights of the moments restricted to those sets."""
    moments, coupled = generic_moments
    among = np.array([False, True, False, True, True, True, True])
    weights = min_variance_weights(moments, 0.0, coupled, min_count=100, among=among)
    kept = np.flatnonzero(among)
    restricted = EventMoments(moments.n, moments.in_p[kept], moments.in_q[kept], moments.pp[np.ix_(kept, kept)],
                              moments.qq[np.ix_(kept, kept)], moments.pq[np.ix_(kept, kept)])
    assert np.all(weights[~among] == 0.0)
    np.testing.assert_allclose(weights[kept], min_variance_weights(restricted, 0.0, coupled, min_count=100),
                               atol=1e-12)
    with pytest.raises(ValueError, match="no set among those allowed holds min_count=100"):
        min_variance_weights(moments, 0.0, coupled, min_count=100, among=~GENERIC_USABLE)


def test_coupled_sets_need_separated_pairs():
    """{x <= 10} holds almost every output of both laws but separates 4 pairs in 10^5: usable for independent
    samples only (a coupled set that separates no pair would look free of noise)."""
    x, y = draw(np.random.default_rng(61), 100_000, True)
    moments = moments_of(x, y, np.array([10.0, 0.0]))
    assert usable_sets(moments, 0.0, False, 100).tolist() == [True, True]
    assert usable_sets(moments, 0.0, True, 100).tolist() == [False, True]
    assert min_variance_weights(moments, 0.0, True).tolist() == [0.0, 1.0]


TAIL = -np.arange(6.0)  # t_k = -k, k < 6: every set has log-ratio 1 / b
TAIL_SCALE = 2.0


def test_pooling_the_tail_beats_its_best_set():
    """Coupled, b = 2, sets {x <= -k}, k < 6, 10^6 pairs.

    Exact theory: Sigma is diagonal (nested tail sets have uncorrelated
    influences), Sigma_kk = 1 / P(X <= -k - 1) - 1 / P(X <= -k), so the
    optimal weights are proportional to 1 / Sigma_kk, i.e. to e^{-k/b}, and
    the pooled variance per pair over the best single set's (k = 0) is
    r* = (1 - e^{-1/b}) / (1 - e^{-K/b}) = 0.414.
    The estimated weights are off by O(n^{-1/2}); the exact variance at them
    exceeds the optimum by a term quadratic in that error (allowed: 1%).
    The estimated ratio r_hat = w_hat' Sigma_hat w_hat / Sigma_hat_00 is
    within 5 delta-method standard errors of r*; by the envelope theorem the
    noise of the weights does not enter that error to first order.
    """
    n = 10**6
    sigma = exact_sigma(TAIL, 0.0, True, TAIL_SCALE)
    np.testing.assert_allclose(sigma - np.diag(np.diag(sigma)), 0.0, atol=1e-9)
    optimum = 1.0 / np.sum(1.0 / np.diag(sigma))
    ratio = optimum / sigma[0, 0]
    assert ratio == pytest.approx((1 - np.exp(-1 / TAIL_SCALE)) / (1 - np.exp(-6 / TAIL_SCALE)), rel=1e-12)
    assert ratio == pytest.approx(0.414, abs=5e-4)

    x, y = draw(np.random.default_rng(70), n, True, TAIL_SCALE)
    moments = moments_of(x, y, TAIL)
    weights = min_variance_weights(moments, 0.0, True)
    assert optimum <= weights @ sigma @ weights <= 1.01 * optimum

    best = np.full(TAIL.size, optimum) / np.diag(sigma)
    estimate = influence_covariance(moments, 0.0, True)
    ratio_hat = weights @ estimate @ weights / estimate[0, 0]
    unit = np.zeros((TAIL.size, TAIL.size))
    unit[0, 0] = 1.0
    gradient = np.outer(best, best).ravel() / sigma[0, 0] - optimum / sigma[0, 0] ** 2 * unit.ravel()
    error = np.sqrt(gradient @ sigma_noise(TAIL, 0.0, True, TAIL_SCALE) @ gradient / n)
    assert abs(ratio_hat - ratio) < 5 * error, (ratio_hat, ratio, error)
    assert ratio_hat < 0.5


# ---------------------------------------------------------------- errors

@pytest.fixture(scope="module")
def sample_moments():
    x, y = draw(np.random.default_rng(80), 2000, True)
    return moments_of(x, y)


@pytest.mark.parametrize("weights", [
    [0.3, 0.3, 0.3, 0.3], [1.2, -0.2, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0], [np.nan, 0.5, 0.5, 0.0],
    [[0.25, 0.25], [0.25, 0.25]],
])
@pytest.mark.parametrize("bound", [
    lambda m, w: pooled_log_ratio(m, w, 0.0, True),
    lambda m, w: pooled_lower_bound(m, w, 0.0, 0.95, True),
], ids=["pooled_log_ratio", "pooled_lower_bound"])
def test_bad_weights_are_refused(sample_moments, weights, bound):
    with pytest.raises(ValueError, match="weights must be 4 non-negative finite numbers summing to 1"):
        bound(sample_moments, weights)


@pytest.mark.parametrize("delta", [0.0, 0.1])
def test_weights_on_a_set_without_finite_estimate_are_refused(delta):
    """Set 1 holds no output of D' (estimate +inf); with delta = 0.1, set 0 holds fewer outputs of D than delta n."""
    in_x = np.array([[True, True]] * 5 + [[False, False]] * 95)
    in_y = np.array([[True, False]] * 3 + [[False, False]] * 97)
    moments = EventMoments.from_memberships(in_x, in_y)
    with pytest.raises(ValueError, match=r"weights put mass on sets \[1\] whose estimate"):
        pooled_log_ratio(moments, [0.0, 1.0], 0.0, True)
    bad = [0, 1] if delta else [1]
    with pytest.raises(ValueError, match=rf"weights put mass on sets \[{', '.join(map(str, bad))}\]"):
        pooled_lower_bound(moments, [0.5, 0.5], delta, 0.95, True)


@pytest.mark.parametrize("coupled", MODES)
def test_min_variance_weights_without_a_usable_set(sample_moments, coupled):
    with pytest.raises(ValueError, match="no set holds min_count=10000 samples"):
        min_variance_weights(sample_moments, 0.0, coupled, min_count=10_000)


def test_min_variance_weights_of_sets_without_variance():
    """Sets holding every sample of both (independent) laws have a zero covariance (e.g. outputs that are all
    one code, "the mechanism raised", on both datasets): equal weights, not a failed Cholesky factorisation.
    Coupled pairs never weigh such sets: no pair is separated."""
    everything = np.ones((200, 2), dtype=bool)
    weights = min_variance_weights(EventMoments.from_memberships(everything, everything), 0.0, False, min_count=10)
    np.testing.assert_allclose(weights, [0.5, 0.5])
