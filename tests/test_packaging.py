"""The wheel holds every package of the checkout, and CI tests the installed wheel.

``pyproject.toml`` finds the packages automatically (``[tool.setuptools.packages.find]``);
these tests fail when a package directory (one with an ``__init__.py``) under ``attacks/``
or ``audit/`` would be left out of the wheel, as ``audit.mechanisms`` once was.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("attacks", "audit")


def _package_directories() -> set[str]:
    """Dotted names of the directories under attacks/ and audit/ that hold an __init__.py."""
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP_LEVEL
        for init in (ROOT / top).rglob("__init__.py")
    }


def test_package_directories_include_the_subpackages():
    assert {"audit.mechanisms", "audit.mechanisms.adapters"} <= _package_directories()


def test_discovery_lists_every_package_directory(monkeypatch):
    """setuptools' reading of pyproject.toml, as the wheel build does it, finds every package."""
    pytest.importorskip("setuptools", minversion="77")  # the version pyproject.toml's build needs
    from setuptools.config import pyprojecttoml
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT)  # discovery runs relative to the project root, as in a build
    distribution = pyprojecttoml.apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert set(distribution.packages) == _package_directories()


@pytest.mark.slow
def test_built_wheel_contains_every_package(tmp_path):
    """A real (non-editable) wheel build: every package's __init__.py is in the archive."""
    pytest.importorskip("setuptools", minversion="77")  # builds wheels itself, no build isolation needed
    # Built from a copy: an in-tree build would leave build/ and *.egg-info in the checkout.
    source = tmp_path / "source"
    for top in TOP_LEVEL:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("capaudit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {name[: -len("/__init__.py")].replace("/", ".") for name in names if name.endswith("/__init__.py")}
    assert packages == _package_directories()
    assert not any(name.startswith(("tests/", "benchmarks/", "examples/")) for name in names)


@pytest.mark.skipif(
    os.environ.get("CAPAUDIT_TEST_INSTALLED") != "1",
    reason="CI only (.ci/run sets CAPAUDIT_TEST_INSTALLED=1 after installing the wheel)",
)
def test_tests_import_the_installed_package():
    """In CI the suite runs against the installed wheel, not the checkout's sources."""
    for name in sorted(_package_directories()):
        module = importlib.import_module(name)
        location = Path(module.__file__).resolve()
        source = ROOT / name.split(".")[0]  # the checkout's sources; CI's own .venv also lies inside ROOT
        assert source not in location.parents, f"{name} imported from the checkout: {location}"
        assert "site-packages" in location.parts, f"{name} not from site-packages: {location}"


def _top_level_imports(path: Path) -> set[str]:
    """The top-level names a module imports when it is loaded (its module body; not inside functions)."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in requirements}


def test_the_test_extra_installs_what_collecting_the_suite_imports():
    """``pip install ".[test]" && python -m pytest -q -n auto`` collects: the tests and the benchmark modules they load
    import only capaudit, the standard library, tests/ and benchmarks/ and what the dependencies and the
    ``[test]`` extra install (a library of another extra is imported inside a test, which skips naming it)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = _requirement_names(project["dependencies"] + project["optional-dependencies"]["test"])
    local = {*TOP_LEVEL, *(path.stem for folder in ("tests", "benchmarks") for path in (ROOT / folder).glob("*.py"))}
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for path in [*(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for name in _top_level_imports(path) - set(sys.stdlib_module_names) - local:
            names = _requirement_names(distributions.get(name, [name]))
            if not names & installed:
                missing.setdefault(name, []).append(path.name)
    assert not missing, f"imported when the suite is collected but installed by no dependency or the [test] extra: {missing}"
