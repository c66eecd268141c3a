"""The mechanism protocol, the base class of built-ins and adapters, and output checks.

A mechanism maps a dataset (a numpy array) to n independent random outputs
of shape (n, d) (docs/design.md, "Contract: config"; docs/architecture.md,
"Mechanisms").  User code only has to satisfy :class:`Mechanism`; built-ins
and library adapters derive from :class:`BaseMechanism`, which adds what the
audit uses to compare attacks with theory (output laws, the closed-form
law of :mod:`audit.theory.table`, worst-case neighbouring pairs).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from audit.sampling.errors import MechanismError
from audit.sampling.structure import StructureEncoder, output_array

Pair = tuple[np.ndarray, np.ndarray]
"""A neighbouring pair of datasets (d, d')."""

FLOAT_UNSAFE = "of the values only: the float outputs are not private (a floating-point sampler, Mironov 2012)"
"""What a mechanism that is not float-safe (:attr:`BaseMechanism.float_safe`) adds to its true privacy."""


@runtime_checkable
class Mechanism(Protocol):
    """What the audit needs from any mechanism.

    Attributes
    ----------
    name : str
        Registry name, or ``"package.module:function"`` for user code.
    params : dict
        The parameters it was built with.
    """

    name: str
    params: dict

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """Return n independent outputs on ``dataset``, shape (n, d)."""
        ...


def check_output(out: Any, n: int, expected_dim: int | None = None) -> np.ndarray:
    """Validate a mechanism's outputs and return them as a float array of shape (n, d).

    Parameters
    ----------
    out : array-like
        What the mechanism returned: shape (n, d), or (n,) read as d = 1.
    n : int
        The number of outputs asked for.
    expected_dim : int or None
        The width d of earlier outputs of the same mechanism; None accepts any d.

    Returns
    -------
    numpy.ndarray of float, shape (n, d)

    Raises
    ------
    MechanismError
        On non-numeric values, NaN or inf, a number of rows other than n, more
        than two dimensions, or a width other than ``expected_dim``.
    """
    array = output_array(np.asarray(out), n)
    if expected_dim is not None and array.shape[1] != expected_dim:
        raise MechanismError(
            f"mechanism output width changed: earlier outputs had d = {expected_dim}. "
            f"Found d = {array.shape[1]}."
        )
    if not np.all(np.isfinite(array)):
        bad = int(np.count_nonzero(~np.isfinite(array)))
        raise MechanismError(f"mechanism outputs must be finite. Found {bad} NaN or inf values.")
    return array



def sample_coupled(mechanism: Any, datasets, n: int, seed) -> tuple[list[Any], bool]:
    """n outputs on every dataset from clones of one generator (common random numbers).

    Returns the raw outputs, in the order of ``datasets``, and whether the
    mechanism spent the same randomness on every dataset (the generators end
    in one state).  Without that, row i of two outputs did not come from the
    same random numbers and the rows cannot be paired; with it, they can when
    the mechanism spends row i's numbers on row i, as vectorised samplers do.
    A mechanism that ignores the generator leaves every state untouched: its
    rows are independent pairs.

    Parameters
    ----------
    mechanism : Mechanism
    datasets : sequence of numpy.ndarray
    n : int
    seed : anything :func:`numpy.random.default_rng` accepts
    """
    outputs, states = [], []
    for dataset in datasets:
        generator = np.random.default_rng(seed)
        outputs.append(mechanism.sample(dataset, n, generator))
        states.append(generator.bit_generator.state)
    return outputs, all(state == states[0] for state in states)

class BaseMechanism:
    """Base class of built-in, buggy and adapter mechanisms.

    Subclasses define ``name``, ``description`` and ``privacy_claim`` (the
    generic statement shown by ``capaudit mechanisms``), store their
    parameters in ``__init__`` (keyword arguments with defaults: the registry
    reads them from the signature), and implement ``_sample``.  ``sample``
    checks every batch with :func:`check_output`.

    Attributes
    ----------
    name, description, privacy_claim : str
    params : dict
        The parameters as given, after defaults.
    library_version : str or None
        Version of the wrapped library; None for built-ins.
    seedable : bool
        Whether ``rng`` fully determines the outputs.
    true_epsilon : float or None
        The mechanism's exact pure-DP epsilon over its neighbouring inputs
        (``inf`` when it is not epsilon-DP for any epsilon), or None when it
        is not known or the mechanism is not meant to be pure DP.
    float_safe : bool or None
        Whether its float64 outputs carry no more about the input than their
        values (the representation layer, ``floatbits``, finds nothing beyond
        the values' privacy): True for samplers exact in floating point
        (snapping) and for outputs on a grid (counts, indices, categories);
        False for noise drawn in floating point and added to a data-dependent
        value (numpy's Laplace or Gaussian: Mironov 2012), whose privacy then
        holds of the values only; None when not stated.
    input_relation : str or None
        The neighbour notion of an input that is a vector of query answers
        or counts, not records (a key of
        :data:`audit.results.provenance.INPUT_RELATIONS`): the audited pairs are
        checked against it, not by counting records; None for records.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    privacy_claim: ClassVar[str]
    float_safe: ClassVar[bool | None] = None
    input_relation: ClassVar[str | None] = None
    library_version: str | None = None
    seedable: bool = True
    true_epsilon: float | None = None

    def __init__(self, **params: Any) -> None:
        self.params = params

    @property
    def true_privacy(self) -> str:
        """The mechanism's actual privacy at its parameters, in words (:meth:`of_values` when not float-safe)."""
        if self.true_epsilon is None:
            return self.of_values(self.privacy_claim)
        if np.isinf(self.true_epsilon):
            return "not epsilon-DP for any finite epsilon"
        return self.of_values(f"{self.true_epsilon:g}-DP (pure)")

    def of_values(self, privacy: str) -> str:
        """``privacy`` with :data:`FLOAT_UNSAFE` after it when the mechanism is not float-safe."""
        return f"{privacy}; {FLOAT_UNSAFE}" if self.float_safe is False else privacy

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """n independent outputs on ``dataset``, shape (n, d), encoded by :class:`audit.sampling.structure.StructureEncoder`.

        Outputs that are NaN, infinite or of a changing width are evidence,
        encoded in a fixed finite layout (:mod:`audit.sampling.structure`).
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer. Found {n!r}.")
        return self.structure.encode(self._sample(np.asarray(dataset, dtype=float), int(n), rng), int(n))

    @property
    def structure(self) -> StructureEncoder:
        """The layout of this mechanism's outputs (:mod:`audit.sampling.structure`), made on first use."""
        if "_structure" not in vars(self):  # subclasses need not call BaseMechanism.__init__
            self._structure = StructureEncoder()
        return self._structure

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[Any, Any] | None:
        """The 1-D laws of the outputs on d and d' (frozen ``scipy.stats`` laws or :mod:`audit.theory.laws`' laws), or
        None when not 1-D or unknown."""
        return None

    @property
    def theory_law(self) -> Any:
        """The closed-form family of the default pair's output laws (:mod:`audit.theory.table`), or None.

        By default only a pure-DP epsilon is known: ``true_epsilon`` bounds
        the DP divergence of every attack class.
        """
        from audit.theory.table import PureDP

        return None if self.true_epsilon is None else PureDP(self.true_epsilon)

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Neighbouring inputs (d, d') that exercise the mechanism's worst case."""
        return []

    def __repr__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.params.items())
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True)
class MechanismInfo:
    """One line of ``capaudit mechanisms``: what a registry entry is and whether it can be built.

    Attributes
    ----------
    name : str
    kind : str
        ``"builtin"``, ``"buggy"`` or ``"adapter"``.
    description : str
    parameters : dict
        Parameter name -> default value (:data:`REQUIRED` when there is none).
    true_privacy : str
    float_safe : bool or None
        :attr:`BaseMechanism.float_safe` (None: not stated, e.g. adapters).
    requires : tuple of str
        Modules that must import for the entry to be usable (adapters' libraries).
    install_hint : str
        What to run when a required module is missing, e.g. ``install_hint("opendp")``.
    """

    name: str
    kind: str
    description: str
    parameters: dict = field(default_factory=dict)
    true_privacy: str = ""
    requires: tuple[str, ...] = ()
    install_hint: str = ""
    float_safe: bool | None = None

    @property
    def available(self) -> bool:
        return all(_import_error(module) is None for module in self.requires)

    @property
    def availability(self) -> str:
        """``"available"``, or ``"unavailable: <install hint> (<import error>)"``."""
        errors = [error for error in map(_import_error, self.requires) if error is not None]
        if not errors:
            return "available"
        return f"unavailable: {self.install_hint or 'install ' + ', '.join(self.requires)} ({errors[0]})"


@contextmanager
def library_import_path() -> Iterator[None]:
    """``sys.path`` without the current directory for the duration: where capaudit imports its libraries.

    ``python -m`` and an interactive session put the current directory
    first on ``sys.path``; an ``opendp.py`` there would otherwise be
    imported in place of the OpenDP library when an adapter is built.  Only
    a config's ``callable`` imports from the config's folder
    (:func:`audit.config.import_path.user_import_path`).
    """
    saved, here = sys.path[:], os.getcwd()
    sys.path[:] = [entry for entry in saved if os.path.abspath(entry or os.curdir) != here]
    try:
        yield
    finally:
        sys.path[:] = saved


@lru_cache(maxsize=None)
def _import_error(module: str) -> str | None:
    """None if ``module`` imports (never from the current directory), else the error in one line (cached)."""
    try:
        with library_import_path():
            importlib.import_module(module)
    except Exception as error:  # a broken install raises more than ImportError (e.g. diffprivlib)
        return f"{type(error).__name__}: {error}"
    return None


REQUIRED = "<required>"
"""Marks a parameter without a default in :attr:`MechanismInfo.parameters`."""


class CallableMechanism:
    """A user function ``f(dataset, n, rng) -> (n, d)`` wrapped as a mechanism.

    Exceptions of the user function and malformed outputs become
    :class:`MechanismError` naming the callable; the outputs' layout is fixed
    by the first call and outputs that are NaN, infinite or of a changing
    width are encoded as evidence (:class:`audit.sampling.structure.StructureEncoder`).
    Nothing is known about its privacy.
    """

    description = "user mechanism"
    privacy_claim = true_privacy = "unknown (user code)"
    true_epsilon = None
    theory_law = None
    library_version = None
    seedable = True

    def __init__(self, name: str, function: Callable[..., Any], params: dict | None = None) -> None:
        self.name = name
        self.function = function
        self.params = dict(params or {})
        self.structure = StructureEncoder()

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        try:
            out = self.function(np.asarray(dataset), n, rng)
        except Exception as error:
            raise MechanismError(f"mechanism {self.name!r} raised {type(error).__name__}: {error}") from error
        try:
            return self.structure.encode(out, n)
        except MechanismError as error:
            raise MechanismError(f"mechanism {self.name!r}: {error}") from None

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> None:
        return None

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return []
