"""audit.figures: one labelled point per row, a panel per claim, a legend of what is drawn; ROC and witness."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from attacks.estimate import score_histogram
from audit.figures import (
    divergence_title,
    interval_level_text,
    mechanism_label,
    plot_group,
    plot_roc,
    roc_points,
    write_evidence_figures,
    write_figures,
)

NAN, INF = math.nan, math.inf


def _row(pair, direction, function_class, estimate, claim, claim_class, verdict, **extra):
    return {
        "pair": pair, "direction": direction, "function_class": function_class, "divergence": "kl",
        "alpha": NAN, "estimate": estimate, "ci_low": estimate - 0.05, "ci_high": estimate + 0.05,
        "n_samples": 1000, "claim": claim, "claim_class": claim_class, "refutes_claim": True,
        "theory_bound": extra.get("theory_bound", NAN), "exact": extra.get("exact", NAN),
        "verdict": verdict, "note": "", "task": f"{pair}|{direction}|{function_class}",
    }


@pytest.fixture
def two_claims():
    """Three tasks, each audited against two KL claims: six rows."""
    tasks = [("p0", "P|Q", "linear", 0.3), ("p0", "Q|P", "linear", 0.25), ("p1", "P|Q", "poly2", INF)]
    rows = [_row(*task, 0.2, "all", "violation") for task in tasks]
    rows += [_row(*task, 0.5, "linear", "pass") for task in tasks[:2]]
    rows += [_row(*tasks[2], 0.5, "linear", "info")]
    return pd.DataFrame(rows)


def _labels(fig):
    return [[text.get_text() for text in ax.texts] for ax in fig.axes]


def test_each_row_is_one_labelled_point_in_its_claims_panel(two_claims):
    fig = plot_group(two_claims, "KL divergence — laplace")
    try:
        assert len(fig.axes) == 2  # one panel per claim, never two points of one task in a panel
        expected = sorted(["p0 P|Q", "p0 Q|P", "p1 P|Q unbounded"])
        assert [sorted(labels) for labels in _labels(fig)] == [expected, expected]
        assert [ax.get_title() for ax in fig.axes] == [
            "claim: class all, at most 0.2", "claim: class linear, at most 0.5"
        ]
    finally:
        plt.close(fig)


def test_legend_lists_only_what_is_drawn_and_the_claim_is_not_red(two_claims):
    fig = plot_group(two_claims, "KL divergence — laplace")
    try:
        legend = fig.axes[-1].get_legend()
        assert [text.get_text() for text in legend.get_texts()] == ["violation", "pass", "info", "claim"]
        claim_lines = [line for ax in fig.axes for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert len(claim_lines) == 2 and {line.get_color() for line in claim_lines} == {"black"}
    finally:
        plt.close(fig)
    with_theory = two_claims.assign(exact=0.26, theory_bound=0.4)
    fig = plot_group(with_theory, "KL divergence — laplace")
    try:
        texts = [text.get_text() for text in fig.axes[-1].get_legend().get_texts()]
        assert texts[-2:] == ["exact", "theory bound"]
    finally:
        plt.close(fig)


def test_titles_are_words_with_the_mechanism_and_the_level(tmp_path, two_claims):
    assert divergence_title("renyi", 4.0) == "Rényi divergence of order 4"
    assert divergence_title("kl") == "KL divergence"
    assert mechanism_label({"mechanism": {"name": "laplace", "params": {"epsilon": 1.0}}}) == "laplace (epsilon=1.0)"
    assert mechanism_label({"mechanism": {"callable": "mod:f"}}) == "mod:f"
    assert interval_level_text(two_claims) == "intervals at the per-row level, see table"
    assert interval_level_text(two_claims.assign(level=0.9)) == "intervals at level 0.9"
    paths = write_figures(two_claims, tmp_path, mechanism="laplace (epsilon=1.0)")
    assert [path.name for path in paths] == ["kl.png"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_score_histogram_keeps_every_held_out_score_and_discrete_values_apart():
    rng = np.random.default_rng(0)
    continuous = score_histogram(rng.normal(1, 1, 500), rng.normal(0, 1, 700), threshold=0.4, side=-1)
    assert len(continuous["edges"]) == 41 and sum(continuous["p"]) == 500 and sum(continuous["q"]) == 700
    assert continuous["threshold"] == -0.4  # the threshold of the oriented score side * g
    discrete = score_histogram(np.array([0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0]))
    assert discrete == {"edges": [-0.5, 0.5, 1.5], "p": [1, 2], "q": [2, 1], "threshold": None}


def test_roc_points_are_the_shares_above_each_edge():
    fpr, tpr, chosen = roc_points({"edges": [-0.5, 0.5, 1.5], "p": [1, 3], "q": [3, 1], "threshold": 0.5})
    assert fpr.tolist() == [1.0, 0.25, 0.0] and tpr.tolist() == [1.0, 0.75, 0.0]
    assert chosen == (0.25, 0.75)


def test_evidence_figures_cover_each_claims_strongest_row(tmp_path, two_claims):
    scores = {"edges": [-0.5, 0.5, 1.5], "p": [1, 3], "q": [3, 1], "threshold": 0.5}
    rows = two_claims.assign(held_out_scores=[scores] * len(two_claims)).iloc[[0, 3]]
    assert [path.name for path in write_evidence_figures(rows, tmp_path, mechanism="m")] == ["witness.png"]
    dp = rows.assign(divergence="dp")
    assert [path.name for path in write_evidence_figures(dp, tmp_path, mechanism="m")] == ["witness.png", "roc.png"]
    fig = plot_roc(dp, "ROC")
    try:
        legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
        assert legend[0] == "0.2-DP region (delta = 0)" and "the attack set" in legend
    finally:
        plt.close(fig)
    none = rows.assign(held_out_scores=None)
    assert write_evidence_figures(none, tmp_path, mechanism="m") == []
