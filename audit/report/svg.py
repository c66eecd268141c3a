"""A minimal SVG plot writer: every figure capaudit draws (``run``, ``theory``, ``oakl``), no plotting library.

The reports' figures need far less than a plotting library offers, and an
audit should not pay for importing one (docs/speed.md).  A :class:`Figure` is a grid of :class:`Axes` panels
(optionally sharing y), each with a linear or log10 x and y scale, "nice"
ticks (1-2-5 steps, decades on log axes), lines, markers, error bars,
reference lines, step curves, filled regions, small rotated labels and a
legend; markers filled or hollow.  Data are clipped to the axes box; a NaN, an infinity, or a value
<= 0 on a log axis is not drawn (a line breaks there).  Text widths are
estimated (:data:`EM` of the font size per character): no font is measured.

The output is a standalone SVG 1.1 document, white background, sizes in px;
every text is escaped, since titles carry user-chosen names.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

import numpy as np

TAB10 = {
    "blue": "#1f77b4", "orange": "#ff7f0e", "green": "#2ca02c", "red": "#d62728", "purple": "#9467bd",
    "brown": "#8c564b", "pink": "#e377c2", "gray": "#7f7f7f", "olive": "#bcbd22", "cyan": "#17becf",
}
"""matplotlib's ``tab10`` colours by name."""
EM = 0.55
"""Estimated text width per character, in units of the font size."""
DASHES = {"solid": None, "dashed": "5,3", "dotted": "1.5,2.5"}
"""Line styles and their ``stroke-dasharray``."""
MARKERS = ("o", "^", "x", "_", "*", ".", "v", "s")
FONT = {"title": 13.0, "panel": 10.5, "label": 11.0, "tick": 10.0, "legend": 10.0}
"""Font sizes in px of the figure title, panel titles, axis labels, tick labels and legend."""


@dataclasses.dataclass(frozen=True)
class Style:
    """How a line or a marker is drawn: ``line=None`` draws markers only, ``marker=None`` the line only;
    ``filled=False`` draws a marker's outline only (a hollow circle, triangle or square)."""

    colour: str = "#000000"
    width: float = 1.5
    line: str | None = "solid"
    marker: str | None = None
    size: float = 6.0
    alpha: float = 1.0
    filled: bool = True

    def __post_init__(self) -> None:
        if self.line is not None and self.line not in DASHES:
            raise ValueError(f"line must be one of {sorted(DASHES)} or None. Found {self.line!r}.")
        if self.marker is not None and self.marker not in MARKERS:
            raise ValueError(f"marker must be one of {MARKERS} or None. Found {self.marker!r}.")


def text_width(text: str, size: float) -> float:
    """Estimated width in px of the longest line of ``text`` at font size ``size``."""
    return EM * size * max((len(line) for line in str(text).split("\n")), default=0)


def nice_ticks(low: float, high: float, most: int = 8) -> list[float]:
    """Multiples of a 1-2-5 step (1, 2 or 5 times a power of ten) in [low, high]: the smallest step that cuts
    the range into at most ``most`` intervals (so 4 to 9 ticks)."""
    if not (math.isfinite(low) and math.isfinite(high) and high > low):
        raise ValueError(f"ticks need a finite range with high > low. Found [{low}, {high}].")
    raw = (high - low) / max(most, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """Decades in [low, high] (every other one past 8), else 1-2-5 multiples of decades, else :func:`nice_ticks`."""
    if not (0 < low < high and math.isfinite(high)):
        raise ValueError(f"log ticks need 0 < low < high < inf. Found [{low}, {high}].")
    lo, hi = math.log10(low), math.log10(high)
    decades = range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1)
    if len(decades) >= 2:
        stride = 1 if len(decades) <= 8 else 2
        return [10.0 ** k for k in decades[::stride]]
    multiples = [m * 10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)]
    inside = [value for value in multiples if low * (1 - 1e-9) <= value <= high * (1 + 1e-9)]
    return inside if len(inside) >= 2 else nice_ticks(low, high)


