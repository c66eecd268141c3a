"""Coverage benchmark: how often is the lower confidence bound of estimate_divergence at or below the truth? (run by hand)

    python benchmarks/bench_coverage.py [--seeds N] [--sizes N ...] [--cells TEXT ...] [--merge JSON ...] [--out FILE]

Every cell is one output law pair, one sample size n per dataset and one
(class, divergence); per seed it draws n outputs of each law, runs
:func:`attacks.estimate_divergence` (the engine every audit runs) and asks
whether ``lower_bound(0.95)`` is at most the exact value of the class
(the interval [lower bound, inf) a verdict reads covers the truth).  The
estimand, the held-out objective of the fitted witness, is at most the
restricted divergence of its class, so a bound above that value is a miss.
The truth:

* ``kl``, ``renyi`` (orders 2, 4, 10) over ``linear`` and ``ipm`` over
  ``threshold``: :func:`audit.theory.exact.restricted_divergence` of the two
  output laws (P from d, Q from d' of the mechanism's first default pair);
* ``dp`` over ``threshold``: the mechanism's epsilon, the largest
  log((P(S) - delta) / Q(S)) of any set (docs/theory.md section 7; for these
  monotone likelihood ratios a threshold set attains it): epsilon for Laplace
  and randomized response, for the Gaussian the epsilon of delta = 1e-3
  (Balle and Wang 2018, Thm. 8, ``bench_validity.gaussian_dp_epsilon``);
* the point mass (a constant release, P = Q = the point 0): 0 for all.

The cheap classes keep 500 seeds per cell tractable.  Per cell the table
gives the share of seeds covered with its Clopper-Pearson 95 % interval
(``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``); a share below
95 % is flagged ``*`` when the interval still contains 95 % (consistent with
nominal coverage at that many seeds) and ``**`` when it does not.  Caveats
(intervals a verdict never trusts) are counted but not excused: a caveated
bound above the truth is a miss.  Results: ``benchmarks/results/bench_coverage.json``
(per cell: seeds, covered, caveats, truth; cells of earlier runs with other
``--sizes`` or ``--cells`` are kept; ``--merge`` adds those of runs written
elsewhere with ``--out``) and the tables of ``bench_coverage.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from attacks import estimate_divergence  # noqa: E402
from audit.mechanisms import make_mechanism  # noqa: E402
from audit.theory.exact import restricted_divergence  # noqa: E402
from bench_validity import GAUSSIAN_DELTA, gaussian_dp_epsilon  # noqa: E402
from results_file import add_out_option, write  # noqa: E402

LEVEL = 0.95
SIZES = (200, 1000, 10_000)
# (divergence, alpha, class): the cheap classes whose exact values audit.theory.exact has (dp: the mechanism's epsilon).
TARGETS = (("dp", None, "threshold"), ("kl", None, "linear"), ("renyi", 2.0, "linear"), ("renyi", 4.0, "linear"),
           ("renyi", 10.0, "linear"), ("ipm", None, "threshold"))
# label: (mechanism, params); None is the point mass at 0 on both datasets.
LAWS = {
    "laplace eps=1": ("laplace", {"epsilon": 1.0}), "laplace eps=4": ("laplace", {"epsilon": 4.0}),
    "gaussian sigma=1": ("gaussian", {"sigma": 1.0}), "gaussian sigma=0.25": ("gaussian", {"sigma": 0.25}),
    "randomized_response eps=1": ("randomized_response", {"epsilon": 1.0}),
    "randomized_response eps=4": ("randomized_response", {"epsilon": 4.0}),
    "point mass": None,
}


@dataclass(frozen=True)
class Cell:
    """One law pair, sample size per dataset and (class, divergence); its truth is the exact value (module docstring)."""

    label: str
    n: int
    divergence: str
    alpha: float | None
    function_class: str

    @property
    def target(self) -> str:
        return f"{self.function_class} {self.divergence}{'' if self.alpha is None else f'{self.alpha:g}'}"

    @property
    def name(self) -> str:
        return f"{self.label}|n={self.n}|{self.target}"

    @property
    def delta(self) -> float:
        return GAUSSIAN_DELTA if self.divergence == "dp" and self.label.startswith("gaussian") else 0.0


def coverage_cells(sizes: tuple[int, ...] = SIZES, keep: Callable[[Cell], bool] = lambda cell: True) -> list[Cell]:
    """The grid: laws x sample sizes x targets, those ``keep`` selects."""
    cells = [Cell(label, n, divergence, alpha, function_class)
             for label in LAWS for n in sizes for divergence, alpha, function_class in TARGETS]
    return [cell for cell in cells if keep(cell)]


def _laws(label: str) -> tuple[Any, Any, Any] | None:
    """(mechanism, P, Q) of a label's first default pair; None for the point mass."""
    if LAWS[label] is None:
        return None
    mechanism = make_mechanism(*LAWS[label])
    return (mechanism, *mechanism.output_laws(*mechanism.default_pairs()[0]))


def truth(cell: Cell) -> float:
    """The exact value of the cell's class and divergence on its laws (module docstring)."""
    laws = _laws(cell.label)
    if laws is None:
        return 0.0
    mechanism, p, q = laws
    if cell.divergence == "dp":
        return gaussian_dp_epsilon(mechanism.params["sigma"], cell.delta) if cell.delta else float(mechanism.true_epsilon)
    return float(restricted_divergence(p, q, cell.function_class, cell.divergence, cell.alpha))


