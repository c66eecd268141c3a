"""The repository carries its own documentation: links resolve, citations of the theory name real sections,
and no file points outside the repository."""

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {"build", "dist", "__pycache__"}
TEXT_SUFFIXES = {".md", ".py", ".toml", ".json", ".txt", ".cfg", ""}


def _repository_files():
    """The checkout's text files, without hidden directories (.git, CI's .venv; .ci kept) and build outputs."""
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = [
            name for name in subdirectories
            if (name == ".ci" or not name.startswith(".")) and name not in SKIPPED_DIRS and not name.endswith(".egg-info")
        ]
        yield from (Path(directory) / name for name in files if Path(name).suffix in TEXT_SUFFIXES)


def _markdown_files():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(path):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    missing = [link for link in local if not (path.parent / link).exists()]
    assert not missing, f"{path.name} links to missing files {missing}"


def test_no_file_points_outside_the_repository():
    outside = re.compile(r"\.\./" + "shared|/work/" + "shared|\\bseeds/")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _repository_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if outside.search(line)
    ]
    assert not offenders, offenders


def test_theory_citations_name_existing_sections():
    """Every "theory.md section N" (or the older "docs/theory.md section N") names a numbered section of docs/theory.md."""
    sections = {int(number) for number in re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "theory.md").read_text(), re.M)}
    assert sections == set(range(1, max(sections) + 1))  # numbered 1, 2, ... without gaps
    cited = {
        int(number)
        for path in _repository_files()
        for match in re.finditer(r"theory\.md,? sections? ([0-9]+(?:-[0-9]+)?)", path.read_text(errors="replace"), re.I)
        for number in match.group(1).split("-")
    }
    assert cited and cited <= sections


_QUOTE_SPEC = importlib.util.spec_from_file_location("quote_results", ROOT / "benchmarks" / "quote_results.py")
quote_results = importlib.util.module_from_spec(_QUOTE_SPEC)
_QUOTE_SPEC.loader.exec_module(quote_results)


def _quotes():
    return [(path, *quote) for path in quote_results.documents() for quote in quote_results.quotes(path.read_text())]


def test_the_docs_quote_the_benchmarks_results():
    quoted = {results_file for _, results_file, _, _ in _quotes()}
    assert {"benchmarks/results/bench_suite.md", "benchmarks/results/bench_power.md",
            "benchmarks/results/bench_validity_tight.md"} <= quoted


@pytest.mark.parametrize("path, results_file, number, text", _quotes(),
                         ids=lambda value: value.name if isinstance(value, Path) else str(value)[:40])
def test_each_quoted_table_equals_its_results_file(path, results_file, number, text):
    """A table quoted between <!-- from benchmarks/results/X.md --> markers is the file's table, verbatim."""
    assert text == quote_results.source_table(results_file, number), (
        f"{path.name} quotes an outdated table of {results_file}: run python benchmarks/quote_results.py")


def test_validity_totals_are_the_sums_of_the_results_files():
    text = (ROOT / "docs" / "validity.md").read_text()
    (quoted,) = [match[2] for match in quote_results.TOTALS.finditer(text)]
    assert quoted.count("\n") >= 5 and quoted == quote_results.totals_table(quoted)


def test_quote_tables_reads_markdown_tables():
    text = "# title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nnote\n| c |\n|---|\n"
    assert quote_results.tables(text) == ["| a | b |\n|---|---|\n| 1 | 2 |\n", "| c |\n|---|\n"]


def test_readme_is_a_short_manual_that_starts_with_the_two_commands():
    """A newcomer's first two commands: the demo into a directory git ignores, then the tests."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S)[1].splitlines()
    assert first_block[0] == "pip install . && capaudit demo --out out/demo"
    assert first_block[1] == 'pip install ".[test]" && python -m pytest -q -n auto'
    assert "/out/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_config_schema_and_field_tables_are_written_from_the_declared_fields():
    """docs/schema/config.schema.json and docs/config.md's tables are what ``python -m audit.config.docs`` writes."""
    from audit.config import docs as config_docs

    assert config_docs.stale(ROOT) == [], "run python -m audit.config.docs"
    edited = (ROOT / config_docs.REFERENCE).read_text().replace("| `seed` | integer | 0 |", "| `seed` | integer | 1 |")
    assert config_docs.reference_text(edited) != edited  # a hand edit of a table is undone
