"""DP-Sniper benchmark: epsilon lower bounds on the known-buggy suite (run by hand).

    /work/venv/bin/python benchmarks/bench_suite.py [--independent] [--quick] [--mechanisms NAME ...] [--out FILE]

For every mechanism (claimed epsilon = 0.1, DP-Sniper's benchmark settings,
Bichsel et al. 2021) it finds a valid lower confidence bound on the pure-DP
epsilon (THEORY.md section 7) over the mechanism's ``default_pairs`` (StatDP's
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
   inputs: an attack set S_0 = {side (g - t) > 0} each, and its nested
   subsets {side (g - t_k) > 0}, t_k beyond t, each holding 2^(-1/8) of the
   previous one's training outputs of P;
3. **check**: each attack's sets are counted on fresh samples, which fix the
   weights of its final bound (the minimum-variance weights of
   :func:`attacks.pooled_ratio.min_variance_weights` on the sets with 100
   counts), and the attack with the best projected bound is kept
   (DP-Sniper's n_check stage), so that
4. **final**: that attack's sets are counted on a large fresh sample, in
   chunks, and one bound is reported, with no correction for multiplicity:
   the pooled bound on the weighted mean of the log-ratios of the sets
   (:func:`attacks.pooled_ratio.pooled_lower_bound`; a lower bound on
   epsilon, as every set's log-ratio is) when more than one set has weight,
   else the score bound on log(P(S) / Q(S)) of the one set.

Pooling pays where the likelihood ratio is flat over the sets: for
report-noisy-max releasing the value, every set in the lower tail has the
ratio e^epsilon, and the pooled variance per pair is about a third of the
best single set's.  Subsets of S_0 are pooled, not supersets: a score g that
orders the likelihood ratio gives them at least S_0's log-ratio.

"Samples per input" counts every sample drawn on an input of the chosen pair:
(number of pairs) x screen + train + check + final (the screen term bounds the
input that occurs in every pair).  DP-Sniper (``DDConfig``) draws 10.7 M
(train) + 10.7 M (threshold) + 10.7 M (check) + 200 M (final) on one input of
a pair and all but the threshold samples on the other: 221.4 M is the smaller,
and a tenth of it the budget here.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tabulate import tabulate

from attacks import Adversary, binomial_ratio, paired_ratio, pooled_ratio
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
DPSNIPER_SAMPLES = 10_700_000 + 10_700_000 + 200_000_000  # per input, the input without threshold samples
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
# Nested attack sets pooled by the final bound (attacks.pooled_ratio): below the fitted set S_0,
# 63 subsets each holding 2^(-1/8) of the previous one's training outputs of P (the deepest 2^-7.9
# of S_0), and only sets with MIN_COUNT counts (separated pairs too, coupled) in the check stage.
NESTED_SETS = 64
NESTED_STEP = 2 ** (-1 / 8)
MIN_COUNT = 100


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


FULL = Budget(screen=100_000, train=1_000_000, check=1_000_000, final=19_000_000)
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
        n = int(counts.sum())
        return binomial_ratio.log_ratio_bound(int(counts[0] + counts[1]), n, int(counts[0] + counts[2]), n,
                                              0.0, level, lower=True)

    def projected(self, counts: np.ndarray, n_eval: int) -> tuple[float, float]:
        """The bound the cells project to ``n_eval`` fresh samples (``projected_lower_bound``) and the
        standard error of their smoothed log(P(S) / Q(S))."""
        n = int(counts.sum())
        if self.coupled:
            bound = paired_ratio.projected_lower_bound(counts, 0.0, SELECTION_LEVEL, n_eval)
            _, variance = paired_ratio.smoothed_log_ratio(counts, 0.0)
        else:
            k_p, k_q = int(counts[0] + counts[1]), int(counts[0] + counts[2])
            bound = binomial_ratio.projected_lower_bound(k_p, n, k_q, n, 0.0, SELECTION_LEVEL, n_eval)
            _, variance_p, variance_q = binomial_ratio.smoothed_log_ratio(k_p, n, k_q, n, 0.0)
            variance = variance_p + variance_q
        return float(bound), float(np.sqrt(variance / n))

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
class Attack:
    """A fitted DP adversary's set S_0 = {s g > c_0} (s its side, g its score, c_0 = s t) and nested
    subsets {s g > c_k}, c_0 < c_1 < ...: the sets the final bound may pool."""

    adversary: Adversary
    cuts: np.ndarray

    def memberships(self, x: np.ndarray) -> np.ndarray:
        """Boolean (n, K): output i lies in set k."""
        return (self.adversary.side_ * self.adversary.discriminant(x))[:, None] > self.cuts


def nested_attack(adversary: Adversary, p_train: np.ndarray) -> Attack:
    """The adversary's set and its subsets holding NESTED_STEP^k of the training outputs of P in it."""
    cut = adversary.side_ * adversary.threshold_
    scores = adversary.side_ * adversary.discriminant(p_train)
    inside = scores[scores > cut]
    if inside.size == 0:
        return Attack(adversary, np.array([cut]))
    deeper = np.quantile(inside, 1.0 - NESTED_STEP ** np.arange(1, NESTED_SETS), method="lower")
    return Attack(adversary, np.unique(np.r_[cut, deeper[deeper > cut]]))


