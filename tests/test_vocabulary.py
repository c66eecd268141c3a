"""The divergence vocabulary: each type's behaviour, and names compared as strings only where config text is parsed."""

import ast
import dataclasses
import math
import pathlib
import pickle
import re

import numpy as np
import pytest

from attacks.vocabulary import (
    CURVES, DIVERGENCES, DP, F_DIVERGENCES, FAMILIES, GDP, IPM, KL, MEMBERS, WEIGHTED, ZCDP, AlphaDivergence, Profile,
    Renyi, TotalVariation, divergence_kind, divergence_of, parse_curve, parse_divergence, parse_f_divergence,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
PARSERS = {"attacks/vocabulary.py"}
"""Where divergence names may be compared: the vocabulary itself (the config parser reads them as its types too)."""
LIBRARY_NAMES = {"audit/mechanisms/adapters/opacus_learners.py": 1}
"""Files that list a library's own names which coincide with a divergence name, and how many such lines: Opacus's
accountants ("gdp" is its GaussianAccountant, a parameter value passed to Opacus, not a claim)."""
NAMES = set(DIVERGENCES) | set(FAMILIES) | {"tv"}
"""Names compared nowhere else (``alpha``, the f-divergence's name, is also a field name and is left out)."""


@pytest.mark.parametrize("divergence, alpha, delta", [
    (KL(), None, None), (Renyi(2.0), 2.0, None), (Renyi(1.5), 1.5, None), (IPM(), None, None), (DP(), None, 0.0),
    (DP(1e-5), None, 1e-5),
])
def test_name_and_type_round_trip(divergence, alpha, delta):
    assert str(divergence) == divergence.name
    assert parse_divergence(divergence.name, alpha, delta) == divergence
    assert parse_divergence(divergence) is divergence
    assert divergence.alpha == alpha and divergence.delta == delta
    assert divergence_kind(divergence.name) is type(divergence)


def test_what_the_engines_switch_on():
    assert DIVERGENCES == ("kl", "renyi", "ipm", "dp") and FAMILIES == ("gdp", "zcdp", "profile")
    assert WEIGHTED == ("kl", "renyi")
    assert [kind.weights for kind in MEMBERS.values()] == ["exp(h)", "|g|^beta", None, None]
    assert [kind.has_order for kind in MEMBERS.values()] == [False, True, False, False]
    assert [kind.label for kind in MEMBERS.values()] == ["KL", "Renyi", "IPM", "DP epsilon"]
    assert Renyi(3.0).f_divergence == AlphaDivergence(3.0)
    assert [kind.member for kind in CURVES.values()] == [DP, Renyi, DP]
    assert [parse_curve(name) for name in FAMILIES] == [GDP(), ZCDP(), Profile()]
    assert [parse_f_divergence(name, 2.0) for name in F_DIVERGENCES] == [KL(), AlphaDivergence(2.0), TotalVariation()]


def test_rows_convert_through_the_parser():
    """A results row writes no order as NaN and a delta of 0 for every divergence: both read as absent."""
    class Row:
        divergence, alpha, delta = "kl", math.nan, 0.0

    assert divergence_of(Row()) == KL()
    Row.divergence, Row.alpha = "renyi", np.float64(4.0)
    assert divergence_of(Row()) == Renyi(4.0)


@pytest.mark.parametrize("arguments, message", [
    (("renyi",), r"alpha: divergence 'renyi' needs a Renyi order alpha > 1; set alpha"),
    (("renyi", math.nan), r"alpha: divergence 'renyi' needs a Renyi order alpha > 1; set alpha"),
    (("renyi", 1.0), r"alpha must be a finite Renyi order greater than 1 \(alpha = 1 is KL: use divergence 'kl'\)"),
    (("renyi", "two"), r"alpha must be a number greater than 1. Found 'two'"),
    (("kl", 2.0), r"alpha applies to divergence 'renyi' only; leave it None for 'kl'. Found alpha=2.0"),
    (("ipm", None, 0.1), r"delta applies to divergence 'dp' only; leave it 0 for 'ipm'. Found delta=0.1"),
    (("dp", None, 1.0), r"delta must be a number in \[0, 1\). Found 1.0"),
    (("dp", None, -0.1), r"delta must be a number in \[0, 1\). Found -0.1"),
    (("hellinger",), r"divergence must be one of \('kl', 'renyi', 'ipm', 'dp'\). Found 'hellinger'"),
    (("gdp",), r"divergence must be one of \('kl', 'renyi', 'ipm', 'dp'\). Found 'gdp'"),
])
def test_parse_errors_name_the_field_and_the_fix(arguments, message):
    with pytest.raises(ValueError, match=message):
        parse_divergence(*arguments)


def test_unknown_names_list_the_accepted_ones():
    with pytest.raises(ValueError, match="'kl', 'renyi', 'ipm', 'dp', 'gdp', 'zcdp', 'profile'"):
        divergence_kind("tv")
    with pytest.raises(ValueError, match="'gdp', 'zcdp', 'profile'"):
        parse_curve("renyi")
    with pytest.raises(ValueError, match="'kl', 'alpha', 'tv'"):
        parse_f_divergence("renyi")


def test_types_are_frozen_and_validated_when_built():
    with pytest.raises(ValueError, match="alpha must be a finite Renyi order"):
        Renyi(0.5)
    with pytest.raises(ValueError, match="delta must be a number"):
        DP(2.0)
    with pytest.raises(AttributeError):
        Renyi(2.0).alpha = 3.0


@pytest.mark.parametrize("divergence", [KL(), Renyi(2), IPM(), DP(0.01), GDP(), AlphaDivergence(3), TotalVariation()])
def test_types_travel_to_workers_and_key_dicts(divergence):
    """Workers receive fitted adversaries holding their divergence (pickle); types key caches (hash)."""
    assert pickle.loads(pickle.dumps(divergence)) == divergence
    assert {divergence: 1}[type(divergence)(*dataclasses.astuple(divergence))] == 1


def test_public_functions_take_names_or_types():
    """``estimate_divergence(..., divergence="renyi", alpha=2)`` parses at the door: the same estimate as the type."""
    from attacks.estimate import estimate_divergence

    rng = np.random.default_rng(0)
    p, q = rng.normal(1.0, 1.0, 400), rng.normal(0.0, 1.0, 400)
    by_name = estimate_divergence(p, q, "linear", "renyi", alpha=2.0, random_state=0)
    by_type = estimate_divergence(p, q, "linear", Renyi(2.0), random_state=0)
    assert by_name.divergence == by_type.divergence == "renyi"
    assert by_name.estimate == by_type.estimate and by_name.alpha == by_type.alpha == 2.0
    with pytest.raises(ValueError, match="alpha applies to divergence 'renyi' only"):
        estimate_divergence(p, q, "linear", "kl", alpha=2.0)


def test_the_vocabulary_imports_the_standard_library_only():
    tree = ast.parse((ROOT / "attacks/vocabulary.py").read_text())
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert modules <= {"__future__", "math", "dataclasses", "typing"}


CLASS_PARSERS = {"attacks/classes.py"}
"""Where function-class names may be compared: the classes module itself (the config parser asks its types too)."""
_CLASS_NAME = re.compile(r"linear|poly|poly[1-9][0-9]*|kernel|mlp|tree|tree[1-9][0-9]*|threshold|atoms|floatbits|all")


def is_divergence_name(value: object) -> bool:
    return isinstance(value, str) and value in NAMES


def is_class_name(value: object) -> bool:
    """A function class's name or kind (``linear``, ``poly3``, ``tree``, ``atoms``, ``all``, ...)."""
    return isinstance(value, str) and _CLASS_NAME.fullmatch(value) is not None


def name_comparisons(source: str, is_name=is_divergence_name, any_key: bool = True) -> list[tuple[int, str]]:
    """(line, what) of each place ``source`` compares names as strings: ``==``, ``!=``, ``in`` with a
    name or a literal set of names, a ``case`` on a name, or a dict keyed by names (a dispatch table: any key a
    name when ``any_key``, else all its keys or a tuple key holding one); with ``any_key`` also a bare literal
    set of names (for class names, a list of them is a default, not a comparison)."""
    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and is_name(node.value)

    def name_set(node: ast.AST) -> bool:
        return (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(named(e) for e in node.elts)
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts))

    def dispatch(node: ast.Dict) -> bool:
        tuple_keys = any(isinstance(key, ast.Tuple) and any(named(e) for e in key.elts) for key in node.keys)
        plain = [named(key) for key in node.keys if key is not None and not isinstance(key, ast.Tuple)]
        return tuple_keys or (any(plain) if any_key else len(plain) > 1 and all(plain))

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(named(o) or name_set(o) for o in operands):
                found.append((node.lineno, "comparison with a name"))
        elif isinstance(node, ast.match_case) and any(
                isinstance(p, ast.MatchValue) and named(p.value) for p in ast.walk(node.pattern)):
            found.append((node.pattern.lineno, "case on a name"))
        elif isinstance(node, ast.Dict) and dispatch(node):
            found.append((node.lineno, "dict keyed by names"))
        elif any_key and name_set(node):
            found.append((node.lineno, "literal set of names"))
    return sorted(dict(reversed(found)).items())  # one entry per line


