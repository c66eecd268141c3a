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
from collections.abc import Mapping
from typing import Any

import matplotlib
import matplotlib.figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

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
_DIVERGENCE_WORDS = {
    "kl": "KL divergence",
    "renyi": "Rényi divergence",
    "ipm": "IPM (total variation of the class)",
    "dp": "DP epsilon (log-ratio of an attack set)",
}


def figure_name(divergence: str, alpha: Any) -> str:
    """File stem of a group's figure: ``kl``, ``dp``, ``renyi_alpha4``."""
    return f"{divergence}_alpha{format_number(alpha)}" if divergence == "renyi" else str(divergence)


def divergence_title(divergence: str, alpha: Any = None) -> str:
    """The divergence in words, e.g. ``"Rényi divergence of order 4"``."""
    words = _DIVERGENCE_WORDS.get(divergence, str(divergence))
    return f"{words} of order {format_number(alpha)}" if divergence == "renyi" else words


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
        Results rows (:data:`audit.report.ROW_COLUMNS`); an optional ``level``
        column gives each row's interval level.
    figure_dir : Path
        Existing directory for the PNGs.
    mechanism : str
        The mechanism's name as shown in titles (:func:`mechanism_label`).

    Returns
    -------
    list of Path
        The written files, sorted by divergence and alpha.
    """
    paths = []
    for (divergence, alpha), rows in table.groupby(["divergence", "alpha"], dropna=False, sort=True):
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
        ax.set_xlabel("attack class")
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