def tick_label(value: float, ticks: Sequence[float], scale: str) -> str:
    """A tick's text: as many decimals as the step needs on a linear axis, ``%g`` on a log axis."""
    if scale == "log":
        return f"{value:g}"
    step = min((b - a for a, b in zip(ticks, ticks[1:])), default=1.0) or 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    text = f"{value:.{decimals}f}"
    return "0" if float(text) == 0 else text


class _Scale:
    """Data to pixels along one axis: ``(low, high)`` onto ``(start, end)``, in log10 on a log axis."""

    def __init__(self, scale: str, limits: tuple[float, float], start: float, end: float) -> None:
        self.log = scale == "log"
        self.low, self.high = (math.log10(v) for v in limits) if self.log else limits
        self.start, self.end = start, end

    def __call__(self, values: np.ndarray | float) -> np.ndarray:
        """Pixel coordinates; NaN where a value cannot be drawn (NaN, inf, <= 0 on a log axis)."""
        values = np.asarray(values, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.where(values > 0, np.log10(np.where(values > 0, values, 1.0)), np.nan) if self.log else values
            pixels = self.start + (values - self.low) / (self.high - self.low) * (self.end - self.start)
        # far outside the box (clipped anyway), a pixel is held within 1e6 px: no 300-digit coordinates
        return np.where(np.isfinite(pixels), np.clip(pixels, -1e6, 1e6), np.nan)


@dataclasses.dataclass
class _Item:
    kind: str
    x: np.ndarray
    y: np.ndarray
    style: Style
    extra: dict


class Axes:
    """One panel: add data with :meth:`plot`, :meth:`errorbar`, ..., then set the labels and limits as attributes.

    Attributes
    ----------
    xscale, yscale : {"linear", "log"}
    xlim, ylim : (float, float) or None
        Axis limits; None: the data's range with 5 % margins.
    xticks : list of (float, str) or None
        Explicit ticks (e.g. categories); None: :func:`nice_ticks` / :func:`log_ticks`.
    title, xlabel, ylabel : str
        The title may have several lines.
    """

    def __init__(self) -> None:
        self.xscale = self.yscale = "linear"
        self.xlim: tuple[float, float] | None = None
        self.ylim: tuple[float, float] | None = None
        self.xticks: list[tuple[float, str]] | None = None
        self.title = self.xlabel = self.ylabel = ""
        self._items: list[_Item] = []
        self._legend: tuple[str, list[tuple[str, Style | str]] | None, float] | None = None

    def plot(self, x, y, style: Style = Style(), label: str | None = None) -> None:
        """A polyline through (x, y), broken where a point cannot be drawn, with ``style.marker`` at each point."""
        self._add("line", x, y, style, label=label)

    def errorbar(self, x, y, low, high, style: Style = Style(), cap: float = 3.0, label: str | None = None) -> None:
        """Markers at (x, y) with vertical bars from ``low`` to ``high`` (absolute values) capped ``cap`` px wide."""
        x, low, high = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (x, low, high))
        self._add("errorbar", x, y, style, label=label, low=low, high=high, cap=cap)

    def hline(self, y: float, style: Style = Style(), label: str | None = None) -> None:
        """A horizontal line across the panel at ``y``."""
        self._add("hline", [], [y], style, label=label)

    def vline(self, x: float, style: Style = Style(), label: str | None = None) -> None:
        """A vertical line across the panel at ``x``."""
        self._add("vline", [x], [], style, label=label)

    def stairs(self, values, edges, style: Style = Style(), label: str | None = None, baseline: float = 0.0) -> None:
        """A histogram outline: ``values[i]`` over ``[edges[i], edges[i + 1]]``, closed down to ``baseline``."""
        values, edges = np.asarray(values, dtype=float), np.asarray(edges, dtype=float)
        if edges.shape != (values.size + 1,):
            raise ValueError(f"stairs need one more edge than values. Found {edges.size} edges, {values.size} values.")
        x = np.repeat(edges, 2)
        y = np.r_[baseline, np.repeat(values, 2), baseline]
        self._add("line", x, y, style, label=label)

    def fill_between(self, x, low, high, colour: str, alpha: float = 0.15, label: str | None = None) -> None:
        """The region between the curves ``low`` and ``high`` over ``x``, clamped to the axes box."""
        x, low = np.asarray(x, dtype=float), np.broadcast_to(np.asarray(low, dtype=float), np.shape(x))
        self._add("fill", x, high, Style(colour=colour, line=None, alpha=alpha), label=label, low=low)

    def text(self, x: float, y: float, text: str, *, offset: tuple[float, float] = (4.0, -3.0),
             size: float = 8.0, angle: float = 0.0) -> None:
        """``text`` at data point (x, y) shifted ``offset`` px (right, down), rotated ``angle`` degrees
        counter-clockwise; not drawn when the point is outside the box."""
        self._items.append(_Item("text", np.atleast_1d(float(x)), np.atleast_1d(float(y)), Style(),
                                 {"text": str(text), "offset": offset, "size": size, "angle": angle}))

    def legend(self, loc: str = "upper right", entries: list[tuple[str, Style | str]] | None = None,
               size: float = FONT["legend"]) -> None:
        """Show a legend at ``loc`` (``"upper right"``, ``"upper left"``, ``"lower right"``, ``"lower left"`` or
        ``"right"``: outside, right of the panel) in font ``size``; ``entries`` (label, Style, or a colour for a
        filled patch) default to the labelled items in the order drawn."""
        if loc not in ("upper right", "upper left", "lower right", "lower left", "right"):
            raise ValueError(f"legend loc must be a corner ('upper right', ...) or 'right'. Found {loc!r}.")
        self._legend = (loc, entries, size)

    def _add(self, kind: str, x, y, style: Style, **extra) -> None:
        x = np.atleast_1d(np.asarray(x, dtype=float))
        y = np.atleast_1d(np.asarray(y, dtype=float))
        self._items.append(_Item(kind, x, y, style, extra))

    def legend_entries(self) -> list[tuple[str, Style | str]]:
        """What the legend shows: the explicit entries, else every labelled item once, in order."""
        if self._legend is None:
            return []
        if self._legend[1] is not None:
            return list(self._legend[1])
        entries: dict[str, Style | str] = {}
        for item in self._items:
            label = item.extra.get("label")
            if label and label not in entries:
                entries[label] = item.style.colour if item.kind == "fill" else item.style
        return list(entries.items())

    def data_limits(self, axis: str) -> tuple[float, float] | None:
        """The range of the drawable data along ``axis`` (``"x"`` or ``"y"``), with 5 % margins, or None."""
        scale = self.xscale if axis == "x" else self.yscale
        values = [item.x if axis == "x" else item.y for item in self._items if item.kind != "text"]
        values += [item.extra[k] for item in self._items if axis == "y" for k in ("low", "high") if k in item.extra]
        data = np.concatenate(values) if values else np.empty(0)
        data = data[np.isfinite(data) & ((data > 0) if scale == "log" else True)]
        if not data.size:
            return None
        low, high = float(data.min()), float(data.max())
        if scale == "log":
            low, high = math.log10(low), math.log10(high)
        pad = 0.05 * (high - low) if high > low else 0.5
        low, high = low - pad, high + pad
        return (10.0 ** low, 10.0 ** high) if scale == "log" else (low, high)


