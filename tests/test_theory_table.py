"""audit.theory.table: one (law, class, divergence) -> bound table, read by audits and `capaudit theory`."""

import math

import numpy as np
import pytest

from attacks.vocabulary import MEMBERS, Renyi
from audit.theory import bounds
from audit.theory.table import (
    ANY,
    TABLE,
    FloatLaplace,
    GaussianShift,
    LaplaceShift,
    LeakedValue,
    MatrixLaplace,
    PointMasses,
    PureDP,
    SubsampledGaussianSteps,
    exact_closed_form,
    lookup,
    published,
    theory_bound,
)

LAPLACE = LaplaceShift(1.0, (1.0,))
GAUSSIAN = GaussianShift(1.0, (1.0,))


def test_every_entry_is_a_closed_form_upper_bound_or_heuristic_with_a_source():
    for (law_type, class_key, divergence), entry in TABLE.items():
        assert divergence in MEMBERS.values(), (law_type, class_key)
        assert entry.kind in ("closed form", "upper bound", "heuristic")
        assert entry.source


@pytest.mark.parametrize(
    ("law", "function_class", "divergence", "alpha", "reference"),
    [
        # docs/theory.md section 6 reference table (4 significant digits).
        (LAPLACE, "linear", "kl", None, 0.2260),
        (LAPLACE, "poly3", "kl", None, 0.3679),
        (LAPLACE, "linear", "renyi", 4.0, 0.7324),
        (LAPLACE, "all", "renyi", 4.0, 0.8137),
        (LAPLACE, "threshold", "ipm", None, 0.7869),
        (GAUSSIAN, "linear", "renyi", 4.0, 0.9395),
        (GAUSSIAN, "threshold", "ipm", None, 0.7658),
    ],
)
def test_reference_values(law, function_class, divergence, alpha, reference):
    assert theory_bound(law, function_class, divergence, alpha) == pytest.approx(reference, abs=5e-5)


def test_unstated_entries_fall_back_to_the_unrestricted_value():
    # Corollary 2 states (lin, Renyi) for alpha > 2 only; Thm 9's (lin, KL) is 1-D.
    assert lookup(LAPLACE, "linear", "renyi", 2.0).source == "Renyi DP, CBDP Thm 11"
    assert theory_bound(LAPLACE, "linear", "renyi", 2.0) == pytest.approx(bounds.laplace_renyi(1.0, 2.0))
    assert published(LAPLACE, "linear", "renyi").value(LAPLACE, 2.0) == pytest.approx(
        bounds.laplace_linear_renyi_bound(1.0, 2.0))
    two = LaplaceShift(2.0, (1.0, 2.0))
    assert theory_bound(two, "linear", "kl") == pytest.approx(bounds.laplace_kl(0.5, [1.0, 2.0]))
    assert theory_bound(two, "threshold", "ipm") is None  # 2 TV is 1-D only


def test_dp_is_the_pure_epsilon_where_known():
    assert theory_bound(LaplaceShift(2.0, (1.0, 3.0)), "mlp", "dp") == pytest.approx(2.0)
    assert theory_bound(GAUSSIAN, "all", "dp") is None
    assert theory_bound(PureDP(0.7), "tree3", "dp") == 0.7
    assert theory_bound(PureDP(0.7), "tree3", "kl") is None
    assert theory_bound(MatrixLaplace(0.5, ((1.0, 0.0), (1.0, 1.0))), "linear", "dp") == 0.5


def test_float_laplace_is_unbounded_for_the_representation_classes_only():
    law = FloatLaplace(10.0, (1.0,))
    for function_class in ("atoms", "floatbits"):
        assert theory_bound(law, function_class, "dp") == math.inf
        assert theory_bound(law, function_class, "ipm") is None  # the float law's IPM: no closed form
    assert theory_bound(law, "linear", "kl") == theory_bound(LaplaceShift(10.0, (1.0,)), "linear", "kl")
    assert theory_bound(law, "threshold", "dp") == pytest.approx(0.1)


def test_point_masses_and_leaks():
    for divergence, alpha in (("kl", None), ("renyi", 3.0), ("dp", None)):
        assert theory_bound(PointMasses(), "linear", divergence, alpha) == math.inf  # CBDP Lemma 2
        assert theory_bound(LeakedValue(0.01), "poly2", divergence, alpha) == math.inf
    assert theory_bound(PointMasses(), "threshold", "ipm") == 2.0
    assert theory_bound(LeakedValue(0.01), "threshold", "ipm") is None


def test_matrix_mechanism_is_the_noisy_release_worst_column():
    law = MatrixLaplace(0.5, ((1.0, 0.0), (1.0, 1.0), (0.0, 1.0)))  # ||A||_1 = 2, s = 3
    assert theory_bound(law, "linear", "renyi", 4.0) == pytest.approx(bounds.matrix_linear_renyi_bound(0.5, 4.0, 3))
    assert theory_bound(law, "linear", "renyi", 2.0) == pytest.approx(bounds.laplace_renyi(0.25, 2.0, [1.0, 1.0]))
    assert theory_bound(law, "poly2", "kl") == pytest.approx(bounds.laplace_kl(0.25, [1.0, 1.0]))


def test_no_law_and_bad_classes():
    assert theory_bound(None, "linear", "kl") is None
    with pytest.raises(ValueError, match="function_class"):
        theory_bound(LAPLACE, "cubic", "kl")


def test_the_any_key_covers_every_class():
    assert lookup(GAUSSIAN, "tree3", "renyi", 3.0) is TABLE[(GaussianShift, ANY, Renyi)]
    assert np.isclose(theory_bound(GAUSSIAN, "mlp", "renyi", 3.0), 1.5)


def test_exact_closed_forms_are_the_exact_entries_only():
    assert exact_closed_form(GaussianShift(1.0, (1.0, 1.0)), "linear", "kl") == pytest.approx(1.0)  # Thm 10, d = 2
    assert exact_closed_form(LAPLACE, "linear", "kl") == pytest.approx(0.2260, abs=5e-5)
    assert exact_closed_form(LAPLACE, "linear", "renyi", 4.0) is None  # Table 1: an upper bound
    assert exact_closed_form(PureDP(1.0), "linear", "dp") is None
    assert exact_closed_form(None, "linear", "kl") is None


def test_dp_sgd_last_iterate_heuristic_for_linear_beside_composition_for_every_class():
    # Steinke et al. (ICLR 2025): 1.955 for the last iterate against 4.618 for composition (PLD), T = 1000,
    # q = 0.01, sigma = 0.7, delta = 1e-5 (issue 35); the PLD value to its discretization (1e-4 per step's loss).
    pytest.importorskip("dp_accounting")
    law = SubsampledGaussianSteps(1000, 0.01, 0.7, 1e-5)
    assert lookup(law, "linear", "dp").kind == "heuristic"
    assert theory_bound(law, "linear", "dp") == pytest.approx(1.955, abs=5e-4)
    assert theory_bound(law, "all", "dp") == pytest.approx(4.618, abs=5e-3)
    assert lookup(law, "poly2", "dp") is lookup(law, "all", "dp")  # no heuristic beyond linear
    # an audit reads the law at its task's delta: a smaller delta, a larger epsilon
    assert theory_bound(law, "linear", "dp", delta=1e-6) > theory_bound(law, "linear", "dp") + 0.1
    assert theory_bound(law, "linear", "kl") is None
