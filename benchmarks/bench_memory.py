"""Peak memory of audits against ``audit.engine.memory.estimate_memory``.

Each config runs ``run_audit`` in a fresh Python process.  The peak is the
largest resident set of the audit and its joblib (loky) workers together,
sampled every 20 ms with psutil once the child has exec'd, and for a single
process also its ``VmHWM`` (the kernel's own high-water mark, which sampling
cannot miss; not ``ru_maxrss``, which keeps a vfork launcher's peak).  Run by hand::

    python benchmarks/bench_memory.py            # benchmarks/results/bench_memory.md, quoted in docs/benchmarks.md
    python benchmarks/bench_memory.py --quick    # two small configs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audit.config.load import RunSpec  # noqa: E402
from audit.engine.memory import estimate_memory  # noqa: E402

CHILD = """
import json, sys
from audit.commands.api import run_audit
run_audit(json.loads(sys.argv[1]), progress=False)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({"vm_hwm_kib": int(status["VmHWM"].split()[0])}))
"""
"""The audit in a fresh interpreter; it prints its own peak resident set, VmHWM: the high-water mark of the
memory it has since ``exec`` (``ru_maxrss`` also keeps the launching process's, which a child started by
``vfork`` from a large test run inherits at ``exec``)."""


def config(n_samples: int, classes: list[str], n_jobs: int = 1, pairs: int = 1, dim: int = 1) -> dict:
    """A Laplace audit on ``pairs`` explicit pairs of d-dimensional sums, KL claims only."""
    d = [[0.0] * dim]
    pair_list = [{"d": d, "d_prime": [[float(k + 1)] * dim]} for k in range(pairs)]
    return {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0, "sensitivity": [1.0] * dim if dim > 1 else 1.0}},
        "pairs": pair_list,
        "claims": [{"divergence": "kl", "function_class": "all", "epsilon": 100.0}],
        "attacks": {"classes": classes, "n_samples": n_samples, "policy": "every"},  # the plan estimate_memory guards
        "run": {"seed": 0, "n_jobs": n_jobs},
    }


CONFIGS = [
    config(200_000, ["linear", "poly2"]),
    config(1_000_000, ["linear", "poly3"]),
    config(500_000, ["linear", "kernel"]),
    config(300_000, ["linear", "poly2"], n_jobs=2, pairs=2),
    config(200_000, ["linear", "poly3"], dim=3),
    config(200_000, ["mlp"]),
    config(1_000_000, ["tree3"]),
    config(100_000, ["linear"], n_jobs=2, pairs=2),
]
QUICK = [config(20_000, ["linear"]), config(200_000, ["linear", "poly2"])]


def measure(audit: dict) -> dict:
    """Run one audit in a child process; return its peaks in MiB and the estimate."""
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(audit)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    parent, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        try:
            if "run_audit" in " ".join(parent.cmdline()):  # exec'd: before, its pages are the launcher's
                tree = [parent, *filter(_is_worker, parent.children(recursive=True))]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.02)
    output = process.stdout.read().strip().splitlines()
    if process.returncode != 0 or not output:
        raise RuntimeError(f"the audit failed (exit {process.returncode}): {audit}")
    maxrss = json.loads(output[-1])["vm_hwm_kib"] * 1024
    attacks, run = audit["attacks"], audit["run"]
    dim = len(audit["pairs"][0]["d"][0])
    estimate = estimate_memory(attacks["n_samples"], dim, len(audit["pairs"]), attacks["classes"], run["n_jobs"],
                               backend=run.get("backend", RunSpec.backend))
    measured = max(peak, maxrss)
    return {
        "n_samples": attacks["n_samples"], "d": dim, "pairs": len(audit["pairs"]),
        "classes": "+".join(attacks["classes"]), "n_jobs": run["n_jobs"],
        "peak MiB": round(measured / 2**20), "estimate MiB": round(estimate / 2**20),
        "estimate / peak": round(estimate / measured, 2),
    }


def _is_worker(process: psutil.Process) -> bool:
    """A joblib (loky) worker.  Other children are short forks (a library probing the system through
    a subprocess) whose resident set is the parent's own pages counted a second time: a run of the
    test suite once measured twice the peak that way."""
    try:
        return "loky" in " ".join(process.cmdline())
    except psutil.Error:
        return False


def main() -> None:
    from results_file import add_out_option, write  # beside this script; tests/test_memory.py loads it by path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small configs")
    add_out_option(parser, "bench_memory")
    args = parser.parse_args()
    from tabulate import tabulate

    rows = [measure(audit) for audit in (QUICK if args.quick else CONFIGS)]
    text = tabulate(rows, headers="keys", tablefmt="github")
    print(text)
    write(args.out, text)


if __name__ == "__main__":
    main()
