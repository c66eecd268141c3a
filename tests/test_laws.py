"""audit.theory.laws: the built-in mechanisms' Laplace and Gaussian laws compute what scipy.stats' laws compute, and
the exact values read from them are scipy's to float precision (issue 33: an audit of the built-ins without
scipy.stats)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats

from audit.theory import bounds
from audit.theory.exact import restricted_divergence
from audit.theory.laws import Laplace, Normal, family_name
from audit.theory.tradeoff import exact_tradeoff, laplace_tradeoff

X = np.concatenate([np.linspace(-40.0, 40.0, 4001), [-np.inf, np.inf, np.nan, -1e300, 1e300]])
U = np.concatenate([np.linspace(0.0, 1.0, 1001), [1e-300, 1 - 1e-16, -0.5, 1.5, np.nan]])
PAIRS = [(Laplace(0.3, 1.7), stats.laplace(loc=0.3, scale=1.7)), (Normal(-1.2, 0.4), stats.norm(loc=-1.2, scale=0.4))]


@pytest.mark.parametrize(("ours", "scipy_law"), PAIRS, ids=["laplace", "norm"])
def test_the_laws_compute_what_scipy_computes(ours, scipy_law):
    """CDF, survival function, their inverses (nan outside [0, 1]) and the moments are scipy's bit for bit; the
    densities agree to a few ulps where scipy's are positive (scipy's Laplace log density is the log of the
    density, -inf where it underflows; ours is log(1/2) - |z|, finite)."""
    with np.errstate(all="ignore"):
        for method, points in (("cdf", X), ("sf", X), ("ppf", U), ("isf", U)):
            assert_array_equal(getattr(ours, method)(points), getattr(scipy_law, method)(points), err_msg=method)
        for method in ("logpdf", "pdf"):
            theirs = getattr(scipy_law, method)(X)
            finite = np.isfinite(theirs) & (theirs != 0)
            assert_allclose(getattr(ours, method)(X)[finite], theirs[finite], rtol=1e-13, atol=0, err_msg=method)
    assert (ours.median(), ours.mean(), ours.std(), ours.support()) == (
        scipy_law.median(), scipy_law.mean(), scipy_law.std(), scipy_law.support())
    assert isinstance(ours.cdf(0.1), np.float64) and family_name(ours) == family_name(scipy_law)
    assert_array_equal(ours.rvs(5, random_state=np.random.default_rng(4)),
                       scipy_law.rvs(5, random_state=np.random.default_rng(4)))


@pytest.mark.parametrize(("function_class", "divergence", "alpha"), [
    ("linear", "kl", None), ("poly2", "kl", None), ("all", "kl", None),
    ("linear", "renyi", 2.0), ("poly2", "renyi", 4.0), ("threshold", "ipm", None), ("all", "ipm", None),
])
@pytest.mark.parametrize(("law", "scipy_law", "scale"), [
    (Laplace, stats.laplace, 1.0), (Laplace, stats.laplace, 10.0), (Normal, stats.norm, 1.5),
])
def test_exact_values_match_those_of_scipy_laws(law, scipy_law, scale, function_class, divergence, alpha):
    """The same quadrature on either law: equal up to the solvers' float noise (the Laplace log density's last
    bits differ, and the iterative Renyi solver amplifies them to about 1e-13 at epsilon = 0.1)."""
    ours = restricted_divergence(law(0.0, scale), law(1.0, scale), function_class, divergence, alpha)
    theirs = restricted_divergence(scipy_law(loc=0.0, scale=scale), scipy_law(loc=1.0, scale=scale),
                                   function_class, divergence, alpha)
    assert ours == pytest.approx(theirs, rel=1e-11)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_log_density_that_does_not_underflow_resolves_far_tails():
    """Laplace at epsilon = 20, Renyi over all at alpha = 4: scipy's log density underflows to -inf in the bulk of
    the other law (no exact value, tests/test_exact_inputs.py); ours gives the closed form."""
    value = restricted_divergence(Laplace(0.0, 0.05), Laplace(1.0, 0.05), "all", "renyi", alpha=4.0)
    assert value == pytest.approx(bounds.laplace_renyi(20.0, 4.0), rel=1e-12)


def test_the_trade_off_curve_reads_the_laws():
    levels = np.linspace(0.0, 1.0, 11)
    assert_allclose(exact_tradeoff(levels, Laplace(0.0, 0.5), Laplace(1.0, 0.5)), laplace_tradeoff(levels, 2.0))


def test_a_scale_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="finite scale > 0. Found laplace"):
        Laplace(0.0, 0.0)
