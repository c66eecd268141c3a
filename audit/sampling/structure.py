"""Structural outputs as evidence: a fixed-width, finite encoding of what a mechanism returns.

An output that is NaN or infinite, beyond :data:`MAX_OUTPUT` in magnitude,
whose length changes with the dataset (a histogram over the categories
present), or a call that raises instead of returning, is an observable
event, as much as any value: "the output is NaN", "the output has 2
coordinates" or "the mechanism raised" are sets whose probabilities under
M(D) and M(D') the dp and ipm count bounds compare exactly like any other
set.  The attacks need n rows of one finite width, so a mechanism's outputs
are encoded once, by the wrapper that checks them (:class:`StructureEncoder`,
used by ``BaseMechanism.sample`` and ``CallableMechanism.sample``):

* regular outputs (finite, within :data:`MAX_OUTPUT`, the width of the first
  call) are passed on unchanged: the encoding is the identity, and an audit
  of a mechanism that never shows structure is the audit it was;
* from the first structural output on, every output is encoded as
  ``width`` value columns (the widest output seen, at most
  :data:`MAX_STRUCTURAL_WIDTH`) (NaN and inf replaced by 0, magnitudes clipped to
  :data:`MAX_OUTPUT`, missing coordinates 0, extra ones cut) followed by the
  :data:`INDICATORS` columns: the output's length (-1 for a call that
  raised) and, per row, its numbers of NaN, of +inf (or > :data:`MAX_OUTPUT`)
  and of -inf (or < -MAX_OUTPUT) coordinates.

The encoding is a fixed function of the output once its layout is fixed,
so it is post-processing: it never raises a divergence over ``all`` and the
intervals keep their level.  The layout must be fixed before the audit's
samples are drawn, from draws of their own: a mechanism's wrapper is copied
into the forked children that draw the samples, and a child that first sees
structure would widen only its own copy.  :func:`fix_layout` draws a few
outputs on every dataset of the audit in a forked child, copies the layout
it ends with into the audit's mechanism and fixes it (the dataset search,
:func:`audit.inputs.pair_search.search_pairs`, copies the layout its forked screening
children end with before that).  A fixed layout never changes: structure
that the pilot draws did not show (a NaN with probability 0.5 %) is written
*in band*, as codes beyond :data:`MAX_OUTPUT` that no regular value takes
(:data:`CODES`: a coordinate that is NaN, +-inf or beyond +-MAX_OUTPUT,
absent from a shorter output, the last column of a longer output, every
column of a call that raised), so it stays evidence in the same columns
instead of changing the width of its chunk.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from audit.sampling.errors import MechanismError
from audit.sampling.isolation import FORK, fork

MAX_OUTPUT = 1e30
"""Largest magnitude passed on as a value: it and the :data:`CODES` stay within float32's range (3.4e38; the
tree classes read their features as float32), and their cubes' squares within float64's."""
MAX_STRUCTURAL_WIDTH = 100
"""Most value columns of a structural layout: an output whose length changes keeps its first this many values and
its length (the ``length`` indicator), so that one very wide output does not widen every row of the audit."""
INDICATORS = ("length", "nan", "posinf", "neginf")
"""The structural columns appended to the value columns once a mechanism's outputs show structure."""
CODES = {"posinf": 2 * MAX_OUTPUT, "neginf": -2 * MAX_OUTPUT, "nan": 3 * MAX_OUTPUT, "absent": -3 * MAX_OUTPUT,
         "longer": 4 * MAX_OUTPUT, "raised": -4 * MAX_OUTPUT}
"""In-band codes of the structure a fixed identity layout has no column for (module docstring): beyond
MAX_OUTPUT, so that no regular value takes them, and distinct in float32."""
EVENTS = ("nan", "inf", "length", "raised")
"""The kinds of structure :meth:`StructureEncoder.events` counts: a NaN coordinate, an infinite one (or beyond
+-MAX_OUTPUT), an output of another length than the layout's width, a call that raised."""
RAISED_LENGTH = -1
"""The ``length`` indicator of a call that raised (no output), in a structural layout."""


