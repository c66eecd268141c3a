"""Mechanisms: samplers against their laws, true privacy, theory bounds, output checks, the registry.

Statistical checks use fixed seeds; each states its tolerance: "k SE" is k
standard errors of the estimate at that n, so a correct sampler fails with
probability about 1e-6 (k = 5) and a seed change cannot turn a pass into
flakiness.  KS tests compare p-values to 1e-3 at a fixed seed.
"""

import textwrap

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate, stats

from audit.theory import bounds
from audit.mechanisms import (
    REQUIRED,
    BaseMechanism,
    CallableMechanism,
    MechanismError,
    check_output,
    list_mechanisms,
    make_mechanism,
    sample_coupled,
)
from audit.mechanisms import additive_noise, buggy, builtin, query_answers
from audit.theory.table import theory_bound

BUILTIN_PARAMS = {"matrix": {"A": [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]}}
ALL_CLASSES = builtin.MECHANISMS + buggy.MECHANISMS


def build(cls, **params):
    return cls(**{**BUILTIN_PARAMS.get(cls.name, {}), **params})


# ---------------------------------------------------------------- shapes, vectorisation


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.name)
def test_default_pairs_sample_to_n_finite_rows_of_one_width(cls):
    mechanism = build(cls)
    rng = np.random.default_rng(0)
    pairs = mechanism.default_pairs()
    assert pairs, "every built-in has worst-case pairs"
    widths = {mechanism.sample(x, 257, rng).shape for pair in pairs for x in pair}
    assert len(widths) == 1 and next(iter(widths))[0] == 257


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.name)
def test_same_seed_same_outputs(cls):
    mechanism = build(cls)
    d = mechanism.default_pairs()[0][0]
    first = mechanism.sample(d, 100, np.random.default_rng(3))
    assert_allclose(first, mechanism.sample(d, 100, np.random.default_rng(3)))


def test_sample_rejects_a_bad_n():
    with pytest.raises(ValueError, match="n must be a positive integer. Found 0"):
        additive_noise.LaplaceMechanism().sample(np.zeros((1, 1)), 0, np.random.default_rng(0))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["laplace", "svt_2", "svt_3", "report_noisy_max_3"])
def test_a_million_samples(name):
    mechanism = make_mechanism(name)
    assert mechanism.sample(mechanism.default_pairs()[0][1], 10**6, np.random.default_rng(0)).shape[0] == 10**6


# ---------------------------------------------------------------- laws


@pytest.mark.parametrize(
    "mechanism",
    [additive_noise.LaplaceMechanism(epsilon=0.5, sensitivity=2.0), additive_noise.GaussianMechanism(sigma=1.5)],
    ids=["laplace", "gaussian"],
)
def test_samples_follow_output_laws(mechanism):
    d, d_prime = np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])
    laws = mechanism.output_laws(d, d_prime)
    rng = np.random.default_rng(1)
    for dataset, law in zip((d, d_prime), laws):
        # KS at n = 20000, fixed seed: a correct sampler gives p >> 1e-3; a wrong scale or location gives p ~ 0.
        assert stats.kstest(mechanism.sample(dataset, 20_000, rng)[:, 0], law.cdf).pvalue > 1e-3
    assert_allclose([law.mean() for law in laws], [1.0, 3.0])


def test_laplace_scale_is_l1_sensitivity_over_epsilon_per_coordinate():
    v = np.array([1.0, 3.0])
    mechanism = additive_noise.LaplaceMechanism(epsilon=2.0, sensitivity=v.tolist())
    d = np.array([[1.0, 2.0], [3.0, -1.0]])
    out = mechanism.sample(d, 200_000, np.random.default_rng(2))
    b = v.sum() / 2.0
    # Mean within 5 SE (SE = sqrt(2) b / sqrt(n)); variance 2 b^2 within 5 SE (Laplace: SE = sqrt(20) b^2 / sqrt(n)).
    assert_allclose(out.mean(axis=0), [4.0, 1.0], atol=5 * np.sqrt(2) * b / np.sqrt(2e5))
    assert_allclose(out.var(axis=0), 2 * b**2, atol=5 * np.sqrt(20) * b**2 / np.sqrt(2e5))
    assert mechanism.output_laws(d, d) is None  # no 1-D law for d = 2


