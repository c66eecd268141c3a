"""The figures of an audit report: estimates with intervals, beside the claims and the theory.

One PNG per (divergence, alpha), with one panel per claim on that divergence.
A results row is one (task, claim) pair, so a task audited against two claims
has two rows whose intervals can differ (Holm's levels depend on the claim,
:mod:`audit.verdicts`); drawing each row in its own claim's panel shows every
row exactly once, with its own interval and verdict, and never draws a point
over another.

Every point is labelled by its pair and direction; the claim is a black
dashed line (red is kept for violations), the exact restricted divergence a
black cross and the paper's closed-form bound a blue bar, and the legend lists
only what the figure draws.  Titles name the divergence in words and the
mechanism.  The interval level is stated: the one of the ``level`` column when
the rows carry it, else "per-row level, see table".
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import matplotlib.figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from attacks.vocabulary import DP, ZCDP, divergence_kind  # noqa: E402

VERDICT_COLOURS = {
    "violation": "tab:red",
    "unbounded": "tab:purple",
    "inconclusive": "tab:orange",
    "pass": "tab:green",
    "info": "tab:gray",
}
"""Marker colour of a row by its verdict; no other element of a figure is red."""
CLAIM_COLOUR = "black"
EXACT_COLOUR = "black"
BOUND_COLOUR = "tab:blue"


def figure_name(divergence: str, alpha: Any) -> str:
    """File stem of a group's figure: ``kl``, ``dp``, ``renyi_alpha4``."""
    return f"{divergence}_alpha{format_number(alpha)}" if divergence_kind(divergence).has_order else str(divergence)


def divergence_title(divergence: str, alpha: Any = None) -> str:
    """The divergence in words (:attr:`attacks.vocabulary.Divergence.words`): ``"Rényi divergence of order 4"``."""
    kind = divergence_kind(divergence)
    return f"{kind.words} of order {format_number(alpha)}" if kind.has_order else kind.words


_CLASS_WORDS = {
    "linear": "linear functions",
    "kernel": "random-feature kernel functions",
    "mlp": "one-hidden-layer ReLU networks",
    "threshold": "1-D thresholds",
    "atoms": "sets of exact output values",
    "floatbits": "IEEE-754 bit features",
    "all": "all functions",
}


def class_words(function_class: Any) -> str:
    """An attack or claim class in words with its name, e.g. ``"polynomials of degree 2 (poly2)"``."""
    name = str(function_class)
    for prefix, words in (("poly", "polynomials of degree"), ("tree", "trees of depth")):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return f"{words} {name[len(prefix):]} ({name})"
    return f"{_CLASS_WORDS[name]} ({name})" if name in _CLASS_WORDS else name


def direction_words(direction: Any) -> str:
    """``"P|Q"`` (the divergence of M(d) from M(d')) as ``"M(d) against M(d')"``, ``"Q|P"`` the other way."""
    return {"P|Q": "M(d) against M(d')", "Q|P": "M(d') against M(d)"}.get(str(direction), str(direction))


def row_label(pair: Any, direction: Any, function_class: Any) -> str:
    """A results row as a reviewer reads it: pair, direction and attack class in words (never a task id)."""
    where = "the mean over pairs" if pair == "average" else f"pair {pair}"
    return f"{where}, {direction_words(direction)}, {class_words(function_class)}"


def mechanism_label(config: Mapping[str, Any]) -> str:
    """The audited mechanism as a reader names it: its registry name or its callable, with parameters."""
    mechanism = config.get("mechanism", {}) or {}
    name = mechanism.get("name") or mechanism.get("callable")
    if name is None:
        return "unnamed mechanism"
    if not isinstance(name, str):  # a function object passed to run_audit
        name = getattr(name, "__qualname__", repr(name))
    params = mechanism.get("params") or {}
    shown = ", ".join(f"{key}={value}" for key, value in params.items() if np.ndim(value) == 0)
    return f"{name} ({shown})" if shown else name


