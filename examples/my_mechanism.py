"""A user mechanism for ``capaudit run examples/custom.toml``: the noisy mean of clipped records.

The protocol (docs/design.md, "Contract: config") is one plain function
``mechanism(dataset, n, rng, **params) -> array of shape (n, d)`` returning n
independent outputs; ``params`` come from the config's ``[mechanism] params``.
capaudit imports this module with the config file's directory and the
current directory at the front of ``sys.path``, so it needs no installing.
"""

import numpy as np


def mechanism(dataset: np.ndarray, n: int, rng: np.random.Generator, epsilon: float = 1.0) -> np.ndarray:
    """Mean of the records clipped to [0, 1] plus Laplace noise: epsilon-DP under replace-one.

    Replacing one of m records moves the clipped mean by at most 1/m, so the
    noise scale is 1 / (m epsilon).
    """
    records = np.clip(np.asarray(dataset, dtype=float).reshape(len(dataset), -1)[:, 0], 0.0, 1.0)
    return records.mean() + rng.laplace(0.0, 1.0 / (len(records) * epsilon), size=n)