def samples(label: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n outputs of each law of ``label``, drawn from ``seed`` (the same for every target of a seed)."""
    laws = _laws(label)
    if laws is None:
        return np.zeros(n), np.zeros(n)
    rng = np.random.default_rng([seed, n])
    _, p, q = laws
    return np.asarray(p.rvs(n, random_state=rng), float), np.asarray(q.rvs(n, random_state=rng), float)


def covers(cell: Cell, value: float, seed: int) -> tuple[bool, bool]:
    """(the lower bound at LEVEL is at most ``value``, the estimate has a caveat) for one seed."""
    result = estimate_divergence(*samples(cell.label, cell.n, seed), cell.function_class, cell.divergence,
                                 alpha=cell.alpha, delta=cell.delta, random_state=seed)
    return bool(result.lower_bound(LEVEL) <= value + 1e-12 * max(1.0, abs(value))), result.caveat is not None


def run_cell(cell: Cell, seeds: range) -> dict[str, Any]:
    """The cell's record: truth, seeds, covered, caveats."""
    value = truth(cell)
    outcomes = [covers(cell, value, seed) for seed in seeds]
    return {"label": cell.label, "n": cell.n, "target": cell.target, "truth": value, "seeds": len(outcomes),
            "covered": sum(c for c, _ in outcomes), "caveats": sum(k for _, k in outcomes)}


def coverage_interval(covered: int, seeds: int) -> tuple[float, float]:
    """The Clopper-Pearson 95 % interval of a coverage share."""
    interval = stats.binomtest(covered, seeds).proportion_ci(confidence_level=0.95, method="exact")
    return float(interval.low), float(interval.high)


def flag(covered: int, seeds: int) -> str:
    """'' at or above 95 %; '*' below but with 95 % inside the Clopper-Pearson interval; '**' below it."""
    if covered >= LEVEL * seeds:
        return ""
    return "*" if coverage_interval(covered, seeds)[1] >= LEVEL else "**"


def tables(records: dict[str, dict]) -> str:
    """The grid (one row per law and target, a column per n) and the cells below 95 %."""
    frame = pd.DataFrame(records.values())
    def entry(row: pd.Series) -> str:
        low, high = coverage_interval(row["covered"], row["seeds"])
        share = row["covered"] / row["seeds"]
        return f"{share:.3f}{flag(row['covered'], row['seeds'])} [{low:.3f}, {high:.3f}] ({row['seeds']})"
    frame["entry"] = frame.apply(entry, axis=1)
    frame["order"] = frame["label"].map(list(LAWS).index) * 100 + frame["target"].map(
        [f"{c} {d}{'' if a is None else f'{a:g}'}" for d, a, c in TARGETS].index)
    grid = frame.pivot_table(index=["order", "label", "target"], columns="n", values="entry", aggfunc="first")
    grid = grid.reset_index().drop(columns="order")
    grid.columns = ["law", "target", *(f"n = {n:,}" for n in grid.columns[2:])]
    truths = frame.groupby(["label", "target"])["truth"].first()
    grid.insert(2, "truth", [f"{truths[(law, target)]:.4g}" for law, target in zip(grid["law"], grid["target"])])
    low = frame[frame["covered"] < LEVEL * frame["seeds"]].sort_values(["order", "n"])
    below = pd.DataFrame({
        "cell": low["label"] + ", n = " + low["n"].map("{:,}".format) + ", " + low["target"],
        "covered / seeds": low["covered"].astype(str) + " / " + low["seeds"].astype(str),
        "coverage [95% CP]": low["entry"].str.replace(r" \(\d+\)$", "", regex=True),
        "CP upper bound includes 95 %": ["yes" if coverage_interval(c, s)[1] >= LEVEL else "no"
                                         for c, s in zip(low["covered"], low["seeds"])],
        "caveats": low["caveats"],
    })
    seeds = sorted(set(frame["seeds"]))
    return "\n".join([
        f"Share of seeds whose lower bound at {LEVEL} (`estimate_divergence(...).lower_bound({LEVEL})`) is at most "
        f"the exact value (truth), with its Clopper-Pearson 95 % interval and (seeds); `*`: below 95 % with 95 % "
        f"inside the interval, `**`: the interval excludes 95 %. Seeds per cell: {', '.join(map(str, seeds))}.",
        "", grid.to_markdown(index=False), "",
        "Cells below 95 %:" if len(below) else "No cell below 95 %.", "",
        *([below.to_markdown(index=False), ""] if len(below) else []),
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=500, help="seeds per cell (default 500)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="samples per dataset")
    parser.add_argument("--cells", nargs="+", default=[], metavar="TEXT", help="keep cells whose name contains one")
    parser.add_argument("--merge", nargs="+", type=Path, default=[], metavar="JSON", help="add the cells of other "
                        "runs' JSON files (run side by side with their own --out) and rewrite the tables; no new seeds")
    add_out_option(parser, "bench_coverage")
    args = parser.parse_args(argv)
    cells = coverage_cells(tuple(args.sizes), lambda cell: not args.cells or any(t in cell.name for t in args.cells))
    store = args.out.with_suffix(".json")
    records = json.loads(store.read_text()) if store.exists() else {}
    if args.merge:
        for other in args.merge:
            records.update(json.loads(other.read_text()))
        save(args.out, records)
        return
    for cell in cells:  # cell by cell, the files rewritten after each: a run stopped part way keeps its cells
        records[cell.name] = run_cell(cell, range(args.seeds))
        print(cell.name, records[cell.name], flush=True)
        save(args.out, records)


def save(out: Path, records: dict[str, dict]) -> None:
    """The records as ``out`` with suffix .json, and their tables as ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(records, indent=1) + "\n")
    write(out, tables(records))


if __name__ == "__main__":
    main()
