"""DP-Sniper benchmark: epsilon lower bounds on the known-buggy suite (run by hand).

    /work/venv/bin/python benchmarks/bench_suite.py [--quick] [--mechanisms NAME ...] [--out FILE]

For every mechanism (claimed epsilon = 0.1, DP-Sniper's benchmark settings,
Bichsel et al. 2021) it finds a valid 95% lower confidence bound on the pure-DP
epsilon (THEORY.md section 7) over the mechanism's ``default_pairs`` (StatDP's
neighbouring inputs) in both directions, and writes a markdown table beside
DP-Sniper's published lower bounds.

Three stages, each on fresh samples (so no stage's choice leaks into the next
stage's statistics), and every choice made for the bound expected at the
final sample size (:func:`attacks.binomial_ratio.projected_lower_bound`: a
rare event with a large ratio beats a frequent weak one only when the final
sample is large enough to pin its ratio down):

1. **screen**: for every candidate (pair, direction, function class), an
   :class:`attacks.Adversary` with ``divergence="dp"`` and ``dp_eval_size``
   the final size is fitted on half of a few samples and its attack set
   counted on the other half, giving the bound the candidate would reach on
   the final samples and its noise; the (pair, direction)s whose best class
   is within two standard errors of the best (at most four) go on: screening samples cannot tell
   apart events whose ratios differ by less than their noise (SVT1's best
   event has mass 0.006);
2. **train**: for each finalist an adversary of its class is fitted on a
   training split of its pair's inputs, its attack set S = {side (g - t) > 0}
   again chosen for the final size;
3. **final**: every finalist's S is counted on a large held-out split of its
   inputs (an input shared by finalists is sampled once), sampled in
   chunks; each finalist's bound is the score bound on log(P(S) / Q(S)) of
   :mod:`attacks.binomial_ratio` at level 1 - 0.05 / (number of finalists)
   (Bonferroni), and the largest is reported: a 95% bound, simultaneous over
   the finalists.

No stage reuses an earlier stage's samples, so every choice is fixed before
the data that scores it is drawn.

"Samples per input" counts every sample drawn on an input of the chosen pair:
(number of pairs) x screen + train + final (the screen term bounds the input
that occurs in every pair).  DP-Sniper used 10.7 M (train) + 200 M
(final) per input.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import norm
from tabulate import tabulate

from attacks import Adversary
from attacks.binomial_ratio import log_ratio_bound, smoothed_log_ratio
from audit.mechanisms import make_mechanism

LEVEL = 0.95
CLAIMED_EPSILON = 0.1
CHUNK = 1_000_000
# DP-Sniper's published 95% lower bounds (Bichsel et al. 2021, Table 2), epsilon = 0.1.
DPSNIPER = {
    "laplace": 0.098, "noisy_hist_1": 0.098, "noisy_hist_2": 4.60,
    "report_noisy_max_1": 0.093, "report_noisy_max_2": 0.098, "report_noisy_max_3": 0.249,
    "report_noisy_max_4": 0.353, "svt_1": 0.086, "svt_2": 0.086, "svt_3": 0.182,
    "svt_4": 0.170, "svt_5": 1.761, "svt_6": 0.272, "leaky_laplace": None,
}
DPSNIPER_SAMPLES = 10_700_000 + 200_000_000
# Function classes screened: real-valued outputs get one-coordinate thresholds and
# linear scores (one-dimensional outputs thresholds only: a linear score there gives
# the same sets); discrete outputs (argmax index, SVT flags) get a tree deep enough to
# isolate single outputs and linear scores (a linear score counts "above" answers,
# which the X-shaped pair needs).  Every extra class is another noisy candidate.
REAL_CLASSES = ("threshold", "linear")
SCALAR_CLASSES = ("threshold",)
DISCRETE_CLASSES = ("linear", "tree8")
CLASSES = {
    "laplace": REAL_CLASSES, "noisy_hist_1": REAL_CLASSES, "noisy_hist_2": REAL_CLASSES,
    "report_noisy_max_1": DISCRETE_CLASSES, "report_noisy_max_2": DISCRETE_CLASSES,
    "report_noisy_max_3": SCALAR_CLASSES, "report_noisy_max_4": SCALAR_CLASSES,
    "svt_1": DISCRETE_CLASSES, "svt_2": DISCRETE_CLASSES, "svt_3": DISCRETE_CLASSES,
    "svt_4": DISCRETE_CLASSES, "svt_5": DISCRETE_CLASSES, "svt_6": DISCRETE_CLASSES,
    "leaky_laplace": ("tree2", "tree8"),
}


@dataclass(frozen=True)
class Budget:
    """Samples per input of each stage; ``screen`` is drawn anew for every pair."""

    screen: int
    train: int
    final: int

    def total(self, pairs: int) -> int:
        """Samples drawn on one input: it may occur in every pair screened (an upper bound)."""
        return pairs * self.screen + self.train + self.final


FULL = Budget(screen=200_000, train=1_000_000, final=18_000_000)
# Mechanisms whose bound clears DP-Sniper's by far with few samples.
EASY = Budget(screen=100_000, train=200_000, final=1_000_000)
EASY_MECHANISMS = {"noisy_hist_2", "report_noisy_max_4", "svt_5", "leaky_laplace"}
QUICK = Budget(screen=20_000, train=50_000, final=200_000)


MAX_FINALISTS = 4


@dataclass(frozen=True)
class Candidate:
    pair: int
    swapped: bool  # P = M(D') and Q = M(D) instead of P = M(D), Q = M(D')
    function_class: str
    screen_bound: float  # the bound projected to the final size from the screening counts
    screen_error: float  # the standard error of the screening log-ratio


@dataclass(frozen=True)
class Row:
    mechanism: str
    candidate: Candidate
    bound: float
    plug_in: float
    finalists: int
    samples: int
    seconds: float


def build(name: str):
    """The mechanism at DP-Sniper's settings: claimed epsilon 0.1, other parameters default."""
    return make_mechanism(name, {"epsilon": CLAIMED_EPSILON})


