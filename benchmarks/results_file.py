"""Where a benchmark writes its table: ``benchmarks/results/NAME.md``, headed by the command that made it.

docs/benchmarks.md and docs/validity.md quote these files' tables between
``<!-- from benchmarks/results/NAME.md -->`` markers; tests/test_docs.py checks
that each quote equals the file's table, and ``python benchmarks/quote_results.py``
copies the tables into the docs after a rerun.
"""

from __future__ import annotations

import argparse
import shlex
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
