"""OpenDP's Laplace (float and integer) and Gaussian measurements, audited as they are.

OpenDP (``make_laplace``, ``make_gaussian``) takes the noise ``scale`` and
proves a privacy map from an input distance ``d_in`` (here: ``sensitivity``)
to a privacy loss: ``epsilon = d_in / scale`` for Laplace (pure DP),
``rho = d_in**2 / (2 scale**2)`` for Gaussian (zero-concentrated DP).

Sampling: the adapter builds the measurement on a vector domain and passes a
vector of ``CHUNK_SIZE`` copies of the query value in one call; OpenDP adds
independent noise of the same scale to each coordinate, so each coordinate
has the law of the scalar measurement on that value, at a fraction of the
cost of one call per sample.  OpenDP draws from the operating system's
cryptographic generator and has no seed: its outputs are not reproducible
bit for bit (``seedable = False``).  Its calls release the GIL, so chunks
run in threads.

Output laws: on integers OpenDP samples the discrete Laplace law
P(k) ∝ exp(-|k| / scale) exactly (``scipy.stats.dlaplace``).  On floats it
samples a discrete Laplace / Gaussian on the lattice 2^k Z with OpenDP's
default k = -1074 (the smallest subnormal), then rounds to the nearest
float: the continuous law is then a sound comparison, the two differ by
float rounding only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.mechanisms.adapters.library import DiscreteLaplaceNoise, GaussianNoise, LaplaceNoise, LibraryAdapter


class OpenDPAdapter(LibraryAdapter):
    """Shared parts of the OpenDP adapters: the measurement on a scalar and on a vector domain."""

    library = "opendp"
    extra = "opendp"
    module = "opendp.prelude"
    seedable = False
    backend = "threading"

    def _measurement(self, vector: bool) -> Any:
        raise NotImplementedError

    def _privacy_loss(self) -> float:
        """OpenDP's privacy map of the scalar measurement at ``d_in = sensitivity``."""
        try:
            return float(self._measurement(vector=False).map(self.params["sensitivity"]))
        except Exception as error:  # OpenDPException on a parameter it rejects
            raise ValueError(f"OpenDP rejected the parameters {self.params}: {error}") from error

    def stated_claim(self) -> tuple[dict, str]:
        """OpenDP's privacy map at ``d_in = sensitivity``, in its measure: max-divergence (dp) or zCDP (zcdp)."""
        measure = str(self._measurement(vector=False).output_measure)
        loss = self._privacy_loss()
        divergence = {"MaxDivergence": "dp", "ZeroConcentratedDivergence": "zcdp"}[measure]
        return ({"divergence": divergence, "epsilon": loss},
                f"privacy map of {measure} at d_in = sensitivity = {self.params['sensitivity']:g}: {loss:.6g}")

    def _draw_chunk(self, value: float | int, size: int, seed: int) -> np.ndarray:
        return np.asarray(self._measurement(vector=True)([value] * size), dtype=float)

    def _space(self, vector: bool, atom_type: str, metric: str) -> tuple[Any, Any]:
        dp = self._import()
        dp.enable_features("contrib")
        nan = {"nan": False} if atom_type == "f64" else {}
        atom = dp.atom_domain(T=atom_type, **nan)
        if vector:
            return dp.vector_domain(atom), getattr(dp, f"{metric}_distance")(T=atom_type)
        return atom, dp.absolute_distance(T=atom_type)


