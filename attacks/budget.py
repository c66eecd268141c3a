"""How an audit's outputs are spent: the stages' default shares, and the held-out floor every confirm stage obeys.

An estimate is confirmed on outputs its fit never saw (the held-out split of
:func:`attacks.estimate_divergence`, the confirm stage of
:mod:`attacks.staged`).  :func:`min_held_out` is the fewest such outputs per
dataset that still bound a set's probability at the audit's confidence;
``[attacks]`` refuses smaller splits (:mod:`audit.config.attacks`).
This module imports the standard library only, so that the config reads it
without loading the attacks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

STAGES = ("screen", "train", "check", "confirm")
DEFAULT_SHARES = {"screen": 0.2, "train": 0.2, "check": 0.1, "confirm": 0.5}
"""Shares of the budget per candidate pair (``n_samples``) spent by each stage
(:meth:`attacks.budget.StageSizes.from_budget`)."""
MIN_HELD_OUT = 30
"""Fewest held-out outputs per dataset at any confidence: the usual floor for the normal
approximation that the delta-method intervals of kl / renyi / ipm rest on."""
RESOLVED_MASS = 0.1
"""A held-out split must bound, at the audit's confidence, the probability of a set that none of
its points falls in below this mass (see :func:`min_held_out`)."""


def train_size(n_samples: int, train_fraction: float) -> int:
    """Outputs per dataset that train: ``train_fraction`` of ``n_samples`` rounded, at least 1 and at most
    n_samples - 1 (the split of :func:`attacks.estimate_divergence` and of the ``every`` policy's stages)."""
    return min(max(int(round(train_fraction * n_samples)), 1), n_samples - 1)


def held_out(n_samples: int, train_fraction: float) -> int:
    """Held-out outputs per dataset: n_samples minus :func:`train_size`."""
    return n_samples - train_size(n_samples, train_fraction)


def min_held_out(confidence: float) -> int:
    """Fewest held-out outputs per dataset for an audit at ``confidence``.

    max(``MIN_HELD_OUT``, ceil(log(1 - c) / log(1 - ``RESOLVED_MASS``))). The
    second term: when none of m held-out points falls in a set, the exact
    (Clopper-Pearson) upper confidence bound on its probability is
    1 - (1 - c)^(1/m), which is below 0.1 only for m >= log(1 - c) / log(0.9)
    (29 at c = 0.95, 44 at 0.99); a smaller split cannot tell a set of mass
    0.1 from an empty one, so its bounds are uninformative. The floor of 30
    is for the normal approximation behind the kl / renyi / ipm intervals
    (false violations at small splits: docs/benchmarks.md, "Measurements
    behind constants").
    """
    return max(MIN_HELD_OUT, math.ceil(math.log1p(-confidence) / math.log1p(-RESOLVED_MASS)))


@dataclass(frozen=True)
class StageSizes:
    """Outputs per dataset of each stage: ``screen`` on every pair, the others on the finalists' pairs."""

    screen: int
    train: int
    check: int
    confirm: int

    @classmethod
    def from_budget(cls, n_samples: int, shares: Mapping[str, float] | None = None) -> StageSizes:
        """Split ``n_samples`` (outputs per dataset of a pair over all four stages) by ``shares`` (summing to 1)."""
        shares = dict(DEFAULT_SHARES if shares is None else shares)
        if sorted(shares) != sorted(STAGES) or not all(0 < v < 1 for v in shares.values()) \
                or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-9):
            raise ValueError(
                f"shares must give each of {list(STAGES)} a number in (0, 1), summing to 1. Found {shares!r}."
            )
        sizes = {stage: int(shares[stage] * n_samples) for stage in STAGES}
        if min(sizes.values()) < 20:
            raise ValueError(
                f"every stage needs at least 20 outputs per dataset; n_samples={n_samples} with shares {shares!r} "
                f"gives {sizes}. Raise n_samples or the smallest share."
            )
        return cls(**sizes)

    @classmethod
    def from_split(cls, n_samples: int, train_fraction: float) -> StageSizes:
        """The stages of the ``every`` policy (:func:`confirm_every`): no screen, no check; ``train_fraction``
        of ``n_samples`` trains each candidate (rounded, at least 1 and at most n_samples - 1), the rest confirms it."""
        train = train_size(n_samples, train_fraction)
        return cls(screen=0, train=train, check=0, confirm=n_samples - train)
