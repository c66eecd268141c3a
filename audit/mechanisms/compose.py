"""Combinators: mechanisms built from mechanisms (sequential, parallel, mixture, post-processing).

In the spirit of OpenDP's ``make_composition`` and ``>>``: each combinator
returns a mechanism like any built-in (``sample(dataset, n, rng)``, checked
outputs, ``seedable`` when its parts are), so the audit's sampler and
attacks take it as they are.  ``[[checks]]`` (:mod:`audit.engine.checks`) audit
these composed mechanisms against the right-hand sides of CBDP's theorems
(:mod:`audit.theory.composition`).  Each composed release draws its parts'
randomness from the one generator it is given, in a fixed order, so that a
seed fixes every output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from audit.sampling.errors import MechanismError
from audit.mechanisms.base import BaseMechanism
from audit.sampling.structure import MAX_OUTPUT, StructureEncoder
from audit.theory.table import GaussianShift, LaplaceShift

MAPS = ("square", "append-square")
"""Named nonlinear post-processing maps: y -> y**2 and y -> (y, y**2) (elementwise); a matrix is a linear map."""


def _seedable(*parts: Any) -> bool:
    return all(getattr(part, "seedable", True) for part in parts)


def _label(*parts: Any) -> str:
    return ", ".join(getattr(part, "name", repr(part)) for part in parts)


class Sequential(BaseMechanism):
    """(M1(D), M2(D)): both releases on the same dataset, outputs side by side (CBDP Thm 4).

    ``adaptive``: M2 sees M1's output and queries the data only when M1's
    first coordinate is >= 0, else the all-zeros dataset of the same shape;
    Thm 4 is non-adaptive.

    Parameters
    ----------
    first, second : Mechanism
    adaptive : bool
    """

    name = "sequential"
    description = "(M1(D), M2(D)): two releases on one dataset, outputs concatenated"
    privacy_claim = "Gamma^(H1+H2) <= eps1 + eps2 when non-adaptive (CBDP Thm 4)"

    def __init__(self, first: Any, second: Any, adaptive: bool = False) -> None:
        super().__init__(first=first, second=second, adaptive=adaptive)
        self.first, self.second, self.adaptive = first, second, bool(adaptive)
        self.name = f"{'adaptive ' if self.adaptive else ''}sequential({_label(first, second)})"
        self.seedable = _seedable(first, second)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        first = np.asarray(self.first.sample(dataset, n, rng), dtype=float).reshape(n, -1)
        second = np.asarray(self.second.sample(dataset, n, rng), dtype=float).reshape(n, -1)
        if self.adaptive:
            reference = np.asarray(self.second.sample(np.zeros_like(dataset), n, rng), dtype=float).reshape(n, -1)
            second = np.where(first[:, :1] >= 0, second, reference)
        return np.hstack([first, second])

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.first.default_pairs() if hasattr(self.first, "default_pairs") else []

    @property
    def theory_law(self) -> Any:
        """The product law when both parts are shifts of one noise family and scale on the same default pair.

        Independent coordinates: Laplace (or Gaussian) noise of one scale with
        the shifts side by side, so KL and Renyi add (CBDP appendix Thms 11, 12);
        None otherwise (adaptive, different pairs, families or scales).
        """
        laws = [getattr(part, "theory_law", None) for part in (self.first, self.second)]
        if self.adaptive or not _same_pairs(self.first, self.second):
            return None
        if all(type(law) is LaplaceShift for law in laws) and laws[0].scale == laws[1].scale:
            return LaplaceShift(laws[0].scale, laws[0].shift + laws[1].shift)
        if all(type(law) is GaussianShift for law in laws) and laws[0].sigma == laws[1].sigma:
            return GaussianShift(laws[0].sigma, laws[0].shift + laws[1].shift)
        return None


def _same_pairs(first: Any, second: Any) -> bool:
    """Whether two mechanisms' first default pairs are the same datasets."""
    pairs = [getattr(part, "default_pairs", list)() for part in (first, second)]
    if not all(pairs):
        return False
    (d1, e1), (d2, e2) = pairs[0][0], pairs[1][0]
    return all(np.shape(a) == np.shape(b) and np.array_equal(a, b) for a, b in ((d1, d2), (e1, e2)))


class Parallel(BaseMechanism):
    """(M1(D1), M2(D2)) on disjoint blocks of one dataset: rows before ``split`` to M1, the rest to M2 (CBDP Thm 3).

    A record changes in one block only, so a neighbouring pair moves one
    block; :meth:`pairs` builds the two composed pairs of a pair per block.

    Parameters
    ----------
    first, second : Mechanism
    split : int
        The number of leading rows (records, or answers of a 1-D vector) that form D1.
    """

    name = "parallel"
    description = "(M1(D1), M2(D2)) on the two blocks of a dataset, outputs concatenated"
    privacy_claim = "Gamma^(H1+H2) <= max(eps1, eps2) on disjoint data (CBDP Thm 3)"

    def __init__(self, first: Any, second: Any, split: int) -> None:
        super().__init__(first=first, second=second, split=split)
        if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or split < 1:
            raise ValueError(f"split must be a positive integer (the rows of D1). Found {split!r}.")
        self.first, self.second, self.split = first, second, int(split)
        self.name = f"parallel({_label(first, second)})"
        self.seedable = _seedable(first, second)

    def blocks(self, dataset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D1, D2): the rows before and from ``split``."""
        if len(dataset) <= self.split:
            raise ValueError(
                f"a parallel composition's dataset needs more than split = {self.split} rows (D1, then D2). "
                f"Found {len(dataset)}."
            )
        return dataset[: self.split], dataset[self.split:]

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        d1, d2 = self.blocks(dataset)
        first = np.asarray(self.first.sample(d1, n, rng), dtype=float).reshape(n, -1)
        second = np.asarray(self.second.sample(d2, n, rng), dtype=float).reshape(n, -1)
        return np.hstack([first, second])

    @staticmethod
    def pairs(pair1: Sequence[np.ndarray], pair2: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The composed pairs of neighbouring pairs (d1, d1') and (d2, d2'): the change in D1, then in D2."""
        (d1, e1), (d2, e2) = (tuple(np.asarray(x, dtype=float) for x in pair) for pair in (pair1, pair2))
        for block, other in ((d1, d2), (e1, d2), (d1, e2)):
            if block.ndim != other.ndim or block.shape[1:] != other.shape[1:]:
                raise ValueError(
                    f"parallel composition stacks D1 on D2: their records must have one shape. "
                    f"Found {block.shape} and {other.shape}."
                )
        whole = np.concatenate([d1, d2])
        return [(whole, np.concatenate([e1, d2])), (whole, np.concatenate([d1, e2]))]