def test_laplace_rejects_records_wider_than_the_sensitivity():
    with pytest.raises(ValueError, match="records have 2 coordinate.*sensitivity has 1"):
        additive_noise.LaplaceMechanism().sample(np.zeros((3, 2)), 5, np.random.default_rng(0))


def test_matrix_mechanism_mean_and_covariance():
    A = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    W = np.array([[1.0, 1.0]])
    mechanism = query_answers.MatrixMechanism(A=A.tolist(), W=W.tolist(), epsilon=0.5)
    x = np.array([3.0, 4.0])
    out = mechanism.sample(x, 200_000, np.random.default_rng(4))[:, 0]
    b = 2.0 / 0.5  # ||A||_1 = 2 (largest column L1 norm)
    R = W @ np.linalg.pinv(A)
    variance = 2 * b**2 * float((R @ R.T)[0, 0])
    # Mean of W A^+ A x = 7 within 5 SE; the variance within 5 SE (kurtosis of a sum of Laplaces <= 6: SE <= sqrt(7/n) var).
    assert_allclose(out.mean(), 7.0, atol=5 * np.sqrt(variance / 2e5))
    assert_allclose(out.var(), variance, atol=5 * np.sqrt(7 / 2e5) * variance)
    d, d_prime = mechanism.default_pairs()[0]
    assert np.sum(np.abs(d_prime - d)) == 1.0


@pytest.mark.parametrize("k", [2, 4])
def test_randomized_response_frequencies(k):
    epsilon, n = 1.0, 100_000
    mechanism = query_answers.RandomizedResponse(epsilon=epsilon, k=k)
    out = mechanism.sample(np.array([1.0]), n, np.random.default_rng(5))[:, 0]
    frequencies = np.bincount(out.astype(int), minlength=k) / n
    expected = np.full(k, 1.0 / (np.exp(epsilon) + k - 1))
    expected[1] *= np.exp(epsilon)
    # Each frequency within 5 binomial SE; the likelihood ratio of the truth vs another value is e^epsilon.
    assert_allclose(frequencies, expected, atol=5 * np.sqrt(0.25 / n))
    assert_allclose(expected[1] / expected[0], np.exp(mechanism.true_epsilon))


@pytest.mark.parametrize("k", [2, 3, 5])
def test_randomized_response_output_laws_match_the_sampler(k):
    # Chi-square goodness of fit of n = 20 000 outputs per input to the law's pmf on its k atoms (expected
    # counts >= 1600), fixed seed, level 1e-3. The other input's law must be rejected at that level: the test
    # has the power to catch a law that puts the truth probability on the wrong value.
    n = 20_000
    mechanism = query_answers.RandomizedResponse(epsilon=1.0, k=k)
    d, d_prime = mechanism.default_pairs()[0]
    laws = mechanism.output_laws(d, d_prime)
    rng = np.random.default_rng(7)
    for dataset, law, other in zip((d, d_prime), laws, laws[::-1]):
        counts = np.bincount(mechanism.sample(dataset, n, rng)[:, 0].astype(int), minlength=k)
        assert counts.size == k
        assert stats.chisquare(counts, n * law.pmf(np.arange(k))).pvalue > 1e-3
        assert stats.chisquare(counts, n * other.pmf(np.arange(k))).pvalue < 1e-3
    # The likelihood ratio of the two laws is at most e^epsilon, attained: epsilon-DP, tight.
    ratio = laws[0].pmf(np.arange(k)) / laws[1].pmf(np.arange(k))
    assert_allclose(ratio.max(), np.exp(mechanism.true_epsilon))