def interval_level_text(rows: pd.DataFrame) -> str:
    """How confident the drawn intervals are: the ``level`` column's value(s), else a pointer to the table.

    Holm's procedure gives each row its own level (:mod:`audit.verdicts`), so a
    single level is stated only when the rows say so.
    """
    if "level" in rows.columns:
        levels = pd.to_numeric(rows["level"], errors="coerce").dropna().unique()
        if len(levels) == 1:
            return f"intervals at level {levels[0]:.4g}"
        if len(levels) > 1:
            return f"intervals at levels {min(levels):.4g} to {max(levels):.4g} (per row, see table)"
    return "intervals at the per-row level, see table"


def write_figures(table: pd.DataFrame, figure_dir: pathlib.Path, *, mechanism: str) -> list[pathlib.Path]:
    """Write one figure per (divergence, alpha) of ``table`` into ``figure_dir``.

    Parameters
    ----------
    table : pandas.DataFrame
        Results rows (:data:`audit.schema.ROW_COLUMNS`); an optional ``level``
        column gives each row's interval level.
    figure_dir : Path
        Existing directory for the PNGs.
    mechanism : str
        The mechanism's name as shown in titles (:func:`mechanism_label`).

    Returns
    -------
    list of Path
        The written files, sorted by divergence and alpha; none for a group
        whose rows all lack an estimate (failed tasks): no empty figures.
    """
    paths = []
    for (divergence, alpha), rows in table.groupby(["divergence", "alpha"], dropna=False, sort=True):
        if pd.to_numeric(rows["estimate"], errors="coerce").isna().all():
            continue
        path = figure_dir / f"{figure_name(divergence, alpha)}.png"
        fig = plot_group(rows, f"{divergence_title(divergence, alpha)} — {mechanism}")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_group(rows: pd.DataFrame, title: str) -> matplotlib.figure.Figure:
    """One figure: a panel per claim, the attack classes along x, one labelled point per row.

    Each point's annotation is ``"<pair> <direction>"`` (plus ``" unbounded"``
    for an infinite estimate drawn as a triangle at the top).
    """
    claims = rows[["claim_class", "claim"]].drop_duplicates().itertuples(index=False)
    claims = list(claims)
    bottom, ceiling = _value_range(rows)
    classes = sorted(set(rows["function_class"]), key=lambda name: (name != "linear", name))
    points = rows.groupby(["function_class"]).size().max()
    width = max(4.5, 0.9 * len(classes) * max(1, points) ** 0.5 + 2.0)
    fig, axes = plt.subplots(
        1, len(claims), figsize=(width * len(claims) + 2.2, 4.4), sharey=True, squeeze=False
    )
    drawn: set[str] = set()
    for ax, claim in zip(axes[0], claims):
        members = rows[(rows["claim_class"] == claim.claim_class) & _same(rows["claim"], claim.claim)]
        drawn |= _plot_panel(ax, members, classes, ceiling)
        if np.isfinite(claim.claim):
            ax.axhline(claim.claim, color=CLAIM_COLOUR, linestyle="--", linewidth=1)
            drawn.add("claim")
        ax.set_title(f"claim: class {claim.claim_class}, at most {format_number(claim.claim)}", fontsize=9)
        ax.set_xlim(-0.6, len(classes) - 0.4)
        ax.set_xlabel("function class (attack)")
    axes[0][0].set_ylim(bottom, ceiling + 0.08 * (ceiling - bottom))
    axes[0][0].set_ylabel("held-out estimate")
    fig.suptitle(f"{title}\n{interval_level_text(rows)}", fontsize=10)
    axes[0][-1].legend(
        handles=_legend_handles(drawn), fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0)
    )
    fig.tight_layout()
    return fig


