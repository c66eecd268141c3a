"""Text of the reports: numbers, safe one-line text and the one markdown table writer.

Every report (``capaudit run``'s report.md, ``capaudit theory``'s and
``capaudit oakl``'s) writes its tables with :func:`markdown_table`: numbers
with four significant digits (:func:`format_number`), cells on one line with
``|`` escaped, and text from a config or a mechanism shown as written, never
read as HTML (:func:`plain_text`).
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

import pandas as pd

LINE_LIMIT = 400
"""The most characters of one message from user code on a line of report.md, a table cell or stderr
(results.json keeps all of it)."""

_HTML = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)")
"""What markdown would read as HTML: a ``<`` that opens a tag, comment or declaration, an ``&`` that opens an entity."""


def format_number(value: Any, missing: str = "-") -> str:
    """A number as the reports print it: 4 significant digits (an integer whole), ``inf``; ``missing`` for None or
    NaN; anything else as ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(value)
    return f"{value:.4g}" if isinstance(value, numbers.Real) and not isinstance(value, bool) else str(value)


def bounded(text: Any, limit: int = LINE_LIMIT) -> Any:
    """Text on one line, cut to ``limit`` characters with an ellipsis (anything but a string as it is)."""
    if not isinstance(text, str):
        return text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def plain_text(text: str) -> str:
    """``text`` with every ``<`` that opens a tag and ``&`` that opens an entity escaped: shown as written, never
    read as HTML (``<=`` stays as it is)."""
    return _HTML.sub(lambda match: "&lt;" if match.group() == "<" else "&amp;", text)


def markdown_table(frame: pd.DataFrame, *, index: bool = False, missing: str = "-") -> str:
    """A GitHub-flavoured markdown table of ``frame``, every cell text (:func:`format_number` for numbers).

    Each cell (:func:`markdown_cell`) is cut to :data:`LINE_LIMIT` characters on one line, its ``|``
    escaped (an unescaped one ends a GFM cell, a newline its row), and a ``<``
    or ``&`` that would open a tag or an entity escaped (:func:`plain_text`).

    Parameters
    ----------
    frame : DataFrame
    index : bool, default=False
        Write the index as the first column (blank header).
    missing : str, default="-"
        The text of a missing value (None or NaN).
    """
    if index:
        frame = frame.reset_index(names="")
    cells = pd.DataFrame({markdown_cell(column, missing): [markdown_cell(value, missing) for value in frame[column]]
                          for column in frame.columns})
    return cells.to_markdown(index=False, disable_numparse=True)


def markdown_cell(value: Any, missing: str = "-") -> str:
    """One cell of :func:`markdown_table`: :func:`format_number`, cut to :data:`LINE_LIMIT` characters on one line,
    ``|`` escaped, no HTML (:func:`plain_text`); a list or tuple is one such line per item, joined by ``<br>``
    (``missing`` when empty)."""
    if isinstance(value, (list, tuple)):
        return "<br>".join(markdown_cell(item, missing) for item in value) or missing
    return plain_text(bounded(format_number(value, missing))).replace("|", "\\|")
