"""docs/theory.md section 6 reference values: the one copy the tests read.

P is the mechanism's output at 0 and Q its output at 1 (sensitivity 1): Laplace
with epsilon = 1 (scale 1), Gaussian with sigma = 1. Class ``all`` is the
unrestricted divergence; ``threshold`` with ``ipm`` is the IPM over thresholds
(= 2 TV). The table has 4 significant digits, so ``REFERENCE_RTOL`` covers its
rounding.
"""

from scipy import stats

REFERENCE_RTOL = 1e-3

LAWS = {
    "laplace": (stats.laplace(0.0, 1.0), stats.laplace(1.0, 1.0)),
    "gaussian": (stats.norm(0.0, 1.0), stats.norm(1.0, 1.0)),
}

EXACT = {  # mechanism -> (function class, divergence, alpha) -> value
    "laplace": {
        ("linear", "kl", None): 0.2260, ("poly2", "kl", None): 0.2614,
        ("poly3", "kl", None): 0.2614, ("all", "kl", None): 0.3679,
        ("linear", "renyi", 2.0): 0.4055, ("poly2", "renyi", 2.0): 0.4383,
        ("poly3", "renyi", 2.0): 0.4749, ("all", "renyi", 2.0): 0.6191,
        ("linear", "renyi", 4.0): 0.4106, ("poly2", "renyi", 4.0): 0.6269,
        ("poly3", "renyi", 4.0): 0.6407, ("all", "renyi", 4.0): 0.8137,
        ("threshold", "ipm", None): 0.7869,
    },
    "gaussian": {
        ("linear", "kl", None): 0.5, ("poly2", "kl", None): 0.5,
        ("poly3", "kl", None): 0.5, ("all", "kl", None): 0.5,
        ("linear", "renyi", 2.0): 0.6931, ("poly2", "renyi", 2.0): 0.9163,
        ("poly3", "renyi", 2.0): 0.9808, ("all", "renyi", 2.0): 1.0,
        ("linear", "renyi", 4.0): 0.6247, ("poly2", "renyi", 4.0): 1.034,
        ("poly3", "renyi", 4.0): 1.320, ("all", "renyi", 4.0): 2.0,
        ("threshold", "ipm", None): 0.7658,
    },
}

TABLE1_BOUND_ALPHA4 = {"laplace": 0.7324, "gaussian": 0.9395}
"""CBDP Table 1's upper bound on (linear, Renyi) at alpha = 4."""
