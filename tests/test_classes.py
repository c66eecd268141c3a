"""Function class names and containment (docs/theory.md section 3)."""

import re

import pytest

from attacks import parse_function_class
from attacks.classes import FitRule, Polynomials


@pytest.mark.parametrize(
    "name, kind, degree, canonical",
    [
        ("linear", "poly", 1, "linear"),
        ("poly1", "poly", 1, "linear"),
        ("Poly3", "poly", 3, "poly3"),
        ("kernel", "kernel", None, "kernel"),
        ("mlp", "mlp", None, "mlp"),
        ("tree4", "tree", 4, "tree4"),
        ("threshold", "threshold", None, "threshold"),
        ("all", "all", None, "all"),
    ],
)
def test_parse_names(name, kind, degree, canonical):
    parsed = parse_function_class(name)
    assert (parsed.kind, parsed.degree, parsed.name) == (kind, degree, canonical)
    assert parse_function_class(parsed) is parsed


@pytest.mark.parametrize("name", ["poly0", "tree0", "quadratic", "poly", "", 3, None])
def test_parse_rejects_unknown_names(name):
    with pytest.raises(ValueError, match="function_class must be one of"):
        parse_function_class(name)


@pytest.mark.parametrize(
    "small, large, expected",
    [
        ("linear", "poly2", True),
        ("poly2", "poly3", True),
        ("poly3", "poly2", False),
        ("poly2", "linear", False),
        ("linear", "mlp", True),
        ("poly2", "mlp", False),
        ("mlp", "linear", False),
        ("tree2", "tree3", True),
        ("tree3", "tree2", False),
        ("kernel", "kernel", True),
        ("kernel", "poly3", False),
        ("linear", "kernel", False),
        ("threshold", "linear", False),
        ("tree3", "all", True),
        ("threshold", "all", True),
        ("all", "poly3", False),
    ],
)
def test_containment(small, large, expected):
    assert parse_function_class(small).is_contained_in(parse_function_class(large)) is expected


@pytest.mark.parametrize("name, divergences", [("threshold", ("kl", "renyi", "ipm", "dp")), ("all", ()), ("poly2", ("kl", "renyi", "ipm", "dp"))])
def test_divergences_per_class(name, divergences):
    assert parse_function_class(name).divergences == divergences


def test_class_is_hashable_value():
    assert {parse_function_class("poly1"), Polynomials(1)} == {parse_function_class("linear")}


@pytest.mark.parametrize("name", ["poly00", "poly02", "tree00", "tree07", "poly\u0968", "tree\u0661", "poly11", "tree21", " linear"])
def test_parse_is_strict_about_digits_and_degrees(name):
    with pytest.raises(ValueError, match="function_class must be one of"):
        parse_function_class(name)


def test_largest_degrees_are_accepted():
    from attacks.classes import MAX_POLY_DEGREE, MAX_TREE_DEPTH

    assert parse_function_class(f"poly{MAX_POLY_DEGREE}").degree == MAX_POLY_DEGREE
    assert parse_function_class(f"tree{MAX_TREE_DEPTH}").degree == MAX_TREE_DEPTH


@pytest.mark.parametrize("name", ["linear", "poly3", "kernel", "mlp", "tree2", "threshold", "all"])
def test_class_parameters_are_adversary_parameters(name):
    import inspect

    from attacks import Adversary

    accepted = set(inspect.signature(Adversary).parameters)
    assert set(parse_function_class(name).parameters) <= accepted


@pytest.mark.parametrize("name, layer", [("linear", "value"), ("tree3", "value"), ("atoms", "value"),
                                         ("threshold", "value"), ("floatbits", "representation")])
def test_a_class_says_whether_it_reads_values_or_their_representation(name, layer):
    assert parse_function_class(name).layer == layer


@pytest.mark.parametrize("name, linear_maps, pinsker", [
    ("linear", True, True), ("poly3", True, True), ("kernel", False, True), ("mlp", True, False),
    ("tree3", False, False), ("threshold", False, False), ("atoms", False, False), ("floatbits", False, False),
])
def test_closure_properties(name, linear_maps, pinsker):
    """Post-processing (CBDP Thm 1) needs closure under linear maps; the restricted Pinsker (Thm 7) convexity and
    translation invariance."""
    hclass = parse_function_class(name)
    assert (hclass.closed_under_linear_maps, hclass.convex_translation_invariant) == (linear_maps, pinsker)


@pytest.mark.parametrize("name, rule", [("linear", FitRule.CONVEX), ("kernel", FitRule.CONVEX), ("mlp", FitRule.CONVEX),
                                        ("tree2", FitRule.CELLS), ("floatbits", FitRule.CELLS),
                                        ("threshold", FitRule.FIXED), ("atoms", FitRule.FIXED)])
def test_fit_rules(name, rule):
    assert parse_function_class(name).fit_rule is rule


@pytest.mark.parametrize("name, params, count", [
    ("linear", {}, 4), ("poly3", {}, 20), ("kernel", {}, 100), ("kernel", {"n_components": 7}, 7), ("mlp", {}, 64),
    ("mlp", {"width": 5}, 10), ("tree8", {}, 3), ("threshold", {}, 3), ("atoms", {}, 3), ("floatbits", {}, 3),
])
def test_feature_counts_of_the_memory_model(name, params, count):
    """C(d + K, K) monomials of degree <= K with the constant at d = 3 (C(4, 1) = 4 for linear, C(6, 3) = 20 for
    poly3); d for the others but kernel (n_components) and mlp (2 width)."""
    assert parse_function_class(name).feature_count(3, params) == count


@pytest.mark.parametrize("name, words", [("linear", "linear functions"), ("poly2", "polynomials of degree 2"),
                                         ("tree3", "trees of depth 3"), ("all", "all functions")])
def test_words(name, words):
    assert parse_function_class(name).words == words


def test_ranks_put_polynomials_first_and_all_last():
    names = ["all", "floatbits", "threshold", "poly2", "tree3", "linear", "mlp", "atoms", "kernel"]
    ranked = sorted(names, key=lambda name: (parse_function_class(name).rank, parse_function_class(name).degree or 0))
    assert ranked == ["linear", "poly2", "kernel", "mlp", "tree3", "threshold", "atoms", "floatbits", "all"]


@pytest.mark.parametrize("params, message", [
    ({"width": 0}, "width must be an integer from 1 to 10000. Found 0."),
    ({"n_components": 10_001}, "n_components must be an integer from 1 to 10000. Found 10001."),
    ({"ridge": float("inf")}, "ridge must be a finite number >= 0. Found inf."),
    ({"bandwidth": True}, "bandwidth must be a finite number > 0"),
])
def test_parameters_are_checked_once_for_the_estimator_and_the_config(params, message):
    """The same rule (attacks.classes.PARAMETERS) speaks in Adversary.fit and in attacks.class_params."""
    import numpy as np

    from attacks import Adversary
    from audit.config.attacks import check_class_params
    from audit.config.load import ConfigError

    with pytest.raises(ValueError, match=re.escape(message)):
        Adversary("kernel", **params).fit(np.array([[0.0], [1.0]]), np.array([0, 1]))
    name = "mlp" if "width" in params else "kernel"
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_class_params(name, params)


def test_parameters_a_class_does_not_take_are_named_with_a_suggestion():
    with pytest.raises(ValueError, match="'mlp' attacks take no parameter 'widht'; did you mean 'width'"):
        parse_function_class("mlp").check_parameters({"widht": 3})


def test_claim_only_class_has_no_feature_map():
    with pytest.raises(ValueError, match="for claims only"):
        parse_function_class("all").feature_map(None, None, 0, None)
