"""Power at the default budget through the product: how often a false dp claim is caught (run by hand).

    PYTHONPATH=. python benchmarks/bench_power.py [--seeds 20] [--large-seeds 10] [--mechanisms NAME ...] [--out FILE]

Every audit is an ordinary :func:`audit.run_audit` of the claim ``dp`` / ``all``
<= 0.1 on a mechanism built at epsilon = 0.1 (:func:`bench_suite.config`: its
default pairs, its attack classes, policy best with coupled sampling),
with the product's defaults otherwise: confidence 0.95 and the default stage
shares (docs/config.md).

- **Buggy members** (their true epsilon exceeds 0.1): the share of ``--seeds``
  seeds whose verdict is ``violation`` at the default budget (``n_samples`` =
  100 000 outputs per dataset of a pair, over all stages), and the smallest
  budget of :data:`BUDGETS` at which at least :data:`CAUGHT_SHARE` of the seeds
  are caught (:func:`ladder`: assuming power grows with the budget, the
  smaller budgets are tried in increasing order when the default one reaches
  the share, else the larger ones on ``--large-seeds`` seeds, for CPU; a
  budget stops once the share is out of reach, and the search once reached).
- **Correct members** (epsilon-DP as claimed): the number of ``violation``
  verdicts over ``--seeds`` seeds at the default budget -- each is a false
  violation, expected in at most 1 - 0.95 of the audits.

This script only builds configs, runs them and tabulates.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
from bench_suite import config  # noqa: E402
from results_file import commit, machine, write  # noqa: E402

from audit import run_audit  # noqa: E402

BUGGY = ("noisy_hist_2", "report_noisy_max_3", "report_noisy_max_4", "svt_3", "svt_4", "svt_5", "svt_6",
         "leaky_laplace")
CORRECT = ("noisy_hist_1", "report_noisy_max_1", "report_noisy_max_2", "svt_1", "svt_2")
DEFAULT_BUDGET = 100_000  # the benchmark's reference budget (one pair's outputs per dataset; the config's default is 10 000)
BUDGETS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
CAUGHT_SHARE = 0.9


def caught(name: str, n_samples: int, seeds: int, max_misses: int | None = None) -> tuple[int, int, int, float]:
    """(violations, seeds run, errors, seconds per audit) of the audit at ``n_samples`` on seeds 0, 1, ...;
    it stops once more than ``max_misses`` seeds were not caught (the share sought is then out of reach)."""
    violations = errors = runs = 0
    start = time.perf_counter()
    for seed in range(seeds):
        result = run_audit(config(name, n_samples, True, seed, confidence=None), progress=False)  # default stages
        violations += result.verdict == "violation"
        errors += result.exit_code == 2
        runs += 1
        if max_misses is not None and runs - violations > max_misses:
            break
    return violations, runs, errors, (time.perf_counter() - start) / runs


def ladder(name: str, seeds: int, large_seeds: int) -> dict:
    """The buggy mechanism's share caught at the default budget and the smallest budget of :data:`BUDGETS`
    catching ``CAUGHT_SHARE`` of its seeds (None when none does).

    The default budget runs all ``seeds``; the others are tried only where they can be the smallest (power
    grows with the budget): the smaller ones in increasing order when the default budget reaches the share,
    else the larger ones on ``large_seeds`` seeds; each stops once the share is out of reach."""
    row = {"mechanism": name, "smallest": None, "runs": []}

    def run(n_samples: int, n_seeds: int, stop: bool) -> bool:
        allowed = n_seeds - math.ceil(CAUGHT_SHARE * n_seeds)
        violations, runs, errors, seconds = caught(name, n_samples, n_seeds, allowed if stop else None)
        row["runs"].append((n_samples, violations, runs, errors, seconds))
        print(name, n_samples, f"{violations}/{runs}", f"errors {errors}", f"{seconds:.1f} s/audit", flush=True)
        return runs - violations <= allowed and runs == n_seeds

    reached = run(DEFAULT_BUDGET, seeds, stop=False)
    row["default"] = row["runs"][0][1:3] + (row["runs"][0][4],)
    smaller = [n for n in BUDGETS if n < DEFAULT_BUDGET]
    larger = [n for n in BUDGETS if n > DEFAULT_BUDGET]
    for n_samples in smaller if reached else larger:
        if run(n_samples, seeds if n_samples < DEFAULT_BUDGET else large_seeds, stop=True):
            row["smallest"] = n_samples
            break
    if reached and row["smallest"] is None:
        row["smallest"] = DEFAULT_BUDGET
    row["runs"].sort()
    return row


def spaced(n: int) -> str:
    """``n`` with its thousands separated by spaces (100 000)."""
    return f"{n:,}".replace(",", " ")


def tables(buggy: list[dict], correct: list[tuple[str, int, int, int, float]]) -> str:
    """Markdown: the buggy members' power and the correct members' false violations."""
    power = [[row["mechanism"], f"{row['default'][0]}/{row['default'][1]}", f"{row['default'][2]:.1f}",
              f"none up to {spaced(BUDGETS[-1])}" if row["smallest"] is None else spaced(row["smallest"]),
              ", ".join(f"{spaced(n)}: {v}/{s}" + (f" ({e} errors)" if e else "") for n, v, s, e, _ in row["runs"])]
             for row in buggy]
    false = [[name, f"{violations}/{seeds}", errors, f"{seconds:.1f}"] for name, violations, seeds, errors, seconds
             in correct]
    return "\n\n".join(text for text, rows in [
        (tabulate(power, headers=["buggy mechanism", f"caught at {spaced(DEFAULT_BUDGET)}",
                                  f"s/audit at {spaced(DEFAULT_BUDGET)}",
                                  f"smallest budget catching >= {CAUGHT_SHARE:.0%}", "caught per budget"],
                  tablefmt="github", disable_numparse=True), power),
        (tabulate(false, headers=["correct mechanism", f"false violations at {spaced(DEFAULT_BUDGET)}", "errors",
                                  "s/audit"],
                  tablefmt="github", disable_numparse=True), false),
    ] if rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per budget up to the default budget")
    parser.add_argument("--large-seeds", type=int, default=10, help="seeds per budget above the default budget")
    parser.add_argument("--mechanisms", nargs="+", default=[*BUGGY, *CORRECT], choices=[*BUGGY, *CORRECT],
                        metavar="NAME")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_power.md")
    args = parser.parse_args(argv)
    code, start = commit(), time.process_time()  # the code at the start (docs may change while it runs)
    buggy = [ladder(name, args.seeds, args.large_seeds) for name in args.mechanisms if name in BUGGY]
    correct = []
    for name in (name for name in args.mechanisms if name in CORRECT):
        violations, runs, errors, seconds = caught(name, DEFAULT_BUDGET, args.seeds)
        print(name, DEFAULT_BUDGET, f"{violations}/{runs}", f"errors {errors}", f"{seconds:.1f} s/audit", flush=True)
        correct.append((name, violations, runs, errors, seconds))
    text = tables(buggy, correct)
    print(text)
    write(args.out, f"Code: {code}. CPU time, all audits: {time.process_time() - start:.0f} s. Machine: {machine()}.\n\n"
          + text)


if __name__ == "__main__":
    main()