class StructureEncoder:
    """The layout of one mechanism's outputs: fixed by its first call, widened once by the first structure.

    Attributes
    ----------
    width : int or None
        Value columns (None before the first call).
    structural : bool
        Whether the :data:`INDICATORS` columns are appended (from the first
        structural output on).
    fixed : bool
        Whether the layout is fixed (:func:`fix_layout`): it then never
        changes, and structure it has no column for is written in band
        (:data:`CODES`).
    """

    def __init__(self) -> None:
        self.width: int | None = None
        self.structural = False
        self.fixed = False

    def encode(self, out: Any, n: int) -> np.ndarray:
        """The outputs of one call as a finite float array of shape (n, width) or (n, width + 4).

        Raises
        ------
        MechanismError
            On non-numeric values or a number of rows other than n.
        """
        values, lengths = output_rows(out, n)
        regular = bool(np.all(np.isfinite(values)) and np.all(np.abs(values) <= MAX_OUTPUT))
        uniform = bool(np.all(lengths == values.shape[1]))
        if self.width is None:
            self.width = values.shape[1]
        if not self.structural:
            if regular and uniform and values.shape[1] == self.width:
                return values
            if self.fixed:
                return encode_in_band(values, lengths, self.width)
            self.structural = True
            self.width = min(max(self.width, values.shape[1]), MAX_STRUCTURAL_WIDTH)
        return encode_structure(values, lengths, self.width)

    def raised(self, n: int) -> np.ndarray:
        """n rows of the event "the call raised" in this (fixed) layout: length -1, or every column its code."""
        if self.structural:
            return np.hstack([np.zeros((n, self.width)), np.tile([RAISED_LENGTH, 0.0, 0.0, 0.0], (n, 1))])
        return np.full((n, self.width), CODES["raised"])

    def is_raised(self, rows: np.ndarray) -> np.ndarray:
        """Which encoded rows are the event "the call raised" (:meth:`raised`), shape (n,)."""
        if self.structural:
            return rows[:, self.width] == RAISED_LENGTH
        return np.all(rows == CODES["raised"], axis=1)

    def events(self, rows: np.ndarray) -> dict[str, int]:
        """How many encoded rows (this layout's) show each kind of structure: :data:`EVENTS` -> count.

        A row counts once per kind it shows (a row with a NaN and an infinite
        coordinate counts under both); a call that raised counts under
        ``raised`` only.
        """
        if len(rows) == 0 or self.width is None:
            return dict.fromkeys(EVENTS, 0)
        raised = self.is_raised(rows)
        if self.structural:
            lengths, counts = rows[:, self.width], rows[:, self.width + 1:]
            found = {"nan": counts[:, 0] > 0, "inf": (counts[:, 1] > 0) | (counts[:, 2] > 0),
                     "length": lengths != self.width}
        else:
            values = rows[:, : self.width]
            found = {"nan": np.any(values == CODES["nan"], axis=1),
                     "inf": np.any((values == CODES["posinf"]) | (values == CODES["neginf"]), axis=1),
                     "length": np.any((values == CODES["absent"]) | (values == CODES["longer"]), axis=1)}
        return {**{kind: int(np.count_nonzero(seen & ~raised)) for kind, seen in found.items()},
                "raised": int(np.count_nonzero(raised))}

    def adopt(self, width: int | None, structural: bool) -> None:
        """Take the layout a forked child's copy of this encoder ended with (a widening of this one)."""
        if width is not None and not self.fixed:
            self.width, self.structural = width, structural


