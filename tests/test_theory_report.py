"""audit.theory_report: reference values, violation flags, report files, CLI errors."""

import math

import numpy as np
import pandas as pd
import pytest

from audit import theory_report
from audit.cli import main
from audit.theory_report import bound_crossings, bound_violations, theory_table, write_theory_report
from theory_reference import EXACT, REFERENCE_RTOL, TABLE1_BOUND_ALPHA4



def _reference(mechanism):
    """docs/theory.md's values keyed as the theory table labels them: (divergence, alpha, class, kind)."""
    values = {
        (divergence, alpha, function_class, "closed form" if function_class == "all" else "exact"): value
        for (function_class, divergence, alpha), value in EXACT[mechanism].items()
    }
    values[("kl", None, "linear", "closed form")] = EXACT[mechanism][("linear", "kl", None)]
    values[("renyi", 4.0, "linear", "upper bound")] = TABLE1_BOUND_ALPHA4[mechanism]
    return values


REFERENCE = {(mechanism, 1.0): _reference(mechanism) for mechanism in EXACT}


@pytest.fixture(scope="module", params=list(REFERENCE), ids=lambda key: key[0])
def case(request):
    mechanism, scale = request.param
    return mechanism, scale, theory_table(mechanism, scale, alphas=[2.0, 4.0])


def _value(table, divergence, alpha, function_class, kind):
    match = (table["divergence"] == divergence) & (table["function_class"] == function_class)
    match &= (table["kind"] == kind) & (table["alpha"].isna() if alpha is None else table["alpha"] == alpha)
    assert match.sum() == 1, (divergence, alpha, function_class, kind)
    return float(table.loc[match, "value"].iloc[0])


def test_table_matches_the_theory_reference_values(case):
    mechanism, scale, table = case
    for (divergence, alpha, function_class, kind), expected in REFERENCE[(mechanism, scale)].items():
        got = _value(table, divergence, alpha, function_class, kind)
        assert got == pytest.approx(expected, rel=REFERENCE_RTOL), (divergence, alpha, function_class, kind)


def _expected_flags(table):
    """A published value is violated when below the exact value of a class it covers (containment by degree)."""
    degree = {"linear": 1, "poly2": 2, "poly3": 3, "threshold": math.inf, "all": math.inf}
    flags = []
    for row in table.itertuples():
        same = (table["kind"] == "exact") & (table["divergence"] == row.divergence)
        same &= table["alpha"].isna() if math.isnan(row.alpha) else table["alpha"] == row.alpha
        exact = table[same]
        if row.function_class != "all":
            exact = exact[exact["function_class"].map(degree) <= degree[row.function_class]]
        below = exact["value"] * (1 - theory_report.BOUND_RTOL) > row.value
        flags.append(row.kind != "exact" and bool(below.any()))
    return flags


def test_flags_match_the_numbers_at_the_reference_parameters(case):
    _, _, table = case
    assert list(table["bound_violated"]) == _expected_flags(table)
    assert len(bound_violations(table)) == 0


@pytest.mark.parametrize("mechanism,scale", [("laplace", 0.2), ("gaussian", 5.0)])
def test_flags_fire_where_the_table_one_bound_is_below_exact_linear(mechanism, scale):
    # For little noise-to-signal the Table 1 bound decays like scale^-alpha (2^(alpha-1) eps^alpha) while
    # exact (lin, Renyi) decays like eps^2: at alpha = 8 the published bound is below the exact value.
    table = theory_table(mechanism, scale, alphas=[1.5, 8.0])
    assert list(table["bound_violated"]) == _expected_flags(table)
    violations = bound_violations(table)
    assert len(violations) == sum(note.count("<") for note in table["violated_by"])
    assert (violations["excess"] > 0).all()
    assert violations[["alpha", "source", "exact_class"]].values.tolist() == [[8.0, "CBDP Table 1", "linear"]]


def test_flags_and_report_on_a_table_with_a_violated_bound(tmp_path):
    # A doctored table stands in for a wrong published value: Renyi DP at alpha = 4 is set below the
    # exact (lin, Renyi) value; the flag, the list and the report must all show it.
    table = theory_table("laplace", 1.0, alphas=[4.0], classes=["linear"])
    table = table.drop(columns=["bound_violated", "violated_by"])
    doctored = (table["function_class"] == "all") & (table["divergence"] == "renyi")
    table.loc[doctored, "value"] = 0.3
    table = theory_report._flag_violations(table)
    assert table["bound_violated"].tolist() == list(doctored)
    violations = bound_violations(table)
    assert violations[["alpha", "exact_class", "bound"]].values.tolist() == [[4.0, "linear", 0.3]]
    text = write_theory_report(table, tmp_path, "laplace", 1.0).read_text()
    assert "## Published bound violated (1)" in text and "WARNING" in text
    assert text.index("Published bound violated") < text.index("## Values")


def test_table_one_bound_crosses_renyi_dp_where_the_paper_says():
    # CBDP: the Table 1 bound overtakes Renyi DP near alpha = 3.3 (Laplace eps = 1, Fig. 1a)
    # and near 2.3 (Gaussian sigma = 1, Fig. 2a); the paper gives one decimal.
    assert bound_crossings("laplace", 1.0, 1.25, 10.0) == [pytest.approx(3.3, abs=0.1)]
    assert bound_crossings("gaussian", 1.0, 1.25, 10.0) == [pytest.approx(2.3, abs=0.1)]


def test_report_and_figures_are_written(tmp_path, case):
    mechanism, scale, table = case
    report = write_theory_report(table, tmp_path, mechanism, scale)
    text = report.read_text()
    for name in (f"{mechanism}_linear_renyi.png", f"{mechanism}_poly_renyi.png"):
        assert (tmp_path / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(figures/{name})" in text
    assert "|t|" in text and "quadrature" in text and "Table 1" in text


def test_command_prints_the_table_without_out(capsys):
    assert main(["theory", "--mechanism", "gaussian", "--sigma", "1", "--alpha", "2"]) == 0
    out = capsys.readouterr().out
    assert "Renyi alpha=2" in out and "0.6931" in out and "IPM" in out


@pytest.mark.parametrize(
    "argv,named",
    [
        (["--mechanism", "laplace", "--epsilon", "0"], "epsilon"),
        (["--mechanism", "laplace", "--epsilon", "-1"], "epsilon"),
        (["--mechanism", "gaussian", "--sigma", "0"], "sigma"),
        (["--mechanism", "gaussian", "--sigma", "nan"], "sigma"),
        (["--mechanism", "laplace", "--epsilon", "1", "--alpha", "1"], "alpha"),
        (["--mechanism", "laplace", "--epsilon", "1", "--alpha", "0.5"], "alpha"),
        (["--mechanism", "laplace", "--epsilon", "1", "--classes", "poly2", "quadratic"], "quadratic"),
        (["--mechanism", "laplace", "--epsilon", "1", "--classes", "mlp"], "mlp"),
        (["--mechanism", "laplace", "--sigma", "1"], "epsilon"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(capsys, argv, named):
    assert main(["theory", *argv]) == 2
    captured = capsys.readouterr()
    assert named in captured.err and "Found" in captured.err
    assert "Traceback" not in captured.err + captured.out


def test_display_table_has_one_line_per_divergence_and_alpha(case):
    _, _, table = case
    wide = theory_report.display_table(table)
    assert list(wide.index) == ["Renyi alpha=2", "Renyi alpha=4", "KL", "IPM"]
    assert isinstance(wide, pd.DataFrame) and np.isnan(wide.loc["IPM", "linear exact"])
