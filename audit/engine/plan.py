"""The audit's plan: its tasks and their stable ids, and the seeds named after them.

A task is one attack: (pair, direction, attack class, divergence, alpha, delta),
named by a stable id such as ``p0|P|Q|poly3|renyi|4|0``.  Directions: ``P|Q``
estimates Gamma(M(d) || M(d')), ``Q|P`` the reverse (docs/theory.md section 1).
A class is attacked only on the divergences it can estimate
(:attr:`attacks.classes.FunctionClass.divergences`); :mod:`audit.engine.run`
decides which tasks run (its policy).

Reproducibility: every random draw of the audit (each chunk of samples, each
attack) is seeded by :func:`task_seed` from the audit's seed and a name, so
results do not depend on n_jobs, the backend or the order in which jobs finish.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

DIRECTIONS = ("P|Q", "Q|P")


@dataclass(frozen=True)
class Task:
    """One attack of the audit; ``id`` is stable across runs with the same config."""

    pair: str
    direction: str
    function_class: str
    divergence: str
    alpha: float | None
    delta: float

    @property
    def id(self) -> str:
        alpha = "" if self.alpha is None else f"{self.alpha:g}"
        return f"{self.pair}|{self.direction}|{self.function_class}|{self.divergence}|{alpha}|{self.delta:g}"


def task_seed(seed: int, name: str) -> np.random.SeedSequence:
    """The seed of a named task or sample: ``SeedSequence([seed, sha256(name)])``, independent of scheduling."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.SeedSequence([seed, digest])
