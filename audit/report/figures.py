"""The figures of an audit report: estimates with intervals, beside the claims and the theory.

One SVG per (divergence, alpha), with one panel per claim on that divergence,
drawn by :mod:`audit.report.svg` (no matplotlib: an audit's report costs no plotting
library's import).  A results row is one (task, claim) pair, so a task
audited against two claims has two rows whose intervals can differ (Holm's
levels depend on the claim, :mod:`audit.results.verdicts`); drawing each row in its
own claim's panel shows every row exactly once, with its own interval and
verdict, and never draws a point over another.

Every point is labelled by its pair and direction; the claim is a black
dashed line (red is kept for violations), the exact restricted divergence a
black cross and the paper's closed-form bound a blue bar, and the legend lists
only what the figure draws.  Titles name the divergence in words and the
mechanism, and say that each row has its own interval level (in the table);
an on-average claim has its own panel beside a worst-case claim of the same value.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attacks.classes import LINEAR, parse_function_class
from attacks.vocabulary import DP, ZCDP, divergence_kind
from audit.results.schema import Row, has_scores
from audit.report.svg import TAB10, Axes, Figure, Style
from audit.report.tables import format_number

if TYPE_CHECKING:
    from audit.report.tradeoff import Panel

VERDICT_COLOURS = {
    "violation": TAB10["red"],
    "inconclusive": TAB10["orange"],
    "pass": TAB10["green"],
    "info": TAB10["gray"],
}
"""Marker colour of a row by its verdict; no other element of a figure is red."""
CLAIM = Style(colour="#000000", width=1.0, line="dashed")
EXACT = Style(colour="#000000", width=1.5, line=None, marker="x", size=8)
BOUND = Style(colour=TAB10["blue"], width=2.5, line=None, marker="_", size=16)
INTERVAL_LEVEL = "intervals at the per-row level, see table"
"""Holm's procedure gives each row its own level (:mod:`audit.results.verdicts`): the table states it."""
CLASS_COLOURS = [TAB10[name] for name in ("orange", "green", "purple", "brown", "pink", "olive", "cyan")]
"""The trade-off figure's colour per attack class (tab10 without blue, red and gray, used for other lines)."""


def figure_name(divergence: str, alpha: Any) -> str:
    """File stem of a group's figure: ``kl``, ``dp``, ``renyi_alpha4``."""
    return f"{divergence}_alpha{format_number(alpha)}" if divergence_kind(divergence).has_order else str(divergence)


def divergence_title(divergence: str, alpha: Any = None) -> str:
    """The divergence in words (:attr:`attacks.vocabulary.Divergence.words`): ``"Rényi divergence of order 4"``."""
    kind = divergence_kind(divergence)
    return f"{kind.words} of order {format_number(alpha)}" if kind.has_order else kind.words


def class_words(function_class: Any) -> str:
    """An attack or claim class in words with its name, e.g. ``"polynomials of degree 2 (poly2)"``."""
    try:
        hclass = parse_function_class(function_class)
    except ValueError:
        return str(function_class)
    return f"{hclass.words} ({hclass.name})"


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


def write_figures(rows: Sequence[Row], figure_dir: pathlib.Path, *, mechanism: str) -> list[pathlib.Path]:
    """Write one figure per (divergence, alpha) of ``rows`` into ``figure_dir``.

    Parameters
    ----------
    rows : sequence of audit.results.schema.Row
        The results rows.
    figure_dir : Path
        Existing directory for the SVGs.
    mechanism : str
        The mechanism's name as shown in titles (:func:`mechanism_label`).

    Returns
    -------
    list of Path
        The written files, sorted by divergence and alpha; none for a group
        whose rows all lack an estimate (failed tasks): no empty figures.
    """
    groups: dict[tuple[str, float | None], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.divergence, _key(row.alpha)), []).append(row)
    paths = []
    for divergence, alpha in sorted(groups, key=lambda key: (key[0], key[1] is None, key[1] or 0.0)):
        members = groups[divergence, alpha]
        if all(math.isnan(row.estimate) for row in members):
            continue
        fig = plot_group(members, f"{divergence_title(divergence, alpha)} — {mechanism}")
        paths.append(fig.save(figure_dir / f"{figure_name(divergence, alpha)}.svg"))
    return paths