def encode_structure(values: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """``width`` finite value columns and the :data:`INDICATORS` columns of raw outputs (module docstring).

    Parameters
    ----------
    values : numpy.ndarray, shape (n, L)
        Raw outputs, NaN-padded past each row's length.
    lengths : numpy.ndarray of int, shape (n,)
        Each row's number of coordinates.
    width : int
        Value columns kept.
    """
    kept = np.full((len(values), width), np.nan)
    kept[:, : min(width, values.shape[1])] = values[:, :width]
    present = np.arange(values.shape[1]) < lengths[:, None]
    raw = np.where(present, values, 0.0)  # padding is no NaN of the output
    indicators = np.column_stack([
        lengths,
        np.count_nonzero(np.isnan(raw), axis=1),
        np.count_nonzero(raw > MAX_OUTPUT, axis=1),
        np.count_nonzero(raw < -MAX_OUTPUT, axis=1),
    ])
    encoded = np.clip(np.nan_to_num(kept, nan=0.0, posinf=MAX_OUTPUT, neginf=-MAX_OUTPUT), -MAX_OUTPUT, MAX_OUTPUT)
    return np.hstack([encoded, indicators.astype(float)])


def encode_in_band(values: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """Raw outputs in a fixed identity layout of ``width`` columns, structure written as :data:`CODES`.

    Coordinates that are NaN, or beyond +-MAX_OUTPUT (infinities included),
    get their code; coordinates past a row's length get ``absent``; a row
    longer than ``width`` is cut to ``width`` columns and its last one gets
    ``longer``.  Regular coordinates pass unchanged.
    """
    raw = np.full((len(values), width), np.nan)
    raw[:, : min(width, values.shape[1])] = values[:, :width]
    present = np.arange(width) < lengths[:, None]
    kept = np.select(
        [~present, np.isnan(raw), raw > MAX_OUTPUT, raw < -MAX_OUTPUT],
        [CODES["absent"], CODES["nan"], CODES["posinf"], CODES["neginf"]],
        raw,
    )
    kept[lengths > width, width - 1] = CODES["longer"]
    return kept


def output_array(array: np.ndarray, n: int) -> np.ndarray:
    """A mechanism's outputs as floats of shape (n, d) ((n,) read as d = 1), or MechanismError naming the problem."""
    if array.dtype.kind not in "biuf":
        raise MechanismError(
            f"mechanism outputs must be real numbers (bool, int or float). Found dtype {array.dtype}."
        )
    array = array.astype(float, copy=False)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] != n:
        raise MechanismError(
            f"mechanism outputs must be one row per output asked for: a call with n = {n} must return shape "
            f"({n}, d) or ({n},). Found shape {array.shape}."
        )
    return array


def output_rows(out: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw outputs as a float array (n, L), rows NaN-padded to the longest, and each row's length.

    ``out`` is an (n, d) or (n,) array, or a sequence of n rows of possibly
    different lengths (None entries read as NaN).
    """
    try:
        array = np.asarray(out)
    except ValueError:  # ragged rows
        array = np.empty(0, dtype=object)
    if array.dtype != object:
        array = output_array(array, n)
        return array, np.full(n, array.shape[1])
    rows = [_row(row) for row in out] if hasattr(out, "__len__") else []
    if len(rows) != n:
        raise MechanismError(f"mechanism outputs must be one row per output asked for: a call with n = {n} must "
                             f"return {n} rows. Found {len(rows)}.")
    lengths = np.array([row.size for row in rows])
    values = np.full((n, max(lengths.max(initial=0), 1)), np.nan)
    for i, row in enumerate(rows):
        values[i, : row.size] = row
    return values, lengths


def _row(row: Any) -> np.ndarray:
    """One output row of a ragged sequence as floats (None -> NaN)."""
    items = np.atleast_1d(np.asarray(row, dtype=object)).ravel()
    try:
        return np.array([np.nan if item is None else float(item) for item in items], dtype=float)
    except (TypeError, ValueError):
        raise MechanismError(f"mechanism outputs must be real numbers. Found the row {row!r}.") from None


PILOT_OUTPUTS = 20
"""Outputs per dataset drawn by :func:`fix_layout` to see the structure of a mechanism's outputs."""
PILOT_SECONDS = 10.0
"""Longest :func:`fix_layout` waits for its draws (at most ``run.sample_timeout``)."""


def fix_layout(mechanism: Any, datasets: Sequence[np.ndarray], seed: int, timeout: float,
               on_drawn: Callable[[int, int], None] | None = None) -> None:
    """Fix the layout of ``mechanism``'s outputs before an audit samples it in forked children.

    Draws :data:`PILOT_OUTPUTS` outputs on every dataset in one forked child
    (:func:`audit.sampling.isolation.fork`, as the sampler's chunks) and copies the
    layout the child's encoder has after each dataset into the mechanism's
    encoder, for at most ``min(timeout, PILOT_SECONDS)`` seconds (a hanging
    or slow mechanism keeps the layout of the datasets drawn in time;
    failures are ignored here and reported by the sampler), so that every
    chunk drawn later starts from the same layout (module docstring).  The
    parent polls without blocking, so Ctrl-C reaches it at once.  Where
    the sampler draws in this process (:data:`audit.sampling.isolation.FORK` false),
    so does the pilot.  The layout is then fixed (when a dataset was drawn):
    later structure is written in band (module docstring).  A mechanism
    without an encoder (not wrapped by capaudit) is left as it is.
    ``on_drawn(k, len(datasets))`` is called before the first draw (k = 0)
    and as each dataset is drawn (a progress bar from the first call on).
    """
    encoder = getattr(mechanism, "structure", None)
    if not isinstance(encoder, StructureEncoder):
        return
    drawn = on_drawn or (lambda done, total: None)
    drawn(0, len(datasets))
    pilot = functools.partial(_pilot, mechanism, encoder, datasets, seed)
    if not FORK:  # the pilot widens this process's encoder itself
        pilot(send=lambda layout: None)
        drawn(len(datasets), len(datasets))
        encoder.fixed = encoder.width is not None
        return
    receiver, child = fork(pilot)
    deadline = time.monotonic() + min(timeout, PILOT_SECONDS)
    try:
        while time.monotonic() < deadline:
            if not receiver.poll(0):
                time.sleep(0.01)
                continue
            layout = receiver.recv()
            if layout is None:  # every dataset drawn
                break
            done, encoder.width, encoder.structural = layout
            drawn(done, len(datasets))
    except (EOFError, OSError):  # the child died (its pipe reads EOF): the sampler will say how
        pass
    finally:
        child.kill()
        child.join()
        receiver.close()
    encoder.fixed = encoder.width is not None


def _pilot(mechanism: Any, encoder: StructureEncoder, datasets: Sequence[np.ndarray], seed: int,
           send: Callable[[Any], None]) -> None:
    """Sample every dataset, sending the datasets done and the encoder's layout after each; None at the end."""
    rng = np.random.default_rng(seed)
    for done, dataset in enumerate(datasets, 1):
        if _pilot_draw(mechanism, dataset, rng):
            send((done, encoder.width, encoder.structural))
    send(None)


def _pilot_draw(mechanism: Any, dataset: np.ndarray, rng: np.random.Generator) -> bool:
    """Whether :data:`PILOT_OUTPUTS` outputs on ``dataset`` were drawn: in one call or, when it raises (a call
    that raises at random, 30 % of the time, fails on every dataset of a pair 1 time in 11), in one-output
    calls until one returns; a mechanism that raises on every call costs PILOT_OUTPUTS more."""
    for size in (PILOT_OUTPUTS,) + (1,) * PILOT_OUTPUTS:
        try:
            mechanism.sample(dataset, size, rng)
            return True
        except (Exception, SystemExit):
            continue
    return False
