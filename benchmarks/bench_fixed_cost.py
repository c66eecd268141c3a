"""The CPU of a 10 000-sample ``capaudit run`` at this checkout against another commit, under the same load.

On a shared machine one run reads the load of its moment, so the two codes
run in turn (this checkout, then the other, ``--runs`` times), each in a
fresh process, with their bytecode compiled beforehand; a run's CPU is the
user + sys time of the process and the sampling children it reaped
(``resource.getrusage(RUSAGE_CHILDREN)``).  The audit is bench_scaling's
fixed-cost one (:data:`bench_scaling.FIXED_CONFIG`: the built-in Laplace
mechanism, one KL claim, default classes and policy).  The other commit is
checked out in a temporary git worktree, removed afterwards.

Run by hand (about 1 minute on a quiet 2-core machine)::

    python benchmarks/bench_fixed_cost.py 7bf6dea      # writes benchmarks/results/bench_fixed_cost.md
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_scaling import FIXED_CONFIG, load
from results_file import add_out_option, commit, machine, write

ROOT = Path(__file__).resolve().parents[1]


def run_cpu(checkout: Path, config: Path, out: Path) -> float:
    """CPU seconds of one ``capaudit run`` of ``config`` with ``checkout``'s code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "audit.commands.cli", "run", str(config), "--quiet", "--out", str(out)],
                   check=True, cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)}, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="the commit to compare with (a hash or a branch)")
    parser.add_argument("--runs", type=int, default=8, help="runs of each code (default: 8)")
    add_out_option(parser, "bench_fixed_cost")
    args = parser.parse_args()
    start_load = load()
    with tempfile.TemporaryDirectory() as folder:
        other = Path(folder) / "other"
        subprocess.run(["git", "worktree", "add", "--detach", str(other), args.other], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            for checkout in (ROOT, other):
                subprocess.run([sys.executable, "-m", "compileall", "-q", "audit", "attacks"], cwd=checkout, check=True)
            config = Path(folder) / "laplace_10k.toml"
            config.write_text(FIXED_CONFIG)
            cpu: dict[Path, list[float]] = {ROOT: [], other: []}
            for _ in range(args.runs):
                for checkout in cpu:
                    cpu[checkout].append(run_cpu(checkout, config, Path(folder) / "out"))
            label = {ROOT: commit(), other: subprocess.run(["git", "rev-parse", "--short", args.other], cwd=ROOT,
                                                           capture_output=True, text=True).stdout.strip()}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    rows = [f"| {label[checkout]} | {len(values)} | {np.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |"
            for checkout, values in cpu.items()]
    saved = np.median(cpu[other]) - np.median(cpu[ROOT])
    write(args.out, "\n".join([
        f"Machine: {machine()}, load average (1, 5, 15 min) {start_load} at the start, {load()} at the end.", "",
        "CPU seconds of `capaudit run` of a 10 000-sample Laplace audit (one KL claim, default classes and "
        "policy), the two codes in turn:", "",
        "| code | runs | median CPU (s) | min | max |", "|---|---|---|---|---|", *rows, "",
        f"The median at {label[ROOT]} is {saved:.2f} CPU s ({saved / np.median(cpu[other]):.0%}) below {label[other]}.",
    ]))


if __name__ == "__main__":
    main()
