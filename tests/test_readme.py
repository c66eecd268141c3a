"""README.md's Python blocks run (fast: the example audit on 2 000 samples and one job; slow: as written)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)


def _run(block: str, namespace: dict) -> None:
    exec(compile(block, "README.md", "exec"), namespace)
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value):  # a test written for the user's suite
            value()


def _small_examples(tmp_path: Path) -> Path:
    """A copy of examples/ whose audits use 2 000 samples per dataset instead of 20 000."""
    copy = tmp_path / "examples"
    copy.mkdir()
    for path in (ROOT / "examples").iterdir():
        if path.is_file():
            (copy / path.name).write_text(path.read_text().replace("n_samples = 20000", "n_samples = 2000"))
    return copy


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    _small_examples(tmp_path)
    monkeypatch.chdir(tmp_path)  # "examples/..." is the small copy; "out/" lands in tmp_path
    small = BLOCKS[index].replace("n_samples=5000", "n_samples=1000").replace("n_jobs=2", "n_jobs=1")
    _run(small, {"__name__": "readme"})


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs_as_written(index, tmp_path, monkeypatch):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    _run(BLOCKS[index], {"__name__": "readme"})
