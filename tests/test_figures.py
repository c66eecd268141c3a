"""audit.report.figures: one labelled point per row, a panel per claim, a legend of what is drawn; ROC and witness.

The figures are SVG (:mod:`audit.report.svg`), read back here with ElementTree; no matplotlib is imported.
"""

import dataclasses
import math
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from attacks.estimate import score_histogram
from audit.report.figures import (
    INTERVAL_LEVEL,
    VERDICT_COLOURS,
    divergence_title,
    mechanism_label,
    plot_group,
    plot_roc,
    roc_points,
    write_evidence_figures,
    write_figures,
)
from audit.results.schema import Row

NAN, INF = math.nan, math.inf
SVG = "{http://www.w3.org/2000/svg}"


def _row(pair, direction, function_class, estimate, claim, claim_class, verdict, **extra):
    return Row(
        pair=pair, direction=direction, function_class=function_class, divergence=extra.get("divergence", "kl"),
        estimate=estimate, ci_low=estimate - 0.05, ci_high=estimate + 0.05, n_samples=1000, claim=claim,
        claim_class=claim_class, refutes_claim=True, theory_bound=extra.get("theory_bound", NAN),
        exact=extra.get("exact", NAN), verdict=verdict, task=f"{pair}|{direction}|{function_class}",
    )


@pytest.fixture
def two_claims():
    """Three tasks, each audited against two KL claims: six rows."""
    tasks = [("p0", "P|Q", "linear", 0.3), ("p0", "Q|P", "linear", 0.25), ("p1", "P|Q", "poly2", INF)]
    rows = [_row(*task, 0.2, "all", "violation") for task in tasks]
    rows += [_row(*task, 0.5, "linear", "pass") for task in tasks[:2]]
    rows += [_row(*tasks[2], 0.5, "linear", "info")]
    return rows


def _panels(fig):
    return ElementTree.fromstring(fig.to_svg()).findall(f"{SVG}g[@class='axes']")


def _texts(element, kind=None):
    texts = element.iter(f"{SVG}text")
    return ["".join(text.itertext()) for text in texts if kind is None or text.get("class") == kind]


def _legend(fig):
    return [_texts(group) for panel in _panels(fig) for group in panel.iter(f"{SVG}g")
            if group.get("class") == "legend"]


def test_each_row_is_one_labelled_point_in_its_claims_panel(two_claims):
    panels = _panels(plot_group(two_claims, "KL divergence — laplace"))
    assert len(panels) == 2  # one panel per claim, never two points of one task in a panel
    expected = sorted(["p0 P|Q", "p0 Q|P", "p1 P|Q unbounded"])
    assert [sorted(_texts(panel, "annotation")) for panel in panels] == [expected, expected]
    titles = [_texts(panel)[0] for panel in panels]
    assert titles == ["claim: class all, at most 0.2", "claim: class linear, at most 0.5"]
    for panel, colours in zip(panels, (["violation"] * 2, ["pass"] * 2)):
        data = panel.find(f"{SVG}g[@class='data']")
        assert [circle.get("fill") for circle in data.iter(f"{SVG}circle")] == [VERDICT_COLOURS[c] for c in colours]
        (triangle,) = data.iter(f"{SVG}polygon")  # the unbounded row: a triangle at the top
        corners = [tuple(map(float, point.split(","))) for point in triangle.get("points").split()]
        circles = [float(circle.get("cy")) for circle in data.iter(f"{SVG}circle")]
        assert len(corners) == 3 and max(y for _, y in corners) < min(circles)  # above every bounded point


def test_an_on_average_claim_has_its_own_panel(two_claims):
    """Two claims of one class and value, one on average: their rows are never drawn in one panel."""
    on_average = [dataclasses.replace(row, on_average=True) for row in two_claims[:3]]
    panels = _panels(plot_group(two_claims[:3] + on_average, "KL divergence — laplace"))
    assert [_texts(panel)[0] for panel in panels] == ["claim: class all, at most 0.2",
                                                      "claim: class all, at most 0.2 on average"]
    assert [len(_texts(panel, "annotation")) for panel in panels] == [3, 3]


def test_legend_lists_only_what_is_drawn_and_the_claim_is_not_red(two_claims):
    fig = plot_group(two_claims, "KL divergence — laplace")
    assert _legend(fig) == [["violation", "pass", "info", "claim"]]
    for panel in _panels(fig):  # one black dashed claim line per panel
        data = panel.find(f"{SVG}g[@class='data']")
        dashed = [line.get("stroke") for line in data.iter(f"{SVG}line") if line.get("stroke-dasharray")]
        assert dashed == ["#000000"]
    red = [VERDICT_COLOURS["violation"] in ElementTree.tostring(panel.find(f"{SVG}g[@class='data']"), "unicode")
           for panel in _panels(fig)]
    assert red == [True, False]  # the panel of violations; the other panel has none: nothing else is red
    with_theory = [dataclasses.replace(row, exact=0.26, theory_bound=0.4) for row in two_claims]
    assert _legend(plot_group(with_theory, "KL divergence — laplace"))[0][-2:] == ["exact", "theory bound"]


