"""Accuracy and speed of the attacks at n = 100 000 per distribution (run by hand).

    /work/venv/bin/python benchmarks/bench_attacks.py

Prints a markdown table: per law, class and divergence, the held-out
estimate, its relative error to the exact value of THEORY.md section 6 (for
kernel, mlp and tree3 the exact value is the unrestricted one, an upper
bound, so their "error" is a shortfall) and the fit + score time.
"""

import time

import numpy as np
from tabulate import tabulate

from attacks import estimate_divergence

N = 100_000
LAWS = {
    "laplace eps=1": (lambda rng: rng.laplace(0, 1, N), lambda rng: rng.laplace(1, 1, N)),
    "gaussian sigma=1": (lambda rng: rng.normal(0, 1, N), lambda rng: rng.normal(1, 1, N)),
}
EXACT = {  # THEORY.md section 6 reference values; None for the unrestricted class
    "laplace eps=1": {
        ("linear", "kl", None): 0.2260, ("poly2", "kl", None): 0.2614, ("poly3", "kl", None): 0.2614,
        ("linear", "renyi", 2): 0.4055, ("poly2", "renyi", 2): 0.4383, ("poly3", "renyi", 2): 0.4749,
        ("linear", "renyi", 4): 0.4106, ("poly2", "renyi", 4): 0.6269, ("poly3", "renyi", 4): 0.6407,
        (None, "kl", None): 0.3679, (None, "renyi", 2): 0.6191, (None, "renyi", 4): 0.8137, (None, "ipm", None): 0.7869,
    },
    "gaussian sigma=1": {
        ("linear", "kl", None): 0.5, ("poly2", "kl", None): 0.5, ("poly3", "kl", None): 0.5,
        ("linear", "renyi", 2): 0.6931, ("poly2", "renyi", 2): 0.9163, ("poly3", "renyi", 2): 0.9808,
        ("linear", "renyi", 4): 0.6247, ("poly2", "renyi", 4): 1.034, ("poly3", "renyi", 4): 1.320,
        (None, "kl", None): 0.5, (None, "renyi", 2): 1.0, (None, "renyi", 4): 2.0, (None, "ipm", None): 0.7658,
    },
}
CLASSES = ["linear", "poly2", "poly3", "kernel", "mlp", "tree3"]
DIVERGENCES = [("kl", None), ("renyi", 2), ("renyi", 4), ("ipm", None)]


def main() -> None:
    rows = []
    for law, (draw_p, draw_q) in LAWS.items():
        rng = np.random.default_rng(0)
        samples_p, samples_q = draw_p(rng), draw_q(rng)
        for function_class in CLASSES:
            for divergence, alpha in DIVERGENCES:
                start = time.perf_counter()
                result = estimate_divergence(samples_p, samples_q, function_class, divergence, alpha=alpha, random_state=0)
                seconds = time.perf_counter() - start
                exact = EXACT[law].get((function_class, divergence, alpha), EXACT[law].get((None, divergence, alpha)))
                restricted = (function_class, divergence, alpha) in EXACT[law] or divergence == "ipm"
                rows.append([
                    law, function_class, divergence if alpha is None else f"renyi a={alpha}",
                    f"{result.estimate:.4f}", f"{result.standard_error:.4f}",
                    f"{exact:.4f}" + ("" if restricted else " (unrestricted)"),
                    f"{(result.estimate - exact) / exact:+.1%}", f"{seconds:.2f}",
                ])
    print(tabulate(rows, headers=["law", "class", "divergence", "estimate", "SE", "exact", "rel. error", "seconds"], tablefmt="github"))


if __name__ == "__main__":
    main()