class Figure:
    """A grid of panels with a (multi-line) title, written as SVG.

    Parameters
    ----------
    rows, columns : int
        The grid's shape; ``axes[i][j]`` is its panel in row i, column j.
    panel : (float, float)
        Width and height of each panel's box in px.
    title : str
    sharey : bool
        All panels take one y range and only the first column labels its y axis.
    """

    def __init__(self, rows: int, columns: int, *, panel: tuple[float, float] = (320.0, 260.0),
                 title: str = "", sharey: bool = False) -> None:
        if rows < 1 or columns < 1:
            raise ValueError(f"a figure needs at least one row and one column. Found {rows} x {columns}.")
        self.axes = [[Axes() for _ in range(columns)] for _ in range(rows)]
        self.panel, self.title, self.sharey = panel, title, sharey

    def save(self, path: pathlib.Path) -> pathlib.Path:
        """Write :meth:`to_svg` to ``path`` (UTF-8) and return it."""
        path = pathlib.Path(path)
        path.write_text(self.to_svg(), encoding="utf-8")
        return path

    def to_svg(self) -> str:
        """The figure as a standalone SVG 1.1 document."""
        limits = {id(ax): self._limits(ax) for row in self.axes for ax in row}
        ticks = {id(ax): _ticks(ax, *limits[id(ax)]) for row in self.axes for ax in row}
        width, height = self.panel
        title_height = _lines(self.title) * (FONT["title"] + 3) + (10 if self.title else 4)
        lefts, column_widths = [], []
        for j in range(len(self.axes[0])):
            labelled = not self.sharey or j == 0
            labels = [label for row in self.axes for _, label in ticks[id(row[j])][1]] if labelled else []
            tick_space = max((text_width(label, FONT["tick"]) for label in labels), default=0.0)
            ylabel = labelled and any(row[j].ylabel for row in self.axes)
            # a panel title wider than its box (centred on it) widens the column on both sides
            overhang = max((text_width(row[j].title, FONT["panel"]) - width) / 2 + 6 for row in self.axes)
            lefts.append(max(tick_space + 10 + (FONT["label"] + 8 if ylabel else 0) + 8, overhang))
            outside = max((_legend_size(row[j])[0] + 12 for row in self.axes
                           if row[j]._legend and row[j]._legend[0] == "right"), default=0.0)
            column_widths.append(lefts[-1] + width + max(12 + outside, overhang))
        heads = [max(_lines(ax.title) for ax in row) * (FONT["panel"] + 3) + 8 for row in self.axes]
        bottom = FONT["tick"] + 10 + (FONT["label"] + 10 if any(ax.xlabel for row in self.axes for ax in row) else 0)
        grid_width = sum(column_widths) + 8
        total_width = max(grid_width, text_width(self.title, FONT["title"]) + 20)
        total_height = title_height + sum(heads) + len(self.axes) * (height + bottom) + 4
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{total_width:.0f}px" '
            f'height="{total_height:.0f}px" viewBox="0 0 {total_width:.0f} {total_height:.0f}" '
            'font-family="sans-serif">',
            f'<rect x="0" y="0" width="{total_width:.0f}" height="{total_height:.0f}" fill="#ffffff"/>',
            _text(total_width / 2, 6 + FONT["title"], self.title, FONT["title"], anchor="middle"),
        ]
        top = title_height
        for i, row in enumerate(self.axes):
            top += heads[i]
            left = (total_width - grid_width) / 2  # the panels centred under a wider title
            for j, ax in enumerate(row):
                box = (left + lefts[j], top, width, height)
                parts.append(_draw_axes(ax, box, limits[id(ax)], ticks[id(ax)], f"clip{i}_{j}",
                                        labelled=not self.sharey or j == 0))
                left += column_widths[j]
            top += height + bottom
        parts.append("</svg>")
        return "\n".join(part for part in parts if part) + "\n"

    def _limits(self, ax: Axes) -> tuple[tuple[float, float], tuple[float, float]]:
        """(xlim, ylim) of ``ax``: set, else its data's, else [0, 1] ([1, 10] on a log axis); with ``sharey`` one
        y range (the first set, else the union of the panels' data)."""
        empty = {"linear": (0.0, 1.0), "log": (1.0, 10.0)}
        if not {ax.xscale, ax.yscale} <= set(empty):
            raise ValueError(f"an axis scale must be 'linear' or 'log'. Found {ax.xscale!r} and {ax.yscale!r}.")
        xlim = ax.xlim or ax.data_limits("x") or empty[ax.xscale]
        panels = [other for row in self.axes for other in row] if self.sharey else [ax]
        ylim = next((other.ylim for other in panels if other.ylim), None)
        if ylim is None:
            found = [limits for other in panels if (limits := other.data_limits("y"))]
            ylim = (min(f[0] for f in found), max(f[1] for f in found)) if found else empty[ax.yscale]
        return xlim, ylim


