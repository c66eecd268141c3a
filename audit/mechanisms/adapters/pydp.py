"""PyDP's (Google's differential-privacy library) Laplace and Gaussian mechanisms, audited as they are.

``pydp.algorithms.numerical_mechanisms.LaplaceMechanism(epsilon, sensitivity)``
and ``GaussianMechanism(epsilon, delta, sensitivity)`` (sensitivity is the L2
sensitivity, exposed as ``l2_sensitivity``) release one output per
``add_noise(value)`` call; the adapter calls it in a tight loop per chunk.
They draw from the C++ library's own generator, which Python cannot seed:
outputs are not reproducible bit for bit (``seedable = False``).

Output laws: Google's samplers return multiples of a power of two, far
finer than the scale (docs/benchmarks.md, "Measurements behind
constants").  At that resolution the continuous law (Laplace with scale ``diversity``,
normal with standard deviation ``std``, both as the library reports them)
is a sound comparison.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from audit.mechanisms.adapters.library import GaussianNoise, LaplaceNoise, LibraryAdapter, per_call


class PyDPAdapter(LibraryAdapter):
    """Shared parts: build ``numerical_mechanisms.<mechanism_class>`` positionally, call it per output."""

    library = "python-dp"
    extra = "pydp"
    module = "pydp.algorithms.numerical_mechanisms"
    seedable = False
    mechanism_class: ClassVar[str]
    library_arguments: ClassVar[tuple[str, ...]]

    def _mechanism(self) -> Any:
        """The library's mechanism at the adapter's parameters; its errors become ``ValueError``."""
        arguments = [float(self.params[key]) for key in self.library_arguments]
        try:
            return getattr(self._import(), self.mechanism_class)(*arguments)
        except (TypeError, ValueError, RuntimeError) as error:
            raise ValueError(
                f"PyDP {self.mechanism_class} rejected {dict(zip(self.library_arguments, arguments))}: {error}"
            ) from None

    def _draw_chunk(self, value: float | int, size: int, seed: int) -> np.ndarray:
        return per_call(self._mechanism().add_noise, float(value), size)


class PyDPLaplace(LaplaceNoise, PyDPAdapter):
    """PyDP ``LaplaceMechanism``: x + Laplace(b), b = sensitivity / epsilon (the library's ``diversity``).

    Parameters
    ----------
    epsilon, sensitivity : float
        PyDP's own names; records are clamped to [0, sensitivity].
    n_jobs : int
        Processes drawing chunks.
    """

    name = "pydp.laplace"
    description = "PyDP LaplaceMechanism (Google DP library, discretised Laplace sampler)"
    privacy_claim = "pure epsilon-DP"
    mechanism_class = "LaplaceMechanism"
    library_arguments = ("epsilon", "sensitivity")

    def __init__(self, epsilon: float = 1.0, sensitivity: float = 1.0, n_jobs: int = 1) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self.scale = float(self._mechanism().diversity)

    @property
    def true_privacy(self) -> str:
        return f"pure {self.params['epsilon']:g}-DP (noise scale {self.scale:.6g})"


class PyDPGaussian(GaussianNoise, PyDPAdapter):
    """PyDP ``GaussianMechanism``: x + N(0, std²), std calibrated by the library for (epsilon, delta).

    Parameters
    ----------
    epsilon, delta, sensitivity : float
        PyDP's own names (sensitivity is its ``l2_sensitivity``); records are
        clamped to [0, sensitivity].
    n_jobs : int
        Processes drawing chunks.
    """

    name = "pydp.gaussian"
    description = "PyDP GaussianMechanism (Google DP library, analytic calibration, discretised sampler)"
    privacy_claim = "(epsilon, delta)-DP"
    mechanism_class = "GaussianMechanism"
    library_arguments = ("epsilon", "delta", "sensitivity")

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, sensitivity: float = 1.0, n_jobs: int = 1) -> None:
        super().__init__(epsilon=epsilon, delta=delta, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self.sigma = float(self._mechanism().std)

    @property
    def true_privacy(self) -> str:
        return f"({self.params['epsilon']:g}, {self.params['delta']:g})-DP with std = {self.sigma:.6g}"


ADAPTERS = (PyDPLaplace, PyDPGaussian)
