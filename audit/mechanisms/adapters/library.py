"""The library adapters' base class and noise families: what the OpenDP, diffprivlib and PyDP adapters share.

The adapters themselves are in the sibling modules, registered by the
package (:mod:`audit.mechanisms.adapters`); see its docstring for what an
adapter releases and how libraries that draw one output per call are chunked.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
from joblib import Parallel, delayed

from audit.inputs.dataset_distance import RecordNeighbours
from audit.mechanisms.base import BaseMechanism
from audit.config.validation import install_hint
from audit.theory.table import GaussianShift, LaplaceShift

CHUNK_SIZE = 16384
"""Outputs drawn per library call (vector libraries) or per joblib task (per-call libraries)."""


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, read from its metadata without importing it."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class LibraryClaim:
    """A measurement's privacy map at one ``d_in``, as a ``[[claims]]`` table of capaudit.

    Attributes
    ----------
    table : dict
        ``divergence`` (``dp``, ``zcdp`` or ``profile``) and its values (``epsilon``, ``delta``, or
        ``epsilons`` and ``deltas``): what :mod:`audit.config.load` reads as a typed claim.
    source : str
        The claim's source in words: library, version, measure, ``d_in`` and the map's value.
    """

    table: dict
    source: str


class LibraryAdapter(RecordNeighbours, BaseMechanism):
    """Base class of the adapters: the clamped-sum query, chunked sampling, library import.

    Subclasses set ``library`` (the distribution name), ``extra`` (capaudit's
    pip extra that installs it) and ``module`` (what to import), define
    ``__init__`` with the library's parameters (validating them by building
    the library's mechanism once), and implement :meth:`_draw_chunk`.
    Library objects are never kept on the adapter, so adapters pickle
    (joblib ships them to worker processes).

    Parameters
    ----------
    sensitivity : float
        Records are clamped to ``[0, sensitivity]``; the sum's sensitivity.
    n_jobs : int
        Chunks drawn at once with joblib (execution only: the outputs, and
        the privacy, do not depend on it).
    """

    library: ClassVar[str]
    extra: ClassVar[str]
    module: ClassVar[str]
    integer: ClassVar[bool] = False
    backend: ClassVar[str] = "loky"

    @property
    def library_version(self) -> str | None:  # type: ignore[override]
        return installed_version(self.library)

    @classmethod
    def install_hint(cls) -> str:
        """What to run when the library is missing or does not import."""
        return install_hint(cls.extra)

    def _import(self) -> ModuleType:
        """Import the library, or raise ``ValueError`` with the install hint."""
        try:
            return importlib.import_module(self.module)
        except Exception as error:  # a broken install raises more than ImportError
            raise ValueError(
                f"{self.name} needs {self.library}, which is unavailable: {self.install_hint()} "
                f"({type(error).__name__}: {error})."
            ) from error

    def _check_params(self) -> None:
        """Check what the adapter itself uses, ``n_jobs`` and ``sensitivity``; the library checks the rest."""
        n_jobs, sensitivity = self.params["n_jobs"], self.params["sensitivity"]
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
            raise ValueError(f"n_jobs must be a non-zero integer (-1: all cores). Found {n_jobs!r}.")
        kinds, kind = ((int, np.integer), "integer") if self.integer else ((int, float, np.number), "number")
        if isinstance(sensitivity, bool) or not isinstance(sensitivity, kinds) or not 0 < sensitivity < np.inf:
            raise ValueError(f"sensitivity must be a positive finite {kind}. Found {sensitivity!r}.")

    def query(self, dataset: np.ndarray) -> float | int:
        """Sum of the records, each clamped to ``[0, sensitivity]`` (rounded first for integer mechanisms).

        Parameters
        ----------
        dataset : array of shape (m,) or (m, 1)
            One scalar record per row.
        """
        records = np.asarray(dataset, dtype=float)
        if records.ndim == 2 and records.shape[1] == 1:
            records = records[:, 0]
        if records.ndim != 1:
            raise ValueError(
                f"{self.name} releases a sum of scalar records: the dataset must have shape (m,) or (m, 1). "
                f"Found shape {records.shape}."
            )
        if self.integer:
            return int(np.clip(np.rint(records), 0, self.params["sensitivity"]).sum())
        return float(np.clip(records, 0.0, self.params["sensitivity"]).sum())

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        value = self.query(dataset)
        sizes = [CHUNK_SIZE] * (n // CHUNK_SIZE) + ([n % CHUNK_SIZE] if n % CHUNK_SIZE else [])
        seeds = rng.integers(2**32, size=len(sizes))
        n_jobs = self.params["n_jobs"]
        if n_jobs == 1 or len(sizes) == 1:
            chunks = [self._draw_chunk(value, size, int(seed)) for size, seed in zip(sizes, seeds)]
        else:
            chunks = Parallel(n_jobs=n_jobs, backend=self.backend)(
                delayed(self._draw_chunk)(value, size, int(seed)) for size, seed in zip(sizes, seeds)
            )
        return np.concatenate(chunks)[:, None]

    def _draw_chunk(self, value: float | int, size: int, seed: int) -> np.ndarray:
        """``size`` outputs of the library's mechanism on ``value``; ``seed`` seeds it when it can be seeded."""
        raise NotImplementedError

    def library_claim(self, d_in: int, epsilons: Sequence[float] | None = None,
                      delta: float | None = None) -> LibraryClaim:
        """The claim the library states for neighbours (``d_in`` = 1 record): its ``epsilon`` and ``delta`` arguments.

        OpenDP's adapters override :meth:`stated_claim` with their privacy map at ``d_in = sensitivity``; the
        Opacus learner overrides this method (its accountant's epsilon at the claim's ``delta``).  A ``delta``
        given here is the library's own to state: :func:`audit.config.library_claims.library_claim_table` compares them.
        """
        if d_in != 1:
            raise ValueError(f"{self.name} states its claim for neighbouring datasets (one record apart); the pairs "
                             f"are {d_in} records apart: give neighbours (distance = 1).")
        table, words = self.stated_claim()
        return LibraryClaim(table, f"{self.library} {self.library_version}'s {words}")

    def stated_claim(self) -> tuple[dict, str]:
        """The library's claim as a claim table, and where it comes from in words: here its privacy arguments."""
        epsilon, delta = float(self.params["epsilon"]), float(self.params.get("delta", 0.0))
        return ({"divergence": "dp", "epsilon": epsilon, "delta": delta},
                f"privacy arguments epsilon = {epsilon:g}, delta = {delta:g} (neighbours one record apart)")

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Two records 0 against 0 and ``sensitivity``: the sums differ by exactly the sensitivity."""
        return [(np.zeros((2, 1)), np.array([[0.0], [float(self.params["sensitivity"])]]))]

    def _laws(self, d: np.ndarray, d_prime: np.ndarray, law: Callable[..., Any]) -> tuple[Any, Any]:
        """``law(loc=f(D)), law(loc=f(D'))``: the noise law centred at each dataset's query value."""
        return law(loc=self.query(d)), law(loc=self.query(d_prime))



class LaplaceNoise(LibraryAdapter):
    """Adapters whose noise is (up to float granularity) Laplace with scale ``self.scale``, set in ``__init__``.

    The mechanism is then the built-in ``laplace`` with the same scale and
    sensitivity: pure epsilon-DP with epsilon = sensitivity / scale, and the
    paper's closed forms (docs/theory.md section 6) are the built-in's.
    """

    scale: float

    @property
    def true_epsilon(self) -> float:
        return self.params["sensitivity"] / self.scale

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[Any, Any]:
        """Continuous Laplace laws at the library's scale."""
        from scipy import stats  # the exact laws only: not on a mechanism's import

        return self._laws(d, d_prime, partial(stats.laplace, scale=self.scale))

    @property
    def theory_law(self) -> LaplaceShift:
        """The built-in ``laplace``'s law at the library's scale and sensitivity."""
        return LaplaceShift(self.scale, (float(self.params["sensitivity"]),))


class GaussianNoise(LibraryAdapter):
    """Adapters whose noise is (up to float granularity) N(0, sigma²), ``self.sigma`` set in ``__init__``.

    The paper's closed forms are the built-in ``gaussian``'s at the same sigma
    and sensitivity (docs/theory.md section 6).
    """

    sigma: float

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[Any, Any]:
        """Normal laws at the library's sigma."""
        from scipy import stats  # the exact laws only: not on a mechanism's import

        return self._laws(d, d_prime, partial(stats.norm, scale=self.sigma))

    @property
    def theory_law(self) -> GaussianShift:
        """The built-in ``gaussian``'s law at the library's sigma and sensitivity."""
        return GaussianShift(self.sigma, (float(self.params["sensitivity"]),))


class DiscreteLaplaceNoise(LibraryAdapter):
    """Integer adapters whose noise is discrete Laplace, P(k) ∝ exp(-a |k|), ``self.a`` set in ``__init__``.

    Pure epsilon-DP with epsilon = a · sensitivity.  The paper's closed forms
    are for continuous noise, so only epsilon is known (the default ``theory_law``).
    """

    integer = True
    a: float

    @property
    def true_epsilon(self) -> float:
        return self.a * self.params["sensitivity"]

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[Any, Any]:
        """The exact laws, ``scipy.stats.dlaplace(a)`` centred at the integer sums."""
        from scipy import stats  # the exact laws only: not on a mechanism's import

        return self._laws(d, d_prime, partial(stats.dlaplace, self.a))


def per_call(randomise: Callable[[Any], float], value: Any, size: int) -> np.ndarray:
    """Call a one-output-per-call library ``size`` times in a tight loop."""
    return np.fromiter((randomise(value) for _ in range(size)), dtype=float, count=size)


def diffprivlib_hint() -> str:
    """diffprivlib's install hint; names the versions when it is installed but fails to import."""
    hint = install_hint("diffprivlib")
    version, sklearn = installed_version("diffprivlib"), installed_version("scikit-learn")
    if version is None:
        return hint
    return f"diffprivlib {version} failed to import with scikit-learn {sklearn}; the extra pins a compatible one: {hint}"