def _plot_panel(ax: Any, rows: pd.DataFrame, classes: list[str], ceiling: float) -> set[str]:
    """Draw one claim's rows; return the names of the legend entries drawn."""
    drawn = set()
    for i, function_class in enumerate(classes):
        members = rows[rows["function_class"] == function_class].sort_values(["pair", "direction"])
        offsets = np.linspace(-0.3, 0.3, len(members)) if len(members) > 1 else [0.0]
        for x, row in zip(i + np.asarray(offsets), members.itertuples()):
            colour = VERDICT_COLOURS.get(row.verdict, "black")
            drawn.add(f"verdict:{row.verdict}")
            y = ceiling if np.isposinf(row.estimate) else row.estimate
            if np.isposinf(row.estimate):
                ax.plot(x, y, marker="^", color=colour, markersize=9, linestyle="")
            elif np.isfinite(row.estimate):
                low = row.estimate - row.ci_low if np.isfinite(row.ci_low) else 0.0
                high = min(row.ci_high, ceiling) - row.estimate if not math.isnan(row.ci_high) else 0.0
                ax.errorbar(x, y, yerr=[[max(low, 0.0)], [max(high, 0.0)]], fmt="o", color=colour, capsize=3)
            else:
                continue
            label = f"{row.pair} {row.direction}" + (" unbounded" if np.isposinf(row.estimate) else "")
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=6.5, rotation=30)
            if np.isfinite(row.exact):
                ax.plot(x, row.exact, marker="x", color=EXACT_COLOUR, markersize=7, linestyle="")
                drawn.add("exact")
            if np.isfinite(row.theory_bound):
                ax.plot(x, row.theory_bound, marker="_", color=BOUND_COLOUR, markersize=14,
                        markeredgewidth=2, linestyle="")
                drawn.add("theory bound")
    ax.set_xticks(range(len(classes)), classes)
    return drawn


def _legend_handles(drawn: set[str]) -> list[Any]:
    handles = [
        plt.Line2D([], [], marker="o", linestyle="", color=colour, label=verdict)
        for verdict, colour in VERDICT_COLOURS.items()
        if f"verdict:{verdict}" in drawn
    ]
    if "claim" in drawn:
        handles.append(plt.Line2D([], [], color=CLAIM_COLOUR, linestyle="--", linewidth=1, label="claim"))
    if "exact" in drawn:
        handles.append(plt.Line2D([], [], marker="x", linestyle="", color=EXACT_COLOUR, label="exact"))
    if "theory bound" in drawn:
        handles.append(plt.Line2D([], [], marker="_", linestyle="", color=BOUND_COLOUR, markersize=14,
                                  markeredgewidth=2, label="theory bound"))
    return handles


def _value_range(rows: pd.DataFrame) -> tuple[float, float]:
    """(bottom, ceiling) of the y axis: every finite value drawn, with room above for unbounded rows."""
    bounded = rows[np.isfinite(rows["estimate"].astype(float))]
    values = pd.concat(
        [bounded[c] for c in ("estimate", "ci_low", "ci_high")] + [rows[c] for c in ("claim", "theory_bound", "exact")]
    ).astype(float)
    values = values[np.isfinite(values)]
    top = float(values.max()) if len(values) else 1.0
    bottom = min(0.0, float(values.min())) if len(values) else 0.0
    return bottom, top + 0.1 * (top - bottom or 1.0)


def _same(column: pd.Series, value: float) -> pd.Series:
    """Equality that also matches NaN with NaN (a claim without a value)."""
    values = column.astype(float)
    return values.isna() if math.isnan(value) else values == value


