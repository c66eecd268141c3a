"""audit.report.svg: valid SVG, data at the right pixels on linear and log axes, nice ticks, escaped text, no NaN drawn."""

import math
import re
from xml.etree import ElementTree

import numpy as np
import pytest

from audit.report.svg import Figure, Style, log_ticks, nice_ticks, tick_label

SVG = "{http://www.w3.org/2000/svg}"


def _parse(fig):
    return ElementTree.fromstring(fig.to_svg())


def _box(root):
    """(left, top, width, height) of the first panel: its clip rectangle."""
    rect = root.find(f".//{SVG}clipPath/{SVG}rect")
    return tuple(float(rect.get(key)) for key in ("x", "y", "width", "height"))


def _data(root):
    return root.find(f".//{SVG}g[@class='data']")


def test_a_figure_is_a_standalone_svg_with_a_white_background():
    fig = Figure(2, 3, panel=(200.0, 100.0), title="two\nlines")
    fig.axes[1][2].plot([0, 1], [0, 1], label="a line")
    fig.axes[1][2].legend("right")
    root = _parse(fig)
    assert root.tag == f"{SVG}svg" and root.get("version") == "1.1" and root.get("font-family") == "sans-serif"
    width, height = float(root.get("width").removesuffix("px")), float(root.get("height").removesuffix("px"))
    assert root.get("viewBox") == f"0 0 {width:.0f} {height:.0f}"
    assert width > 3 * 200 and height > 2 * 100  # six panels, their margins and the legend
    background = root.find(f"{SVG}rect")
    assert background.get("fill") == "#ffffff" and float(background.get("width")) == width
    assert len(root.findall(f"{SVG}g[@class='axes']")) == 6
    assert [t.text for t in root.find(f"{SVG}text")] == ["two", "lines"]  # one tspan per line


def test_a_point_lands_on_its_pixel_on_linear_axes():
    fig = Figure(1, 1, panel=(200.0, 100.0))
    ax = fig.axes[0][0]
    ax.xlim, ax.ylim = (0.0, 10.0), (-1.0, 4.0)
    ax.plot([2.5], [0.0], Style(line=None, marker="o"))
    root = _parse(fig)
    left, top, width, height = _box(root)
    circle = _data(root).find(f"{SVG}circle")
    assert float(circle.get("cx")) == pytest.approx(left + 0.25 * width, abs=0.01)
    assert float(circle.get("cy")) == pytest.approx(top + 0.8 * height, abs=0.01)  # y grows upwards


def test_a_point_lands_on_its_pixel_on_log_axes():
    fig = Figure(1, 1, panel=(300.0, 150.0))
    ax = fig.axes[0][0]
    ax.xscale = ax.yscale = "log"
    ax.xlim, ax.ylim = (1e-3, 1e1), (1.0, 1000.0)
    ax.plot([0.1], [10.0], Style(line=None, marker="o"))
    root = _parse(fig)
    left, top, width, height = _box(root)
    circle = _data(root).find(f"{SVG}circle")
    assert float(circle.get("cx")) == pytest.approx(left + 0.5 * width, abs=0.01)  # 2 of 4 decades
    assert float(circle.get("cy")) == pytest.approx(top + height * 2 / 3, abs=0.01)  # 1 of 3 decades up


@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-0.13, 2.47), (3e-5, 7.1e-5), (-250.0, -3.0), (0.0, 0.001)])
def test_ticks_are_one_two_five_steps_covering_the_range(low, high):
    ticks = nice_ticks(low, high)
    steps = np.diff(ticks)
    step = steps[0]
    assert np.allclose(steps, step, rtol=1e-9)
    mantissa = step / 10.0 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9
    assert ticks[0] - step < low <= ticks[0] + 1e-12 and ticks[-1] - 1e-12 <= high < ticks[-1] + step
    assert 3 <= len(ticks) <= 9  # at most 8 intervals, and a step at most 2.5 times the smallest allowed
    labels = [tick_label(value, ticks, "linear") for value in ticks]
    assert len(set(labels)) == len(labels)  # enough decimals to tell ticks apart
    assert [float(label) for label in labels] == pytest.approx(ticks, abs=step / 100)


def test_log_ticks_are_decades_or_one_two_five_multiples():
    assert log_ticks(1e-4, 1.2) == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1, 1.0])
    assert log_ticks(2.0, 30.0) == pytest.approx([2.0, 5.0, 10.0, 20.0])
    assert len(log_ticks(1e-12, 1e6)) <= 10  # every other decade past 8
    assert tick_label(0.001, [0.001, 0.01], "log") == "0.001"
    with pytest.raises(ValueError, match="0 < low"):
        log_ticks(0.0, 1.0)


def test_text_is_escaped():
    name = 'a <b> & "c" \'d\''
    fig = Figure(1, 1, title=name)
    ax = fig.axes[0][0]
    ax.title = ax.xlabel = name
    ax.plot([0, 1], [0, 1], label=name)
    ax.text(0.5, 0.5, name)
    ax.legend()
    svg = fig.to_svg()
    assert "<b>" not in svg
    root = ElementTree.fromstring(svg)
    texts = ["".join(text.itertext()) for text in root.iter(f"{SVG}text")]
    assert texts.count(name) == 5  # title, panel title, x label, annotation, legend