@dataclass(frozen=True)
class Statistic:
    """The final bound of an attack: weights on its sets, pooled (attacks.pooled_ratio) when more than one
    set has weight, else the score bound on that one set's cells."""

    weights: np.ndarray

    @classmethod
    def choose(cls, moments: pooled_ratio.EventMoments, sampling: Sampling) -> Statistic:
        """Minimum-variance weights on the usable sets of a check sample (S_0 alone when none is usable)."""
        if not pooled_ratio.usable_sets(moments, 0.0, sampling.coupled, MIN_COUNT).any():
            return cls(np.eye(moments.in_p.size)[0])
        weights = pooled_ratio.min_variance_weights(moments, 0.0, sampling.coupled, MIN_COUNT)
        weights[weights < 1e-6] = 0.0  # the solver's round-off: a set that barely counts is not pooled
        return cls(weights / weights.sum())

    @property
    def pooled(self) -> bool:
        return np.count_nonzero(self.weights) > 1

    def projected(self, moments: pooled_ratio.EventMoments, final: int, sampling: Sampling) -> tuple[float, float]:
        """The bound these counts project to ``final`` fresh samples, and the standard error of the estimate."""
        if self.pooled:
            bound = pooled_ratio.projected_lower_bound(moments, self.weights, 0.0, SELECTION_LEVEL, final,
                                                       sampling.coupled)
            return bound, pooled_ratio.pooled_log_ratio(moments, self.weights, 0.0, sampling.coupled)[1]
        return sampling.projected(moments.cells(int(np.argmax(self.weights))), final)

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
    projected, error = sampling.projected(counts, final)
    return replace(candidate, projected=projected, error=error)


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
    inputs = list({x.tobytes(): x for pair in pairs for x in pair}.values())
    position = {x.tobytes(): i for i, x in enumerate(inputs)}
    totals: list[pooled_ratio.EventMoments | None] = [None] * len(pairs)
    for begin in range(0, n, CHUNK):
        outputs = sampling.draw(mechanism, inputs, min(CHUNK, n - begin), rng)
        for index, ((d_p, d_q), attack) in enumerate(zip(pairs, attacks)):
            moments = pooled_ratio.EventMoments.from_memberships(attack.memberships(outputs[position[d_p.tobytes()]]),
                                                                attack.memberships(outputs[position[d_q.tobytes()]]))
            totals[index] = moments if totals[index] is None else totals[index] + moments
    return totals


def audit(name: str, budget: Budget, sampling: Sampling, seed: int) -> Row:
    """Screen, train, check and evaluate the DP attacks on one mechanism (module docstring)."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    mechanism = build(name)
    chosen = finalists(screen(mechanism, CLASSES[name], budget, sampling, rng))
    pairs = [laws(mechanism.default_pairs()[c.pair], c.swapped) for c in chosen]
    inputs = list({x.tobytes(): x for pair in pairs for x in pair}.values())
    train = dict(zip((x.tobytes() for x in inputs), sampling.draw(mechanism, inputs, budget.train, rng)))
    attacks = [
        nested_attack(fit_attack(c.function_class, train[d_p.tobytes()], train[d_q.tobytes()], budget.final,
                                 sampling, rng), train[d_p.tobytes()])
        for c, (d_p, d_q) in zip(chosen, pairs)
    ]
    checks = count_attacks(mechanism, pairs, attacks, budget.check, sampling, rng)
    statistics = [Statistic.choose(moments, sampling) for moments in checks]
    projected = [statistic.projected(moments, budget.final, sampling)[0]
                 for statistic, moments in zip(statistics, checks)]
    best = int(np.argmax(projected))
    moments = count_attacks(mechanism, pairs[best:best + 1], attacks[best:best + 1], budget.final, sampling, rng)[0]
    statistic = statistics[best]
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
            f"{row.samples / DPSNIPER_SAMPLES:.3f}", f"{row.seconds:.1f}",
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
