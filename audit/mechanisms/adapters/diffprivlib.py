"""diffprivlib's Laplace, GaussianAnalytic, Geometric and Snapping mechanisms, audited as they are.

diffprivlib (IBM) mechanisms take ``epsilon``, ``delta``, ``sensitivity`` (and
``lower`` / ``upper`` for Snapping) and release one output per
``randomise(value)`` call; there is no vector path (``randomise`` rejects
arrays), so the adapter calls it in a tight loop per chunk.

Seeding: diffprivlib's ``random_state`` accepts a ``numpy.random.RandomState``.
The adapter seeds one per chunk from the audit's ``rng``, so the outputs are
reproducible (``seedable = True``).  Without ``random_state`` diffprivlib
draws from ``secrets.SystemRandom``; the samplers are the same code, fed by
another uniform source, so the audited law is the library's law.

diffprivlib 0.6.6 fails to import with scikit-learn 1.9;
``pip install ".[diffprivlib]"`` (in a capaudit checkout) pins a scikit-learn it imports with.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from audit.mechanisms.adapters.library import (DiscreteLaplaceNoise, GaussianNoise, LaplaceNoise, LibraryAdapter,
                                              per_call)


class DiffprivlibAdapter(LibraryAdapter):
    """Shared parts: build ``diffprivlib.mechanisms.<mechanism_class>`` from the parameters, call it per output."""

    library = "diffprivlib"
    extra = "diffprivlib"
    module = "diffprivlib.mechanisms"
    seedable = True
    mechanism_class: ClassVar[str]

    def _mechanism(self, random_state: np.random.RandomState | None = None) -> Any:
        """The library's mechanism at the adapter's parameters; its errors become ``ValueError``."""
        library_params = {key: value for key, value in self.params.items() if key != "n_jobs"}
        try:
            return getattr(self._import(), self.mechanism_class)(**library_params, random_state=random_state)
        except (TypeError, ValueError) as error:
            raise ValueError(f"diffprivlib {self.mechanism_class} rejected {library_params}: {error}") from None

    def _draw_chunk(self, value: float | int, size: int, seed: int) -> np.ndarray:
        return per_call(self._mechanism(np.random.RandomState(seed)).randomise, value, size)


class DiffprivlibLaplace(LaplaceNoise, DiffprivlibAdapter):
    """diffprivlib ``Laplace``: x + Laplace(b), b = sensitivity / (epsilon - log(1 - delta)).

    Parameters
    ----------
    epsilon, delta, sensitivity : float
        diffprivlib's own names; records are clamped to [0, sensitivity].
    n_jobs : int
        Processes drawing chunks.
    """

    name = "diffprivlib.laplace"
    description = "diffprivlib Laplace (continuous Laplace sampler built from four uniforms)"
    privacy_claim = "(epsilon, delta)-DP; it is pure DP with epsilon' = epsilon - log(1 - delta)"
    mechanism_class = "Laplace"

    def __init__(self, epsilon: float = 1.0, delta: float = 0.0, sensitivity: float = 1.0, n_jobs: int = 1) -> None:
        super().__init__(epsilon=epsilon, delta=delta, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        # diffprivlib's public variance 2 b² gives the scale it samples with.
        self.scale = float(np.sqrt(self._mechanism().variance(0.0) / 2.0))

    @property
    def true_privacy(self) -> str:
        return (
            f"({self.params['epsilon']:g}, {self.params['delta']:g})-DP as claimed; "
            f"the noise scale {self.scale:.6g} makes it pure {self.true_epsilon:.6g}-DP"
        )


class DiffprivlibGaussianAnalytic(GaussianNoise, DiffprivlibAdapter):
    """diffprivlib ``GaussianAnalytic``: x + N(0, sigma²), sigma from Balle and Wang's analytic calibration.

    Parameters
    ----------
    epsilon, delta, sensitivity : float
        diffprivlib's own names (sensitivity is the L2 sensitivity); records
        are clamped to [0, sensitivity].
    n_jobs : int
        Processes drawing chunks.
    """

    name = "diffprivlib.gaussian_analytic"
    description = "diffprivlib GaussianAnalytic (analytic Gaussian mechanism, Balle and Wang 2018)"
    privacy_claim = "(epsilon, delta)-DP with the smallest sigma that achieves it"
    mechanism_class = "GaussianAnalytic"

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, sensitivity: float = 1.0, n_jobs: int = 1) -> None:
        super().__init__(epsilon=epsilon, delta=delta, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self.sigma = float(np.sqrt(self._mechanism().variance(0.0)))

    @property
    def true_privacy(self) -> str:
        return f"({self.params['epsilon']:g}, {self.params['delta']:g})-DP with sigma = {self.sigma:.6g}"


class DiffprivlibGeometric(DiscreteLaplaceNoise, DiffprivlibAdapter):
    """diffprivlib ``Geometric``: x + two-sided geometric noise, P(k) ∝ exp(-epsilon |k| / sensitivity).

    Parameters
    ----------
    epsilon : float
    sensitivity : int
        diffprivlib's own names; records are rounded and clamped to {0, ..., sensitivity}.
    n_jobs : int
        Processes drawing chunks.
    """

    name = "diffprivlib.geometric"
    description = "diffprivlib Geometric (two-sided geometric = discrete Laplace, on integers)"
    privacy_claim = "pure epsilon-DP"
    float_safe = True  # integer outputs
    mechanism_class = "Geometric"

    def __init__(self, epsilon: float = 1.0, sensitivity: int = 1, n_jobs: int = 1) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self._mechanism()
        self.a = float(epsilon) / sensitivity

    @property
    def true_privacy(self) -> str:
        return f"pure {self.params['epsilon']:g}-DP"


class DiffprivlibSnapping(DiffprivlibAdapter):
    """diffprivlib ``Snapping`` (Mironov 2012): clamp, add Laplace, round to a power of two, clamp.

    The output takes values on a lattice of spacing ``sensitivity`` times the
    power of two at or above 1 / epsilon, with atoms at ``lower`` and
    ``upper``; no continuous law describes it, so :meth:`output_laws` gives
    None.

    Parameters
    ----------
    epsilon, sensitivity, lower, upper : float
        diffprivlib's own names; records are clamped to [0, sensitivity] and
        the library clamps their sum to [lower, upper].
    n_jobs : int
        Processes drawing chunks.
    """

    name = "diffprivlib.snapping"
    description = "diffprivlib Snapping (Mironov's snapping mechanism against floating-point attacks)"
    privacy_claim = "pure epsilon-DP on [lower, upper]"
    float_safe = True  # Mironov's snapping
    mechanism_class = "Snapping"

    def __init__(
        self, epsilon: float = 1.0, sensitivity: float = 1.0, lower: float = 0.0, upper: float = 10.0, n_jobs: int = 1
    ) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity, lower=lower, upper=upper, n_jobs=n_jobs)
        self._check_params()
        self._mechanism()

    @property
    def true_privacy(self) -> str:
        return f"pure {self.params['epsilon']:g}-DP as claimed (Mironov 2012, section 5.2)"


ADAPTERS = (DiffprivlibLaplace, DiffprivlibGaussianAnalytic, DiffprivlibGeometric, DiffprivlibSnapping)