def test_randomized_response_audit_has_exact_values():
    # End to end: run_audit fills the exact column from the output laws. Binary randomized response at
    # epsilon = 1 outputs Ber(1 - t) on 0 and Ber(t) on 1, t = e / (1 + e); a linear witness spans all
    # functions on {0, 1}, so (linear, KL) is KL(Ber(1 - t) || Ber(t)) = (2t - 1) epsilon in both directions.
    from audit import run_audit

    config = {
        "mechanism": {"name": "randomized_response", "params": {"epsilon": 1.0}},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0}],
        "attacks": {"classes": ["linear"], "n_samples": 400},
        "run": {"seed": 0, "n_jobs": 1},
    }
    table = run_audit(config, progress=False).table
    truth = np.e / (1 + np.e)
    assert len(table) == 1  # policy best: one row per claim
    assert_allclose(table["exact"].astype(float), (2 * truth - 1) * 1.0, rtol=1e-9)


def test_randomized_response_rejects_values_outside_the_categories():
    with pytest.raises(ValueError, match="one value in 0..1"):
        query_answers.RandomizedResponse().sample(np.array([2.0]), 3, np.random.default_rng(0))


def test_nonprivate_is_a_point_mass_at_the_sum():
    out = additive_noise.NonPrivateMechanism().sample(np.array([[1.0, 2.0], [3.0, 4.0]]), 50, np.random.default_rng(0))
    assert_allclose(out, np.tile([4.0, 6.0], (50, 1)))


def test_report_noisy_max_released_index_is_within_its_epsilon():
    epsilon, n = 1.0, 200_000
    mechanism = query_answers.ReportNoisyMax(epsilon=epsilon)
    rng = np.random.default_rng(6)
    for d, d_prime in mechanism.default_pairs():
        p = np.bincount(mechanism.sample(d, n, rng)[:, 0].astype(int), minlength=5) / n
        q = np.bincount(mechanism.sample(d_prime, n, rng)[:, 0].astype(int), minlength=5) / n
        seen = (p > 0.02) & (q > 0.02)
        # log p/q <= epsilon up to 5 SE of a log-frequency (SE ~ 1 / sqrt(n p)) on each side.
        slack = 5 * (1 / np.sqrt(n * p[seen]) + 1 / np.sqrt(n * q[seen]))
        assert np.all(np.abs(np.log(p[seen] / q[seen])) <= epsilon + slack)


def first_query_above_probability(answer, threshold, threshold_scale, query_scale):
    """P(answer + Lap(query_scale) >= threshold + Lap(threshold_scale)), by quadrature."""
    integrand = lambda r: stats.laplace.pdf(r, scale=threshold_scale) * stats.laplace.sf(
        threshold + r - answer, scale=query_scale
    )
    return integrate.quad(integrand, -np.inf, 0.0)[0] + integrate.quad(integrand, 0.0, np.inf)[0]


@pytest.mark.parametrize(
    "mechanism,threshold_scale,query_scale",
    [
        (query_answers.SparseVector(epsilon=1.0, threshold=0.5, cutoff=2), 2.0, 8.0),
        (buggy.SVT2(epsilon=1.0, cutoff=2), 4.0, 8.0),
        (buggy.SVT4(epsilon=1.0, cutoff=2), 4.0, 4.0 / 3.0),
        (buggy.SVT6(epsilon=1.0), 2.0, 2.0),
    ],
    ids=["svt_alg1", "svt_2", "svt_4", "svt_6"],
)
def test_sparse_vector_first_answer_and_cutoff(mechanism, threshold_scale, query_scale):
    n, answers = 100_000, np.array([1.0, 0.0, 2.0, 1.0, 0.0, 1.0])
    out = mechanism.sample(answers, n, np.random.default_rng(7))
    expected = first_query_above_probability(1.0, mechanism.threshold, threshold_scale, query_scale)
    # First answer: a Bernoulli frequency within 5 SE of the quadrature.
    assert_allclose(np.mean(out[:, 0] == 1.0), expected, atol=5 * np.sqrt(0.25 / n))
    above_before = np.cumsum(out == 1.0, axis=1) - (out == 1.0)
    if mechanism.cutoff is None:
        assert not np.any(out == -1.0)
    else:
        # Not answered exactly once `cutoff` answers were above.
        assert np.array_equal(out == -1.0, above_before >= mechanism.cutoff)