def _ticks(ax: Axes, xlim, ylim) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """(x ticks, y ticks) of ``ax`` as (value, label) pairs inside its limits."""
    found = []
    for scale, (low, high), explicit in ((ax.xscale, xlim, ax.xticks), (ax.yscale, ylim, None)):
        if explicit is not None:
            found.append([(value, label) for value, label in explicit if low <= value <= high])
            continue
        values = log_ticks(low, high) if scale == "log" else nice_ticks(low, high)
        found.append([(value, tick_label(value, values, scale)) for value in values])
    return found[0], found[1]


def _lines(text: str) -> int:
    return len(text.split("\n")) if text else 0


def _legend_size(ax: Axes) -> tuple[float, float]:
    """(width, height) in px of ``ax``'s legend box."""
    entries = ax.legend_entries()
    if not entries:
        return 0.0, 0.0
    size = ax._legend[2]
    return max(text_width(label, size) for label, _ in entries) + 42, len(entries) * (size + 5) + 8


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _stroke(style: Style) -> str:
    """Stroke attributes of ``style`` (its dash, width, colour and opacity)."""
    dash = DASHES.get(style.line or "solid")
    return (f'stroke={quoteattr(style.colour)} stroke-width="{_number(style.width)}"'
            + (f' stroke-dasharray="{dash}"' if dash else "")
            + (f' stroke-opacity="{_number(style.alpha)}"' if style.alpha < 1 else ""))


