"""DP-Sniper benchmark through the product: one ``run_audit`` per mechanism (run by hand).

    PYTHONPATH=. python benchmarks/bench_suite.py [--independent] [--quick] [--mechanisms NAME ...] [--seed S] [--out F]

For every mechanism of DP-Sniper's benchmark (Bichsel et al. 2021; claimed
epsilon = 0.1) and the leaky Laplace, it builds the config of an ordinary
audit -- the claim ``dp`` / ``all`` <= 0.1, the mechanism's ``default_pairs``
(StatDP's neighbouring inputs), the staged search (``[attacks] policy =
"best"``, docs/config.md) with coupled sampling (``--independent``: the
black-box setting of DP-Sniper) at confidence 0.9 (DP-Sniper's 90 %) -- runs
it with :func:`audit.run_audit` and tabulates the winning row's lower
confidence bound (``ci_low``: with one claim, Holm's level is the confidence)
beside DP-Sniper's published 90 % bound.  Every number comes from the engine
users run; this script only builds configs and tabulates.

**Samples per input.**  ``n_samples`` is one pair's budget over the four
stages; every pair gets the screen stage, each distinct finalist pair the
train and check stages, the winner's pair the confirm stage.  An input shared
by every pair therefore draws at most
``pairs x n_screen + min(finalists, pairs) x (n_train + n_check) + n_confirm``
outputs (:func:`samples_per_input`; the table reports this bound).  DP-Sniper's
published runs drew 10.7 M samples per input for training and 200 M for the
final estimate: 210.7 M is the reference, and :func:`budget` picks the largest
``n_samples`` whose bound, with the most finalists the engine keeps, is a
tenth of it.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

from attacks.staged import MAX_FINALISTS
from audit import run_audit
from audit.mechanisms import make_mechanism

CLAIMED_EPSILON = 0.1
CONFIDENCE = 0.9  # DP-Sniper's DDConfig.confidence
# DP-Sniper's published 90% lower bounds (Bichsel et al. 2021, Table 2), epsilon = 0.1.
DPSNIPER = {
    "laplace": 0.098, "noisy_hist_1": 0.098, "noisy_hist_2": 4.60,
    "report_noisy_max_1": 0.093, "report_noisy_max_2": 0.098, "report_noisy_max_3": 0.249,
    "report_noisy_max_4": 0.353, "svt_1": 0.086, "svt_2": 0.086, "svt_3": 0.182,
    "svt_4": 0.170, "svt_5": 1.761, "svt_6": 0.272, "leaky_laplace": None,
}
DPSNIPER_SAMPLES = 10_700_000 + 200_000_000  # per input: training and final (module docstring)
TARGET_FRACTION = 0.1
# Attack classes per mechanism: real-valued outputs get one-coordinate thresholds and linear scores
# (one-dimensional outputs thresholds only: a linear score there gives the same sets); discrete outputs
# (argmax index, SVT flags) get a tree deep enough to isolate single outputs and linear scores (a linear
# score counts "above" answers, which the X-shaped pair needs).  Every extra class is another noisy candidate.
REAL_CLASSES = ["threshold", "linear"]
SCALAR_CLASSES = ["threshold"]
DISCRETE_CLASSES = ["linear", "tree8"]
CLASSES = {
    "laplace": REAL_CLASSES, "noisy_hist_1": REAL_CLASSES, "noisy_hist_2": REAL_CLASSES,
    "report_noisy_max_1": DISCRETE_CLASSES, "report_noisy_max_2": DISCRETE_CLASSES,
    "report_noisy_max_3": SCALAR_CLASSES, "report_noisy_max_4": SCALAR_CLASSES,
    "svt_1": DISCRETE_CLASSES, "svt_2": DISCRETE_CLASSES, "svt_3": DISCRETE_CLASSES,
    "svt_4": DISCRETE_CLASSES, "svt_5": DISCRETE_CLASSES, "svt_6": DISCRETE_CLASSES,
    "leaky_laplace": ["tree2", "tree8"],
}
# Shares of n_samples: a small screen (it is paid once per pair), a train and check large enough to fit the
# nested sets and choose their pool, the rest confirms.
STAGES = {"screen": 0.005, "train": 0.035, "check": 0.07, "confirm": 0.89}
# Mechanisms whose bound clears DP-Sniper's by far with few samples, and their budget.
EASY_MECHANISMS = {"noisy_hist_2", "report_noisy_max_4", "svt_5", "leaky_laplace"}
EASY_SAMPLES = 2_000_000
QUICK_SAMPLES = 400_000
QUICK_STAGES = {"screen": 0.05, "train": 0.125, "check": 0.125, "confirm": 0.7}


def n_pairs(name: str) -> int:
    """How many neighbouring pairs the mechanism brings (its ``default_pairs``)."""
    return len(make_mechanism(name, {"epsilon": CLAIMED_EPSILON}).default_pairs())


def samples_per_input(pairs: int, finalists: int, sizes: dict[str, int]) -> int:
    """The most outputs drawn on one input: every pair screened, each finalist pair trained and checked,
    the winner's pair confirmed (module docstring)."""
    return pairs * sizes["screen"] + min(finalists, pairs) * (sizes["train"] + sizes["check"]) + sizes["confirm"]


