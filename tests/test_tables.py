"""The one markdown table writer of every report (audit.report.tables)."""

import math

import numpy as np
import pandas as pd
import pytest

from audit.report.tables import LINE_LIMIT, format_number, markdown_table


@pytest.mark.parametrize("value, text", [
    (0.123456, "0.1235"), (12345.678, "1.235e+04"), (20000, "20000"), (np.int64(7), "7"), (math.inf, "inf"),
    (-math.inf, "-inf"), (None, "-"), (math.nan, "-"), ("poly2", "poly2"), (True, "True"),
])
def test_numbers_have_four_significant_digits_integers_stay_whole(value, text):
    assert format_number(value) == text


def test_cells_are_one_line_escaped_and_never_html():
    frame = pd.DataFrame({"a|b": ["x|y", "two\nlines", "<b>bold</b> &amp; 1 <= 2"], "value": [1.0, math.nan, 2]})
    table = markdown_table(frame, missing="")
    lines = table.splitlines()
    assert len(lines) == 5 and lines[0].startswith("| a\\|b")
    assert "x\\|y" in lines[2] and "two lines" in lines[3]
    assert "&lt;b>bold&lt;/b> &amp;amp; 1 <= 2" in lines[4]
    assert lines[3].rstrip("| ").endswith("two lines")  # the missing value is blank
    long = markdown_table(pd.DataFrame({"note": ["x" * (2 * LINE_LIMIT)]}))
    assert max(len(line) for line in long.splitlines()) < LINE_LIMIT + 10


def test_the_index_is_written_when_asked():
    frame = pd.DataFrame({"value": [0.5]}, index=["KL"])
    assert markdown_table(frame, index=True).splitlines()[2].startswith("| KL ")
    assert "KL" not in markdown_table(frame)
