"""Sum queries released with additive noise: the Laplace, Gaussian and snapping mechanisms, and the exact release.

The input is an array of records of shape (m, k), one record per row (a 1-D
array is m records of one coordinate).  The query is the SUM over records,
f(D) = sum_rows D in R^k, and the sensitivity v bounds how much one record
moves each coordinate of f (docs/theory.md section 6).  True privacy is
stated in each class docstring and as ``true_epsilon``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.mechanisms.base import BaseMechanism, Pair
from audit.theory.laws import Laplace, LocationScaleLaw, Normal
from audit.theory.table import GaussianShift, LaplaceShift, PointMasses
from audit.config.validation import as_numbers, check_positive


def sensitivity_vector(sensitivity: Any) -> np.ndarray:
    """Per-coordinate sensitivities v (docs/theory.md section 6) as a 1-D array of positive floats."""
    try:
        v = np.atleast_1d(as_numbers(sensitivity, "sensitivity"))
    except ValueError:
        v = np.empty(0)  # not numbers (a table, a string, a bool): refused below with the accepted forms
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError(
            f"sensitivity must be a positive number or a non-empty list of positive numbers "
            f"(one per output coordinate). Found {sensitivity!r}."
        )
    return v


def sum_query(dataset: np.ndarray, dim: int | None = None) -> np.ndarray:
    """f(D) = sum of the records (rows) of D, shape (k,); checks k == ``dim`` when given."""
    records = dataset[:, None] if dataset.ndim == 1 else dataset
    if records.ndim != 2:
        raise ValueError(f"dataset must be an array of records of shape (m, k). Found shape {dataset.shape}.")
    if dim is not None and records.shape[1] != dim:
        raise ValueError(
            f"dataset records have {records.shape[1]} coordinate(s) but the sensitivity has {dim}; "
            f"give one sensitivity per coordinate. Found dataset shape {dataset.shape}."
        )
    return records.sum(axis=0)


class AdditiveNoiseMechanism(BaseMechanism):
    """Sum query plus i.i.d. noise of a fixed ``scale`` on each of the len(v) coordinates.

    Subclasses set ``v`` (per-coordinate sensitivities) and ``scale`` in
    ``__init__`` and define the noise (``_noise``) and its 1-D law (``_law``).
    """

    v: np.ndarray
    scale: float

    def _noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def _law(self, location: float) -> LocationScaleLaw:
        raise NotImplementedError

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return sum_query(dataset, self.v.size) + self._noise(rng, n)

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[LocationScaleLaw, LocationScaleLaw] | None:
        if self.v.size != 1:
            return None
        f, f_prime = (sum_query(np.asarray(x, dtype=float), 1)[0] for x in (d, d_prime))
        return self._law(f), self._law(f_prime)

    def default_pairs(self) -> list[Pair]:
        """Two records of zeros vs zeros and v: the sums differ by exactly v."""
        zero = np.zeros((2, self.v.size))
        return [(zero, np.vstack([zero[0], self.v]))]


class LaplaceMechanism(AdditiveNoiseMechanism):
    """Laplace mechanism on the sum query: f(D) + Lap(0, b) per coordinate.

    With per-coordinate sensitivities v (a scalar is a 1-D query), the noise
    scale is b = ||v||_1 / epsilon on every coordinate, the usual L1
    calibration, so the mechanism is **epsilon-DP** (pure) over datasets whose
    sums differ by at most |v_i| in each coordinate, tightly for the default
    pair f(D') - f(D) = v.  In docs/theory.md section 6's notation (scale 1/eps_b,
    shift v) this is eps_b = epsilon / ||v||_1; its ``theory_law`` is
    ``audit.theory.table.LaplaceShift(b, v)``.  These are the privacy of the real-valued
    mechanism, which the value-based attack classes see; sampled in float64
    it is the buggy ``textbook_laplace``, which the ``floatbits`` class
    refutes (``snapping_laplace`` is the float-safe counterpart).

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : float or list of float
        v: how much one record can move each coordinate of the sum.
    """

    name = "laplace"
    description = ("sum query + Laplace noise of scale ||v||_1/epsilon per coordinate (numpy's sampler: not "
                   "float-safe, floatbits refutes it; snapping_laplace is)")
    privacy_claim = "epsilon-DP (pure), tight"
    float_safe = False

    def __init__(self, epsilon: float = 1.0, sensitivity: float | list[float] = 1.0) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity)
        self.epsilon = self.true_epsilon = check_positive(epsilon, "epsilon")
        self.v = sensitivity_vector(sensitivity)
        self.scale = float(np.sum(self.v)) / self.epsilon

    def _noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.laplace(0.0, self.scale, size=(n, self.v.size))

    def _law(self, location: float) -> Laplace:
        return Laplace(location, self.scale)

    @property
    def theory_law(self) -> LaplaceShift:
        """Lap(0, b) against Lap(v, b) per coordinate: the default pair (docs/theory.md section 6)."""
        return LaplaceShift(self.scale, tuple(self.v.tolist()))


class GaussianMechanism(AdditiveNoiseMechanism):
    """Gaussian mechanism on the sum query: f(D) + N(0, sigma^2) per coordinate.

    Not epsilon-DP for any finite epsilon; its true privacy is Renyi-DP with
    D_alpha = alpha ||v||_2^2 / (2 sigma^2) and KL = ||v||_2^2 / (2 sigma^2)
    (CBDP appendix Thm 12; docs/theory.md section 6), tight for the default pair
    f(D') - f(D) = v.

    Parameters
    ----------
    sigma : float
        Noise standard deviation, > 0.
    sensitivity : float or list of float
        v: how much one record can move each coordinate of the sum.
    """

    name = "gaussian"
    description = "sum query + N(0, sigma^2) noise per coordinate (numpy's sampler: not float-safe, floatbits refutes it)"
    float_safe = False
    privacy_claim = "Renyi-DP alpha ||v||^2/(2 sigma^2); KL ||v||^2/(2 sigma^2); not pure DP"

    def __init__(self, sigma: float = 1.0, sensitivity: float | list[float] = 1.0) -> None:
        super().__init__(sigma=sigma, sensitivity=sensitivity)
        self.sigma = check_positive(sigma, "sigma")
        self.v = sensitivity_vector(sensitivity)
        self.scale = self.sigma

    @property
    def true_privacy(self) -> str:
        kl = float(np.sum(self.v**2)) / (2 * self.sigma**2)
        return self.of_values(f"Renyi-DP of order alpha: {kl:g} alpha; KL {kl:g}; not pure DP")

    def _noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(0.0, self.sigma, size=(n, self.v.size))

    def _law(self, location: float) -> Normal:
        return Normal(location, self.sigma)

    @property
    def theory_law(self) -> GaussianShift:
        """N(0, sigma^2) against N(v, sigma^2) per coordinate: the default pair (docs/theory.md section 6)."""
        return GaussianShift(self.sigma, tuple(self.v.tolist()))


class SnappingLaplace(BaseMechanism):
    """Mironov's snapping mechanism (CCS 2012, section 5.2): a Laplace release that is epsilon-DP in float64.

    In units of the sensitivity Delta (y = f(D) / Delta, bound b = B / Delta),
    the output is

        Delta * clamp_b(Lambda * round((clamp_b(y) + S lambda ln U*) / Lambda)),

    with S a uniform sign, U* uniform on (0, 1) with every float drawn with
    probability proportional to its spacing (a uniform 52-bit mantissa and a
    geometric exponent), Lambda the smallest power of two >= lambda, and
    lambda = (1 + 12 b eta) / (epsilon - 2 eta), eta = 2^-53, the calibration
    under which Mironov's Theorem 1 gives ((1 + 12 b eta) / lambda + 2 eta)-DP
    = **epsilon-DP** for b in (lambda, 2^46 lambda) (diffprivlib's
    ``Snapping`` calibrates the same way).  Outputs lie on the grid
    Delta Lambda Z (and at +-B): every output is an atom, and no atom's
    probability ratio between neighbours exceeds e^epsilon, so neither the
    float features nor the atom attack (:mod:`attacks.representation`) can
    refute the claim.  The theorem assumes a correctly rounded logarithm;
    numpy's is faithful to about one unit in the last place, far below the
    rounding to Lambda.  The default pair (sums 0 and Delta) is the worst case.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 2^-52.
    sensitivity : float
        Delta: how much one record can move the (scalar) sum.
    bound : float
        B: the sum and the output are clamped to [-B, B]; B / Delta must lie in
        (lambda, 2^46 lambda).
    """

    name = "snapping_laplace"
    description = "Mironov's snapping mechanism: clamp, Laplace from an exact-spacing uniform, round to 2^k, clamp"
    privacy_claim = "epsilon-DP (pure) in float64 (Mironov 2012, Theorem 1)"
    float_safe = True

    def __init__(self, epsilon: float = 1.0, sensitivity: float = 1.0, bound: float = 1000.0) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity, bound=bound)
        self.epsilon = self.true_epsilon = check_positive(epsilon, "epsilon")
        self.sensitivity = check_positive(sensitivity, "sensitivity")
        eta = 2.0**-53
        if self.epsilon <= 2 * eta:
            raise ValueError(f"epsilon must exceed 2^-52 for the snapping calibration. Found {epsilon!r}.")
        self.bound = check_positive(bound, "bound") / self.sensitivity
        self.noise_scale = (1.0 + 12.0 * self.bound * eta) / (self.epsilon - 2 * eta)
        if not self.noise_scale < self.bound < 2.0**46 * self.noise_scale:
            raise ValueError(
                f"bound / sensitivity must lie in (lambda, 2^46 lambda) = ({self.noise_scale:g}, "
                f"{2.0**46 * self.noise_scale:g}) for Mironov's theorem; raise or lower bound. Found bound={bound!r}."
            )
        self.grid = 2.0 ** np.ceil(np.log2(self.noise_scale))

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        y = np.clip(sum_query(dataset, 1)[0] / self.sensitivity, -self.bound, self.bound)
        sign = np.where(rng.integers(0, 2, size=n) == 1, 1.0, -1.0)
        noisy = y + sign * self.noise_scale * np.log(_uniform_by_spacing(rng, n))
        snapped = np.clip(self.grid * np.rint(noisy / self.grid), -self.bound, self.bound)
        return (self.sensitivity * snapped + 0.0)[:, None]  # + 0.0 turns -0.0 into 0.0: one zero, not two

    def default_pairs(self) -> list[Pair]:
        """Two records of zeros vs zeros and Delta: the sums differ by exactly the sensitivity."""
        return [(np.zeros((2, 1)), np.array([[0.0], [self.sensitivity]]))]


def _uniform_by_spacing(rng: np.random.Generator, n: int) -> np.ndarray:
    """n floats in (0, 1), each float u drawn with probability proportional to its spacing (Mironov's U*).

    A uniform 52-bit mantissa on the binade [2^-k, 2^(1-k)), k >= 1 geometric
    with P(k) = 2^-k (the binade's share of (0, 1)).
    """
    mantissa = rng.integers(0, 2**52, size=n, dtype=np.int64)
    binade = rng.geometric(0.5, size=n)
    return np.ldexp(1.0 + np.ldexp(mantissa.astype(np.float64), -52), -binade)


class NonPrivateMechanism(BaseMechanism):
    """Releases the sum query f(D) exactly: a point mass per dataset.

    Not private at all: every divergence between distinct outputs is
    infinite for any class that separates two points, which every attack
    class does (CBDP Lemma 2, docs/theory.md section 6); the IPM is 2.
    """

    name = "nonprivate"
    description = "releases the sum query exactly (a point mass)"
    privacy_claim = "not private (infinite epsilon, KL and Renyi)"

    def __init__(self) -> None:
        super().__init__()

    true_epsilon = float("inf")

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        f = sum_query(dataset)
        return np.broadcast_to(f, (n, f.size))

    def default_pairs(self) -> list[Pair]:
        return [(np.zeros((2, 1)), np.array([[0.0], [1.0]]))]

    theory_law = PointMasses()
