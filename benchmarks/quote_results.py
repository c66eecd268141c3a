"""Copy the benchmarks' tables into the docs that quote them.

A quote in README.md or docs/*.md is a markdown table between
``<!-- from benchmarks/results/NAME.md -->`` (or ``..., table K`` for the K-th
table of the file, counting from 1) and ``<!-- end -->``.  After a benchmark
has rewritten its file, ``python benchmarks/quote_results.py`` replaces each
quote with the file's table; tests/test_docs.py fails while a quote differs.

docs/validity.md also sums bench_validity's tables of false violations: its
table between ``<!-- totals of bench_validity results -->`` and ``<!-- end -->``
has one row per results file (:func:`validity_totals`), rewritten the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUOTE = re.compile(r"(<!-- from (benchmarks/results/[\w.-]+\.md)(?:, table (\d+))? -->\n)(.*?)(<!-- end -->)", re.S)


def tables(text: str) -> list[str]:
    """The markdown tables of ``text``: maximal runs of lines that start with ``|``, each ending in a newline."""
    found, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line.rstrip() + "\n")
        elif current:
            found.append("".join(current))
            current = []
    return found + (["".join(current)] if current else [])


def quotes(text: str) -> list[tuple[str, int, str]]:
    """(results file, table number from 1, quoted text) for each quote in ``text``."""
    return [(match[2], int(match[3] or 1), match[4]) for match in QUOTE.finditer(text)]


def source_table(results_file: str, number: int) -> str:
    found = tables((ROOT / results_file).read_text())
    if not 1 <= number <= len(found):
        raise ValueError(f"{results_file} has {len(found)} tables, not a table {number}")
    return found[number - 1]


TOTALS = re.compile(r"(<!-- totals of bench_validity results -->\n)(.*?)(<!-- end -->)", re.S)
TOTALS_HEADER = ["results file", "cells", "audits", "false violations", "pass", "inconclusive", "errors"]


def validity_totals(results_file: str) -> list[str]:
    """One row of the totals table: ``results_file``'s first table (false violations of true claims) summed."""
    rows = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # "\|" is inside a cell
            for line in tables((ROOT / results_file).read_text())[0].splitlines()]
    header, body = rows[0], rows[2:]
    total = {name: sum(int(row[header.index(name)]) for row in body)
             for name in ("seeds", "violations", "pass", "inconclusive", "errors")}
    return [f"`{results_file}`", str(len(body)), str(total["seeds"]), str(total["violations"]), str(total["pass"]),
            str(total["inconclusive"]), str(total["errors"])]


def totals_table(quoted: str) -> str:
    """The totals table for the results files named in the first column of ``quoted``."""
    files = re.findall(r"^\| `(benchmarks/results/[\w.-]+\.md)`", quoted, re.M)
    lines = [TOTALS_HEADER, *(validity_totals(name) for name in files)]
    rule = "|" + "---|" * len(TOTALS_HEADER) + "\n"
    return "".join(("| " + " | ".join(line) + " |\n") + (rule if index == 0 else "") for index, line in enumerate(lines))


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main() -> None:
    for path in documents():
        text = path.read_text()
        updated = QUOTE.sub(lambda match: match[1] + source_table(match[2], int(match[3] or 1)) + match[5], text)
        updated = TOTALS.sub(lambda match: match[1] + totals_table(match[2]) + match[3], updated)
        if updated != text:
            path.write_text(updated)
            print(f"updated {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
