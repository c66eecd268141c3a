"""Closed forms of audit.theory.bounds against docs/theory.md section 6 and independent evaluations."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate, stats

from audit.theory import bounds

# docs/theory.md's reference table is given to 4 significant digits.
REFERENCE_RTOL = 1e-3


@pytest.mark.parametrize(
    ("value", "reference"),
    [
        (lambda: bounds.laplace_kl(1.0), 0.3679),
        (lambda: bounds.laplace_linear_kl(1.0), 0.2260),
        (lambda: bounds.gaussian_kl(1.0), 0.5),
        (lambda: bounds.gaussian_linear_kl(1.0), 0.5),
        (lambda: bounds.laplace_renyi(1.0, 2.0), 0.6191),
        (lambda: bounds.laplace_renyi(1.0, 4.0), 0.8137),
        (lambda: bounds.gaussian_renyi(1.0, 2.0), 1.0),
        (lambda: bounds.gaussian_renyi(1.0, 4.0), 2.0),
        (lambda: bounds.laplace_linear_renyi_bound(1.0, 4.0), 0.7324),
        (lambda: bounds.gaussian_linear_renyi_bound(1.0, 4.0), 0.9395),
    ],
)
def test_reference_table(value, reference):
    assert_allclose(value(), reference, rtol=REFERENCE_RTOL)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 7.0])
def test_laplace_renyi_matches_quadrature(epsilon, alpha):
    # p^alpha q^(1 - alpha) for P = Lap(0, 1/eps), Q = Lap(1, 1/eps), written out.
    integrand = lambda x: epsilon / 2 * np.exp(-epsilon * (alpha * abs(x) + (1 - alpha) * abs(x - 1)))  # noqa: E731
    integral = sum(
        integrate.quad(integrand, a, b)[0]
        for a, b in [(-np.inf, 0.0), (0.0, 1.0), (1.0, np.inf)]
    )
    assert_allclose(bounds.laplace_renyi(epsilon, alpha), np.log(integral) / (alpha - 1), rtol=1e-8)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_laplace_kl_matches_quadrature(epsilon):
    p, q = stats.laplace(0, 1 / epsilon), stats.laplace(1, 1 / epsilon)
    integrand = lambda x: p.pdf(x) * epsilon * (abs(x - 1) - abs(x))  # noqa: E731
    kl = sum(integrate.quad(integrand, a, b)[0] for a, b in [(-np.inf, 0.0), (0.0, 1.0), (1.0, np.inf)])
    assert_allclose(bounds.laplace_kl(epsilon), kl, rtol=1e-8)


def test_renyi_tends_to_kl_as_alpha_tends_to_one():
    assert_allclose(bounds.laplace_renyi(0.7, 1 + 1e-7), bounds.laplace_kl(0.7), rtol=1e-5)
    assert_allclose(bounds.gaussian_renyi(0.7, 1 + 1e-7), bounds.gaussian_kl(0.7), rtol=1e-5)


def test_laplace_renyi_tends_to_pure_dp_epsilon():
    # The alpha -> infinity limit of Renyi DP is pure epsilon-DP; no overflow on the way.
    assert_allclose(bounds.laplace_renyi(2.0, 1e6), 2.0, rtol=1e-5)


def test_small_epsilon_is_not_cancelled():
    # Leading terms: KL ~ eps^2 / 2, (lin, KL) ~ eps^2 / 4 (Taylor expansion of Theorem 9).
    assert_allclose(bounds.laplace_kl(1e-6), 0.5e-12, rtol=1e-5)
    assert_allclose(bounds.laplace_linear_kl(1e-6), 0.25e-12, rtol=1e-5)


def test_vector_sensitivity_sums_over_coordinates():
    v = np.array([0.5, 2.0])
    assert_allclose(bounds.laplace_kl(1.3, v), bounds.laplace_kl(0.65) + bounds.laplace_kl(2.6))
    assert_allclose(bounds.laplace_renyi(1.3, 3.0, v), bounds.laplace_renyi(0.65, 3.0) + bounds.laplace_renyi(2.6, 3.0))
    assert_allclose(bounds.gaussian_kl(2.0, v), (0.25 + 4.0) / 8.0)
    assert_allclose(bounds.gaussian_renyi(2.0, 3.0, v), 3.0 * (0.25 + 4.0) / 8.0)


@pytest.mark.parametrize("alpha", [1.5, 4.0, 10.0])
def test_d_dimensional_table_bounds_as_published(alpha):
    v = np.array([1.0, 0.5, 2.0])
    norm = np.sum(v**alpha) ** (1 / alpha)
    laplace = np.log(1 + 2 ** (3 * (alpha - 1)) * (0.8 * norm) ** alpha) / (alpha - 1)
    gaussian = np.log(1 + 2 ** (3 * (alpha - 1)) * np.sqrt(np.pi / 2) ** (alpha - 1) * norm**alpha / 1.5**alpha) / (
        alpha - 1
    )
    assert_allclose(bounds.laplace_linear_renyi_bound(0.8, alpha, v), laplace, rtol=1e-12)
    assert_allclose(bounds.gaussian_linear_renyi_bound(1.5, alpha, v), gaussian, rtol=1e-12)
    # d = 1 reduces to CBDP Table 1's one-dimensional formulas.
    assert_allclose(
        bounds.gaussian_linear_renyi_bound(1.5, alpha),
        np.log(1 + np.sqrt(2 * np.pi) ** (alpha - 1) / 1.5**alpha) / (alpha - 1),
        rtol=1e-12,
    )
    assert_allclose(
        bounds.matrix_linear_renyi_bound(0.8, alpha, 3), np.log(1 + 2 ** (3 * (alpha - 1)) * 0.8**alpha) / (alpha - 1)
    )


def test_corollary_2_states_the_linear_renyi_bounds_above_alpha_2_only():
    assert bounds.linear_renyi_bound_stated(2.0001) and bounds.linear_renyi_bound_stated(4.0)
    assert not bounds.linear_renyi_bound_stated(2.0) and not bounds.linear_renyi_bound_stated(1.5)
    with pytest.raises(ValueError, match="alpha"):
        bounds.linear_renyi_bound_stated(1.0)


@pytest.mark.parametrize("alpha", [1.1, 2.0, 4.0, 50.0])
@pytest.mark.parametrize("epsilon, v", [(1.0, 1.0), (0.2, [1.0, 1.0]), (3.0, [1.0, 0.5, 2.0])])
def test_table_one_laplace_renyi_lower_bound(epsilon, v, alpha):
    # CBDP Table 1: Renyi DP of Laplace >= epsilon ||v||_1 - d log 2 / (alpha - 1), below the exact value.
    d = np.size(v)
    lower = bounds.laplace_renyi_lower_bound(epsilon, alpha, v)
    assert_allclose(lower, epsilon * np.sum(v) - d * np.log(2) / (alpha - 1), rtol=1e-12)
    assert lower <= bounds.laplace_renyi(epsilon, alpha, v)
    # Tight as alpha grows: the exact value tends to epsilon ||v||_1 (the pure-DP loss), as does the bound.
    if alpha == 50.0:
        assert bounds.laplace_renyi(epsilon, alpha, v) - lower < 2 * d * np.log(2) / (alpha - 1)


def test_bounds_do_not_overflow_at_large_alpha():
    # log(1 + 2^{a-1} e^a) / (a - 1) -> log 2 + log e as a -> infinity.
    assert_allclose(bounds.laplace_linear_renyi_bound(3.0, 1e5), np.log(2) + np.log(3.0), rtol=1e-4)
    assert np.isfinite(bounds.gaussian_linear_renyi_bound(0.01, 1e5))
    assert np.isfinite(bounds.matrix_linear_renyi_bound(5.0, 1e5, 50))


def test_properties():
    assert bounds.non_private_release() == np.inf
    assert bounds.sequential_composition(0.5, 0.25, 1.0) == 1.75
    assert bounds.parallel_composition(0.5, 0.25, 1.0) == 1.0
    assert bounds.sequential_composition(0.5, np.inf) == np.inf
    assert_allclose(bounds.pinsker_ipm_bound(0.25), 4.0)
    assert_allclose(bounds.generalization_bound(0.04), 1.6)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: bounds.laplace_kl(0.0), "epsilon"),
        (lambda: bounds.laplace_kl(-1.0), "epsilon"),
        (lambda: bounds.laplace_linear_kl(np.nan), "epsilon"),
        (lambda: bounds.gaussian_kl(0.0), "sigma"),
        (lambda: bounds.gaussian_renyi(1.0, 1.0), "alpha"),
        (lambda: bounds.laplace_renyi(1.0, 0.5), "alpha"),
        (lambda: bounds.laplace_linear_renyi_bound(1.0, None), "alpha"),
        (lambda: bounds.laplace_renyi_lower_bound(0.0, 2.0), "epsilon"),
        (lambda: bounds.laplace_kl(1.0, [[1.0, 2.0]]), "sensitivity"),
        (lambda: bounds.gaussian_kl(1.0, [np.inf]), "sensitivity"),
        (lambda: bounds.matrix_linear_renyi_bound(1.0, 2.0, 0), "s "),
        (lambda: bounds.matrix_linear_renyi_bound(1.0, 2.0, 1.5), "s "),
        (lambda: bounds.sequential_composition(), "at least one"),
        (lambda: bounds.parallel_composition(1.0, -0.1), "epsilon"),
        (lambda: bounds.pinsker_ipm_bound(-1.0), "kl"),
        (lambda: bounds.generalization_bound("a"), "epsilon"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "Found" in str(info.value)


@pytest.mark.parametrize("epsilon", [0.3, 0.9, 1.0, 2.0, 5.0, 50.0])
def test_laplace_linear_kl_branches_agree_with_the_published_form(epsilon):
    """Both branches (r < 1/2 and r >= 1/2) against CBDP Theorem 9 as printed, where it is accurate."""
    root = np.sqrt(1.0 + epsilon**2)
    published = root - 1.0 + np.log(1.0 - (root - 1.0) ** 2 / epsilon**2)
    assert_allclose(bounds.laplace_linear_kl(epsilon), published, rtol=1e-12)


@pytest.mark.parametrize("epsilon", [1e8, 1e154, 1e200, 1e308, np.finfo(float).max])
def test_laplace_linear_kl_is_finite_up_to_the_largest_float(epsilon):
    """For large epsilon the value is epsilon - 1 - log(epsilon / 2) + O(1 / epsilon) (r -> 1)."""
    value = bounds.laplace_linear_kl(epsilon)
    assert np.isfinite(value)
    assert_allclose(value, epsilon - 1.0 - np.log(epsilon / 2.0), rtol=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda: bounds.laplace_kl(True),
        lambda: bounds.laplace_kl("1"),
        lambda: bounds.gaussian_kl(1.0, {}),
        lambda: bounds.laplace_kl(1.0, [1.0, True]),
        lambda: bounds.sequential_composition(True),
    ],
)
def test_bools_strings_and_tables_are_not_numbers(call):
    with pytest.raises(ValueError, match="Found"):
        call()
