"""The mlp class against kernel and linear on Gaussian sigma = 1 (run by hand).

    python benchmarks/bench_mlp.py [--n 100000] [--seeds 5] [--classes mlp,kernel,linear]

P = N(0, 1), Q = N(1, 1), n samples of each, ``estimate_divergence`` with
its default half / half split (the engine ``capaudit run`` uses), seeds
0 .. seeds - 1 for both the samples and the fit.  Exact unrestricted values:
Renyi of order alpha = alpha / 2, KL = 1 / 2.  Prints one markdown row per
(class, divergence) into benchmarks/results/bench_mlp.md: the mean and standard deviation over seeds of the
held-out estimate as a share of the exact value, of its 95% lower bound,
and the CPU seconds of one estimate (fit and score; CPU rather than wall
time, which depends on what else the machine runs).
"""

import argparse
import time

import numpy as np
from tabulate import tabulate

from attacks import estimate_divergence
from results_file import add_out_option, write

CASES = [("renyi", 2.0, 1.0), ("renyi", 4.0, 2.0), ("kl", None, 0.5)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--classes", default="mlp,kernel,linear")
    add_out_option(parser, "bench_mlp")
    args = parser.parse_args()
    results = {}
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        samples_p, samples_q = rng.normal(0.0, 1.0, args.n), rng.normal(1.0, 1.0, args.n)
        for function_class in args.classes.split(","):
            for divergence, alpha, exact in CASES:
                start = time.process_time()
                result = estimate_divergence(samples_p, samples_q, function_class, divergence, alpha=alpha,
                                             random_state=seed)
                seconds = time.process_time() - start
                results.setdefault((function_class, divergence, alpha, exact), []).append(
                    (result.estimate / exact, result.lower_bound(0.95) / exact, seconds))
                print(f"seed {seed} {function_class} {divergence} {alpha}: {result.estimate:.4f} "
                      f"(SE {result.standard_error:.4f}), lower bound {result.lower_bound(0.95):.4f}, "
                      f"{seconds:.1f} s", flush=True)
    rows = []
    for (function_class, divergence, alpha, exact), values in results.items():
        share, bound, seconds = np.array(values).T
        rows.append([function_class, divergence if alpha is None else f"renyi a={alpha:g}", f"{exact:g}",
                     f"{share.mean():.1%} ± {share.std(ddof=1) if share.size > 1 else 0.0:.1%}",
                     f"{bound.mean():.1%} ± {bound.std(ddof=1) if bound.size > 1 else 0.0:.1%}",
                     f"{seconds.mean():.1f}"])
    text = (f"n = {args.n} per law, seeds 0..{args.seeds - 1} (mean ± sd over seeds)\n\n"
            + tabulate(rows, headers=["class", "divergence", "exact", "estimate / exact", "95% lower bound / exact",
                                      "CPU s"], tablefmt="github"))
    print(text)
    write(args.out, text)


if __name__ == "__main__":
    main()