def test_svt_3_releases_noisy_answers_where_above():
    answers = np.arange(10.0)
    out = buggy.SVT3(cutoff=2).sample(answers, 5000, np.random.default_rng(8))
    flags, values = out[:, :10], out[:, 10:]
    assert np.all(values[flags != 1.0] == 0.0) and np.all(values[flags == 1.0] != 0.0)
    # With a threshold far below every answer the first query is always above and its released
    # value is the answer plus unselected Lap(2c/epsilon) = Lap(40) noise: KS at p > 1e-3.
    out = buggy.SVT3(threshold=-1e6, cutoff=2).sample(answers, 20_000, np.random.default_rng(8))
    assert np.all(out[:, 0] == 1.0) and np.all(out[:, 2:10] == -1.0)
    assert stats.kstest(out[:, 10], stats.laplace(loc=0.0, scale=40.0).cdf).pvalue > 1e-3


def test_svt_5_x_shape_event_has_probability_zero_on_one_side():
    # StatDP's "X shape": q1 > q2 on D, q1 < q2 on D'; without query noise "q1 above, q2 below" never
    # happens on D' but does on D: the privacy loss is infinite (Lyu et al. 2017, Alg. 5).
    mechanism = buggy.SVT5(epsilon=1.0, threshold=0.5)
    d, d_prime = [pair for pair in mechanism.default_pairs() if pair[0][0] != pair[0][-1]][0]
    event = lambda out: np.mean((out[:, 0] == 1.0) & (out[:, -1] == 0.0))
    rng = np.random.default_rng(9)
    assert event(mechanism.sample(d, 20_000, rng)) > 0.05
    assert event(mechanism.sample(d_prime, 20_000, rng)) == 0.0
    assert mechanism.true_epsilon == np.inf


# ---------------------------------------------------------------- the buggy suite's true privacy


@pytest.mark.parametrize(
    "cls,true_epsilon",
    [
        (buggy.NoisyHist1, 0.1),
        (buggy.NoisyHist2, 10.0),
        (buggy.ReportNoisyMax1, 0.1),
        (buggy.ReportNoisyMax2, 0.1),
        (buggy.ReportNoisyMax3, 0.25),
        (buggy.ReportNoisyMax4, np.inf),
        (buggy.SVT1, 0.1),
        (buggy.SVT2, 0.1),
        (buggy.SVT3, None),
        (buggy.SVT4, 0.175),
        (buggy.SVT5, np.inf),
        (buggy.SVT6, None),
        (buggy.LeakyLaplace, np.inf),
    ],
    ids=lambda x: getattr(x, "name", str(x)),
)
def test_documented_true_epsilon_at_defaults(cls, true_epsilon):
    mechanism = cls()
    assert mechanism.true_epsilon == pytest.approx(true_epsilon)
    assert mechanism.true_privacy


@pytest.mark.parametrize("cls,scale", [(buggy.NoisyHist1, 10.0), (buggy.NoisyHist2, 0.1)])
def test_noisy_hist_scale_gives_its_true_epsilon(cls, scale):
    # The privacy loss of a count moved by 1 under Lap(scale) is 1/scale: check the sampler's scale.
    mechanism = cls(epsilon=0.1)
    out = mechanism.sample(np.ones(5), 100_000, np.random.default_rng(10)) - 1.0
    # Mean absolute deviation of Lap(b) is b; its SE is b / sqrt(n): 5 SE.
    assert_allclose(np.abs(out).mean(), scale, atol=5 * scale / np.sqrt(5e5))
    assert mechanism.true_epsilon == pytest.approx(1.0 / scale)