def laws(pair, swapped: bool):
    """(input of P, input of Q) of a pair in the given direction."""
    return (pair[1], pair[0]) if swapped else pair


def fit_attack(function_class: str, p: np.ndarray, q: np.ndarray, final: int, rng: np.random.Generator) -> Adversary:
    """A DP adversary fitted on p (y = 0) and q (y = 1), its attack set chosen for ``final`` held-out samples."""
    adversary = Adversary(function_class, "dp", dp_eval_size=final, random_state=int(rng.integers(2**31)))
    return adversary.fit(np.vstack([p, q]), np.r_[np.zeros(len(p)), np.ones(len(q))])


def screen(mechanism, classes, budget: Budget, rng: np.random.Generator) -> list[Candidate]:
    """Every (pair, direction, class), its attack set fitted on half of ``budget.screen`` samples per input
    and counted on the other half, with the bound that count projects to ``budget.final`` samples."""
    candidates, half = [], budget.screen // 2
    for index, pair in enumerate(mechanism.default_pairs()):
        samples = [mechanism.sample(x, budget.screen, rng) for x in pair]
        for swapped in (False, True):
            p, q = laws(samples, swapped)
            for function_class in classes:
                adversary = fit_attack(function_class, p[:half], q[:half], budget.final, rng)
                k_p, k_q = (int(adversary.witness(x[half:]).sum()) for x in (p, q))
                n = budget.screen - half
                psi, variance_p, variance_q = smoothed_log_ratio(k_p, n, k_q, n, 0.0)
                variance = variance_p + variance_q
                bound = psi - norm.ppf(LEVEL) * np.sqrt(variance / budget.final)
                candidates.append(Candidate(index, swapped, function_class, float(bound), float(np.sqrt(variance / n))))
    return candidates


