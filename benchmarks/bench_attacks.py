"""Accuracy and speed of the attacks at n = 100 000 per distribution (run by hand).

    python benchmarks/bench_attacks.py

Writes a markdown table to benchmarks/results/bench_attacks.md: per law, class and divergence, the held-out
estimate, its relative error to the exact value computed by ``audit.theory.exact`` (for
kernel, mlp and tree3 the exact value is the unrestricted one, an upper
bound, so their "error" is a shortfall) and the fit + score time.
"""

import argparse
import time

import numpy as np
from scipy import stats
from tabulate import tabulate

from attacks import estimate_divergence
from audit.theory.exact import restricted_divergence
from results_file import add_out_option, write

N = 100_000
LAWS = {
    "laplace eps=1": (stats.laplace(0.0, 1.0), stats.laplace(1.0, 1.0)),
    "gaussian sigma=1": (stats.norm(0.0, 1.0), stats.norm(1.0, 1.0)),
}
EXACT_CLASSES = ("linear", "poly2", "poly3")
CLASSES = ["linear", "poly2", "poly3", "kernel", "mlp", "tree3"]
DIVERGENCES = [("kl", None), ("renyi", 2), ("renyi", 4), ("ipm", None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_option(parser, "bench_attacks")
    args = parser.parse_args()
    rows = []
    for law, (p, q) in LAWS.items():
        rng = np.random.default_rng(0)
        samples_p, samples_q = p.rvs(size=N, random_state=rng), q.rvs(size=N, random_state=rng)
        for function_class in CLASSES:
            for divergence, alpha in DIVERGENCES:
                start = time.perf_counter()
                result = estimate_divergence(samples_p, samples_q, function_class, divergence, alpha=alpha, random_state=0)
                seconds = time.perf_counter() - start
                # Both laws have a monotone likelihood ratio, so the IPM over thresholds is the
                # unrestricted 2 TV; kernel, mlp and trees have no exact value: compare with "all".
                restricted = function_class in EXACT_CLASSES or divergence == "ipm"
                exact_class = "threshold" if divergence == "ipm" else function_class if restricted else "all"
                exact = restricted_divergence(p, q, exact_class, divergence, alpha=alpha)
                rows.append([
                    law, function_class, divergence if alpha is None else f"renyi a={alpha}",
                    f"{result.estimate:.4f}", f"{result.standard_error:.4f}",
                    f"{exact:.4f}" + ("" if restricted else " (unrestricted)"),
                    f"{(result.estimate - exact) / exact:+.1%}", f"{seconds:.2f}",
                ])
    text = tabulate(rows, headers=["law", "class", "divergence", "estimate", "SE", "exact", "rel. error", "seconds"],
                    tablefmt="github")
    print(text)
    write(args.out, f"n = {N} per law, seeds 0, one process.\n\n{text}")


if __name__ == "__main__":
    main()