def plot_group(rows: Sequence[Row], title: str) -> Figure:
    """One figure: a panel per claim, the attack classes along x, one labelled point per row.

    Each point's annotation is ``"<pair> <direction>"`` (plus ``" unbounded"``
    for an infinite estimate drawn as a triangle at the top).
    """
    claims = list(dict.fromkeys(_claim(row) for row in rows))
    bottom, ceiling = _value_range(rows)
    classes = sorted({row.function_class for row in rows}, key=lambda name: (parse_function_class(name) != LINEAR, name))
    points = max(collections.Counter((_claim(row), row.function_class) for row in rows).values())
    width = max(320.0, 90.0 * len(classes) * points ** 0.5 + 120.0)
    fig = Figure(1, len(claims), panel=(width, 280.0), title=f"{title}\n{INTERVAL_LEVEL}", sharey=True)
    drawn: set[str] = set()
    for ax, (claim_class, claim, delta, on_average) in zip(fig.axes[0], claims):
        members = [row for row in rows if _claim(row) == (claim_class, claim, delta, on_average)]
        drawn |= _plot_panel(ax, members, classes, ceiling)
        if claim is not None and math.isfinite(claim):
            ax.hline(claim, CLAIM)
            drawn.add("claim")
        ax.title = (f"claim: class {claim_class}, at most {format_number(claim)}"
                    + (f", delta {format_number(delta)}" if delta else "") + (" on average" if on_average else ""))
        ax.xlim = (-0.6, len(classes) - 0.4)
        ax.xticks = list(enumerate(classes))
        ax.xlabel = "function class (attack)"
    fig.axes[0][0].ylim = (bottom, ceiling + 0.08 * (ceiling - bottom))
    fig.axes[0][0].ylabel = "held-out estimate"
    fig.axes[0][-1].legend("right", _legend_entries(drawn))
    return fig


def _plot_panel(ax: Axes, rows: Sequence[Row], classes: list[str], ceiling: float) -> set[str]:
    """Draw one claim's rows; return the names of the legend entries drawn."""
    drawn = set()
    for i, function_class in enumerate(classes):
        members = sorted((row for row in rows if row.function_class == function_class),
                         key=lambda row: (row.pair, row.direction))
        offsets = np.linspace(-0.3, 0.3, len(members)) if len(members) > 1 else [0.0]
        for x, row in zip(i + np.asarray(offsets), members):
            marker = Style(colour=VERDICT_COLOURS.get(row.verdict, "#000000"), line=None, marker="o", size=7)
            unbounded = row.estimate == math.inf
            if unbounded:
                y = ceiling
                ax.plot([x], [y], dataclasses.replace(marker, marker="^", size=11))
            elif math.isfinite(row.estimate):
                y = row.estimate
                low = min(row.ci_low, y) if math.isfinite(row.ci_low) else y
                high = max(min(row.ci_high, ceiling), y) if not math.isnan(row.ci_high) else y
                ax.errorbar([x], [y], [low], [high], marker, cap=3.5)
            else:
                continue
            drawn.add(f"verdict:{row.verdict}")
            ax.text(x, y, f"{row.pair} {row.direction}" + (" unbounded" if unbounded else ""), offset=(9.0, -4.0),
                    angle=30)
            if math.isfinite(row.exact):
                ax.plot([x], [row.exact], EXACT)
                drawn.add("exact")
            if math.isfinite(row.theory_bound):
                ax.plot([x], [row.theory_bound], BOUND)
                drawn.add("theory bound")
    return drawn


def _legend_entries(drawn: set[str]) -> list[tuple[str, Style]]:
    """The legend of a group figure: the verdicts drawn, then the claim, exact and theory bound where drawn."""
    entries = [(verdict, Style(colour=colour, line=None, marker="o", size=7))
               for verdict, colour in VERDICT_COLOURS.items() if f"verdict:{verdict}" in drawn]
    return entries + [(name, style) for name, style in (("claim", CLAIM), ("exact", EXACT), ("theory bound", BOUND))
                      if name in drawn]


def _value_range(rows: Sequence[Row]) -> tuple[float, float]:
    """(bottom, ceiling) of the y axis: every finite value drawn, with room above for unbounded rows."""
    values = [v for row in rows if math.isfinite(row.estimate) for v in (row.estimate, row.ci_low, row.ci_high)]
    values += [v for row in rows for v in (row.claim, row.theory_bound, row.exact)]
    values = [v for v in values if v is not None and math.isfinite(v)]
    top = max(values, default=1.0)
    bottom = min(0.0, min(values, default=0.0))
    return bottom, top + 0.1 * (top - bottom or 1.0)


def _claim(row: Row) -> tuple[str, float | None, float | None, bool]:
    """The claim a row is judged against, as far as a figure tells claims apart (its delta included): a panel each."""
    return row.claim_class, _key(row.claim), _key(row.delta), row.on_average


def _key(value: float | None) -> float | None:
    """A number usable as a key: None for a missing one (NaN never equals itself)."""
    return None if value is None or math.isnan(value) else value


