"""Function class names and containment (docs/theory.md section 3)."""

import pytest

from attacks import FunctionClass, parse_function_class


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
    assert {parse_function_class("poly1"), FunctionClass("poly", 1)} == {parse_function_class("linear")}


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
