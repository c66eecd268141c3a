"""The repository carries its own documentation: links resolve, citations of the theory name real sections,
and no file points outside the repository."""

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