def max_of_laplaces_logpdf(m, answers, scale):
    """log density of max_i (answers_i + Lap(scale)): sum_i f_i prod_{j != i} F_j, in log space."""
    logcdf = stats.laplace.logcdf(m[:, None], loc=answers, scale=scale)
    logpdf = stats.laplace.logpdf(m[:, None], loc=answers, scale=scale)
    return np.logaddexp.reduce(logpdf + logcdf.sum(axis=1, keepdims=True) - logcdf, axis=1)


def test_report_noisy_max_3_value_law_and_its_true_epsilon():
    mechanism = buggy.ReportNoisyMax3()
    scale = 2.0 / mechanism.epsilon
    grid = np.linspace(-400.0, 400.0, 4001)
    losses = [
        np.max(np.abs(max_of_laplaces_logpdf(grid, d, scale) - max_of_laplaces_logpdf(grid, d_prime, scale)))
        for d, d_prime in mechanism.default_pairs()
    ]
    # The sup of the privacy loss over the default pairs is k epsilon / 2, approached in the left tail
    # (grid to -400 = -20 scales: within 1e-6 of the limit).
    assert_allclose(max(losses), mechanism.true_epsilon, rtol=1e-6)
    d = mechanism.default_pairs()[0][0]
    samples = mechanism.sample(d, 20_000, np.random.default_rng(11))[:, 0]
    cdf = lambda m: np.prod(stats.laplace.cdf(np.asarray(m)[..., None], loc=d, scale=scale), axis=-1)
    assert stats.kstest(samples, cdf).pvalue > 1e-3


def test_report_noisy_max_4_value_has_disjoint_support_on_all_below():
    mechanism = buggy.ReportNoisyMax4(epsilon=10.0)
    d, d_prime = next((a, b) for a, b in mechanism.default_pairs() if np.all(b == 0.0))
    rng = np.random.default_rng(12)
    # Exponential noise >= 0: the maximum is >= max(d) = 1 on d, while d' puts mass on [0, 1).
    assert mechanism.sample(d, 10_000, rng).min() >= 1.0
    assert np.mean(mechanism.sample(d_prime, 10_000, rng) < 1.0) > 0.01


def test_leaky_laplace_leaks_with_probability_p():
    mechanism = buggy.LeakyLaplace(p=0.02)
    n = 100_000
    out = mechanism.sample(np.array([[0.0], [3.0]]), n, np.random.default_rng(13))[:, 0]
    # Exactly the true sum 3.0 with probability p (Laplace draws never hit it): 5 binomial SE.
    assert_allclose(np.mean(out == 3.0), 0.02, atol=5 * np.sqrt(0.02 * 0.98 / n))


# ---------------------------------------------------------------- theory bounds


def test_theory_bounds_match_the_reference_values():
    laplace, gaussian = additive_noise.LaplaceMechanism(epsilon=1.0), additive_noise.GaussianMechanism(sigma=1.0)
    # docs/theory.md section 6 reference table (4 significant digits).
    assert theory_bound(laplace.theory_law, "linear", "kl") == pytest.approx(0.2260, abs=5e-5)
    assert theory_bound(laplace.theory_law, "poly1", "kl") == pytest.approx(0.2260, abs=5e-5)
    assert theory_bound(laplace.theory_law, "all", "kl") == pytest.approx(0.3679, abs=5e-5)
    assert theory_bound(laplace.theory_law, "linear", "renyi", 4.0) == pytest.approx(0.7324, abs=5e-5)
    assert theory_bound(laplace.theory_law, "all", "renyi", 4.0) == pytest.approx(0.8137, abs=5e-5)
    assert theory_bound(laplace.theory_law, "threshold", "ipm") == pytest.approx(0.7869, abs=5e-5)
    assert theory_bound(laplace.theory_law, "all", "dp") == 1.0
    assert theory_bound(gaussian.theory_law, "linear", "kl") == pytest.approx(0.5)
    assert theory_bound(gaussian.theory_law, "linear", "renyi", 4.0) == pytest.approx(0.9395, abs=5e-5)
    assert theory_bound(gaussian.theory_law, "all", "renyi", 4.0) == pytest.approx(2.0)
    assert theory_bound(gaussian.theory_law, "threshold", "ipm") == pytest.approx(0.7658, abs=5e-5)
    assert theory_bound(gaussian.theory_law, "all", "dp") is None


