"""audit.report.html_report: report.html is self-contained and its tables carry results.json's numbers."""

import json
import math
from html.parser import HTMLParser

import numpy as np
import pytest

from audit.commands.api import run_audit
from audit.results.files import load_results

CONFIG = {
    "mechanism": {"name": "noisy_hist_2", "params": {"epsilon": 0.5}},
    "claims": [
        {"divergence": "dp", "function_class": "all", "epsilon": 0.5},
        {"divergence": "kl", "function_class": "all", "epsilon": 0.12},
        {"divergence": "kl", "function_class": "linear", "epsilon": 1.0},
    ],
    "attacks": {"classes": ["linear", "poly2"], "n_samples": 600, "confidence": 0.95},
    "run": {"seed": 0, "n_jobs": 1},
}


class _Page(HTMLParser):
    """The tables (header + rows of cell texts) and image sources of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell.strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("audit")
    run_audit(CONFIG, out_dir=out, progress=False)
    return out


def _numbers(text):
    """The numbers of a cell: '2.046 [1.92, 2.17]' -> [2.046, 1.92, 2.17]; '-' -> [nan]."""
    words = text.replace("[", " ").replace("]", " ").replace(",", " ").replace("*", " ").split()
    return [math.nan if word == "-" else float(word) for word in words]


def _close(shown, value):
    """A shown number is the value to the 4 significant digits the report prints."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.isnan(shown)
    value = float(value)
    return shown == value if math.isinf(value) else bool(np.isclose(shown, value, rtol=5e-4, atol=0))


def _matches(cells, row):
    checks = {"pair": row["pair"] == cells["pair"], "function class": row["function_class"] == cells["function class"]}
    if "direction" in cells:
        checks["direction"] = cells["direction"].replace("\\", "") == row["direction"]
    if "estimate [CI]" in cells:
        checks["estimate"] = all(map(_close, _numbers(cells["estimate [CI]"]),
                                     [row["estimate"], row["ci_low"], row["ci_high"]]))
    for column, key in (("theory bound", "theory_bound"), ("exact", "exact"), ("n", "n_samples")):
        if column in cells:
            checks[column] = _close(_numbers(cells[column])[0], row[key])
    return all(checks.values())


def test_html_is_self_contained_and_every_table_number_matches_results_json(audit_dir):
    page = _Page()
    page.feed((audit_dir / "report.html").read_text())
    rows = json.loads((audit_dir / "results.json").read_text())["rows"]
    for row in rows:
        for key in ("estimate", "ci_low", "ci_high", "theory_bound", "exact"):
            row[key] = {"inf": math.inf, "-inf": -math.inf}.get(row[key], row[key])
    results_tables = [table for table in page.tables if {"pair", "function class"} <= set(table[0])]
    assert len(results_tables) >= 3  # violations + one table per claim
    shown = 0
    for header, *body in results_tables:
        for cells in body:
            cells = dict(zip(header, cells))
            assert any(_matches(cells, row) for row in rows), f"no results.json row shows as {cells}"
            shown += 1
    assert shown >= len(rows)  # every row is shown at least once (per-claim tables hold them all)
    assert page.images and all(src.startswith("data:image/svg+xml;base64,") for src in page.images)
    assert len(page.images) == len(list((audit_dir / "figures").glob("*.svg")))


def test_a_changed_number_is_caught(audit_dir):
    """The matching above can fail: a cell whose estimate is off in the 3rd digit matches no row."""
    table, _ = load_results(audit_dir)
    row = table.iloc[0].to_dict()
    cells = {"pair": row["pair"], "direction": row["direction"], "function class": row["function_class"],
             "estimate [CI]": f"{row['estimate'] * 1.01:.4g} [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"}
    assert not _matches(cells, row)
    cells["estimate [CI]"] = f"{row['estimate']:.4g} [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"
    assert _matches(cells, row)


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@pytest.mark.parametrize("verdict", ["pass", "violation", "inconclusive", "error"])
def test_the_verdict_is_coloured_and_still_said_in_words(tmp_path, verdict):
    import re

    from audit.report.html_report import STYLE, render_html

    page = render_html(f"# capaudit audit report\n\n## Verdict: **{verdict.upper()}**\n\nrows", tmp_path)
    assert f'<h2 class="verdict verdict-{verdict}">Verdict: <strong>{verdict.upper()}</strong></h2>' in page
    rule = re.search(rf"h2\.verdict-{verdict} {{ background: (#\w{{6}}); border-color: #\w{{6}}; color: (#\w{{6}}); }}",
                     STYLE)
    darker, lighter = sorted((_luminance(rule[1]), _luminance(rule[2])))
    assert (lighter + 0.05) / (darker + 0.05) >= 7.0  # WCAG AAA contrast for the heading's text
