"""audit.theory.tradeoff against independent values: likelihood-ratio tests and hockey-stick integrals by quadrature."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate, optimize, stats

from audit.theory import tradeoff as T

LEVELS = np.array([0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9])


def neyman_pearson(a: float, p, q) -> float:
    """Type-II error of the likelihood-ratio test at type-I error a, by root finding on the ratio's threshold.

    Both laws here have a likelihood ratio q / p monotone in x (Q to the right), so the
    test rejects P on {x > t} with P(X > t) = a; t is found by brentq, not by p.isf.
    """
    def tail(x):
        return integrate.quad(p.pdf, x, 40.0, points=[0.0], limit=200)[0] if x < 0 else \
            integrate.quad(p.pdf, x, x + 40.0, limit=200)[0]

    t = optimize.brentq(lambda x: tail(x) - a, -30.0, 30.0, xtol=1e-13)
    return integrate.quad(q.pdf, -40.0, t, points=[0.0] if -40 < 0 < t else None, limit=200)[0]


def hockey_stick(epsilon: float, p, q) -> float:
    """sup_S P(S) - e^eps Q(S) = integral of (p - e^eps q)_+ by quadrature."""
    value, _ = integrate.quad(lambda x: max(p.pdf(x) - math.exp(epsilon) * q.pdf(x), 0.0), -40, 40,
                              points=[-1.0, 0.0, 0.5, 1.0, 2.0], limit=400, epsabs=1e-15)
    return value


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_gaussian_tradeoff_is_the_likelihood_ratio_test(mu):
    p, q = stats.norm(0, 1), stats.norm(mu, 1)
    expected = [neyman_pearson(a, p, q) for a in LEVELS]
    assert_allclose(T.gaussian_tradeoff(LEVELS, mu), expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
def test_laplace_tradeoff_is_the_likelihood_ratio_test(epsilon):
    p, q = stats.laplace(0, 1), stats.laplace(epsilon, 1)
    expected = [neyman_pearson(a, p, q) for a in LEVELS]
    assert_allclose(T.laplace_tradeoff(LEVELS, epsilon), expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0, 3.0])
def test_gaussian_profile_is_the_hockey_stick_divergence(mu, epsilon):
    expected = hockey_stick(epsilon, stats.norm(0, 1), stats.norm(mu, 1))
    assert_allclose(T.gaussian_profile(epsilon, mu), expected, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("epsilon0", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.25, 0.9, 2.5])
def test_laplace_profile_is_the_hockey_stick_divergence(epsilon0, epsilon):
    expected = hockey_stick(epsilon, stats.laplace(0, 1), stats.laplace(epsilon0, 1))
    assert_allclose(T.laplace_profile(epsilon, epsilon0), expected, rtol=1e-6, atol=1e-10)


def test_gdp_is_the_supremum_of_its_profile_curves():
    """DRS Prop. 2.12 / Cor. 2.13: G_mu is the pointwise sup over epsilon of f_{eps, delta(eps)}."""
    mu, epsilons = 1.0, np.linspace(0.0, 8.0, 4001)
    implied = T.profile_tradeoff(LEVELS, epsilons, T.gaussian_profile(epsilons, mu))
    assert_allclose(implied, T.gaussian_tradeoff(LEVELS, mu), atol=2e-4)  # the epsilon grid's step
    assert np.all(implied <= T.gaussian_tradeoff(LEVELS, mu) + 1e-12)


def test_dp_tradeoff_of_randomised_response():
    """eps-DP randomised response: P = Bern(e^eps / (1 + e^eps)), Q the mirror; its curve is f_{eps, 0} exactly."""
    epsilon = 1.0
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))
    # tests: reject P on {0} with prob r: a = r (1 - keep), b = 1 - r keep, then also on {1}
    a = np.array([0.1, 1 - keep, 0.5])
    b = np.where(a <= 1 - keep, 1 - a / (1 - keep) * keep, (1 - keep) * (1 - (a - (1 - keep)) / keep))
    assert_allclose(T.dp_tradeoff(a, epsilon), b, rtol=1e-12)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_gaussian_zcdp_is_its_renyi_divergence_over_alpha(sigma):
    """rho alpha equals the Gaussian's Renyi divergence alpha / (2 sigma^2) (integrated numerically) at every order."""
    p, q = stats.norm(0, sigma), stats.norm(1, sigma)
    for alpha in (1.5, 2.0, 5.0):
        integral, _ = integrate.quad(lambda x: math.exp(alpha * p.logpdf(x) + (1 - alpha) * q.logpdf(x)),
                                     -20.0 * sigma, 20.0 * sigma, limit=200)
        renyi = math.log(integral) / (alpha - 1)
        assert_allclose(T.zcdp_renyi_bound(T.gaussian_zcdp(sigma), alpha), renyi, rtol=1e-7)
    assert T.gaussian_gdp(sigma) == pytest.approx(1 / sigma)
    assert T.gdp_to_zcdp(T.gaussian_gdp(sigma)) == pytest.approx(T.gaussian_zcdp(sigma))