def finalists(candidates: list[Candidate]) -> list[Candidate]:
    """The best class of each (pair, direction), for the (pair, direction)s whose projected bound is within
    two standard errors of the best one's (at most four): classes on the same pair mostly find the same set."""
    ranked = sorted(candidates, key=lambda candidate: -candidate.screen_bound)
    best, kept = ranked[0], {}
    for c in ranked:
        if c.screen_bound >= best.screen_bound - 2 * np.hypot(best.screen_error, c.screen_error):
            kept.setdefault((c.pair, c.swapped), c)
    return list(kept.values())[:MAX_FINALISTS]


def audit(name: str, budget: Budget, seed: int) -> Row:
    """Screen, train and evaluate the DP attacks on one mechanism (module docstring)."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    mechanism = build(name)
    chosen = finalists(screen(mechanism, CLASSES[name], budget, rng))
    pairs = [laws(mechanism.default_pairs()[c.pair], c.swapped) for c in chosen]
    inputs, roles = {}, {}  # input by key; (finalist, side) pairs in which it occurs (side 0: P, 1: Q)
    for index, pair in enumerate(pairs):
        for side, dataset in enumerate(pair):
            inputs.setdefault(dataset.tobytes(), dataset)
            roles.setdefault(dataset.tobytes(), []).append((index, side))
    train = {key: mechanism.sample(x, budget.train, rng) for key, x in inputs.items()}
    adversaries = [
        fit_attack(c.function_class, train[d_p.tobytes()], train[d_q.tobytes()], budget.final, rng)
        for c, (d_p, d_q) in zip(chosen, pairs)
    ]
    counts = np.zeros((len(chosen), 2), dtype=np.int64)  # (k_p, k_q) of each finalist
    for key, x in inputs.items():
        for begin in range(0, budget.final, CHUNK):
            outputs = mechanism.sample(x, min(CHUNK, budget.final - begin), rng)
            for index, side in roles[key]:
                counts[index, side] += int(adversaries[index].witness(outputs).sum())
    level = 1 - (1 - LEVEL) / len(chosen)
    bounds = [log_ratio_bound(int(k_p), budget.final, int(k_q), budget.final, 0.0, level, lower=True)
              for k_p, k_q in counts]
    best = int(np.argmax(bounds))
    with np.errstate(divide="ignore"):
        plug_in = float(np.log(counts[best, 0] / counts[best, 1]))
    return Row(name, chosen[best], float(bounds[best]), plug_in, len(chosen),
               budget.total(len(mechanism.default_pairs())), time.perf_counter() - start)


def pair_label(mechanism_name: str, candidate: Candidate) -> str:
    d, d_prime = build(mechanism_name).default_pairs()[candidate.pair]
    text = [np.array2string(np.asarray(x).ravel(), separator=",") for x in (d, d_prime)]
    return f"{text[1]} vs {text[0]}" if candidate.swapped else f"{text[0]} vs {text[1]}"


def table(rows: list[Row]) -> str:
    """Markdown table of the results beside DP-Sniper's bounds."""
    lines = []
    for row in rows:
        reference = DPSNIPER[row.mechanism]
        lines.append([
            row.mechanism, f"{row.bound:.4f}", "-" if reference is None else f"{reference:.3f}",
            "-" if reference is None else ("yes" if row.bound >= reference else "NO"),
            f"{row.plug_in:.4f}", pair_label(row.mechanism, row.candidate),
            row.candidate.function_class, row.finalists, f"{row.samples / 1e6:.2f} M",
            f"{row.samples / DPSNIPER_SAMPLES:.3f}", f"{row.seconds:.1f}",
        ])
    headers = ["mechanism", "eps LB (95%)", "DP-Sniper LB", ">= DP-Sniper", "plug-in eps", "pair P vs Q",
               "class", "finalists", "samples/input", "fraction of DP-Sniper's", "seconds"]
    return tabulate(lines, headers=headers, tablefmt="github")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small budget for a smoke run")
    parser.add_argument("--mechanisms", nargs="+", default=list(DPSNIPER), choices=list(DPSNIPER), metavar="NAME")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bench_suite.md")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = []
    for offset, name in enumerate(args.mechanisms):
        budget = QUICK if args.quick else EASY if name in EASY_MECHANISMS else FULL
        rows.append(audit(name, budget, args.seed + offset))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