def budget(pairs: int, stages: dict[str, float] = STAGES, fraction: float = TARGET_FRACTION) -> int:
    """The largest ``n_samples`` whose :func:`samples_per_input` with ``MAX_FINALISTS`` finalists is at most
    ``fraction`` of DP-Sniper's samples per input."""
    per_budget = samples_per_input(pairs, MAX_FINALISTS, stages)
    return math.floor(fraction * DPSNIPER_SAMPLES / per_budget)


def config(name: str, n_samples: int, coupled: bool, seed: int, stages: dict[str, float] | None = None,
           confidence: float | None = CONFIDENCE) -> dict:
    """The audit of one mechanism at DP-Sniper's settings: the claim dp / all <= 0.1 on its default pairs,
    its :data:`CLASSES`, policy best; ``stages`` or ``confidence`` None leaves the product's default."""
    attacks = {"classes": CLASSES[name], "n_samples": n_samples, "coupled": coupled, "policy": "best",
               "stages": stages, "confidence": confidence}
    return {
        "mechanism": {"name": name, "params": {"epsilon": CLAIMED_EPSILON}},
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": CLAIMED_EPSILON}],
        "attacks": {key: value for key, value in attacks.items() if value is not None},
        "run": {"seed": seed, "n_jobs": 1},
    }


def audit(name: str, quick: bool, coupled: bool, seed: int) -> dict:
    """Run the mechanism's audit and return its table row (as a dict of the winning result row's fields)."""
    pairs = n_pairs(name)
    stages = QUICK_STAGES if quick else STAGES
    n_samples = QUICK_SAMPLES if quick else EASY_SAMPLES if name in EASY_MECHANISMS else budget(pairs, stages)
    start = time.perf_counter()
    result = run_audit(config(name, n_samples, coupled, seed, stages), progress=False)
    seconds = time.perf_counter() - start
    if result.exit_code == 2:
        raise RuntimeError(f"{name}: the audit failed: {result.table['error'].dropna().tolist()}")
    row = result.table.iloc[0]
    sizes = {stage: int(row[f"n_{stage}"]) for stage in ("screen", "train", "check", "confirm")}
    records = {pair["name"]: pair for pair in result.pairs}
    return {"mechanism": name, "bound": float(row["ci_low"]), "estimate": float(row["estimate"]),
            "pair": pair_label(records[row["pair"]], row["direction"]), "class": row["function_class"],
            "sets": int(row["sets_pooled"]), "finalists": int(row["finalists"]), "n_samples": n_samples,
            "samples": samples_per_input(pairs, int(row["finalists"]), sizes), "seconds": seconds}


def pair_label(pair: dict, direction: str) -> str:
    """"P vs Q" of the winning row: its pair's d and d' in the row's direction."""
    d, d_prime = (np.array2string(np.ravel(pair[key]), separator=",") for key in ("d", "d_prime"))
    return f"{d_prime} vs {d}" if direction == "Q|P" else f"{d} vs {d_prime}"


def table(rows: list[dict]) -> str:
    """Markdown table of the results beside DP-Sniper's bounds (both at 90 %)."""
    lines = []
    for row in rows:
        reference = DPSNIPER[row["mechanism"]]
        lines.append([
            row["mechanism"], f"{row['bound']:.4f}", "-" if reference is None else f"{reference:.3f}",
            "-" if reference is None else ("yes" if row["bound"] >= reference else "NO"),
            f"{row['estimate']:.4f}", row["pair"], row["class"], row["sets"], row["finalists"],
            f"{row['n_samples'] / 1e6:.2f} M", f"{row['samples'] / 1e6:.2f} M",
            f"{row['samples'] / DPSNIPER_SAMPLES:.4f}", f"{row['seconds']:.1f}",
        ])
    headers = ["mechanism", "eps LB (90%)", "DP-Sniper LB (90%)", ">= DP-Sniper", "estimate", "pair P vs Q",
               "class", "sets pooled", "finalists", "n_samples", "samples/input (at most)",
               "fraction of DP-Sniper's", "seconds"]
    return tabulate(lines, headers=headers, tablefmt="github", disable_numparse=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--independent", action="store_true", help="independent samples (black box), no coupling")
    parser.add_argument("--quick", action="store_true", help="small budget for a smoke run")
    parser.add_argument("--mechanisms", nargs="+", default=list(DPSNIPER), choices=list(DPSNIPER), metavar="NAME")
    parser.add_argument("--out", type=Path, help="default: results/bench_suite[_independent].md")
    parser.add_argument("--seed", type=int, default=0, help="the first mechanism's seed; the next get seed + 1, ...")
    args = parser.parse_args(argv)
    out = args.out or Path(__file__).parent / "results" / f"bench_suite{'_independent' if args.independent else ''}.md"
    rows = []
    for offset, name in enumerate(args.mechanisms):
        rows.append(audit(name, args.quick, not args.independent, args.seed + offset))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()