@pytest.mark.parametrize("source, expected", [
    ('if d == "kl": pass', 1), ('if "renyi" != d: pass', 1), ('x = d in ("kl", "ipm")', 1),
    ('x = frame.isin(["dp", "ipm"])', 1), ('match d:\n    case "dp": pass', 1), ('w = {"kl": 1}[d]', 1), ('w = {(A, "any", "dp"): 1}', 1),
    ('x = d is KL', 0), ('x = isinstance(d, DP)', 0), ('f(divergence="kl")', 0), ('x = {"divergence": "kl"}', 0),
    ('x = key in ("alpha", "delta")', 0),
])
def test_the_scan_finds_name_comparisons(source, expected):
    assert len(name_comparisons(source)) == expected


def test_divergence_names_are_compared_only_where_config_text_is_parsed():
    """Done-means of issue 22: code switches on :mod:`attacks.vocabulary`'s types, not on names."""
    offences = [f"{path.relative_to(ROOT)}:{line}: {what}"
                for package in ("audit", "attacks") for path in sorted((ROOT / package).rglob("*.py"))
                if str(path.relative_to(ROOT)) not in PARSERS
                for line, what in name_comparisons(path.read_text())]
    for path, lines in LIBRARY_NAMES.items():
        listed = [offence for offence in offences if offence.startswith(path + ":")]
        assert len(listed) == lines, listed
        offences = [offence for offence in offences if offence not in listed]
    assert not offences, "switch on attacks.vocabulary's types instead:\n" + "\n".join(offences)