def test_theory_bounds_in_d_dimensions_use_scale_one_over_b_and_shift_v():
    v = [1.0, 2.0]
    mechanism = additive_noise.LaplaceMechanism(epsilon=1.5, sensitivity=v)
    assert theory_bound(mechanism.theory_law, "linear", "renyi", 4.0) == pytest.approx(
        bounds.laplace_linear_renyi_bound(0.5, 4.0, v)
    )
    # Corollary 2 states the (lin, Renyi) bound for alpha > 2 only: below, the unrestricted value.
    assert theory_bound(mechanism.theory_law, "linear", "renyi", 2.0) == pytest.approx(bounds.laplace_renyi(0.5, 2.0, v))
    assert theory_bound(mechanism.theory_law, "poly3", "renyi", 2.0) == pytest.approx(bounds.laplace_renyi(0.5, 2.0, v))
    assert theory_bound(mechanism.theory_law, "linear", "kl") == pytest.approx(bounds.laplace_kl(0.5, v))
    # The unrestricted pure-DP loss of the default pair is eps_b ||v||_1 = epsilon.
    assert theory_bound(mechanism.theory_law, "all", "renyi", 1e6) == pytest.approx(1.5, rel=1e-4)


@pytest.mark.parametrize("cls", [query_answers.ReportNoisyMax, buggy.NoisyHist2, buggy.SVT3], ids=lambda cls: cls.name)
def test_default_dp_bound_is_the_true_epsilon(cls):
    mechanism = cls()
    assert theory_bound(mechanism.theory_law, "mlp", "dp") == mechanism.true_epsilon
    assert theory_bound(mechanism.theory_law, "mlp", "kl") is None


def test_matrix_and_nonprivate_bounds():
    matrix = query_answers.MatrixMechanism(A=BUILTIN_PARAMS["matrix"]["A"], epsilon=0.5)
    assert theory_bound(matrix.theory_law, "linear", "renyi", 4.0) == pytest.approx(bounds.matrix_linear_renyi_bound(0.5, 4.0, 3))
    assert theory_bound(matrix.theory_law, "linear", "renyi", 2.0) == theory_bound(matrix.theory_law, "all", "renyi", 2.0)  # not stated
    assert theory_bound(matrix.theory_law, "all", "renyi", 2.0) == pytest.approx(bounds.laplace_renyi(0.25, 2.0, [1.0, 1.0]))
    nonprivate = additive_noise.NonPrivateMechanism()
    assert theory_bound(nonprivate.theory_law, "linear", "kl") == np.inf
    assert theory_bound(nonprivate.theory_law, "threshold", "ipm") == 2.0
    with pytest.raises(ValueError, match="function_class"):
        theory_bound(nonprivate.theory_law, "cubic", "kl")


# ---------------------------------------------------------------- check_output


