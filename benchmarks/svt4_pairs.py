"""The exact dp value of each default pair of the built-in svt_4 (epsilon 0.1): what the suite's SVT4 row can reach.

    PYTHONPATH=. python benchmarks/svt4_pairs.py

With cutoff c = 1 the output of Lyu et al.'s Alg. 4 is the index of the
first query above the noisy threshold, or none: 11 outcomes for 10 queries.
Given the threshold noise rho ~ Lap(4 / epsilon), the queries are independent,
so P(first above at k | rho) = prod_{i<k} F_i(T + rho) (1 - F_k(T + rho)) with
F_i the law of q_i + Lap(4 / (3 epsilon)); integrating over rho (a grid of
400 001 points on [-2000, 2000], 50 threshold scales) gives each outcome's
probability.  The largest log-ratio of an outcome's probabilities, in either
direction, is the pair's dp value over every set (a union of outcomes never
has a larger ratio than its best outcome).
"""

from __future__ import annotations

import numpy as np

from audit.mechanisms import make_mechanism
from audit.mechanisms.builtin import answer_vector

EPSILON, THRESHOLD = 0.1, 1.0
THRESHOLD_SCALE, QUERY_SCALE = 4.0 / EPSILON, 4.0 / (3.0 * EPSILON)
GRID = np.linspace(-2_000.0, 2_000.0, 400_001)


def laplace_cdf(x: np.ndarray, scale: float) -> np.ndarray:
    return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale), 1.0 - 0.5 * np.exp(-np.maximum(x, 0) / scale))


def outcome_probabilities(answers: np.ndarray) -> np.ndarray:
    """P(first above at query k) for k = 0 .. K - 1, then P(none above)."""
    density = np.exp(-np.abs(GRID) / THRESHOLD_SCALE) / (2.0 * THRESHOLD_SCALE) * (GRID[1] - GRID[0])
    probabilities, all_below = [], np.ones_like(GRID)
    for answer in answers:
        below = laplace_cdf(THRESHOLD + GRID - answer, QUERY_SCALE)
        probabilities.append(np.sum(density * all_below * (1.0 - below)))
        all_below = all_below * below
    return np.array(probabilities + [np.sum(density * all_below)])


def main() -> None:
    mechanism = make_mechanism("svt_4", {"epsilon": EPSILON})
    print("| pair | d | d' | best outcome | P(outcome) | dp value |")
    print("|---|---|---|---|---|---|")
    for index, (d, d_prime) in enumerate(mechanism.default_pairs()):
        p, q = (outcome_probabilities(answer_vector(np.asarray(x))) for x in (d, d_prime))
        ratios = np.r_[np.log(p / q), np.log(q / p)]
        best = int(np.argmax(ratios))
        outcome, law = best % p.size, (p, q)[best // p.size]
        label = "none above" if outcome == p.size - 1 else f"first above at query {outcome + 1}"
        print(f"| {index} | {answer_vector(np.asarray(d))} | {answer_vector(np.asarray(d_prime))} | "
              f"{label} ({'P' if best < p.size else 'Q'}) | {law[outcome]:.4f} | {ratios[best]:.4f} |")


if __name__ == "__main__":
    main()