def _text(x: float, y: float, text: str, size: float, *, anchor: str = "start", angle: float = 0.0,
          kind: str | None = None) -> str:
    """A ``<text>`` at (x, y) (the first line's baseline), one ``<tspan>`` per line, escaped."""
    if not text:
        return ""
    lines = str(text).split("\n")
    rotate = f' transform="rotate({_number(-angle)} {_number(x)} {_number(y)})"' if angle else ""
    spans = "".join(f'<tspan x="{_number(x)}" dy="{0 if i == 0 else _number(size * 1.2)}">{escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    kind = f' class="{kind}"' if kind else ""
    return (f'<text{kind} x="{_number(x)}" y="{_number(y)}" font-size="{_number(size)}" text-anchor="{anchor}" '
            f'fill="#000000"{rotate}>{spans}</text>')


def _marker(x: float, y: float, style: Style) -> str:
    """One marker of ``style`` centred at pixel (x, y)."""
    r, colour = style.size / 2, quoteattr(style.colour)
    opacity = f' opacity="{_number(style.alpha)}"' if style.alpha < 1 else ""
    paint = f"fill={colour}" if style.filled else f'fill="#ffffff" stroke={colour} stroke-width="1.2"'
    if style.marker in ("o", "."):
        radius = r if style.marker == "o" else r / 2
        return f'<circle cx="{_number(x)}" cy="{_number(y)}" r="{_number(radius)}" {paint}{opacity}/>'
    if style.marker == "s":
        side = 0.85 * style.size
        return (f'<rect x="{_number(x - side / 2)}" y="{_number(y - side / 2)}" width="{_number(side)}" '
                f'height="{_number(side)}" {paint}{opacity}/>')
    if style.marker in ("^", "v", "*"):
        # "^" / "v": a triangle pointing up / down; "*": a five-pointed star (tips on r, notches on 0.4 r)
        radii = [r] * 3 if style.marker in ("^", "v") else [r, 0.4 * r] * 5
        turn = -1.0 if style.marker == "v" else 1.0
        corners = [(x + rad * math.sin(2 * math.pi * k / len(radii)),
                    y - turn * rad * math.cos(2 * math.pi * k / len(radii))) for k, rad in enumerate(radii)]
        points = " ".join(f"{_number(a)},{_number(b)}" for a, b in corners)
        return f'<polygon points="{points}" {paint}{opacity}/>'
    width = max(style.width, 1.0)
    if style.marker == "x":
        return (f'<path d="M{_number(x - r)},{_number(y - r)} L{_number(x + r)},{_number(y + r)} '
                f'M{_number(x - r)},{_number(y + r)} L{_number(x + r)},{_number(y - r)}" stroke={colour} '
                f'stroke-width="{_number(width)}"{opacity}/>')
    return (f'<line x1="{_number(x - r)}" y1="{_number(y)}" x2="{_number(x + r)}" y2="{_number(y)}" '
            f'stroke={colour} stroke-width="{_number(width)}"{opacity}/>')  # "_"


def _polyline(px: np.ndarray, py: np.ndarray, style: Style) -> list[str]:
    """Paths through the runs of drawable points (a point that cannot be drawn breaks the line)."""
    runs: list[list[str]] = [[]]
    for a, b in zip(px, py):
        if math.isfinite(a) and math.isfinite(b):
            runs[-1].append(f"{_number(a)},{_number(b)}")
        elif runs[-1]:
            runs.append([])
    return [f'<path d="M{" L".join(run)}" fill="none" {_stroke(style)}/>' for run in runs if len(run) > 1]


def _draw_axes(ax: Axes, box, limits, ticks, clip_id: str, *, labelled: bool) -> str:
    """The SVG group of one panel: frame, ticks, labels, clipped data, annotations and legend."""
    left, top, width, height = box
    right, bottom = left + width, top + height
    sx = _Scale(ax.xscale, limits[0], left, right)
    sy = _Scale(ax.yscale, limits[1], bottom, top)
    out = [f'<g class="axes"><clipPath id="{clip_id}"><rect x="{_number(left)}" y="{_number(top)}" '
           f'width="{_number(width)}" height="{_number(height)}"/></clipPath>']
    out.append(_text(left + width / 2, top - 6 - (_lines(ax.title) - 1) * FONT["panel"] * 1.2, ax.title,
                     FONT["panel"], anchor="middle"))
    for value, label in ticks[0]:
        x = float(sx(value))
        out.append(f'<line x1="{_number(x)}" y1="{_number(bottom)}" x2="{_number(x)}" y2="{_number(bottom + 4)}" '
                   'stroke="#000000" stroke-width="0.8"/>')
        out.append(_text(x, bottom + 6 + FONT["tick"], label, FONT["tick"], anchor="middle"))
    tick_space = 0.0
    for value, label in ticks[1]:
        y = float(sy(value))
        out.append(f'<line x1="{_number(left - 4)}" y1="{_number(y)}" x2="{_number(left)}" y2="{_number(y)}" '
                   'stroke="#000000" stroke-width="0.8"/>')
        if labelled:
            out.append(_text(left - 6, y + FONT["tick"] * 0.35, label, FONT["tick"], anchor="end"))
            tick_space = max(tick_space, text_width(label, FONT["tick"]))
    out.append(_text(left + width / 2, bottom + 2 * FONT["tick"] + 14, ax.xlabel, FONT["label"], anchor="middle"))
    if labelled and ax.ylabel:
        x = left - tick_space - 14
        out.append(_text(x, top + height / 2, ax.ylabel, FONT["label"], anchor="middle", angle=90))
    out.append(f'<g class="data" clip-path="url(#{clip_id})">')
    for item in ax._items:
        out += _draw_item(item, sx, sy, box)
    out.append("</g>")
    for item in ax._items:
        if item.kind == "text":
            x, y = float(sx(item.x[0])), float(sy(item.y[0]))
            if math.isfinite(x) and math.isfinite(y) and left <= x <= right and top <= y <= bottom:
                dx, dy = item.extra["offset"]
                out.append(_text(x + dx, y + dy, item.extra["text"], item.extra["size"], angle=item.extra["angle"],
                                 kind="annotation"))
    out.append(f'<rect x="{_number(left)}" y="{_number(top)}" width="{_number(width)}" height="{_number(height)}" '
               'fill="none" stroke="#000000" stroke-width="0.8"/>')
    out += _draw_legend(ax, box)
    out.append("</g>")
    return "\n".join(part for part in out if part)


def _draw_item(item: _Item, sx: _Scale, sy: _Scale, box) -> list[str]:
    """The SVG elements of one data item (inside the clip group)."""
    left, top, width, height = box
    style = item.style
    if item.kind == "hline":
        y = float(sy(item.y[0]))
        return [] if math.isnan(y) else [f'<line x1="{_number(left)}" y1="{_number(y)}" x2="{_number(left + width)}" '
                                         f'y2="{_number(y)}" {_stroke(style)}/>']
    if item.kind == "vline":
        x = float(sx(item.x[0]))
        return [] if math.isnan(x) else [f'<line x1="{_number(x)}" y1="{_number(top)}" x2="{_number(x)}" '
                                         f'y2="{_number(top + height)}" {_stroke(style)}/>']
    if item.kind == "fill":
        low, high = sorted((sy.low, sy.high))
        bounds = (10.0 ** low, 10.0 ** high) if sy.log else (low, high)
        upper = sy(np.clip(item.y, *bounds))
        lower = sy(np.clip(item.extra["low"], *bounds))
        px = sx(item.x)
        keep = np.isfinite(px) & np.isfinite(upper) & np.isfinite(lower)
        if keep.sum() < 2:
            return []
        outline = list(zip(px[keep], upper[keep])) + list(zip(px[keep][::-1], lower[keep][::-1]))
        points = " ".join(f"{_number(a)},{_number(b)}" for a, b in outline)
        return [f'<polygon points="{points}" fill={quoteattr(style.colour)} fill-opacity="{_number(style.alpha)}" '
                'stroke="none"/>']
    px, py = sx(item.x), sy(item.y)
    out = []
    if item.kind == "errorbar":
        lows, highs = sy(item.extra["low"]), sy(item.extra["high"])
        cap = item.extra["cap"]
        bar = Style(colour=style.colour, width=max(style.width, 1.0), alpha=style.alpha)
        for x, a, b in zip(px, lows, highs):
            if np.isfinite([x, a, b]).all():
                out.append(f'<path d="M{_number(x)},{_number(a)} L{_number(x)},{_number(b)} '
                           f'M{_number(x - cap)},{_number(a)} L{_number(x + cap)},{_number(a)} '
                           f'M{_number(x - cap)},{_number(b)} L{_number(x + cap)},{_number(b)}" '
                           f'fill="none" {_stroke(bar)}/>')
    elif style.line is not None:
        out += _polyline(px, py, style)
    if style.marker is not None:
        out += [_marker(x, y, style) for x, y in zip(px, py) if math.isfinite(x) and math.isfinite(y)]
    return out


def _draw_legend(ax: Axes, box) -> list[str]:
    """The legend box of ``ax`` at its corner, or right of the panel."""
    entries = ax.legend_entries()
    if not entries:
        return []
    left, top, width, height = box
    box_width, box_height = _legend_size(ax)
    loc, _, size = ax._legend
    x = left + width + 10 if loc == "right" else left + 6 if "left" in loc else left + width - 6 - box_width
    y = top if loc == "right" else top + 6 if "upper" in loc else top + height - 6 - box_height
    out = ['<g class="legend">',
           f'<rect x="{_number(x)}" y="{_number(y)}" width="{_number(box_width)}" height="{_number(box_height)}" '
           'fill="#ffffff" fill-opacity="0.85" stroke="#cccccc" stroke-width="0.8"/>']
    for k, (label, style) in enumerate(entries):
        middle = y + 4 + (k + 0.5) * (size + 5)
        if isinstance(style, str):  # a filled region's colour
            out.append(f'<rect x="{_number(x + 8)}" y="{_number(middle - 5)}" width="22" height="10" '
                       f'fill={quoteattr(style)} fill-opacity="0.3"/>')
        else:
            if style.line is not None:
                out.append(f'<line x1="{_number(x + 6)}" y1="{_number(middle)}" x2="{_number(x + 32)}" '
                           f'y2="{_number(middle)}" {_stroke(style)}/>')
            if style.marker is not None:
                out.append(_marker(x + 19, middle, style))
        out.append(_text(x + 38, middle + size * 0.35, label, size))
    return out + ["</g>"]