def write_evidence_figures(strongest: Sequence[tuple[Row, Mapping[str, Any] | None]], figure_dir: pathlib.Path, *,
                           mechanism: str) -> list[pathlib.Path]:
    """The held-out scores behind each claim's strongest row: ``witness.svg`` and, for dp and ipm, ``roc.svg``.

    Parameters
    ----------
    strongest : sequence of (audit.results.schema.Row, mapping or None)
        One row per claim (the Claims table's strongest rows, :mod:`audit.report.audit_report`) with its
        held-out scores (:func:`attacks.estimate.score_histogram`'s dict, or None where the
        row has no scores, e.g. a failed task).
    figure_dir : Path
    mechanism : str

    Returns
    -------
    list of Path
        The files written (none when no row has scores).
    """
    shown = [(row, scores) for row, scores in strongest if has_scores(scores)]
    attack_sets = [(row, scores) for row, scores in shown if not divergence_kind(row.divergence).weighted]
    figures = {
        "witness": (shown, plot_witness_histograms, "Held-out scores of the winning witness, per claim"),
        "roc": (attack_sets, plot_roc, "ROC of the winning attack set, per claim"),
    }
    return [plot(members, f"{title} — {mechanism}").save(figure_dir / f"{name}.svg")
            for name, (members, plot, title) in figures.items() if members]


def plot_witness_histograms(shown: Sequence[tuple[Row, Mapping[str, Any]]], title: str) -> Figure:
    """A panel per row: densities of the held-out score on P and on Q, and the attack set's threshold."""
    fig = Figure(1, len(shown), panel=(400.0, 240.0), title=title)
    for ax, (row, scores) in zip(fig.axes[0], shown):
        edges = np.asarray(scores["edges"], dtype=float)
        top = 0.0
        for law, colour in (("p", TAB10["blue"]), ("q", TAB10["brown"])):
            counts = np.asarray(scores[law], dtype=float)
            widths = np.diff(edges)  # a bin between two adjacent floats can be empty of width: no density drawn
            density = np.divide(counts / max(counts.sum(), 1.0), widths, out=np.zeros_like(counts), where=widths > 0)
            ax.stairs(density, edges, Style(colour=colour), label=f"{law.upper()} (held out, {int(counts.sum())})")
            top = max(top, float(density.max(initial=0.0)))
        if scores.get("threshold") is not None:
            ax.vline(scores["threshold"], Style(line="dotted"), label="attack set: score > t")
        ax.ylim = (0.0, 1.45 * top or 1.0)  # room for the legend above the bars
        ax.title = _row_title(row)
        ax.xlabel = "witness score (large on P)"
        ax.legend("upper left")
    fig.axes[0][0].ylabel = "density"
    return fig


def plot_roc(shown: Sequence[tuple[Row, Mapping[str, Any]]], title: str) -> Figure:
    """Per row, the ROC of the sets {score > t} on linear and on log axes; for dp the claim's epsilon-DP region.

    A set S with P(S) = TPR and Q(S) = FPR is allowed by epsilon-DP (delta = 0)
    only if TPR <= min(e^eps FPR, 1 - e^-eps (1 - FPR)) (the hypothesis-testing
    view of DP, Kairouz, Oh and Viswanath 2015); the shaded region is that set.
    Points come from the binned held-out scores, without confidence intervals:
    the verdict is in the table.
    """
    fig = Figure(len(shown), 2, panel=(380.0, 260.0), title=title)
    for (linear, log), (row, scores) in zip(fig.axes, shown):
        fpr, tpr, chosen = roc_points(scores)
        for ax, scale in ((linear, "linear"), (log, "log")):
            grid = np.logspace(-4, 0, 201) if scale == "log" else np.linspace(0.0, 1.0, 201)
            if divergence_kind(row.divergence) is DP and math.isfinite(row.claim):
                epsilon = row.claim
                bound = np.minimum(np.exp(epsilon) * grid, 1.0 - np.exp(-epsilon) * (1.0 - grid))
                ax.fill_between(grid, 0.0, bound, TAB10["green"], alpha=0.15,
                                label=f"{format_number(epsilon)}-DP region (delta = 0)")
            ax.plot(grid, grid, Style(colour=TAB10["gray"], width=0.8), label="chance")
            ax.plot(fpr, tpr, Style(colour=TAB10["blue"], marker=".", size=7), label="sets {score > t}, held out")
            if chosen is not None:
                ax.plot([chosen[0]], [chosen[1]], Style(line=None, marker="*", size=16), label="the attack set")
            ax.xscale = ax.yscale = scale
            ax.xlabel, ax.ylabel = "FPR = Q(S)", "TPR = P(S)"
            ax.title = f"{_row_title(row)}\n({scale} axes)"
        linear.xlim = linear.ylim = (-0.05, 1.05)
        log.xlim = (max(1e-4, 0.5 * fpr[fpr > 0].min(initial=1e-4)), 1.2)
        log.ylim = (max(1e-4, 0.5 * tpr[tpr > 0].min(initial=1e-4)), 1.2)
        linear.legend("lower right")
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


