"""Sequential audits against the fixed design: outputs drawn to a violation, and the time a correct audit takes.

    PYTHONPATH=. python benchmarks/bench_sequential.py [--quick] [--seeds N] [--mechanisms NAME ...] [--out F]

For each buggy built-in (claim ``dp`` / ``all`` <= 0.1, the mechanism's
default pairs and every default setting: the audit a new user runs) and each
seed, it runs

* the **sequential** audit (no ``n_samples``: rounds of 4 000, 16 000, ...
  outputs per dataset of a pair until decided; :mod:`attacks.sequential`) and
  records ``outputs_drawn`` (results.json: every pair, dataset, stage and
  round) and the verdict;
* the **fixed** design at the same power: ``n_samples`` = 4 000, 16 000,
  64 000, ... (the sequential rounds' budgets) until the fixed audit reads
  violation, and records that audit's ``outputs_drawn`` (so both columns catch
  the bug in the seeds counted; a seed the fixed design misses up to the
  last budget counts as missed): an oracle that knows the budget each seed
  needs, so a lower bound on what any fixed design draws at that power;
* the fixed design at the former default ``n_samples = 10 000``.

The table gives, per mechanism, the median over seeds of outputs drawn to a
violation (over the seeds caught) and the seeds caught.  A second table
gives the wall time and outputs of a correct mechanism's sequential audit to
PASS (the float-safe ``snapping_laplace`` at epsilon 1, claimed 1.5).
Every number comes from :func:`audit.run_audit`; this script only builds
configs and tabulates.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from tabulate import tabulate

from attacks.sequential import FIRST_BUDGET, RATIO
from audit import run_audit

CLAIMED_EPSILON = 0.1
BUGGY = ["noisy_hist_2", "report_noisy_max_3", "report_noisy_max_4", "svt_3", "svt_4", "svt_5", "svt_6",
         "leaky_laplace", "textbook_laplace"]
QUICK = ["noisy_hist_2", "report_noisy_max_4", "textbook_laplace"]
FIXED_BUDGETS = [FIRST_BUDGET * RATIO ** k for k in range(4)]  # 4 000 .. 256 000
CORRECT = ("snapping_laplace", {"epsilon": 1.0}, 1.5)
FORMER_DEFAULT = 10_000


def config(name: str, params: dict, claim: float, seed: int, n_samples: int | None = None) -> dict:
    attacks = {} if n_samples is None else {"n_samples": n_samples}
    return {"mechanism": {"name": name, "params": params}, "attacks": attacks, "run": {"seed": seed},
            "claims": [{"divergence": "dp", "function_class": "all", "epsilon": claim}]}


def drawn(name: str, seed: int, n_samples: int | None = None) -> tuple[bool, int]:
    """(caught, outputs drawn) of one audit of the mechanism at epsilon 0.1 claimed 0.1."""
    params = {"epsilon": CLAIMED_EPSILON}
    result = run_audit(config(name, params, CLAIMED_EPSILON, seed, n_samples), progress=False)
    return result.verdict == "violation", int(result.table["outputs_drawn"].dropna().iloc[-1])


def fixed_to_violation(name: str, seed: int) -> tuple[bool, int]:
    """The first fixed budget of FIXED_BUDGETS that catches the bug (caught, that audit's outputs)."""
    for budget in FIXED_BUDGETS:
        caught, outputs = drawn(name, seed, budget)
        if caught:
            return True, outputs
    return False, outputs


def median(values: list[int]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK)}; 2 seeds")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per mechanism (default 10; --quick 2)")
    parser.add_argument("--mechanisms", nargs="+", default=None)
    parser.add_argument("--out", default="benchmarks/results/bench_sequential.md")
    args = parser.parse_args()
    seeds = range(args.seeds or (2 if args.quick else 10))
    names = args.mechanisms or (QUICK if args.quick else BUGGY)
    rows = []
    for name in names:
        sequential = [drawn(name, seed) for seed in seeds]
        fixed = [fixed_to_violation(name, seed) for seed in seeds]
        former = [drawn(name, seed, FORMER_DEFAULT) for seed in seeds]
        rows.append([name] + [cell for runs in (sequential, fixed, former)
                              for cell in (median([n for caught, n in runs if caught]),
                                           f"{sum(c for c, _ in runs)}/{len(seeds)}")])
        print(rows[-1], flush=True)
    name, params, claim = CORRECT
    timed = []
    for seed in seeds:
        start = time.perf_counter()
        result = run_audit(config(name, params, claim, seed), progress=False)
        row = result.table.iloc[-1]
        timed.append([seed, result.verdict, row["stop"], int(row["outputs_drawn"]), f"{time.perf_counter() - start:.1f}"])
    command = "PYTHONPATH=. python benchmarks/bench_sequential.py" + (" --quick" if args.quick else "") \
        + (f" --seeds {args.seeds}" if args.seeds else "") + (f" --mechanisms {' '.join(args.mechanisms)}" if args.mechanisms else "")
    text = "\n".join([
        "# Sequential audits against the fixed design", "",
        f"`{command}` (benchmarks/bench_sequential.py). Claim dp / all <= {CLAIMED_EPSILON}, default pairs, classes "
        "and confidence. Outputs drawn: results.json `outputs_drawn` (every pair, dataset, stage and round), median "
        "over the seeds caught. Fixed: the smallest `n_samples` of "
        f"{', '.join(f'{b:,}' for b in FIXED_BUDGETS)} whose audit reads violation, per seed (an oracle); and the "
        f"fixed design at the former default n_samples = {FORMER_DEFAULT:,}.", "",
        tabulate(rows, headers=["mechanism", "sequential: outputs to violation", "caught",
                                "fixed (oracle budget): outputs", "caught", f"fixed n_samples {FORMER_DEFAULT:,}: outputs",
                                "caught"], tablefmt="github"), "",
        f"Correct mechanism to PASS: {name} {params}, claim dp / all <= {claim} (sequential, default limits).", "",
        tabulate(timed, headers=["seed", "verdict", "stop", "outputs drawn", "seconds"], tablefmt="github"), "",
    ])
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
