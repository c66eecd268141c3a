"""DP-Sniper benchmark: epsilon lower bounds on the known-buggy suite (run by hand).

    /work/venv/bin/python benchmarks/bench_suite.py [--independent] [--quick] [--mechanisms NAME ...] [--out FILE]

For every mechanism (claimed epsilon = 0.1, DP-Sniper's benchmark settings,
Bichsel et al. 2021) it finds a valid lower confidence bound on the pure-DP
epsilon (docs/theory.md section 7) over the mechanism's ``default_pairs`` (StatDP's
neighbouring inputs) in both directions, at 95% and at DP-Sniper's 90%, and
writes a markdown table beside DP-Sniper's published lower bounds.

**Sampling.**  By default the outputs on the two inputs of a pair are drawn
from the same random numbers (common random numbers: one seed per batch, used
for every input), and the bounds are the paired score bounds of
:mod:`attacks.paired_ratio`: the marginal laws, hence P(S) and Q(S), are those
of independent sampling, but only the pairs whose outputs S separates carry
noise.  That needs a mechanism that takes its randomness from the generator it
is given and spends as much of it on every input (checked on every batch).
``--independent`` draws every sample independently and uses the two-sample
bounds of :mod:`attacks.binomial_ratio`: the black-box setting of DP-Sniper.

Four stages, each on fresh samples (no stage's choice leaks into the next
stage's statistics), every choice made for the bound expected at the final
sample size (``projected_lower_bound``: a rare event with a large ratio beats
a frequent weak one only when the final sample can pin its ratio down):

1. **screen**: for every candidate (pair, direction, function class), an
   :class:`attacks.Adversary` with ``divergence="dp"`` is fitted on half of a
   few samples and its attack set counted on the other half, giving the bound
   the candidate would reach on the final samples and its noise;
2. the (pair, direction)s whose best class is within two standard errors of
   the best (at most four) are **trained**, on a larger split of their
   inputs: an attack set {s (g - t) > 0} each (s its side, g its score),
   graded into nested sets S_0 ⊇ S_1 ⊇ ... of the form {s g > c}: the
   fitted set and those holding 2^(-k/8) of the training outputs of P,
   k = 1, 2, ..., down to 100 of them;
3. **check**: each attack's sets are counted on fresh samples, and two
   families of statistics are offered: for every set S_j holding 100 counts
   (and 100 separated pairs, coupled), the pool of S_j and its usable
   subsets S_{j+1}, S_{j+2}, ... with the minimum-variance weights of
   :func:`attacks.pooled_ratio.min_variance_weights`; and the fitted set of
   every attack alone, unless a pool starts from it (with a score that
   orders the likelihood ratio, that pool has no smaller log-ratio and no
   larger variance).  The statistic with the best
   *promise* is kept (DP-Sniper's n_check stage): its check estimate less
   z(1 - 0.05 / m) check standard errors, m the size of its family (the best
   of many was likely lucky), and z(0.95) standard errors of the final
   estimate.  Without the correction, deep pools whose check estimate was
   lucky are picked (report-noisy-max 3, 1 M check: 2 runs in 6 lost some
   0.0015 of the bound); with one correction over both families, a rare
   fitted set with a large ratio is buried under the pools' count (SVT 3,
   independent: 0.13 instead of 0.23);
4. **final**: that statistic is computed on a large fresh sample of its
   attack's pair, counted in chunks, and one bound is reported, with no
   correction for multiplicity: the pooled bound on the weighted mean of the
   log-ratios of the sets (:func:`attacks.pooled_ratio.pooled_lower_bound`;
   a lower bound on epsilon, as every set's log-ratio is) when more than one
   set has weight, else the score bound on log(P(S) / Q(S)) of the one set.

Pooling pays where the likelihood ratio is flat over the sets: for
report-noisy-max releasing the value, every set in the lower tail has the
ratio e^epsilon, and the pooled variance per pair is about a quarter of the
best single set's.  Only subsets of a set S_j are pooled with it: a score g
that orders the likelihood ratio gives them at least S_j's log-ratio, and
the check chooses how deep S_j lies.

"Samples per input" counts every sample drawn on an input of the chosen pair:
(number of pairs) x screen + train + check + final (the screen term bounds the
input that occurs in every pair).  DP-Sniper's published runs drew 10.7 M
samples per input for training and 200 M for the final estimate (its code,
``DDConfig``, draws 10.7 M more for the threshold and 10.7 M more for the
check): the smaller figure, 210.7 M, is the reference, and a tenth of it,
21.07 M, the budget here.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tabulate import tabulate

from attacks import Adversary, binomial_ratio, paired_ratio, pooled_ratio
# The nested sets, their grading and the check stage's promise are the staged engine's (attacks/staged.py).
from attacks.staged import GRADE_FLOOR, GRADE_STEP, MIN_COUNT, Attack, graded_attack, promise  # noqa: F401
from audit.mechanisms import make_mechanism, sample_coupled

LEVELS = (0.95, 0.90)  # reported confidence levels: ours, and DP-Sniper's (DDConfig.confidence)
SELECTION_LEVEL = 0.95
CLAIMED_EPSILON = 0.1
CHUNK = 1_000_000
# DP-Sniper's published 90% lower bounds (Bichsel et al. 2021, Table 2), epsilon = 0.1.
DPSNIPER = {
    "laplace": 0.098, "noisy_hist_1": 0.098, "noisy_hist_2": 4.60,
    "report_noisy_max_1": 0.093, "report_noisy_max_2": 0.098, "report_noisy_max_3": 0.249,
    "report_noisy_max_4": 0.353, "svt_1": 0.086, "svt_2": 0.086, "svt_3": 0.182,
    "svt_4": 0.170, "svt_5": 1.761, "svt_6": 0.272, "leaky_laplace": None,
}
DPSNIPER_SAMPLES = 10_700_000 + 200_000_000  # per input: training and final (module docstring)
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
MAX_FINALISTS = 4


@dataclass(frozen=True)
class Budget:
    """Samples per input of each stage; ``screen`` is drawn anew for every pair."""

    screen: int
    train: int
    check: int
    final: int

    def total(self, pairs: int) -> int:
        """Samples drawn on one input: it may occur in every pair screened (an upper bound)."""
        return pairs * self.screen + self.train + self.check + self.final


# At most 10 pairs x 0.1 M + 1 M + 2 M + 17 M = 21.0 M per input, within a tenth of DP-Sniper's.  A 2 M check
# (rather than 1 M and a larger final) steadies the choice of pool.  On report-noisy-max 3, the row closest to
# DP-Sniper's, 26 of 30 seeds gave a 90% bound of at least its 0.249 (range 0.24891-0.25000; README).
FULL = Budget(screen=100_000, train=1_000_000, check=2_000_000, final=17_000_000)
# Mechanisms whose bound clears DP-Sniper's by far with few samples.
EASY = Budget(screen=100_000, train=200_000, check=200_000, final=1_000_000)
EASY_MECHANISMS = {"noisy_hist_2", "report_noisy_max_4", "svt_5", "leaky_laplace"}
QUICK = Budget(screen=20_000, train=50_000, check=50_000, final=200_000)


@dataclass(frozen=True)
class Sampling:
    """How the outputs on a pair's two inputs are drawn, and the bounds that go with it."""

    coupled: bool

    def draw(self, mechanism, inputs: list[np.ndarray], n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """n outputs on every input: from one seed shared by all inputs (coupled), or one stream."""
        if not self.coupled:
            return [mechanism.sample(x, n, rng) for x in inputs]
        outputs, same_randomness = sample_coupled(mechanism, inputs, n, int(rng.integers(2**63)))
        if not same_randomness:
            raise RuntimeError(
                f"{mechanism.name} spends a different amount of randomness on different inputs, so its outputs "
                "cannot be paired row by row; run with --independent."
            )
        return outputs

    def bound(self, counts: np.ndarray, level: float) -> float:
        """Lower bound on log(P(S) / Q(S)) from the cells (both, only P, only Q, neither)."""
        if self.coupled:
            return paired_ratio.log_ratio_bound(counts, 0.0, level, lower=True)
        k_p, k_q, n = binomial_counts(counts)
        return binomial_ratio.log_ratio_bound(k_p, n, k_q, n, 0.0, level, lower=True)

    def log_ratio(self, counts: np.ndarray) -> tuple[float, float]:
        """The smoothed log(P(S) / Q(S)) of the cells and its standard error."""
        n = int(counts.sum())
        if self.coupled:
            estimate, variance = paired_ratio.smoothed_log_ratio(counts, 0.0)
        else:
            k_p, k_q, _ = binomial_counts(counts)
            estimate, variance_p, variance_q = binomial_ratio.smoothed_log_ratio(k_p, n, k_q, n, 0.0)
            variance = variance_p + variance_q
        return float(estimate), float(np.sqrt(variance / n))

    def projected(self, counts: np.ndarray, n_eval: int) -> float:
        """The bound at SELECTION_LEVEL the cells project to ``n_eval`` fresh samples (``projected_lower_bound``)."""
        if self.coupled:
            return float(paired_ratio.projected_lower_bound(counts, 0.0, SELECTION_LEVEL, n_eval))
        k_p, k_q, n = binomial_counts(counts)
        return float(binomial_ratio.projected_lower_bound(k_p, n, k_q, n, 0.0, SELECTION_LEVEL, n_eval))


def binomial_counts(counts: np.ndarray) -> tuple[int, int, int]:
    """(outputs of P in S, outputs of Q in S, samples per law) from the cells (both, only P, only Q, neither)."""
    return int(counts[0] + counts[1]), int(counts[0] + counts[2]), int(counts.sum())


@dataclass(frozen=True)
class Candidate:
    pair: int
    swapped: bool  # P = M(D') and Q = M(D) instead of P = M(D), Q = M(D')
    function_class: str
    projected: float  # the bound projected to the final size from a stage's counts
    error: float  # the standard error of that stage's log-ratio


@dataclass(frozen=True)
class Row:
    mechanism: str
    candidate: Candidate
    bounds: tuple[float, ...]  # at each of LEVELS
    plug_in: float
    sets: int  # sets the final bound pools (1: the score bound on one set)
    finalists: int
    samples: int
    seconds: float


@dataclass(frozen=True)
class Statistic:
    """The final bound of an attack: weights on its sets, pooled (attacks.pooled_ratio) when more than one
    set has weight, else the score bound on that one set's cells."""

    weights: np.ndarray

    @classmethod
    def pools(cls, moments: pooled_ratio.EventMoments, sampling: Sampling) -> dict[int, Statistic]:
        """For every usable set S_j but the last, keyed by j, the minimum-variance pool of the usable sets
        S_j ⊇ S_{j+1} ⊇ ... (module docstring), when it weighs more than one set."""
        size = moments.in_p.size
        usable = pooled_ratio.usable_sets(moments, 0.0, sampling.coupled, MIN_COUNT)
        pools = {}
        for j in np.flatnonzero(usable)[:-1]:
            weights = pooled_ratio.min_variance_weights(moments, 0.0, sampling.coupled, MIN_COUNT,
                                                        among=np.arange(size) >= j)
            weights[weights < 1e-6] = 0.0  # a set that barely counts is not pooled
            if np.count_nonzero(weights) > 1:
                pools[int(j)] = cls(weights / weights.sum())
        return pools

    @property
    def pooled(self) -> bool:
        return np.count_nonzero(self.weights) > 1

    def log_ratio(self, moments: pooled_ratio.EventMoments, sampling: Sampling) -> tuple[float, float]:
        """The estimate on these counts (pooled, or the one set's smoothed log-ratio) and its standard error."""
        if self.pooled:
            estimate, error = pooled_ratio.pooled_log_ratio(moments, self.weights, 0.0, sampling.coupled)
            return float(estimate), float(error)
        return sampling.log_ratio(moments.cells(int(np.argmax(self.weights))))

    def bounds(self, moments: pooled_ratio.EventMoments, sampling: Sampling) -> tuple[float, ...]:
        """The lower bounds at LEVELS on these (final) counts."""
        if self.pooled:
            return tuple(pooled_ratio.pooled_lower_bound(moments, self.weights, 0.0, level, sampling.coupled)
                         for level in LEVELS)
        cells = moments.cells(int(np.argmax(self.weights)))
        return tuple(sampling.bound(cells, level) for level in LEVELS)

    def estimate(self, moments: pooled_ratio.EventMoments) -> float:
        """The plug-in sum_k w_k log(P_n(S_k) / Q_n(S_k)) (inf when a weighted set holds no output of Q)."""
        with np.errstate(divide="ignore"):
            return float(self.weights[self.weights > 0] @ pooled_ratio.log_ratios(moments, 0.0)[self.weights > 0])


def build(name: str):
    """The mechanism at DP-Sniper's settings: claimed epsilon 0.1, other parameters default."""
    return make_mechanism(name, {"epsilon": CLAIMED_EPSILON})


def distinct_inputs(pairs) -> list[np.ndarray]:
    """The inputs of the pairs, each once, in order of first appearance."""
    return list({x.tobytes(): x for pair in pairs for x in pair}.values())


def laws(pair, swapped: bool):
    """(input of P, input of Q) of a pair in the given direction."""
    return (pair[1], pair[0]) if swapped else pair


def fit_attack(function_class: str, p: np.ndarray, q: np.ndarray, final: int, sampling: Sampling,
               rng: np.random.Generator) -> Adversary:
    """A DP adversary fitted on p (y = 0) and q (y = 1), its attack set chosen for ``final`` held-out samples."""
    adversary = Adversary(function_class, "dp", dp_eval_size=final, coupled=sampling.coupled,
                          random_state=int(rng.integers(2**31)))
    return adversary.fit(np.vstack([p, q]), np.r_[np.zeros(len(p)), np.ones(len(q))])


def cells(adversary: Adversary, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(both, only P, only Q, neither) of the attack set on row-aligned outputs of P and Q."""
    return paired_ratio.paired_counts(adversary.witness(p) > 0, adversary.witness(q) > 0)


def assess(candidate: Candidate, counts: np.ndarray, final: int, sampling: Sampling) -> Candidate:
    """The candidate with the bound its ``counts`` project to ``final`` samples, and their standard error."""
    return replace(candidate, projected=sampling.projected(counts, final), error=sampling.log_ratio(counts)[1])


def screen(mechanism, classes, budget: Budget, sampling: Sampling, rng: np.random.Generator) -> list[Candidate]:
    """Every (pair, direction, class), its attack set fitted on half of ``budget.screen`` samples per input
    and counted on the other half."""
    candidates, half = [], budget.screen // 2
    for index, pair in enumerate(mechanism.default_pairs()):
        samples = sampling.draw(mechanism, list(pair), budget.screen, rng)
        for swapped in (False, True):
            p, q = laws(samples, swapped)
            for function_class in classes:
                adversary = fit_attack(function_class, p[:half], q[:half], budget.final, sampling, rng)
                candidate = Candidate(index, swapped, function_class, -np.inf, np.inf)
                candidates.append(assess(candidate, cells(adversary, p[half:], q[half:]), budget.final, sampling))
    return candidates


def finalists(candidates: list[Candidate]) -> list[Candidate]:
    """The best class of each (pair, direction), for the (pair, direction)s whose projected bound is within
    two standard errors of the best one's (at most four): classes on the same pair mostly find the same set."""
    ranked = sorted(candidates, key=lambda candidate: -candidate.projected)
    best, kept = ranked[0], {}
    for c in ranked:
        if c.projected >= best.projected - 2 * np.hypot(best.error, c.error):
            kept.setdefault((c.pair, c.swapped), c)
    return list(kept.values())[:MAX_FINALISTS]


def count_attacks(mechanism, pairs, attacks: list[Attack], n: int, sampling: Sampling,
                  rng) -> list[pooled_ratio.EventMoments]:
    """Counts of every attack's sets on n fresh samples of its pair, drawn in chunks (an input shared by
    several attacks is sampled once per chunk)."""
    inputs = distinct_inputs(pairs)
    position = {x.tobytes(): i for i, x in enumerate(inputs)}
    totals: list[pooled_ratio.EventMoments | None] = [None] * len(pairs)
    for begin in range(0, n, CHUNK):
        outputs = sampling.draw(mechanism, inputs, min(CHUNK, n - begin), rng)
        for index, ((d_p, d_q), attack) in enumerate(zip(pairs, attacks)):
            moments = attack.moments(outputs[position[d_p.tobytes()]], outputs[position[d_q.tobytes()]])
            totals[index] = moments if totals[index] is None else totals[index] + moments
    return totals


def select(attacks: list[Attack], checks: list[pooled_ratio.EventMoments], check: int, final: int,
           sampling: Sampling) -> tuple[int, Statistic]:
    """(attack index, statistic) of the best :func:`promise` on the check counts, among two families: the
    pools of every attack's sets, and the fitted sets that no pool starts from (module docstring, stage 3)."""
    fitted, pooled = [], []
    for index, (attack, moments) in enumerate(zip(attacks, checks)):
        pools = Statistic.pools(moments, sampling)
        pooled.extend((index, pool) for pool in pools.values())
        if attack.fitted not in pools:
            fitted.append((index, Statistic(np.eye(attack.cuts.size)[attack.fitted])))
    offered = [(option, len(family)) for family in (fitted, pooled) for option in family]

    def score(choice: tuple[tuple[int, Statistic], int]) -> float:
        (index, statistic), family_size = choice
        return promise(*statistic.log_ratio(checks[index], sampling), check, final, family_size)

    return max(offered, key=score)[0]


def audit(name: str, budget: Budget, sampling: Sampling, seed: int) -> Row:
    """Screen, train, check and evaluate the DP attacks on one mechanism (module docstring)."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    mechanism = build(name)
    chosen = finalists(screen(mechanism, CLASSES[name], budget, sampling, rng))
    pairs = [laws(mechanism.default_pairs()[c.pair], c.swapped) for c in chosen]
    inputs = distinct_inputs(pairs)
    train = dict(zip((x.tobytes() for x in inputs), sampling.draw(mechanism, inputs, budget.train, rng)))
    attacks = [
        graded_attack(fit_attack(c.function_class, train[d_p.tobytes()], train[d_q.tobytes()], budget.final,
                                 sampling, rng), train[d_p.tobytes()])
        for c, (d_p, d_q) in zip(chosen, pairs)
    ]
    checks = count_attacks(mechanism, pairs, attacks, budget.check, sampling, rng)
    best, statistic = select(attacks, checks, budget.check, budget.final, sampling)
    moments = count_attacks(mechanism, pairs[best:best + 1], attacks[best:best + 1], budget.final, sampling, rng)[0]
    return Row(name, chosen[best], statistic.bounds(moments, sampling), statistic.estimate(moments),
               int(np.count_nonzero(statistic.weights)), len(chosen), budget.total(len(mechanism.default_pairs())),
               time.perf_counter() - start)


def pair_label(mechanism_name: str, candidate: Candidate) -> str:
    d, d_prime = build(mechanism_name).default_pairs()[candidate.pair]
    text = [np.array2string(np.asarray(x).ravel(), separator=",") for x in (d, d_prime)]
    return f"{text[1]} vs {text[0]}" if candidate.swapped else f"{text[0]} vs {text[1]}"


def table(rows: list[Row]) -> str:
    """Markdown table of the results beside DP-Sniper's bounds (compared at its 90%)."""
    lines = []
    for row in rows:
        reference = DPSNIPER[row.mechanism]
        lines.append([
            row.mechanism, f"{row.bounds[0]:.4f}", f"{row.bounds[1]:.4f}", "-" if reference is None else f"{reference:.3f}",
            "-" if reference is None else ("yes" if row.bounds[1] >= reference else "NO"),
            f"{row.plug_in:.4f}", pair_label(row.mechanism, row.candidate),
            row.candidate.function_class, row.sets, row.finalists, f"{row.samples / 1e6:.2f} M",
            f"{row.samples / DPSNIPER_SAMPLES:.4f}", f"{row.seconds:.1f}",
        ])
    headers = ["mechanism", "eps LB (95%)", "eps LB (90%)", "DP-Sniper LB (90%)", ">= DP-Sniper", "plug-in eps",
               "pair P vs Q", "class", "sets pooled", "finalists", "samples/input", "fraction of DP-Sniper's", "seconds"]
    return tabulate(lines, headers=headers, tablefmt="github")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--independent", action="store_true", help="independent samples (black box), no coupling")
    parser.add_argument("--quick", action="store_true", help="small budget for a smoke run")
    parser.add_argument("--mechanisms", nargs="+", default=list(DPSNIPER), choices=list(DPSNIPER), metavar="NAME")
    parser.add_argument("--out", type=Path, help="default: results/bench_suite[_independent].md")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sampling = Sampling(coupled=not args.independent)
    out = args.out or Path(__file__).parent / "results" / f"bench_suite{'_independent' if args.independent else ''}.md"
    rows = []
    for offset, name in enumerate(args.mechanisms):
        budget = QUICK if args.quick else EASY if name in EASY_MECHANISMS else FULL
        rows.append(audit(name, budget, sampling, args.seed + offset))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()