@pytest.mark.parametrize("source, expected", [
    ('if c.kind == "poly": pass', 1), ('x = name in ("linear", "threshold")', 1), ('x = c != "tree3"', 1),
    ('w = {"poly": 0, "threshold": 1, "all": 2}[kind]', 1), ('w = {(A, "linear", KL): 1}', 1),
    ('match c:\n    case "mlp": pass', 1), ('x = isinstance(c, Polynomials)', 0), ('x = c == LINEAR', 0),
    ('f(function_class="linear")', 0), ('p = {"epsilon": 1.0, "threshold": 0.5}', 0), ('x = scale == "log"', 0),
])
def test_the_scan_finds_class_name_comparisons(source, expected):
    assert len(name_comparisons(source, is_class_name, any_key=False)) == expected


def test_class_names_are_compared_only_where_config_text_is_parsed():
    """Issue 33: code asks :mod:`attacks.classes`'s types (attributes, ``isinstance``), not names or kinds."""
    offences = [f"{path.relative_to(ROOT)}:{line}: {what}"
                for package in ("audit", "attacks") for path in sorted((ROOT / package).rglob("*.py"))
                if str(path.relative_to(ROOT)) not in CLASS_PARSERS
                for line, what in name_comparisons(path.read_text(), is_class_name, any_key=False)]
    assert not offences, "ask attacks.classes's types instead:\n" + "\n".join(offences)