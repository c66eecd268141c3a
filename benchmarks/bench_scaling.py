"""How audits scale with workers, and what an audit costs before its first sample.

Every measurement runs the product in a fresh Python process (``run_audit``
or ``python -m audit.commands.cli run``) and reads its wall time and its CPU time
(user + sys of the process and the workers it waited for,
``resource.getrusage(RUSAGE_CHILDREN)``):

- a sleep-bound mechanism (50 us per output, :func:`sleep_bound`): 1 worker
  against 4 threads (the default backend) and 4 loky workers, policies best
  and every; sleeping needs no core, so the speed-up measures the sampler,
  not the machine;
- CPU-bound audits of the built-in Laplace mechanism on 1 and 2 workers, threads and loky: three classes
  whose fits release the GIL (poly3, tree3, kernel) and the mlp class, whose fits hold it longer;
- the fixed cost: ``import audit.commands.api``, ``capaudit --version`` and
  ``--help``, and a whole 10 000-sample audit of the built-in Laplace
  mechanism (``capaudit run``, default policy and classes), each the median of
  :data:`FIXED_REPEATS` processes;
- ``--learners`` (only this, into ``bench_scaling_learners.md``): a learner
  audit whose work is its training runs (:func:`learner_config`: the built-in
  ``dp_gd_logistic``, 100 steps, its three default pairs, many runs, fixed
  ``n_samples``) on 1 and 2 threads and 2 dask workers, each row with the
  median 1-minute load average at its runs' starts;
- ``--betting REF`` (only this, into ``bench_scaling_betting.md``): the audits whose confirm stage feeds betting
  confidence sequences (:data:`BETTING_AUDITS`: a Laplace ``(all, kl)`` audit at 200 000 and 1 000 000 outputs, a
  default, sequential ``dp`` audit) at the git revision REF (extracted to a temporary folder) and at this
  checkout, one worker: CPU seconds before and after a change of :mod:`attacks.betting`, same rows asserted.

Every audit of a table must give the same rows on every worker count and
backend (a digest of ``run_audit``'s table, asserted): the numbers do not
depend on ``n_jobs``.

Run by hand (about 8 minutes on a quiet 2-core machine; ``--learners`` about 12 at a load of 10)::

    python benchmarks/bench_scaling.py      # writes benchmarks/results/bench_scaling.md
    python benchmarks/bench_scaling.py --learners   # writes benchmarks/results/bench_scaling_learners.md
    nice -n 10 python benchmarks/bench_scaling.py --betting 80b7eae   # bench_scaling_betting.md (about 10 minutes)

The machine line gives the load at the start and at the end: on a shared
machine (the recorded runs were made on a 2-core development machine other
sessions used at the same time) a process waits for a core, and the loky
rows, which start worker processes, suffer most.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from results_file import commit, machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_scaling.md"
LEARNER_RESULTS = RESULTS.with_name("bench_scaling_learners.md")
BETTING_RESULTS = RESULTS.with_name("bench_scaling_betting.md")
SLEEP_PER_OUTPUT = 50e-6
"""Seconds the sleep-bound mechanism sleeps per output."""


def sleep_bound(dataset, n, rng):
    """The sum of the records plus Lap(1), after sleeping 50 us per output (a slow library call, no CPU)."""
    time.sleep(SLEEP_PER_OUTPUT * n)
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


CHILD = """
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[2])
from audit.commands.api import run_audit
import audit.engine.run  # what run_audit imports when it starts (scipy.stats): the fixed cost, outside the timing
start = time.perf_counter()
result = run_audit(json.loads(sys.argv[1]), progress=False)
print(time.perf_counter() - start, hashlib.sha256(result.table.to_json().encode()).hexdigest())
assert result.exit_code in (0, 1), result.table["error"].dropna().tolist()
"""
REPEATS = 3
"""Runs of each audit; a row gives their medians."""
FIXED_REPEATS = 5
"""Runs of each fixed-cost command (a second or less each: on a shared machine one run reads the load of the moment)."""


def measure(command: list[str], code: Path = ROOT, **options) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its reaped descendants, stdout) of one command run with the
    package at ``code`` (default this checkout; also the working folder, which ``python -c`` puts first on the
    path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(code)}, cwd=code, text=True,
                          stdout=subprocess.PIPE, **options)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def audit(config: dict, code: Path = ROOT) -> tuple[tuple[float, float, float, float], set[str]]:
    """Medians over :data:`REPEATS` fresh processes of (process wall, its CPU, ``run_audit``'s own wall time, the
    1-minute load average at the start), and the digests of the tables they gave (the package at ``code``)."""
    runs, digests = [], set()
    for _ in range(REPEATS):
        loaded = os.getloadavg()[0]
        wall, cpu, out = measure([sys.executable, "-c", CHILD, json.dumps(config), str(Path(__file__).parent)], code)
        inside, digest = out.split()[-2:]
        runs.append((wall, cpu, float(inside), loaded))
        digests.add(digest)
    return tuple(float(np.median(column)) for column in zip(*runs)), digests


def scaling_rows(label: str, configs: list[tuple[int, str, dict]], with_load: bool = False) -> list[str]:
    """Table rows of one audit on several worker counts; speed-ups against the first (``with_load``: and the
    median load average).  Raises AssertionError unless every run gave the same table."""
    rows, first, digests = [], None, set()
    for n_jobs, backend, config in configs:
        (wall, cpu, inside, loaded), found = audit(config)
        digests |= found
        first = first or (wall, inside)
        rows.append(f"| {label} | {n_jobs} {backend} | {wall:.1f} | {cpu:.1f} | {first[0] / wall:.2f}x "
                    f"| {inside:.1f} | {first[1] / inside:.2f}x |" + (f" {loaded:.1f} |" if with_load else ""))
    assert len(digests) == 1, f"{label}: the rows differ between worker counts or runs"
    return rows


def sleep_config(policy: str, n_jobs: int, backend: str) -> dict:
    """Four pairs of the sleep-bound mechanism, one dp claim over thresholds (a cheap attack), 40 000 samples."""
    return {
        "mechanism": {"callable": "bench_scaling:sleep_bound"},
        "pairs": [{"d": [[0.0]], "d_prime": [[float(k)]]} for k in (1, 2, 3, 4)],
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 10.0}],
        "attacks": {"classes": ["threshold"], "n_samples": 40_000, "policy": policy},
        "run": {"seed": 0, "n_jobs": n_jobs, "backend": backend},
    }


CPU_AUDITS = {"poly3, tree3, kernel; n_samples = 400 000": (["poly3", "tree3", "kernel"], 400_000),
              "mlp, poly2; n_samples = 100 000": (["mlp", "poly2"], 100_000)}
"""The CPU-bound audits: attack classes and outputs per dataset."""


def cpu_config(classes: list[str], n_samples: int, n_jobs: int, backend: str) -> dict:
    """The built-in Laplace mechanism, its default pair, a KL claim attacked by costly classes, policy every."""
    return {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
        "claims": [{"divergence": "kl", "function_class": "all", "epsilon": 0.3679}],
        "attacks": {"classes": classes, "n_samples": n_samples, "policy": "every"},
        "run": {"seed": 0, "n_jobs": n_jobs, "backend": backend},
    }


LEARNER_AUDIT = "dp_gd_logistic (mu = 1, 100 steps), 3 default pairs, gdp claim, linear; n_samples = 20 000"
LEARNER_WORKERS = ((1, "threading"), (2, "threading"), (2, "dask"))


def learner_config(n_jobs: int, backend: str) -> dict:
    """The built-in DP-GD learner (mu = 1, 100 full-batch steps), its three default pairs (canary, NaN record,
    mislabelled point), its gdp claim mu = 1 by the linear class, 20 000 training runs per dataset (fixed: the
    same work on any worker count); training is most of the audit's CPU."""
    return {
        "mechanism": {"name": "dp_gd_logistic", "params": {"mu": 1.0, "steps": 100}},
        "claims": [{"divergence": "gdp", "function_class": "all", "epsilon": 1.0}],
        "attacks": {"classes": ["linear"], "n_samples": 20_000},
        "run": {"seed": 0, "n_jobs": n_jobs, "backend": backend},
    }