class Mixture(BaseMechanism):
    """lambda M1 + (1 - lambda) M2: each output from M1 with probability ``weight``, else from M2 (CBDP Thm 2).

    An independent coin per output; both mechanisms must have one output width.

    Parameters
    ----------
    first, second : Mechanism
    weight : float
        lambda, in [0, 1].
    """

    name = "mixture"
    description = "each output from M1 with probability lambda, else from M2"
    privacy_claim = "Gamma^H <= max(eps1, eps2) for f-divergences (CBDP Thm 2)"

    def __init__(self, first: Any, second: Any, weight: float = 0.5) -> None:
        super().__init__(first=first, second=second, weight=weight)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
            raise ValueError(f"weight must be a probability in [0, 1]. Found {weight!r}.")
        self.first, self.second, self.weight = first, second, float(weight)
        self.name = f"mixture({_label(first, second)}, lambda={self.weight:g})"
        self.seedable = _seedable(first, second)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        coins = rng.random(n) < self.weight
        first = np.asarray(self.first.sample(dataset, n, rng), dtype=float).reshape(n, -1)
        second = np.asarray(self.second.sample(dataset, n, rng), dtype=float).reshape(n, -1)
        if first.shape != second.shape:
            raise ValueError(
                f"a mixture mixes mechanisms with the same range; their outputs have shapes {first.shape} and "
                f"{second.shape}: choose mechanisms with the same output dimension."
            )
        return np.where(coins[:, None], first, second)

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.first.default_pairs() if hasattr(self.first, "default_pairs") else []


class PostProcessed(BaseMechanism):
    """g(M(D)): a matrix A (y -> A y), or ``"square"`` (y -> y^2) or ``"append-square"`` (y -> (y, y^2)) (CBDP Thm 1).

    Parameters
    ----------
    mechanism : Mechanism
    mapping : matrix (sequence of rows) or one of :data:`MAPS`
    """

    name = "post-processing"
    description = "g(M(D)) for a matrix or a named map g"
    privacy_claim = "Gamma^I(g(M)) <= eps when i o g is in H for every i in I (CBDP Thm 1)"

    def __init__(self, mechanism: Any, mapping: str | Sequence[Sequence[float]]) -> None:
        super().__init__(mechanism=mechanism, mapping=mapping)
        if isinstance(mapping, str) and mapping not in MAPS:
            raise ValueError(f"map must be a matrix or one of {MAPS}. Found {mapping!r}.")
        self.mechanism, self.mapping = mechanism, mapping
        self.name = f"{mapping if isinstance(mapping, str) else 'linear map'}({_label(mechanism)})"
        self.seedable = _seedable(mechanism)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        outputs = np.asarray(self.mechanism.sample(dataset, n, rng), dtype=float).reshape(n, -1)
        encoder = getattr(self.mechanism, "structure", None)
        if (isinstance(encoder, StructureEncoder) and encoder.structural) or np.any(np.abs(outputs) > MAX_OUTPUT):
            # the encoded columns of structure (audit.sampling.structure) are capaudit's, not outputs a map can be applied to
            raise MechanismError(
                f"mechanism {_label(self.mechanism)!r} returned outputs that are NaN, infinite, beyond "
                f"+-{MAX_OUTPUT:g} or of a changing length, to which the map of a post-processing check does not "
                "apply; audit the mechanism itself (such outputs are evidence there) or make it return finite numbers"
            )
        return apply_map(outputs, self.mapping)

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.mechanism.default_pairs() if hasattr(self.mechanism, "default_pairs") else []


def apply_map(outputs: np.ndarray, mapping: str | Sequence[Sequence[float]]) -> np.ndarray:
    """g(y) for every row y of ``outputs``: a matrix A gives A y; ``"square"`` y**2 elementwise,
    ``"append-square"`` (y, y**2)."""
    if isinstance(mapping, str):
        if mapping not in MAPS:
            raise ValueError(f"map must be a matrix or one of {MAPS}. Found {mapping!r}.")
        return outputs**2 if mapping == "square" else np.hstack([outputs, outputs**2])
    matrix = np.asarray(mapping, dtype=float)
    if matrix.shape[1] != outputs.shape[1]:
        raise ValueError(
            f"map has {matrix.shape[1]} column(s) but the mechanism's outputs have {outputs.shape[1]} coordinate(s); "
            f"give a matrix with {outputs.shape[1]} column(s)."
        )
    return outputs @ matrix.T