def test_nan_inf_and_nonpositive_log_values_are_not_drawn():
    fig = Figure(1, 2)
    linear, log = fig.axes[0]
    linear.plot([0, 1, 2, 3, 4], [0, 1, math.nan, 3, math.inf], Style(marker="o"))
    log.yscale = "log"
    log.plot([0, 1, 2, 3], [1.0, 0.0, 10.0, 100.0], Style(marker="o"))
    linear.errorbar([1.0], [1.0], [math.nan], [2.0], Style(line=None, marker="o"))
    root = _parse(fig)
    first, second = root.findall(f".//{SVG}g[@class='data']")
    assert len(first.findall(f"{SVG}circle")) == 4  # 3 of the line, 1 of the error bar (its bar has no low end)
    assert [path.get("d").count("L") for path in first.findall(f"{SVG}path")] == [1]  # (0, 0)-(1, 1); 3 is alone
    assert len(second.findall(f"{SVG}circle")) == 3 and len(second.findall(f"{SVG}path")) == 1
    assert "nan" not in fig.to_svg().lower() and "inf" not in fig.to_svg().lower()


def test_data_are_clipped_to_the_box_and_labels_outside_it_dropped():
    fig = Figure(1, 1)
    ax = fig.axes[0][0]
    ax.xlim = ax.ylim = (0.0, 1.0)
    ax.fill_between([0.0, 0.5, 1.0], 0.0, [0.5, 5.0, 0.5], "#2ca02c")  # clamped to the box
    ax.text(2.0, 0.5, "outside")
    root = _parse(fig)
    left, top, width, height = _box(root)
    data = _data(root)
    assert data.get("clip-path") == f"url(#{root.find(f'.//{SVG}clipPath').get('id')})"
    points = [tuple(map(float, p.split(","))) for p in data.find(f"{SVG}polygon").get("points").split()]
    assert min(y for _, y in points) == pytest.approx(top) and max(y for _, y in points) == pytest.approx(top + height)
    assert "outside" not in fig.to_svg()


def test_shared_y_takes_one_range_and_labels_the_first_column_only():
    fig = Figure(1, 2, sharey=True)
    fig.axes[0][0].plot([0, 1], [0, 1])
    fig.axes[0][1].plot([0, 1], [0, 10])
    fig.axes[0][0].ylabel = "y"
    root = _parse(fig)
    first, second = root.findall(f"{SVG}g[@class='axes']")
    assert "10" in ["".join(t.itertext()) for t in first.iter(f"{SVG}text")]  # the union of both ranges
    assert not [t for t in second.iter(f"{SVG}text") if t.get("text-anchor") == "end"]  # no y tick labels


def test_long_titles_widen_the_figure_instead_of_running_off_it():
    title = "x" * 200
    fig = Figure(1, 2, panel=(100.0, 100.0), title=title)
    fig.axes[0][0].title = fig.axes[0][1].title = "y" * 60
    root = _parse(fig)
    assert float(root.get("width").removesuffix("px")) >= 200 * 0.55 * 13  # the title's estimated width
    boxes = [float(rect.get("x")) for rect in root.iter(f"{SVG}rect") if rect.get("width") == "100"]
    assert boxes[2] - boxes[0] >= 60 * 0.55 * 10.5  # boxes (clip, frame) centre the titles: side by side


def test_far_values_and_empty_panels_still_make_a_figure():
    fig = Figure(1, 2)
    near, empty = fig.axes[0]
    near.ylim = (0.0, 1.0)
    near.plot([0.0, 1.0], [0.5, 1e300])  # leaves the box far above: held within 1e6 px
    empty.xscale = empty.yscale = "log"
    path = _data(_parse(fig)).find(f"{SVG}path").get("d")
    coordinates = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", path)]
    assert max(abs(v) for v in coordinates) <= 1e6


def test_bad_styles_are_refused():
    with pytest.raises(ValueError, match="marker"):
        Style(marker="d")
    with pytest.raises(ValueError, match="line"):
        Style(line="dashdot")
    with pytest.raises(ValueError, match="legend loc"):
        Figure(1, 1).axes[0][0].legend("best")
    fig = Figure(1, 1)
    fig.axes[0][0].xscale = "symlog"
    with pytest.raises(ValueError, match="'linear' or 'log'"):
        fig.to_svg()


def test_down_triangles_squares_and_hollow_markers():
    """A "v" has its tip below its centre (SVG y grows downward), an "s" is a square of 0.85 size, and a hollow
    marker is drawn as a white shape with a coloured outline."""
    from audit.report.svg import _marker

    down = _marker(50.0, 50.0, Style(marker="v", size=10.0))
    corners = [tuple(map(float, point.split(","))) for point in down.split('points="')[1].split('"')[0].split()]
    assert corners[0] == (50.0, 55.0) and all(y < 55.0 for _, y in corners[1:])
    up = _marker(50.0, 50.0, Style(marker="^", size=10.0))
    assert up.split('points="')[1].startswith("50,45")
    square = _marker(50.0, 50.0, Style(marker="s", size=10.0, colour="#123456"))
    assert 'width="8.5"' in square and 'fill="#123456"' in square
    hollow = _marker(50.0, 50.0, Style(marker="o", colour="#123456", filled=False))
    assert 'fill="#ffffff"' in hollow and 'stroke="#123456"' in hollow