def _row_title(row: Row) -> str:
    return (
        f"{divergence_title(row.divergence, row.alpha)}, class {row.claim_class} "
        f"at most {format_number(row.claim)}\n{row.function_class} {row.pair} {row.direction}: "
        f"estimate {format_number(row.estimate)}, lower bound {format_number(row.ci_low)}, {row.verdict}"
    )


def write_tradeoff_figure(panels: Sequence[Panel], figure_dir: pathlib.Path, *, mechanism: str) -> list[pathlib.Path]:
    """``tradeoff.svg``: a panel per curve claim (:func:`audit.report.tradeoff.tradeoff_panels`); none without one."""
    if not panels:
        return []
    fig = plot_tradeoff(panels, f"Trade-off curves per attack class — {mechanism}")
    return [fig.save(figure_dir / "tradeoff.svg")]


DECIDING_REGION = 0.1
"""Type-I errors a below this are drawn again in a zoomed panel: where a dp member's curve 1 - delta - e^eps a
falls steeply and a class's band decides against the claim, squashed on the full square."""


def plot_tradeoff(panels: Sequence[Panel], title: str) -> Figure:
    """Per curve claim: the claimed trade-off function, the exact and the linear class's curves where the output
    laws are known, and per attack class its empirical curve (dashed) and upper confidence band (solid), on the
    full square (top) and zoomed on the deciding region a <= :data:`DECIDING_REGION` (bottom).

    Type-II error b against type-I error a (Dong, Roth and Su 2022): a curve lower
    down is a more powerful test; a class's band below the claimed curve
    shows its tests beating the claim.
    """
    from audit.report.tradeoff import LEVELS

    fig = Figure(2, len(panels), panel=(360.0, 360.0), title=title)
    zoom = LEVELS <= DECIDING_REGION
    for column, panel in enumerate(panels):
        lowest = []  # b of each curve within the deciding region: the zoomed panel's y range
        for row, ax in enumerate((fig.axes[0][column], fig.axes[1][column])):
            if panel.exact is not None:
                ax.plot(LEVELS, panel.exact, Style(colour=TAB10["gray"], width=2.5, alpha=0.6), label="exact T(P, Q)")
                lowest.append(panel.exact[zoom])
            if panel.linear is not None:
                ax.plot(LEVELS, panel.linear, Style(colour=TAB10["gray"], line="dotted", width=1.4),
                        label="exact, linear class (restricted)")
                lowest.append(panel.linear[zoom])
            implied = " (its Renyi bounds on tests)" if isinstance(panel.family.curve, ZCDP) else ""
            claimed = panel.family.tradeoff(LEVELS)
            ax.plot(LEVELS, claimed, dataclasses.replace(CLAIM, width=1.6), label=f"claimed curve{implied}")
            lowest.append(claimed[zoom])
            for evidence, colour in zip(panel.classes, itertools.cycle(CLASS_COLOURS)):
                curve = evidence.curve
                ax.plot(curve.type_one, curve.type_two, Style(colour=colour, width=1.6, line="dashed"),
                        label=f"{evidence.function_class}: empirical ({evidence.pair} {evidence.direction})")
                crossed = " — below the claim" if evidence.crossing else ""
                band = curve.band(LEVELS)
                ax.plot(LEVELS, band, Style(colour=colour, width=2.2),
                        label=f"{evidence.function_class}: {curve.confidence:g} band{crossed}")
                lowest += [band[zoom], curve.type_two[curve.type_one <= DECIDING_REGION]]
            ax.plot([0.0, 1.0], [1.0, 0.0], Style(colour="#d3d3d3", width=0.8), label="no privacy loss (b = 1 - a)")
            ax.xlabel, ax.ylabel = "type-I error a", "type-II error b"
            if row == 0:
                ax.xlim = ax.ylim = (0.0, 1.0)
                ax.title = panel.label or panel.family.label
                ax.legend("upper right", size=8.0)
        ax.xlim = (0.0, DECIDING_REGION)
        floor = min((float(np.nanmin(b)) for b in lowest if np.size(b) and np.isfinite(b).any()), default=0.0)
        ax.ylim = (max(0.0, floor - 0.05 * (1.0 - floor)), 1.0)
        ax.title = f"zoomed: a <= {DECIDING_REGION:g}, where the claim is decided"
    return fig