@pytest.mark.parametrize("delta", [1e-5, 1e-3, 0.05])
def test_zcdp_to_dp_covers_the_gaussian_profile(delta):
    """BS Prop. 1.3 is a valid conversion: the Gaussian's true delta at the converted epsilon is at most delta."""
    rho = 0.5
    epsilon = T.zcdp_to_dp(rho, delta)
    assert epsilon == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)))
    assert T.gaussian_profile(epsilon, math.sqrt(2 * rho)) <= delta


@pytest.mark.parametrize("laws", [(stats.norm(0, 1), stats.norm(1, 1)), (stats.laplace(0, 2), stats.laplace(1, 2))])
def test_linear_class_curve_is_exact_for_monotone_ratios(laws):
    p, q = laws
    exact = T.exact_tradeoff(LEVELS, p, q)
    assert_allclose(T.linear_tradeoff(LEVELS, p, q), exact, rtol=1e-9, atol=1e-12)
    assert_allclose(T.exact_tradeoff(LEVELS, q, p), exact, rtol=1e-9, atol=1e-12)  # both curves are symmetric


def test_linear_class_curve_lies_above_the_exact_curve_of_a_scale_pair():
    """N(0, 1) against N(0, 2): no threshold separates them, the likelihood-ratio test (|x| large) does better."""
    p, q = stats.norm(0, 1), stats.norm(0, 2)
    a = np.array([0.05, 0.2])
    two_sided = q.cdf(p.isf(a / 2)) - q.cdf(-p.isf(a / 2))  # reject P on {|x| > t}: the Neyman-Pearson test
    assert np.all(T.linear_tradeoff(a, p, q) > two_sided + 0.01)
    assert T.exact_tradeoff(a, p, q) is None


@pytest.mark.parametrize("law", [stats.norm, stats.laplace])
def test_no_exact_curve_for_a_law_at_an_infinite_record(law):
    """A search probe's infinite record puts one law's location at inf: no finite closed form, no error."""
    assert T.exact_tradeoff(LEVELS, law(0.0, 1.0), law(math.inf, 1.0)) is None


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="levels"):
        T.gaussian_tradeoff(1.5, 1.0)
    with pytest.raises(ValueError, match="mu"):
        T.gaussian_profile(1.0, 0.0)
    with pytest.raises(ValueError, match="delta"):
        T.zcdp_to_dp(0.5, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        T.zcdp_renyi_bound(0.5, 1.0)


def test_zcdp_tradeoff_lies_between_the_conversion_and_the_gaussian():
    """rho-zCDP's implied curve: the Gaussian (exactly 0.5-zCDP) must meet it, so it lies below G_1; it is at least
    as tight as Bun and Steinke's (epsilon, delta) conversion; its points meet the Renyi bounds they came from."""
    rho, a = 0.5, np.linspace(0.0, 1.0, 41)
    implied = T.zcdp_tradeoff(a, rho)
    assert np.all(implied <= T.gaussian_tradeoff(a, 1.0) + 1e-9)
    deltas = np.logspace(-8, -0.01, 200)
    converted = T.profile_tradeoff(a, [T.zcdp_to_dp(rho, d) for d in deltas], deltas)
    assert np.all(implied >= converted - 1e-9) and np.max(implied - converted) > 0.2
    for x, y in zip(a[1:-1], implied[1:-1]):  # D_2 of the two-point laws at most 2 rho (2 lies between grid orders)
        d2 = math.log(x ** 2 / (1 - y) + (1 - x) ** 2 / y)
        assert d2 <= 2 * rho + 1e-3


@pytest.mark.parametrize("name, params, expected", [
    ("laplace", {"epsilon": 0.7}, lambda a: T.laplace_tradeoff(a, 0.7)),
    ("gaussian", {"sigma": 2.0}, lambda a: T.gaussian_tradeoff(a, 0.5)),
])
def test_exact_curves_of_the_built_in_mechanisms(name, params, expected):
    """The built-ins' output laws at their default pair (sums 0 and 1) give the closed forms, both directions."""
    from audit.mechanisms import make_mechanism

    mechanism = make_mechanism(name, params)
    laws = mechanism.output_laws(*mechanism.default_pairs()[0])
    for p, q in (laws, laws[::-1]):
        assert_allclose(T.exact_tradeoff(LEVELS, p, q), expected(LEVELS), rtol=1e-9, atol=1e-12)
        assert_allclose(T.linear_tradeoff(LEVELS, p, q), expected(LEVELS), rtol=1e-7, atol=1e-10)