@pytest.mark.parametrize(
    "out,n,expected_dim,message",
    [
        (np.array([[0.0], [np.nan]]), 2, None, "finite. Found 1 NaN"),
        (np.array([0.0, np.inf]), 2, None, "finite"),
        (np.zeros((3, 1)), 2, None, r"shape \(2, d\)"),
        (np.zeros((2, 1, 1)), 2, None, r"Found shape \(2, 1, 1\)"),
        (np.zeros((2, 3)), 2, 2, "width changed.*d = 2. Found d = 3"),
        (np.array(["a", "b"]), 2, None, "real numbers"),
        (np.array([1j, 2j]), 2, None, "real numbers"),
        (np.array([None, 1.0]), 2, None, "real numbers"),
    ],
)
def test_check_output_rejects(out, n, expected_dim, message):
    with pytest.raises(MechanismError, match=message):
        check_output(out, n, expected_dim)


def test_check_output_reads_1d_as_one_column():
    out = check_output(np.array([True, False, True]), 3, 1)
    assert out.shape == (3, 1) and out.dtype == float


# ---------------------------------------------------------------- registry and user callables


def test_list_mechanisms_has_every_builtin_and_buggy_mechanism():
    infos = {info.name: info for info in list_mechanisms()}
    for cls in builtin.MECHANISMS:
        assert infos[cls.name].kind == "builtin" and infos[cls.name].available
    for cls in buggy.MECHANISMS:
        assert infos[cls.name].kind == "buggy" and infos[cls.name].true_privacy
    assert infos["laplace"].parameters == {"epsilon": 1.0, "sensitivity": 1.0}
    assert infos["matrix"].parameters["A"] == REQUIRED
    assert all(info.availability == "available" or info.availability.startswith("unavailable: ") for info in infos.values())


def test_make_mechanism_builds_with_params():
    mechanism = make_mechanism("laplace", {"epsilon": 0.5})
    assert isinstance(mechanism, BaseMechanism) and mechanism.params == {"epsilon": 0.5, "sensitivity": 1.0}


@pytest.mark.parametrize(
    "name,params,message",
    [
        ("laplase", {}, "unknown mechanism 'laplase'; did you mean 'laplace'\\? accepted names: .*laplace"),
        ("laplace", {"eps": 1.0}, "no parameter.*eps; accepted: epsilon, sensitivity"),
        ("matrix", {}, "'matrix' needs parameter.*A"),
        ("laplace", {"epsilon": -1.0}, "mechanism 'laplace': epsilon must be a finite number > 0. Found -1.0"),
        ("report_noisy_max", {"noise": "gumbel"}, "noise must be 'laplace' or 'exponential'"),
        ("svt_5", {"cutoff": 2}, "no parameter.*cutoff"),
    ],
)
def test_make_mechanism_errors_name_the_problem(name, params, message):
    with pytest.raises(ValueError, match=message):
        make_mechanism(name, params)


def test_make_mechanism_needs_exactly_one_of_name_and_callable():
    with pytest.raises(ValueError, match="exactly one"):
        make_mechanism()
    with pytest.raises(ValueError, match="exactly one"):
        make_mechanism("laplace", callable="numpy:zeros")


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "capaudit_user_mech.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            def shifted(dataset, n, rng, shift=0.0):
                return dataset.sum() + shift + rng.laplace(size=n)

            def broken(dataset, n, rng):
                raise RuntimeError("boom")

            def nan(dataset, n, rng):
                return np.full(n, np.nan)

            def growing(dataset, n, rng, calls=[]):
                calls.append(1)
                return np.zeros((n, len(calls)))
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "capaudit_user_mech"


def test_user_callable_is_wrapped_with_params(user_module):
    mechanism = make_mechanism(callable=f"{user_module}:shifted", params={"shift": 100.0})
    out = mechanism.sample(np.array([[1.0], [2.0]]), 1000, np.random.default_rng(0))
    assert out.shape == (1000, 1) and 90 < out.mean() < 110
    assert mechanism.name == f"{user_module}:shifted" and mechanism.default_pairs() == []