def format_number(value: Any) -> str:
    """A number as the report prints it: 4 significant digits, ``-`` for a missing one, ``inf``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4g}" if isinstance(value, (int, float, np.number)) else str(value)


def write_evidence_figures(strongest: pd.DataFrame, figure_dir: pathlib.Path, *, mechanism: str) -> list[pathlib.Path]:
    """The held-out scores behind each claim's strongest row: ``witness.png`` and, for dp and ipm, ``roc.png``.

    Parameters
    ----------
    strongest : pandas.DataFrame
        One row per claim (the Claims table's strongest rows, :mod:`audit.report`) with a
        ``held_out_scores`` column (:func:`attacks.estimate.score_histogram`'s
        dict, or None where the row has no scores, e.g. a failed task).
    figure_dir : Path
    mechanism : str

    Returns
    -------
    list of Path
        The files written (none when no row has scores).
    """
    rows = strongest[strongest["held_out_scores"].map(_has_scores)]
    figures = {"witness": (rows, plot_witness_histograms, "Held-out scores of the winning witness, per claim")}
    attack_sets = rows["divergence"].map(lambda name: not divergence_kind(name).weighted).astype(bool)
    figures["roc"] = (rows[attack_sets], plot_roc, "ROC of the winning attack set, per claim")
    paths = []
    for name, (members, plot, title) in figures.items():
        if len(members):
            fig = plot(members, f"{title} — {mechanism}")
            fig.savefig(figure_dir / f"{name}.png", dpi=110)
            plt.close(fig)
            paths.append(figure_dir / f"{name}.png")
    return paths


def plot_witness_histograms(rows: pd.DataFrame, title: str) -> matplotlib.figure.Figure:
    """A panel per row: densities of the held-out score on P and on Q, and the attack set's threshold."""
    fig, axes = plt.subplots(1, len(rows), figsize=(4.6 * len(rows) + 1.0, 3.8), squeeze=False)
    for ax, row in zip(axes[0], rows.to_dict(orient="records")):
        scores = row["held_out_scores"]
        edges = np.asarray(scores["edges"])
        for law, colour in (("p", "tab:blue"), ("q", "tab:brown")):
            counts = np.asarray(scores[law], dtype=float)
            ax.stairs(counts / max(counts.sum(), 1.0) / np.diff(edges), edges, color=colour,
                      label=f"{law.upper()} (held out, {int(counts.sum())})")
        if scores.get("threshold") is not None:
            ax.axvline(scores["threshold"], color="black", linestyle=":", label="attack set: score > t")
        ax.set_title(_row_title(row), fontsize=8)
        ax.set_xlabel("witness score (large on P)")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("density")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_roc(rows: pd.DataFrame, title: str) -> matplotlib.figure.Figure:
    """Per row, the ROC of the sets {score > t} on linear and on log axes; for dp the claim's epsilon-DP region.

    A set S with P(S) = TPR and Q(S) = FPR is allowed by epsilon-DP (delta = 0)
    only if TPR <= min(e^eps FPR, 1 - e^-eps (1 - FPR)) (the hypothesis-testing
    view of DP, Kairouz, Oh and Viswanath 2015); the shaded region is that set.
    Points come from the binned held-out scores, without confidence intervals:
    the verdict is in the table.
    """
    fig, axes = plt.subplots(len(rows), 2, figsize=(9.5, 4.0 * len(rows)), squeeze=False)
    for (linear, log), row in zip(axes, rows.to_dict(orient="records")):
        fpr, tpr, chosen = roc_points(row["held_out_scores"])
        for ax, scale in ((linear, "linear"), (log, "log")):
            grid = np.linspace(0.0, 1.0, 201) if scale == "linear" else np.logspace(-4, 0, 201)
            if divergence_kind(row["divergence"]) is DP and np.isfinite(row["claim"]):
                epsilon = float(row["claim"])
                bound = np.minimum(np.exp(epsilon) * grid, 1.0 - np.exp(-epsilon) * (1.0 - grid))
                ax.fill_between(grid, 0.0, bound, color="tab:green", alpha=0.15,
                                label=f"{format_number(epsilon)}-DP region (delta = 0)")
            ax.plot(grid, grid, color="gray", linewidth=0.8, label="chance")
            ax.plot(fpr, tpr, marker=".", color="tab:blue", label="sets {score > t}, held out")
            if chosen is not None:
                ax.plot(*chosen, marker="*", markersize=12, color="tab:red", linestyle="",
                        label="the attack set")
            ax.set_xscale(scale)
            ax.set_yscale(scale)
            ax.set_xlabel("FPR = Q(S)")
            ax.set_ylabel("TPR = P(S)")
            ax.set_title(f"{_row_title(row)}\n({scale} axes)", fontsize=8)
        log.set_xlim(left=max(1e-4, 0.5 * min([x for x in fpr if x > 0], default=1e-4)))
        log.set_ylim(bottom=max(1e-4, 0.5 * min([y for y in tpr if y > 0], default=1e-4)))
        linear.legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def roc_points(scores: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, tuple[float, float] | None]:
    """(FPR, TPR) of the sets {score >= e} at every bin edge e, and the attack set's point (or None).

    Parameters
    ----------
    scores : mapping
        :func:`attacks.estimate.score_histogram`'s dict.

    Returns
    -------
    fpr, tpr : arrays of shape (n_edges,)
        Q's and P's share of held-out scores at or above each edge, from 1 down to 0.
    chosen : (fpr, tpr) or None
        At the first edge at or above the threshold, when there is one.
    """
    p, q = np.asarray(scores["p"], dtype=float), np.asarray(scores["q"], dtype=float)
    tpr = np.r_[np.cumsum(p[::-1])[::-1], 0.0] / max(p.sum(), 1.0)
    fpr = np.r_[np.cumsum(q[::-1])[::-1], 0.0] / max(q.sum(), 1.0)
    threshold = scores.get("threshold")
    if threshold is None:
        return fpr, tpr, None
    index = int(np.searchsorted(np.asarray(scores["edges"]), threshold))
    return fpr, tpr, (float(fpr[min(index, fpr.size - 1)]), float(tpr[min(index, tpr.size - 1)]))


def _row_title(row: Mapping[str, Any]) -> str:
    return (
        f"{divergence_title(row['divergence'], row['alpha'])}, class {row['claim_class']} "
        f"at most {format_number(row['claim'])}\n{row['function_class']} {row['pair']} {row['direction']}: "
        f"estimate {format_number(row['estimate'])}, lower bound {format_number(row['ci_low'])}, {row['verdict']}"
    )


def _has_scores(value: Any) -> bool:
    return isinstance(value, Mapping) and len(value.get("edges", ())) >= 2


def write_tradeoff_figure(panels: Sequence[Any], figure_dir: pathlib.Path, *, mechanism: str) -> list[pathlib.Path]:
    """``tradeoff.png``: a panel per curve claim (:func:`audit.tradeoff_report.tradeoff_panels`); none without one."""
    if not panels:
        return []
    fig = plot_tradeoff(panels, f"Trade-off curves per attack class — {mechanism}")
    fig.savefig(figure_dir / "tradeoff.png", dpi=110)
    plt.close(fig)
    return [figure_dir / "tradeoff.png"]


def plot_tradeoff(panels: Sequence[Any], title: str) -> matplotlib.figure.Figure:
    """Per curve claim: the claimed trade-off function, the exact and the linear class's curves where the output
    laws are known, and per attack class its empirical curve (thin) and upper confidence band (thick).

    Type-II error b against type-I error a (Dong, Roth and Su 2022): a curve lower
    down is a more powerful test; a class's band below the claimed curve
    shows its tests beating the claim.
    """
    from audit.tradeoff_report import LEVELS

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 0.6, 5.0), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel.exact is not None:
            ax.plot(LEVELS, panel.exact, color="tab:gray", linewidth=2.5, alpha=0.6, label="exact T(P, Q)")
        if panel.linear is not None:
            ax.plot(LEVELS, panel.linear, color="tab:gray", linestyle=":", linewidth=1.4,
                    label="exact, linear class (restricted)")
        implied = " (its Renyi bounds on tests)" if isinstance(panel.family.curve, ZCDP) else ""
        ax.plot(LEVELS, panel.family.tradeoff(LEVELS), color=CLAIM_COLOUR, linestyle="--", linewidth=1.6,
                label=f"claimed curve{implied}")
        for evidence, colour in zip(panel.classes, plt.rcParams["axes.prop_cycle"].by_key()["color"][1:]):
            curve = evidence.curve
            ax.plot(curve.type_one, curve.type_two, color=colour, linewidth=0.9, alpha=0.8,
                    label=f"{evidence.function_class}: empirical ({evidence.pair} {evidence.direction})")
            crossed = " — below the claim" if evidence.crossing else ""
            ax.plot(LEVELS, curve.band(LEVELS), color=colour, linewidth=2.0,
                    label=f"{evidence.function_class}: {curve.confidence:g} band{crossed}")
        ax.plot([0, 1], [1, 0], color="lightgray", linewidth=0.8, label="no privacy loss (b = 1 - a)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("type-I error a")
        ax.set_ylabel("type-II error b")
        ax.set_title(panel.family.label, fontsize=9)
        ax.legend(fontsize=6.5, loc="upper right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
