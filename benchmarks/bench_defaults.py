"""Issue 23's targets at default settings: what a new user's audit (no ``n_samples``) catches and passes.

    PYTHONPATH=. python benchmarks/bench_defaults.py [--seeds N] [--cases TEXT ...] [--out F]

Each case is a mechanism, its parameters and one claim ``dp`` / ``all``,
audited through :func:`audit.run_audit` with every other setting at its
default (the sequential audit: rounds until decided, ``max_outputs``,
``max_seconds``), seeds 0..N-1.  The table gives per case the verdicts'
counts, the outputs drawn (results.json ``outputs_drawn``: median and
largest) and the median wall time, beside the issue's target:

* an exact-answer leak 0.2 % of the time (not DP for any epsilon) caught in
  >= 19 of 20 seeds: the built-in ``leaky_laplace`` (p = 0.002), whose
  textbook float Laplace the default ``floatbits`` class also refutes, and
  :func:`leaky_grid_laplace`, the same leak on a Laplace noise rounded to the
  grid 2^-30 Z (outputs on both datasets on one grid: only the leak refutes it);
* numpy's textbook float Laplace and diffprivlib's Laplace through the
  ``diffprivlib.laplace`` adapter, epsilon 0.1 claimed 0.1 (not DP for any
  epsilon in floating point), caught in 20 of 20;
* a float-safe Laplace of true epsilon 5 claimed 1-DP caught from at most
  1 000 outputs (issue 34: 40 000 before the pilot rounds and the confirm
  confidence sequences, benchmarks/bench_anytime.py);
* a float-safe 1-DP Laplace claimed 1.5 reads PASS in >= 19 of 20.

``met`` says whether the seeds run meet the target (fewer than 20 seeds:
the allowed misses are the target's, not scaled).  A case whose library
does not import (diffprivlib 0.6.6 needs scikit-learn < 1.7: run that case
with the extra's environment, ``--cases diffprivlib``) is skipped with a
message.  Each audit is appended to ``--records`` (default: ``--out`` with
``.jsonl``) when it ends and not run again, so runs of a few ``--cases`` in
different environments add to one table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit import run_audit  # noqa: E402
from audit.mechanisms import make_mechanism  # noqa: E402
from results_file import append_record, commit, machine, read_records  # noqa: E402

OUTPUTS_TARGET = 1_000
GRID = 2.0**30
"""The noise of :func:`leaky_grid_laplace` lies on the grid Z / GRID."""
SUMS = [{"d": [[0.0]], "d_prime": [[1.0]]}]
"""The pair of a user callable: sums 0 and 1 (the built-ins' default pair)."""


def leaky_grid_laplace(dataset: np.ndarray, n: int, rng: np.random.Generator, epsilon: float = 1.0,
                       p: float = 0.002) -> np.ndarray:
    """The sum plus Laplace noise of scale 1 / epsilon rounded to Z / GRID; the exact sum with probability p.

    The rounded noise is epsilon-DP for the shift 1 (each grid cell's probability ratio is at most e^epsilon) and,
    the sums 0 and 1 being on the grid, every output lies on it whatever the dataset, so that its floating-point
    bits carry nothing: only the exact answer, an atom of probability p on one dataset, breaks epsilon-DP
    ((epsilon, p)-DP, not DP for any epsilon).
    """
    noise = np.round(rng.laplace(0.0, 1.0 / epsilon, n) * GRID) / GRID
    noise[rng.random(n) < p] = 0.0
    return float(np.sum(dataset)) + noise


@dataclass(frozen=True)
class Case:
    """One audit of the issue's targets: ``expect`` is "violation" or "pass"; ``misses``: the seeds allowed not to."""

    label: str
    mechanism: str
    params: dict
    claim: float
    expect: str
    misses: int
    within: int | None = None  # a violation must also have drawn at most this many outputs

    @property
    def target(self) -> str:
        seeds = f"{'caught' if self.expect == 'violation' else self.expect} {'>= ' if self.misses else ''}{20 - self.misses}/20"
        return seeds + (f", within {self.within:,} outputs" if self.within else "")

    def met(self, record: dict) -> bool:
        return record["verdict"] == self.expect and (self.within is None or record["outputs"] <= self.within)


CASES = [
    Case("exact-answer leak 0.2 %", "leaky_laplace", {"epsilon": 1.0, "p": 0.002}, 1.0, "violation", 1),
    Case("exact-answer leak 0.2 %, noise on a grid", "bench_defaults:leaky_grid_laplace", {"epsilon": 1.0, "p": 0.002},
         1.0, "violation", 1),
    Case("numpy's textbook Laplace", "textbook_laplace", {"epsilon": 0.1}, 0.1, "violation", 0),
    Case("diffprivlib's Laplace (adapter)", "diffprivlib.laplace", {"epsilon": 0.1}, 0.1, "violation", 0),
    Case("true epsilon 5, claim 1", "snapping_laplace", {"epsilon": 5.0}, 1.0, "violation", 0, OUTPUTS_TARGET),
    Case("correct 1-DP Laplace, claim 1.5", "snapping_laplace", {"epsilon": 1.0}, 1.5, "pass", 1),
]


def audit(case: Case, seed: int) -> dict:
    callable_ = ":" in case.mechanism  # module:function, beside this script
    config = {"mechanism": {"callable" if callable_ else "name": case.mechanism, "params": case.params},
              "run": {"seed": seed}, **({"pairs": SUMS} if callable_ else {}),
              "claims": [{"divergence": "dp", "function_class": "all", "epsilon": case.claim}]}
    start = time.perf_counter()
    result = run_audit(config, progress=False)
    return {"case": case.label, "seed": seed, "verdict": result.verdict, "stop": result.table["stop"].dropna().iloc[-1],
            "outputs": int(result.table["outputs_drawn"].dropna().iloc[-1]),
            "seconds": round(time.perf_counter() - start, 1), "machine": machine(), "commit": commit()}


def importable(case: Case) -> str | None:
    """None when the case's mechanism can be built here, else why not."""
    if ":" in case.mechanism:
        return None  # a callable of this folder
    try:
        make_mechanism(case.mechanism, case.params)
    except Exception as error:  # a library that does not import: the case is skipped, with its reason
        return f"{type(error).__name__}: {error}"
    return None


def row(case: Case, records: list[dict]) -> list[str]:
    verdicts = [record["verdict"] for record in records]
    outputs = [record["outputs"] for record in records]
    met = sum(not case.met(record) for record in records) <= case.misses
    return [case.label, f"{case.mechanism} {case.params}", f"{case.claim:g}", case.target, str(len(records)),
            *(str(verdicts.count(verdict)) for verdict in ("violation", "pass", "inconclusive", "error")),
            f"{statistics.median(outputs):,.0f}", f"{max(outputs):,}",
            f"{statistics.median(record['seconds'] for record in records):.1f}", "yes" if met else "**no**"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 per case (default 20)")
    parser.add_argument("--cases", nargs="+", default=[], metavar="TEXT", help="cases whose label or mechanism has one")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_defaults.md")
    parser.add_argument("--records", type=Path, default=None, help="default: --out with suffix .jsonl")
    args = parser.parse_args()
    path = args.records or args.out.with_suffix(".jsonl")
    done = {(record["case"], record["seed"]): record for record in read_records(path)}
    for case in CASES:
        if args.cases and not any(text in case.label or text in case.mechanism for text in args.cases):
            continue
        if (why := importable(case)) is not None:
            print(f"skipped {case.label}: {why}", flush=True)
            continue
        for seed in range(args.seeds):
            if (case.label, seed) not in done:
                done[case.label, seed] = record = audit(case, seed)
                append_record(path, record)
                print(record, flush=True)
    rows = [row(case, [done[key] for key in sorted(done) if key[0] == case.label])
            for case in CASES if any(key[0] == case.label for key in done)]
    machines = sorted({record["machine"] for record in done.values()})
    commits: dict[str, set[str]] = {}
    for record in done.values():
        commits.setdefault(record.get("commit", "not recorded"), set()).add(record["case"])
    text = "\n".join([
        "# Issue 23's targets at default settings", "",
        "`PYTHONPATH=. python benchmarks/bench_defaults.py` (benchmarks/bench_defaults.py; every audit is a line of "
        f"`{path.name}`, the table is rebuilt from all of them; the diffprivlib case ran in an environment with "
        "diffprivlib 0.6.6 and scikit-learn 1.6). Claim dp / all, every other setting at its default (sequential: "
        "no `n_samples`); outputs: results.json `outputs_drawn`; seconds: median wall time of an audit; met: the "
        "seeds run meet the target.", "",
        tabulate(rows, headers=["case", "mechanism", "claim", "target", "seeds", "violation", "pass", "inconclusive",
                                "error", "outputs (median)", "outputs (max)", "seconds", "met"],
                 tablefmt="github", disable_numparse=True), "",
        "Code each case ran (`commit` of its records; records without one predate the field): "
        + "; ".join(f"{c}: {', '.join(sorted(cases))}" for c, cases in sorted(commits.items())) + ".", "",
        f"Machine: {'; '.join(machines)} (shared with other jobs; run with `nice -n 10`, run.n_jobs 1).", "",
    ])
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