@pytest.mark.parametrize(
    "spec,params,message",
    [
        ("capaudit_no_such_module:f", {}, "cannot import module 'capaudit_no_such_module'"),
        ("numpy", {}, "must be written 'package.module:function'"),
        ("numpy:no_such_function", {}, "has no attribute 'no_such_function'"),
        ("numpy:pi", {}, "is not callable"),
        ("capaudit_user_mech:shifted", {"scale": 2.0}, "does not accept params"),
    ],
)
def test_user_callable_errors_name_the_callable(user_module, spec, params, message):
    with pytest.raises(ValueError, match=message):
        make_mechanism(callable=spec, params=params)


@pytest.mark.parametrize(
    "spec,params,message",
    [
        ("capaudit_user_mech:shifed", {}, "has no attribute 'shifed'. did you mean 'shifted'?"),
        ("capaudit_user_mec:shifted", {}, "cannot import module 'capaudit_user_mec' (ModuleNotFoundError: No module "
         "named 'capaudit_user_mec'). did you mean 'capaudit_user_mech'?"),
        ("capaudit_user_mech:shifted", {"shfit": 2.0}, "accepted after (dataset, n, rng): shift."),
        ("capaudit_user_mech:broken", {"shift": 2.0}, "accepted after (dataset, n, rng): none."),
    ],
)
def test_a_misspelt_callable_or_parameter_gets_a_suggestion(user_module, spec, params, message):
    with pytest.raises(ValueError) as raised:
        make_mechanism(callable=spec, params=params)
    assert message in str(raised.value)


def test_user_callable_failures_become_mechanism_errors(user_module):
    mechanism = make_mechanism(callable=f"{user_module}:broken")
    with pytest.raises(MechanismError, match=f"{user_module}:broken.*raised RuntimeError: boom"):
        mechanism.sample(np.zeros(2), 10, np.random.default_rng(0))


def test_user_callable_structural_outputs_are_encoded(user_module):
    """NaN outputs and a changing width are evidence (audit.sampling.structure): value columns and indicators."""
    nan = make_mechanism(callable=f"{user_module}:nan")
    np.testing.assert_array_equal(nan.sample(np.zeros(2), 3, np.random.default_rng(0)), [[0.0, 1, 1, 0, 0]] * 3)
    growing = make_mechanism(callable=f"{user_module}:growing")
    assert growing.sample(np.zeros(2), 10, np.random.default_rng(0)).shape == (10, 1)  # regular: unchanged
    np.testing.assert_array_equal(growing.sample(np.zeros(2), 2, np.random.default_rng(0)), [[0, 0, 2, 0, 0, 0]] * 2)


def test_sample_coupled_pairs_rows_of_a_vectorised_sampler():
    """A Laplace release from clones of one generator: same noise on every row, so the outputs on
    [0] and [1] differ by exactly the sensitivity, and the generators end in one state."""
    mechanism = make_mechanism("laplace", {"epsilon": 1.0})
    (p, q), same = sample_coupled(mechanism, [np.array([0.0]), np.array([1.0])], 50, 7)
    assert same
    assert_allclose(q - p, 1.0)


def test_sample_coupled_reports_input_dependent_randomness():
    """A sampler that draws one extra number on some inputs cannot have its rows paired."""
    mechanism = CallableMechanism(
        "uneven", lambda dataset, n, rng: rng.normal(size=(n, 1)) + (rng.random() if dataset[0] > 0 else 0.0)
    )
    _, same = sample_coupled(mechanism, [np.array([0.0]), np.array([1.0])], 10, 7)
    assert not same


@pytest.mark.parametrize("out", [np.zeros(1), [[0.0], [0.0, 1.0], [2.0]]])
def test_a_wrong_number_of_outputs_is_said_in_the_users_terms(out):
    """The mechanism's own argument n, not the audit's internal sample sizes ("the 2 samples asked for")."""
    from audit.sampling.errors import MechanismError
    from audit.sampling.structure import output_rows

    with pytest.raises(MechanismError) as raised:
        output_rows(out, 2)
    assert "a call with n = 2 must return" in str(raised.value) and "samples asked for" not in str(raised.value)
