"""What a staged search attacks: the claim's target, its candidates, and the samples of a pair they are fitted on.

A *target* is what a claim asks for (a divergence, its alpha and delta, and
the attack classes contained in the claim's class that estimate it); a
*candidate* is a pair (index), a direction (P = M(d), Q = M(d'), or
swapped) and one of those classes.  Samples come from a *sampling callable*
(:class:`Sampler`) that returns a :class:`Draw`: n outputs on d and on d',
and whether they are coupled pairs (:mod:`attacks.staged`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from attacks.classes import parse_function_class


@dataclass(frozen=True)
class Draw:
    """n outputs on d and on d' of one pair; ``coupled``: row i of both drawn from the same random numbers."""

    d: np.ndarray
    d_prime: np.ndarray
    coupled: bool


class Sampler(Protocol):
    """``sample(pair, n, stage, chunk)``: n fresh outputs on pair ``pair``'s two datasets.

    Draws for different ``(stage, chunk)`` keys must be independent; the same
    key must give the same draw (reproducibility).
    """

    def __call__(self, pair: int, n: int, stage: str, chunk: int) -> Draw: ...


@dataclass(frozen=True)
class Target:
    """What a claim asks the search for: a divergence (alpha, delta) and the attack classes that may refute it;
    ``claim_class``: the class of the one claim its rows answer, None when they answer every claim that holds
    their attack class (policy ``every``)."""

    divergence: str
    classes: tuple[str, ...]
    alpha: float | None = None
    delta: float = 0.0
    class_params: Mapping[str, Mapping] = field(default_factory=dict)
    claim_class: str | None = None

    @classmethod
    def for_claim(cls, divergence: str, claim_class: str, attack_classes: Sequence[str], alpha: float | None = None,
                  delta: float = 0.0, class_params: Mapping[str, Mapping] | None = None,
                  layer: str | None = None) -> Target:
        """The target of a claim on ``claim_class``: the attack classes contained in it that estimate the divergence
        (of one ``layer`` of :data:`attacks.classes.LAYERS` only, when given)."""
        claimed = parse_function_class(claim_class)
        usable = tuple(name for name in attack_classes
                       if divergence in parse_function_class(name).divergences
                       and parse_function_class(name).is_contained_in(claimed)
                       and layer in (None, parse_function_class(name).layer))
        return cls(divergence, usable, alpha, delta, dict(class_params or {}), claim_class)


@dataclass(frozen=True)
class Candidate:
    """A pair (index), a direction (``swapped``: P = M(d'), Q = M(d)) and an attack class."""

    pair: int
    swapped: bool
    function_class: str

    @property
    def direction(self) -> str:
        return "Q|P" if self.swapped else "P|Q"

    def laws(self, draw: Draw) -> tuple[np.ndarray, np.ndarray]:
        """(outputs of P, outputs of Q) of a draw of this candidate's pair."""
        return (draw.d_prime, draw.d) if self.swapped else (draw.d, draw.d_prime)
