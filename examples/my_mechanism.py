"""A user mechanism for ``capaudit run examples/custom.toml``: the noisy mean of clipped records.

The protocol (docs/design.md, "Contract: config") is one plain function
``mechanism(dataset, n, rng, **params) -> array of shape (n, d)`` returning n
independent outputs; ``params`` come from the config's ``[mechanism] params``.
capaudit imports this module with the config file's directory and the
current directory at the front of ``sys.path``, so it needs no installing.

``mechanism`` is the textbook pattern: its values are epsilon-DP, but numpy's
Laplace sampler, added in floating point to a value that depends on the data,
leaves gaps and a precision in the float64 outputs that depend on the input
(Mironov, CCS 2012), so the audit's representation layer (``floatbits``)
refutes any claim over ``all`` while its value layer passes
(examples/custom_dp.toml).  ``float_safe_mechanism`` releases the same mean on
a grid with discrete Laplace noise: every output is an integer multiple of
``grain``, exact in float64, so its bits say nothing beyond its value.
"""

import math

import numpy as np


def mechanism(dataset: np.ndarray, n: int, rng: np.random.Generator, epsilon: float = 1.0) -> np.ndarray:
    """Mean of the records clipped to [0, 1] plus Laplace noise: epsilon-DP under replace-one (of the values).

    Replacing one of m records moves the clipped mean by at most 1/m, so the
    noise scale is 1 / (m epsilon).
    """
    records = np.clip(np.asarray(dataset, dtype=float).reshape(len(dataset), -1)[:, 0], 0.0, 1.0)
    return records.mean() + rng.laplace(0.0, 1.0 / (len(records) * epsilon), size=n)


def float_safe_mechanism(dataset: np.ndarray, n: int, rng: np.random.Generator, epsilon: float = 1.0,
                         grain: float = 2.0**-10) -> np.ndarray:
    """The clipped mean rounded to the grid ``grain`` Z plus discrete Laplace noise on that grid: epsilon-DP, and
    float-safe (every output is k * grain with |k| < 2^53, exact in float64).

    Replacing a record moves the mean by at most 1/m, so its grid index by at most s = ceil(1 / (m grain)) + 1
    steps (the rounding adds one); noise G1 - G2 with G1, G2 iid geometric of success 1 - exp(-epsilon / s) is
    the discrete Laplace law P(k) proportional to exp(-epsilon |k| / s) (Inusah and Kozubowski 2006), so the
    release is epsilon-DP.  ``grain`` must be a power of two so that k * grain is exact.
    """
    records = np.clip(np.asarray(dataset, dtype=float).reshape(len(dataset), -1)[:, 0], 0.0, 1.0)
    index = round(records.mean() / grain)
    steps = math.ceil(1.0 / (len(records) * grain)) + 1
    success = -math.expm1(-epsilon / steps)
    noise = rng.geometric(success, size=n) - rng.geometric(success, size=n)
    return (index + noise).astype(float) * grain
