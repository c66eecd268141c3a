"""Validity benchmark: how often does a correct mechanism with a TRUE claim read "violation"? (run by hand)

    python benchmarks/bench_validity.py [--quick] [--seeds N] [--cells TEXT ...] [--policy best|every]
        [--n-jobs N] [--power] [--out FILE]

Every cell is one correct mechanism, one sample size, one attack class and
one divergence, audited N times (seeds 0..N-1) THROUGH :func:`audit.run_audit`
with one claim set exactly at its true value:

* ``kl``, ``renyi`` (alpha 2 and 10), ``ipm``: the exact restricted divergence
  of the claimed class (:func:`audit.theory.exact.restricted_divergence` on the
  mechanism's output laws, the larger of the two directions).  The claimed
  class is the attack's own class where audit.theory.exact has it (``linear``,
  ``poly2``, ``threshold`` for ipm), else ``all`` (kernel, mlp, trees).  For
  the 2-D Gaussian the likelihood ratio depends on v.x only, and for
  polynomial classes and ``all`` the value is that of the 1-D laws of v.x,
  N(0, sigma^2 |v|^2) against N(|v|^2, sigma^2 |v|^2) (an orthogonal
  component only adds independent noise to a witness).
* ``dp``: the true epsilon (claim class ``all``): epsilon for Laplace and
  randomized response; for the Gaussian, the epsilon at which it is exactly
  (epsilon, delta)-DP with delta = 1e-3 (Balle and Wang 2018, Thm. 8).

A claim at its true value is the hardest true claim: the attack's estimand
can reach it.  An audit is honest when it reads "violation" in at most
1 - confidence = 5 % of the seeds.  The table gives per cell the number of
violations, the false-violation rate with its Clopper-Pearson 95 % interval
(``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``), the one-sided
binomial p-value of H0: rate <= 5 % (a cell is flagged ``**`` when it is below
0.05: significantly above 5 %), and how often the tight claim read pass,
inconclusive, or ended in an error (exit 2, e.g. an untested claim).

``--power`` adds the power table: the known-buggy suite (audit.mechanisms.buggy,
DP-Sniper's benchmark mechanisms at their claimed epsilon = 0.1, with the
classes of ``bench_suite.py``), each audited through ``run_audit`` with its
claim dp/all <= 0.1 and its default pairs, and the share of seeds that read
"violation" (the catch rate).  The correct ones of the suite (noisy_hist_1,
report_noisy_max_1/2, svt_1/2) are validity cells of the same table.

``--quick`` runs the riskiest cells only (high epsilon, small n, kernel and
Renyi alpha = 10, dp and ipm at zero counts) with few seeds; ``--cells`` keeps
the cells whose name contains any of the given texts (e.g. ``"laplace eps=8"``,
``"|n=1000|"``, ``renyi10``).  Results: ``benchmarks/results/bench_validity.md``.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import commit  # noqa: E402

from attacks.sequential import schedule  # noqa: E402
from audit import run_audit  # noqa: E402
from audit.mechanisms import make_mechanism  # noqa: E402
from audit.theory import bounds  # noqa: E402
from audit.theory.exact import restricted_divergence  # noqa: E402

CONFIDENCE = 0.95
FALSE_RATE = 1.0 - CONFIDENCE
SCALES = (0.1, 1.0, 4.0, 8.0, 20.0)  # epsilon of Laplace, 1/sigma of Gaussian
SAMPLE_SIZES = (1000, 20_000, 100_000)
GAUSSIAN_DELTA = 1e-3
# (divergence, alpha, attack classes); the claimed class is the attack's own where audit.theory.exact has it.
TARGETS = (
    ("kl", None, ("linear", "poly2", "kernel", "mlp", "tree3")),
    ("renyi", 2.0, ("linear", "poly2", "kernel", "mlp", "tree3")),
    ("renyi", 10.0, ("linear", "poly2", "kernel", "mlp", "tree3")),
    ("ipm", None, ("threshold", "linear", "kernel")),
    ("dp", None, ("threshold", "linear", "kernel")),
)
EXACT_CLASSES = {"kl": ("linear", "poly2"), "renyi": ("linear", "poly2"), "ipm": ("threshold",), "dp": ()}
# The known-buggy suite with bench_suite.py's classes; true_epsilon > 0.1 except for the correct ones.
SUITE = {
    "noisy_hist_1": ("threshold", "linear"), "noisy_hist_2": ("threshold", "linear"),
    "report_noisy_max_1": ("linear", "tree8"), "report_noisy_max_2": ("linear", "tree8"),
    "report_noisy_max_3": ("threshold",), "report_noisy_max_4": ("threshold",),
    "svt_1": ("linear", "tree8"), "svt_2": ("linear", "tree8"), "svt_3": ("linear", "tree8"),
    "svt_4": ("linear", "tree8"), "svt_5": ("linear", "tree8"), "svt_6": ("linear", "tree8"),
    "leaky_laplace": ("tree2", "tree8"),
}
SUITE_CORRECT = ("noisy_hist_1", "report_noisy_max_1", "report_noisy_max_2", "svt_1", "svt_2")
SUITE_SIZES = (1000, 20_000)


@dataclass(frozen=True)
class Cell:
    """One mechanism, sample size, attack class and claim; audited once per seed."""

    mechanism: str
    params: dict = field(hash=False)
    label: str
    n_samples: int | None
    attack_class: str
    divergence: str
    alpha: float | None
    claim_class: str
    claim: float
    delta: float = 0.0
    buggy: bool = False
    policy: str | None = None
    max_outputs: int | None = None

    @property
    def name(self) -> str:
        target = self.divergence + ("" if self.alpha is None else f"{self.alpha:g}")
        size = f"n={self.n_samples}" if self.n_samples is not None else f"sequential<={self.max_outputs}"
        return f"{self.label}|{size}|{self.attack_class}|{target}|{self.claim_class}"

    def sequential(self, max_outputs: int) -> Cell:
        """The cell without ``n_samples``: the audit draws in rounds until decided or ``max_outputs`` outputs."""
        return replace(self, n_samples=None, max_outputs=max_outputs)

    def config(self, seed: int) -> dict[str, Any]:
        claim = {"divergence": self.divergence, "function_class": self.claim_class, "epsilon": self.claim}
        if self.alpha is not None:
            claim["alpha"] = [self.alpha]
        if self.delta:
            claim["delta"] = self.delta
        return {
            "mechanism": {"name": self.mechanism, "params": dict(self.params)},
            "claims": [claim],
            "attacks": {"classes": [self.attack_class], "confidence": CONFIDENCE,
                        **({"n_samples": self.n_samples} if self.max_outputs is None else {"max_outputs": self.max_outputs}),
                        **({} if self.policy is None else {"policy": self.policy})},
            "run": {"seed": seed, "n_jobs": 1},
        }


def gaussian_dp_delta(epsilon: float, sigma: float) -> float:
    """The smallest delta of (epsilon, delta)-DP for N(0, sigma^2) noise, sensitivity 1 (Balle and Wang 2018, Thm. 8).

    delta = Phi(1/(2 sigma) - epsilon sigma) - e^epsilon Phi(-1/(2 sigma) - epsilon sigma), the second term
    in log space so that it cannot overflow.
    """
    a, b = 0.5 / sigma - epsilon * sigma, -0.5 / sigma - epsilon * sigma
    return float(stats.norm.cdf(a) - np.exp(epsilon + stats.norm.logcdf(b)))


def gaussian_dp_epsilon(sigma: float, delta: float = GAUSSIAN_DELTA) -> float:
    """The epsilon at which the Gaussian mechanism is exactly (epsilon, delta)-DP (0 if delta suffices at 0)."""
    if gaussian_dp_delta(0.0, sigma) <= delta:
        return 0.0
    upper = 1.0
    while gaussian_dp_delta(upper, sigma) > delta:
        upper *= 2.0
    return float(optimize.brentq(lambda e: gaussian_dp_delta(e, sigma) - delta, 0.0, upper, xtol=1e-12))


# Unrestricted values of docs/theory.md section 6 (audit.theory.bounds); restricted_divergence's numerical "all" crashed the
# interpreter (segmentation fault) on Laplace eps = 8, renyi alpha = 2.
CLOSED_FORMS = {
    ("laplace", "kl"): lambda m, alpha: bounds.laplace_kl(m.params["epsilon"], m.params["sensitivity"]),
    ("laplace", "renyi"): lambda m, alpha: bounds.laplace_renyi(m.params["epsilon"], alpha, m.params["sensitivity"]),
    ("gaussian", "kl"): lambda m, alpha: bounds.gaussian_kl(m.params["sigma"], m.params["sensitivity"]),
    ("gaussian", "renyi"): lambda m, alpha: bounds.gaussian_renyi(m.params["sigma"], alpha, m.params["sensitivity"]),
}


def true_value(mechanism: Any, laws: tuple[Any, Any], claim_class: str, divergence: str,
               alpha: float | None) -> float:
    """The claim at its true value: the larger exact value of the two directions (module docstring)."""
    if divergence == "dp":
        return float(mechanism.true_epsilon)
    closed = CLOSED_FORMS.get((mechanism.name, divergence)) if claim_class == "all" else None
    if closed is not None:
        return float(closed(mechanism, alpha))
    p, q = laws
    return max(restricted_divergence(p, q, claim_class, divergence, alpha),
               restricted_divergence(q, p, claim_class, divergence, alpha))


def correct_mechanisms() -> list[tuple[str, dict, str, tuple[Any, Any] | None]]:
    """(name, params, label, 1-D laws for the exact values) of every correct mechanism of the grid."""
    entries = []
    for scale in SCALES:
        entries.append(("laplace", {"epsilon": scale}, f"laplace eps={scale:g}", None))
        entries.append(("gaussian", {"sigma": 1.0 / scale}, f"gaussian 1/sigma={scale:g}", None))
    entries.append(("gaussian", {"sigma": 1.0, "sensitivity": [1.0, 1.0]}, "gaussian2d sigma=1 v=(1,1)",
                    (stats.norm(0.0, math.sqrt(2.0)), stats.norm(2.0, math.sqrt(2.0)))))
    for epsilon in (1.0, 8.0, 20.0):
        entries.append(("randomized_response", {"epsilon": epsilon}, f"randomized_response eps={epsilon:g}", None))
    return entries


def validity_cells(keep: Callable[[Cell], bool] = lambda cell: True) -> list[Cell]:
    """The grid: correct mechanisms x sample sizes x (divergence, class), each claim at its true value.

    ``keep`` selects cells before their claims are computed (a cell's ``claim`` is NaN when it is called).
    """
    cells = []
    for name, params, label, laws in correct_mechanisms():
        mechanism = make_mechanism(name, params)
        for divergence, alpha, classes in TARGETS:
            for attack_class in classes:
                if name == "randomized_response" and attack_class in ("kernel", "mlp", "poly2"):
                    continue  # two output values: every class is the threshold / linear one
                if divergence == "dp" and label.startswith("gaussian2d"):
                    continue  # the (epsilon, delta) curve below is the 1-D one
                claim_class = attack_class if attack_class in EXACT_CLASSES[divergence] else "all"
                delta = GAUSSIAN_DELTA if divergence == "dp" and name == "gaussian" else 0.0
                grid = (Cell(name, params, label, n, attack_class, divergence, alpha, claim_class, math.nan, delta)
                        for n in SAMPLE_SIZES)
                chosen = [cell for cell in grid if keep(cell)]
                if not chosen:
                    continue
                if divergence == "dp" and name == "gaussian":
                    claim = gaussian_dp_epsilon(params["sigma"], delta)
                else:
                    claim = true_value(mechanism, laws or mechanism.output_laws(*mechanism.default_pairs()[0]),
                                       claim_class, divergence, alpha)
                cells += [replace(cell, claim=claim) for cell in chosen]
    return cells


def suite_cells() -> list[Cell]:
    """The known-buggy suite (and its correct members), claim dp/all <= the claimed epsilon 0.1."""
    cells = []
    for name, classes in SUITE.items():
        for n in SUITE_SIZES:
            for attack_class in classes:
                cells.append(Cell(name, {}, name, n, attack_class, "dp", None, "all", 0.1,
                                  buggy=name not in SUITE_CORRECT))
    return cells


def is_quick(cell: Cell) -> bool:
    """The riskiest cells: high epsilon, the smallest n, kernel and alpha = 10, zero counts in dp and ipm."""
    high = any(f"={s:g}" in cell.label for s in (8.0, 20.0)) or cell.label.startswith("gaussian2d")
    risky = cell.attack_class in ("kernel", "linear", "threshold") and (cell.divergence != "renyi" or cell.alpha == 10)
    return cell.n_samples == 1000 and high and risky and cell.attack_class != "mlp"


def audit_once(cell: Cell, seed: int) -> dict[str, Any]:
    """One audit of the cell: its overall verdict, claim verdict, exit code and time; a crash is recorded."""
    start = time.perf_counter()
    try:
        result = run_audit(cell.config(seed), progress=False)
    except Exception as error:  # a crash is an outcome of the tool under test, not of the benchmark
        return {"cell": cell.name, "seed": seed, "verdict": "crash", "claim_verdict": "crash", "exit_code": None,
                "seconds": time.perf_counter() - start, "detail": f"{type(error).__name__}: {error}"}
    # capaudit before per-claim summaries (the baseline of the power table) has only the overall verdict
    (claim,) = result.claims if hasattr(result, "claims") else ({"verdict": result.verdict, "detectable_excess": None},)
    notes = "; ".join(sorted({str(note) for note in result.table["note"] if note}))
    stopped = result.table.dropna(subset=["stop"]) if "stop" in result.table else result.table.iloc[:0]
    return {"cell": cell.name, "seed": seed, "verdict": result.verdict, "claim_verdict": claim["verdict"],
            "exit_code": result.exit_code, "seconds": time.perf_counter() - start,
            "detail": notes[:200], "detectable_excess": claim["detectable_excess"],
            "max_estimate": float(np.nanmax(result.table["estimate"].to_numpy(float))),
            "stop": stopped["stop"].iloc[-1] if len(stopped) else None,
            "outputs_drawn": stopped["outputs_drawn"].iloc[-1] if len(stopped) else None}


def summarize(cells: list[Cell], outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per cell: violations, their rate with its Clopper-Pearson interval, and the other outcomes' shares.

    ``buggy`` marks the cells of the power table (a violation is a catch there).  Sequential cells
    (``max_outputs``) also give why their audits stopped and the median outputs drawn.
    """
    rows = []
    for cell in cells:
        runs = outcomes[outcomes["cell"] == cell.name]
        if runs.empty:
            continue
        seeds, violations = len(runs), int((runs["verdict"] == "violation").sum())
        test = stats.binomtest(violations, seeds, FALSE_RATE, alternative="greater")
        low, high = stats.binomtest(violations, seeds).proportion_ci(confidence_level=0.95, method="exact")
        errors = int(((runs["exit_code"] == 2) | (runs["verdict"] == "crash")).sum())
        rows.append({
            "cell": cell.name.replace("|", "\\|"),  # a bare "|" would split the markdown table's cell
            "claim": f"{cell.claim:.4g}",
            "seeds": seeds,
            "violations": violations,
            "rate [95% CP]": f"{violations / seeds:.3f} [{low:.3f}, {high:.3f}]",
            "p(rate<=5%)": f"{test.pvalue:.3g}" + (" **" if test.pvalue < 0.05 and not cell.buggy else ""),
            "pass": int((runs["claim_verdict"] == "pass").sum()),
            "inconclusive": int((runs["claim_verdict"] == "inconclusive").sum()),
            "errors": errors,
            "s/audit": f"{runs['seconds'].mean():.2f}",
            **({} if cell.max_outputs is None else {
                "stops": ", ".join(f"{stop} {count}" for stop, count in runs["stop"].value_counts().sort_index().items()),
                "median outputs": f"{runs['outputs_drawn'].median():,.0f}"}),
            "first note": next((d for d in runs["detail"] if d), ""),
            "buggy": cell.buggy,
        })
    return pd.DataFrame(rows)


def sequential_note(max_outputs: int) -> str:
    """What a ``--sequential`` run measures, and why it caps the outputs."""
    budgets = schedule(max_outputs, 1)
    return (f"Sequential: no `n_samples`; each audit runs the staged search in rounds (attacks.sequential) until the "
            f"claim is decided or `[attacks] max_outputs` = {max_outputs:,} outputs (every pair, dataset, stage and "
            f"round) would be passed; other limits at their defaults. Validity holds for any limit (the error is spent "
            f"over the looks the limit schedules, whatever the stopping time); the cap keeps the run tractable. With "
            f"one pair it schedules {len(budgets)} rounds of {', '.join(f'{b:,}' for b in budgets)} outputs per "
            f"dataset; stops: why each audit stopped; median outputs: outputs drawn.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the riskiest cells only, 20 seeds unless --seeds")
    parser.add_argument("--seeds", type=int, help="seeds per cell (default 100, --quick 20)")
    parser.add_argument("--cells", nargs="+", default=[], metavar="TEXT", help="keep cells whose name contains one")
    parser.add_argument("--n-jobs", type=int, default=1, help="audits run in parallel (each on one core)")
    parser.add_argument("--power", action="store_true", help="also the known-buggy suite's catch rates")
    parser.add_argument("--policy", choices=("best", "every"), help="[attacks] policy of every audit (default: the "
                        "config's default, audit.config.attacks.default_policy)")
    parser.add_argument("--sequential", action="store_true", help="drop each cell's n_samples: its audit draws in "
                        "rounds until the claim is decided or --max-outputs outputs are drawn (the sequential default)")
    parser.add_argument("--max-outputs", type=int, default=84_000, help="[attacks] max_outputs of a --sequential "
                        "audit (default 84 000: rounds of 4 000 and 16 000 outputs per dataset of one pair)")
    parser.add_argument("--list", action="store_true", help="print the selected cells and stop")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_validity.md")
    args = parser.parse_args(argv)
    seeds = args.seeds or (20 if args.quick else 100)
    def keep(cell: Cell) -> bool:
        return (is_quick(cell) or cell.mechanism in SUITE or not args.quick) and (
            not args.cells or any(text in cell.name for text in args.cells))

    cells = validity_cells(keep) + [cell for cell in (suite_cells() if args.power else []) if keep(cell)]
    cells = [replace(cell, policy=args.policy) for cell in cells]
    if args.sequential:
        if args.policy == "every":
            parser.error("--sequential audits run the staged search of policy best, not --policy every")
        cells = list({cell.name: cell for cell in (cell.sequential(args.max_outputs) for cell in cells)}.values())
    if args.list:
        print("\n".join(cell.name for cell in cells), f"\n{len(cells)} cells", sep="")
        return
    start, outcomes, code = time.perf_counter(), [], commit()  # the code at the start (docs may change meanwhile)
    for seed in range(seeds):  # seed by seed, the file rewritten after each: a run stopped part way keeps its seeds
        outcomes += Parallel(n_jobs=args.n_jobs, verbose=5)(delayed(audit_once)(cell, seed) for cell in cells)
        text = write_results(args, argv, cells, seed + 1, seeds, pd.DataFrame(outcomes), time.perf_counter() - start,
                             code)
    print(text)


def write_results(args: argparse.Namespace, argv: list[str] | None, cells: list[Cell], done: int, seeds: int,
                  outcomes: pd.DataFrame, seconds: float, code: str) -> str:
    """The results file of the ``done`` seeds of ``seeds`` run so far (every cell has them), from the code at
    commit ``code`` (:func:`results_file.commit`); its text."""
    table = summarize(cells, outcomes)
    validity, power = (table[table["buggy"] == flag].drop(columns="buggy") for flag in (False, True))
    text = [
        "# bench_validity",
        "",
        f"Command: `python benchmarks/bench_validity.py {shlex.join(argv if argv is not None else sys.argv[1:])}` "
        f"({len(cells)} cells x {done} seeds{'' if done == seeds else f' of {seeds} (a run stopped there)'}, "
        f"{seconds:.0f} s with --n-jobs {args.n_jobs}; code {code}). Claims at their true "
        f"value, confidence {CONFIDENCE}; `**`: false-violation rate significantly above {FALSE_RATE:.0%} "
        "(one-sided binomial p < 0.05). pass / inconclusive: the claim's verdict; errors: exit 2 or a crash.",
        "",
        *([sequential_note(args.max_outputs), ""] if args.sequential else []),
        "## False violations of true claims",
        "",
        validity.to_markdown(index=False),
        "",
    ]
    if len(power):
        text += ["## Power: the known-buggy suite (claim dp/all <= 0.1; violations = catches)", "",
                 power.drop(columns=["p(rate<=5%)"]).to_markdown(index=False), ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(text))
    print(f"wrote {args.out} ({done} of {seeds} seeds)", flush=True)
    return "\n".join(text)


if __name__ == "__main__":
    main()