def test_titles_are_words_with_the_mechanism_and_the_level(tmp_path, two_claims):
    assert divergence_title("renyi", 4.0) == "Rényi divergence of order 4"
    assert divergence_title("kl") == "KL divergence"
    assert mechanism_label({"mechanism": {"name": "laplace", "params": {"epsilon": 1.0}}}) == "laplace (epsilon=1.0)"
    assert mechanism_label({"mechanism": {"callable": "mod:f"}}) == "mod:f"
    paths = write_figures(two_claims, tmp_path, mechanism="<laplace> & (epsilon=1.0)")
    assert [path.name for path in paths] == ["kl.svg"]
    root = ElementTree.parse(paths[0]).getroot()
    assert _texts(root)[0] == f"KL divergence — <laplace> & (epsilon=1.0){INTERVAL_LEVEL}"  # two tspans
    failed = [dataclasses.replace(row, estimate=NAN, divergence="dp") for row in two_claims]
    assert [path.name for path in write_figures(failed + two_claims, tmp_path, mechanism="m")] == ["kl.svg"]


def test_score_histogram_keeps_every_held_out_score_and_discrete_values_apart():
    rng = np.random.default_rng(0)
    continuous = score_histogram(rng.normal(1, 1, 500), rng.normal(0, 1, 700), threshold=0.4, side=-1)
    assert len(continuous["edges"]) == 41 and sum(continuous["p"]) == 500 and sum(continuous["q"]) == 700
    assert continuous["threshold"] == -0.4  # the threshold of the oriented score side * g
    discrete = score_histogram(np.array([0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0]))
    # gdp_tests: Q sorted 0, 0, 1; ranks round((1 - b) 3) of GDP_FRACTIONS are 2 and 3; P <= 0: 1, P <= 1: 3
    assert discrete == {"edges": [-0.5, 0.5, 1.5], "p": [1, 2], "q": [2, 1], "threshold": None,
                        "gdp_tests": {"n_p": 3, "n_q": 3, "ranks": [2, 3], "p_counts": [1, 3]}}
    assert "gdp_tests" not in score_histogram(np.array([0.0]), np.array([1.0]), independent=False)


def test_roc_points_are_the_shares_above_each_edge():
    fpr, tpr, chosen = roc_points({"edges": [-0.5, 0.5, 1.5], "p": [1, 3], "q": [3, 1], "threshold": 0.5})
    assert fpr.tolist() == [1.0, 0.25, 0.0] and tpr.tolist() == [1.0, 0.75, 0.0]
    assert chosen == (0.25, 0.75)


def test_evidence_figures_cover_each_claims_strongest_row(tmp_path, two_claims):
    scores = {"edges": [-0.5, 0.5, 1.5], "p": [1, 3], "q": [3, 1], "threshold": 0.5}
    shown = [(two_claims[0], scores), (two_claims[3], scores)]
    assert [path.name for path in write_evidence_figures(shown, tmp_path, mechanism="m")] == ["witness.svg"]
    dp = [(dataclasses.replace(row, divergence="dp"), scores) for row, _ in shown]
    assert [path.name for path in write_evidence_figures(dp, tmp_path, mechanism="m")] == ["witness.svg", "roc.svg"]
    legend = _legend(plot_roc(dp, "ROC"))[0]
    assert legend[0] == "0.2-DP region (delta = 0)" and "the attack set" in legend
    assert write_evidence_figures([(row, None) for row, _ in shown], tmp_path, mechanism="m") == []


def test_an_audit_report_imports_no_plotting_library(tmp_path):
    """`capaudit run` draws its figures without matplotlib: a small audit leaves it out of sys.modules."""
    config = tmp_path / "audit.toml"
    config.write_text(
        "[mechanism]\nname = 'laplace'\nparams = { epsilon = 1.0 }\n"
        "[[claims]]\ndivergence = 'kl'\nfunction_class = 'linear'\nepsilon = 1.0\n"
        "[attacks]\nclasses = ['linear']\nn_samples = 2000\n[run]\nseed = 0\nn_jobs = 1\n"
    )
    code = (
        "import sys\nfrom audit.commands.cli import main\n"
        f"code = main(['run', {str(config)!r}, '--out', {str(tmp_path / 'out')!r}, '--quiet'])\n"
        "assert code in (0, 1), code\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in (tmp_path / "out" / "figures").iterdir()) == ["kl.svg", "witness.svg"]
