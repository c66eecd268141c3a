"""Where a benchmark writes its table: ``benchmarks/results/NAME.md``, headed by the command that made it.

docs/benchmarks.md and docs/validity.md quote these files' tables between
``<!-- from benchmarks/results/NAME.md -->`` markers; tests/test_docs.py checks
that each quote equals the file's table, and ``python benchmarks/quote_results.py``
copies the tables into the docs after a rerun.  A benchmark whose audits are
long keeps each audit's record in a JSON-lines file beside its table
(:func:`append_record`, :func:`read_records`) and rebuilds the table from them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def add_out_option(parser: argparse.ArgumentParser, name: str) -> None:
    """``--out`` defaulting to ``benchmarks/results/NAME.md``."""
    parser.add_argument("--out", type=Path, default=RESULTS / f"{name}.md", help=f"default: benchmarks/results/{name}.md")


def write(out: Path, text: str) -> None:
    """``text`` (markdown tables and notes) under a header naming the command line that produced it."""
    command = " ".join(shlex.quote(argument) for argument in ["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# {out.stem}\n\nCommand: `{command}`\n\n{text.rstrip()}\n")
    print(f"wrote {out}")


def machine() -> str:
    """The CPU model, its cores, the system and Python (a sequential audit's time limit makes outputs depend on it)."""
    cpuinfo = Path("/proc/cpuinfo")
    models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M) if cpuinfo.exists() else []
    return (f"{models[0] if models else platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{platform.system()}, Python {platform.python_version()}")


def commit(checkout: Path | None = None) -> str:
    """The short hash of the checkout's HEAD (``checkout``, default this one), with "+" when tracked files
    outside ``benchmarks/results`` differ from it: the code an audit ran (a record's ``commit``; the results files
    themselves change as a run goes)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              cwd=checkout or RESULTS.parent.parent).stdout.strip()
    dirty = git("status", "--porcelain", "-uno", "--", ".", ":(exclude)benchmarks/results")
    return (git("rev-parse", "--short", "HEAD") or "?") + ("+" if dirty else "")


def read_records(path: Path) -> list[dict]:
    """The JSON objects of ``path``, one a line (none when it does not exist): the audits a benchmark has done."""
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


def append_record(path: Path, record: dict) -> None:
    """Add one audit's record to ``path`` as soon as it ends, so that a run stopped part way keeps what it did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        file.write(json.dumps(record) + "\n")
