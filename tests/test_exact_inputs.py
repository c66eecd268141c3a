"""audit.theory.exact refuses laws its float64 quadrature cannot resolve: a ValueError (the exact value is unknown), never
an IndexError, a wrong value or a crash of the process."""

import pytest
from numpy.testing import assert_allclose
from scipy import stats

from audit.theory import bounds
from audit.theory.exact import restricted_divergence


@pytest.mark.parametrize(
    ("p", "q"),
    [
        (stats.laplace(1e308, 1), stats.laplace(-1e308, 1)),  # was IndexError in the quadrature rule
        (stats.laplace(0, 1e300), stats.laplace(1, 1e300)),  # bulks beyond 1e100
        (stats.laplace(0, 1e-300), stats.laplace(1, 1e-300)),  # narrower than the grid resolves
        (stats.laplace(0, 0.01), stats.laplace(1, 0.01)),  # epsilon = 100: wrong values before (KL over all: inf)
    ],
)
@pytest.mark.parametrize(("function_class", "divergence"), [("linear", "kl"), ("all", "kl"), ("threshold", "ipm")])
def test_unresolvable_laws_are_a_value_error(p, q, function_class, divergence):
    with pytest.raises(ValueError, match="no exact value"):
        restricted_divergence(p, q, function_class, divergence)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # scipy's line search on the infinite integrand
def test_an_underflowing_renyi_integrand_is_a_value_error():
    """Laplace at epsilon = 20, Renyi over all at alpha = 4 crashed the process (quad on a NaN integrand)."""
    with pytest.raises(ValueError, match="no exact value"):
        restricted_divergence(stats.laplace(0, 0.05), stats.laplace(1, 0.05), "all", "renyi", alpha=4.0)


@pytest.mark.parametrize("epsilon", [1.0, 20.0, 40.0])
def test_resolvable_laws_still_match_the_closed_forms(epsilon):
    p, q = stats.laplace(0, 1 / epsilon), stats.laplace(1, 1 / epsilon)
    assert_allclose(restricted_divergence(p, q, "all", "kl"), bounds.laplace_kl(epsilon), rtol=1e-6)
    assert_allclose(restricted_divergence(p, q, "linear", "kl"), bounds.laplace_linear_kl(epsilon), rtol=1e-6)