BETTING_AUDITS = {
    "Laplace (all, kl), n_samples = 200 000": ("kl", 0.3679, {"n_samples": 200_000}),
    "Laplace (all, kl), n_samples = 1 000 000": ("kl", 0.3679, {"n_samples": 1_000_000}),
    "Laplace (all, dp), sequential (default)": ("dp", 1.0, {}),
}
"""The ``--betting`` audits of the built-in Laplace mechanism (epsilon 1, its default pair, default classes and
policy, seed 0, one worker): a true KL claim whose clipped witnesses' betting sequences are fed the whole confirm
sample, and a dp claim whose confirm stages are read after every batch (anytime sets)."""


def betting_config(divergence: str, epsilon: float, attacks: dict) -> dict:
    """One of :data:`BETTING_AUDITS` as a configuration."""
    return {"mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
            "claims": [{"divergence": divergence, "function_class": "all", "epsilon": epsilon}],
            "attacks": attacks, "run": {"seed": 0, "n_jobs": 1}}


def betting(before: str) -> None:
    """``--betting REF``: :data:`BETTING_AUDITS` at revision ``before`` and at this checkout, into
    :data:`BETTING_RESULTS`.  Raises AssertionError unless both gave the same rows."""
    lines = ["# CPU of the betting confidence sequences' feed, before and after", "",
             f"Machine: {machine()}, load average (1, 5, 15 min) {load()} at the start.", "",
             f"Code: before {before}, after {commit()}.", "",
             f"Produced by `python benchmarks/bench_scaling.py --betting {before}`. Each audit ran in "
             f"{REPEATS} fresh processes at each code; a row gives the medians of the process's CPU time (user + "
             "sys) and of the wall time of `run_audit` itself. Both codes gave the same rows (asserted).", "",
             "| audit | CPU before (s) | CPU after (s) | CPU ratio | run_audit wall before (s) | after (s) |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", before, "attacks", "audit"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        for label, spec in BETTING_AUDITS.items():
            (_, cpu_before, inside_before, _), old = audit(betting_config(*spec), Path(folder))
            (_, cpu_after, inside_after, _), new = audit(betting_config(*spec))
            assert len(old | new) == 1, f"{label}: the rows differ before and after"
            lines.append(f"| {label} | {cpu_before:.1f} | {cpu_after:.1f} | {cpu_before / cpu_after:.2f}x "
                         f"| {inside_before:.1f} | {inside_after:.1f} |")
            print(lines[-1], flush=True)
    lines[2] = lines[2].rstrip(".") + f", {load()} at the end."
    BETTING_RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


FIXED_CONFIG = """[mechanism]
name = "laplace"
params = { epsilon = 1.0 }

[[claims]]
divergence = "kl"
function_class = "linear"
epsilon = 0.5

[attacks]
n_samples = 10000
"""


def load() -> str:
    """The load averages (1, 5, 15 min): on a shared machine, how many other processes wanted a core."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def learners() -> None:
    """``--learners``: the learner audit on 1 and 2 workers (module docstring), into :data:`LEARNER_RESULTS`."""
    lines = ["# Scaling of a learner audit", "",
             f"Machine: {machine()}, load average (1, 5, 15 min) {load()} at the start.", "", f"Code: {commit()}.", "",
             "Produced by `python benchmarks/bench_scaling.py --learners`. Each audit ran in "
             f"{REPEATS} fresh processes; a row gives the medians of the process's wall time, its CPU time (user + "
             "sys of the process and the processes it reaped: forked samplers, dask workers), the wall time of "
             "`run_audit` itself and the 1-minute load average when a run started. Every run gave the same rows "
             "(asserted).", "",
             "| audit | workers | process wall (s) | CPU (s) | speed-up | run_audit wall (s) | speed-up | load (1 min) |",
             "|---|---|---|---|---|---|---|---|",
             *scaling_rows(LEARNER_AUDIT, [(n_jobs, backend, learner_config(n_jobs, backend))
                                           for n_jobs, backend in LEARNER_WORKERS], with_load=True)]
    lines[2] = lines[2].rstrip(".") + f", {load()} at the end."
    LEARNER_RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", action="store_true", help="only the learner audit (bench_scaling_learners.md)")
    parser.add_argument("--betting", metavar="REF", help="only the betting audits, before (git revision REF) and "
                        "after (bench_scaling_betting.md)")
    arguments = parser.parse_args()
    if arguments.learners:
        learners()
        return
    if arguments.betting:
        betting(arguments.betting)
        return
    lines = ["# Scaling and fixed cost", "",
             f"Machine: {machine()}, load average (1, 5, 15 min) {load()} at the start.", "", f"Code: {commit()}.", "",
             "Produced by `python benchmarks/bench_scaling.py`. Each audit ran in "
             f"{REPEATS} fresh processes; a row gives the medians of the process's wall time, its CPU time "
             "(user + sys of the process and the workers it reaped) and the wall time of `run_audit` itself "
             "(after the imports every audit pays once, about 1 s: see Fixed cost).", ""]
    header = ["| audit | workers | process wall (s) | CPU (s) | speed-up | run_audit wall (s) | speed-up |",
              "|---|---|---|---|---|---|---|"]
    lines += ["## Sleep-bound mechanism (50 us per output, 4 pairs, n_samples = 40 000)", "", *header]
    for policy in ("best", "every"):
        lines += scaling_rows(f"policy {policy}", [(n_jobs, backend, sleep_config(policy, n_jobs, backend))
                                                   for n_jobs, backend in ((1, "threading"), (4, "threading"),
                                                                           (4, "loky"))])
    lines += ["", "## CPU-bound audits (Laplace, KL, policy every, 2 directions per class)", "", *header]
    for label, (classes, n_samples) in CPU_AUDITS.items():
        lines += scaling_rows(label, [(n_jobs, backend, cpu_config(classes, n_samples, n_jobs, backend))
                                      for n_jobs, backend in ((1, "threading"), (2, "threading"), (2, "loky"))])
    lines += ["", f"## Fixed cost (medians of {FIXED_REPEATS} processes)", "", "| what | wall (s) | CPU (s) |",
              "|---|---|---|"]
    python = [sys.executable]
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "laplace_10k.toml"
        config.write_text(FIXED_CONFIG)
        for label, command in (
            ("`import audit.commands.api`", [*python, "-c", "import audit.commands.api"]),
            ("`capaudit --version`", [*python, "-m", "audit.commands.cli", "--version"]),
            ("`capaudit --help`", [*python, "-m", "audit.commands.cli", "--help"]),
            ("`capaudit run` of a 10 000-sample Laplace audit (one KL claim, default classes and policy)",
             [*python, "-m", "audit.commands.cli", "run", str(config), "--quiet", "--out", f"{folder}/out"]),
        ):
            wall, cpu = np.median([measure(command)[:2] for _ in range(FIXED_REPEATS)], axis=0)
            lines.append(f"| {label} | {wall:.2f} | {cpu:.2f} |")
    lines[2] = lines[2].rstrip(".") + f", {load()} at the end."
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
