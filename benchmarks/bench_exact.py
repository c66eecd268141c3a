"""Time per exact restricted divergence (audit.theory.exact), a markdown table in benchmarks/results/bench_exact.md.

Run by hand: ``python benchmarks/bench_exact.py [--repeat N]``. For the
Laplace mechanism (epsilon = 1) and the Gaussian mechanism (sigma = 1), P at 0
and Q at 1, and for discrete laws (binary randomized response at epsilon = 1;
the discrete Laplace / two-sided geometric at a = 1 and a = 0.05, shifted by
1: about 1.2e3 and 2.4e4 atoms within the cut of ``audit.theory.exact``), it times
one call of ``restricted_divergence`` for KL and Renyi (alpha in 2, 4, 10) and each class (linear, poly2, poly3, all), on the
current process's one core, and reports the best of ``--repeat`` runs with the
value computed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats
from tabulate import tabulate

from audit.theory.exact import restricted_divergence
from results_file import add_out_option, write

LAWS = {
    "laplace eps=1": (stats.laplace(0.0, 1.0), stats.laplace(1.0, 1.0)),
    "gaussian sigma=1": (stats.norm(0.0, 1.0), stats.norm(1.0, 1.0)),
    "randomized response eps=1": (stats.bernoulli(1 / (1 + np.e)), stats.bernoulli(np.e / (1 + np.e))),
    "discrete laplace a=1": (stats.dlaplace(1.0), stats.dlaplace(1.0, loc=1)),
    "discrete laplace a=0.05": (stats.dlaplace(0.05), stats.dlaplace(0.05, loc=1)),
}
DIVERGENCES = (("kl", None), ("renyi", 2.0), ("renyi", 4.0), ("renyi", 10.0))
CLASSES = ("linear", "poly2", "poly3", "all")


def time_call(p, q, function_class, divergence, alpha, repeat):
    """Best wall time over ``repeat`` calls, and the value."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        value = restricted_divergence(p, q, function_class, divergence, alpha=alpha)
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="calls per cell; the best time is reported")
    add_out_option(parser, "bench_exact")
    args = parser.parse_args()
    rows = []
    for law_name, (p, q) in LAWS.items():
        for divergence, alpha in DIVERGENCES:
            for function_class in CLASSES:
                seconds, value = time_call(p, q, function_class, divergence, alpha, args.repeat)
                rows.append([law_name, divergence if alpha is None else f"renyi a={alpha:g}", function_class,
                             f"{value:.4f}", f"{1000 * seconds:.0f}"])
    text = tabulate(rows, headers=["laws", "divergence", "class", "value", "ms per value"], tablefmt="github")
    print(text)
    write(args.out, text)


if __name__ == "__main__":
    main()