class OpenDPLaplace(LaplaceNoise, OpenDPAdapter):
    """OpenDP ``make_laplace`` on floats: x + Laplace(scale), epsilon-DP with epsilon = sensitivity / scale.

    The continuous Laplace law is a sound comparison: OpenDP's lattice
    2^-1074 Z is finer than float rounding.

    Parameters
    ----------
    scale : float
        OpenDP's ``scale`` (the Laplace scale b; standard deviation b·sqrt(2)).
    sensitivity : float
        OpenDP's ``d_in``: records are clamped to [0, sensitivity].
    n_jobs : int
        Threads drawing chunks.
    """

    name = "opendp.laplace"
    description = "OpenDP make_laplace on floats (discrete Laplace on the lattice 2^-1074 Z, rounded to float)"
    privacy_claim = "pure epsilon-DP, epsilon = sensitivity / scale (OpenDP's privacy map)"
    float_safe = True  # OpenDP's samplers are exact in floating point

    def __init__(self, scale: float = 1.0, sensitivity: float = 1.0, n_jobs: int = 1) -> None:
        super().__init__(scale=scale, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self.epsilon = self._privacy_loss()
        self.scale = float(scale)

    def _measurement(self, vector: bool) -> Any:
        dp = self._import()
        return dp.m.make_laplace(*self._space(vector, "f64", "l1"), scale=float(self.params["scale"]))

    @property
    def true_privacy(self) -> str:
        return f"pure {self.epsilon:g}-DP (OpenDP's privacy map at d_in = {self.params['sensitivity']:g})"


class OpenDPLaplaceInteger(DiscreteLaplaceNoise, OpenDPAdapter):
    """OpenDP ``make_laplace`` on 64-bit integers: x + discrete Laplace, P(k) ∝ exp(-|k| / scale).

    Parameters
    ----------
    scale : float
        OpenDP's ``scale`` of the discrete Laplace law.
    sensitivity : int
        OpenDP's ``d_in``: records are rounded and clamped to {0, ..., sensitivity}.
    n_jobs : int
        Threads drawing chunks.
    """

    name = "opendp.laplace_int"
    description = "OpenDP make_laplace on integers (discrete Laplace, exact sampler)"
    privacy_claim = "pure epsilon-DP, epsilon = sensitivity / scale (OpenDP's privacy map)"
    float_safe = True  # integer outputs

    def __init__(self, scale: float = 1.0, sensitivity: int = 1, n_jobs: int = 1) -> None:
        super().__init__(scale=scale, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self.epsilon = self._privacy_loss()
        self.a = 1.0 / float(scale)

    def _measurement(self, vector: bool) -> Any:
        dp = self._import()
        return dp.m.make_laplace(*self._space(vector, "i64", "l1"), scale=float(self.params["scale"]))

    @property
    def true_privacy(self) -> str:
        return f"pure {self.epsilon:g}-DP (OpenDP's privacy map at d_in = {self.params['sensitivity']})"


class OpenDPGaussian(GaussianNoise, OpenDPAdapter):
    """OpenDP ``make_gaussian`` on floats: x + N(0, scale²), rho-zCDP with rho = sensitivity² / (2 scale²).

    The continuous normal law is a sound comparison: OpenDP's lattice
    2^-1074 Z is finer than float rounding.

    Parameters
    ----------
    scale : float
        OpenDP's ``scale`` (the standard deviation).
    sensitivity : float
        OpenDP's ``d_in`` (L2 distance): records are clamped to [0, sensitivity].
    n_jobs : int
        Threads drawing chunks.
    """

    name = "opendp.gaussian"
    description = "OpenDP make_gaussian on floats (discrete Gaussian on the lattice 2^-1074 Z, rounded to float)"
    privacy_claim = "rho-zCDP, rho = sensitivity² / (2 scale²) (OpenDP's privacy map)"
    float_safe = True  # OpenDP's samplers are exact in floating point

    def __init__(self, scale: float = 1.0, sensitivity: float = 1.0, n_jobs: int = 1) -> None:
        super().__init__(scale=scale, sensitivity=sensitivity, n_jobs=n_jobs)
        self._check_params()
        self.rho = self._privacy_loss()
        self.sigma = float(scale)

    def _measurement(self, vector: bool) -> Any:
        dp = self._import()
        return dp.m.make_gaussian(*self._space(vector, "f64", "l2"), scale=float(self.params["scale"]))

    @property
    def true_privacy(self) -> str:
        return (
            f"{self.rho:g}-zCDP (OpenDP's privacy map at d_in = {self.params['sensitivity']:g}), "
            f"i.e. Renyi DP of order alpha with epsilon = {self.rho:g}·alpha"
        )


ADAPTERS = (OpenDPLaplace, OpenDPLaplaceInteger, OpenDPGaussian)
