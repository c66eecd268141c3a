"""A ``kl`` or ``renyi`` witness confirmed two ways at once: its delta-method interval and a clipped betting bound.

Where a claim's class holds the clip of the witness (``all`` and the trees,
:func:`attacks.bounded_witness.clipped_bound_applies`), the confirm sample of
a witness gives two lower bounds on the restricted divergence of that class:

* the delta-method bound of the witness itself (:mod:`attacks.witness_moments`), and
* the betting bound of the witness clipped to a range fixed on the training split
  (:mod:`attacks.bounded_witness`), valid at every n with no tail assumption.

Neither is tighter in general (docs/benchmarks.md: on Laplace pairs at 100 000
outputs they are within a few per cent of each other, each ahead on some
rows), and no rule fixed before the data picks the better one, so the error is
split: each bound at a / 2, a union bound (valid for coupled pairs, each
stream being iid on its own).  With probability >= 1 - a both hold, so the
larger one is a lower bound on max(theta_delta, theta_clipped), itself at
most the restricted divergence; the row's interval is the larger one, and
:meth:`ClippedWitnessEstimate.interval` names it.  A delta-method interval
with a caveat (heavy tail, few effective samples) counts for nothing, the
betting half still holds: such a row is no longer left untrusted.

The betting capital depends on the order of the values, so the confirm stage
summarises the witness with :class:`StreamedWitness`: its blocks are
computed in parallel (the witness, the clip, the rescaling) but fed to the
capital in block order, the drawing order fixed by the seed (chunk, then
position), so the numbers do not depend on ``n_jobs`` or the joblib backend.
The feed itself runs on up to four threads (P's and Q's sequences, each
capital and its mirror: independent processes, each fed in that order by one
thread).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.special import expit, logit

from attacks.betting import BettingSequence, in_threads
from attacks.bounded_witness import Rescaling, chosen_rescaling, clipped_bound_applies
from attacks.candidates import Candidate, Target
from attacks.estimate import DivergenceEstimate
from attacks.vocabulary import divergence_of

CLIPPED = "clipped witness"
"""The ``kind`` of a :class:`ClippedWitnessEstimate`'s record."""
DESIGN_LEVEL = 0.0125
"""a_0 of the bets: the one-sided error each mean gets at 95 % confidence (a / 2 to the betting half, a / 4 to each
mean); a tuning fixed before the data, the bounds are valid at any level."""
WINDOW = 96
"""Candidate means added on each side of a training mean (:func:`start_betting`)."""
WINDOW_WIDTH = 12.0
"""Half-width of that window in standard errors of the confirm sample's mean."""


def clipped_serves(target: Target, candidate: Candidate) -> bool:
    """Whether a clipped bound of the candidate's witness may be a row's interval: a ``kl`` or ``renyi`` target
    whose claim's class, or the witness's own (the rows of policy ``every`` serve every claim holding it), is
    closed under clipping (:func:`attacks.bounded_witness.clipped_bound_applies`)."""
    classes = [candidate.function_class] + ([target.claim_class] if target.claim_class else [])
    return divergence_of(target).weighted and any(clipped_bound_applies(name) for name in classes)


def bounded_class(evidence: Any, candidate: Candidate, target: Target) -> str:
    """The class whose restricted divergence a row's ``evidence`` bounds: the candidate's, or the claim's where
    the evidence holds a clipped witness (:class:`ClippedWitnessEstimate`, or a sequential search's look at one)
    and the candidate's class is not closed under clipping (a linear witness clipped is a function of ``all``,
    not a linear one: its row is of the claim's class, and so are its exact value and closed-form bound)."""
    inner = getattr(evidence, "evidence", evidence)  # a sequential search's look holds its round's evidence
    if isinstance(inner, ClippedWitnessEstimate) and not clipped_bound_applies(candidate.function_class):
        return target.claim_class
    return candidate.function_class


@dataclass(frozen=True)
class ClippedBetting:
    """The betting sequences of a clipped witness's two means: x_P on P (lower bound) and x_Q on Q (upper bound),
    rescaled to [0, 1] by ``rescaling`` (:class:`attacks.bounded_witness.Rescaling`)."""

    rescaling: Rescaling
    on_p: BettingSequence
    on_q: BettingSequence

    @property
    def n(self) -> int:
        return self.on_p.n

    def update(self, x_p: np.ndarray, x_q: np.ndarray, threads: int = 1) -> ClippedBetting:
        """The sequences after more rescaled values (:meth:`Rescaling.rescaled`), in drawing order; on up to
        ``threads`` threads (P's and Q's sequences at once, each capital and its mirror at once: the same
        numbers)."""
        inner = max(threads // 2, 1)
        on_p, on_q = in_threads([lambda: self.on_p.update(x_p, inner), lambda: self.on_q.update(x_q, inner)],
                                threads)
        return replace(self, on_p=on_p, on_q=on_q)

    def bounds(self, error: float) -> tuple[float, float]:
        """(lower, upper) bound of the clipped objective, each at confidence 1 - ``error`` (``error`` / 2 on each
        mean; the objective increases in the P mean and decreases in the Q mean)."""
        share = error / 2.0
        scale = self.rescaling
        return (scale.objective(self.on_p.lower_bound(share), self.on_q.upper_bound(share)),
                scale.objective(self.on_p.upper_bound(share), self.on_q.lower_bound(share)))

    def plug_in(self) -> float:
        """The clipped objective at the sample means."""
        return self.rescaling.objective(self.on_p.total / self.on_p.n, self.on_q.total / self.on_q.n)

    def log_peaks(self) -> np.ndarray:
        """The capital peaks the lower bound reads (x_P's lower sequence, x_Q's mirror)."""
        return np.r_[self.on_p.log_peak, self.on_q.mirror_peak]

    def to_record(self) -> dict:
        kind = self.rescaling.divergence
        return dict(divergence=kind.name, alpha=kind.alpha, lo=self.rescaling.lo, hi=self.rescaling.hi,
                    slope=self.rescaling.slope, on_p=self.on_p.to_record(), on_q=self.on_q.to_record())

    @classmethod
    def from_record(cls, record: Mapping) -> ClippedBetting:
        return cls(Rescaling.of(record["divergence"], (record["lo"], record["hi"]), record["alpha"], record["slope"]),
                   BettingSequence.from_record(record["on_p"]), BettingSequence.from_record(record["on_q"]))


def start_betting(target: Target, train_p: np.ndarray, train_q: np.ndarray, n: int) -> ClippedBetting:
    """The empty sequences of a witness with values ``train_p``, ``train_q`` on the training split: its clip range
    (:func:`attacks.bounded_witness.chosen_rescaling` for n confirm values) and, besides the log-odds grid, :data:`WINDOW` candidate
    means on each side of each training mean, spanning :data:`WINDOW_WIDTH` standard errors of a mean of ``n``
    values (in log-odds), where the confirm bounds are expected (all fixed before the confirm sample)."""
    scale = chosen_rescaling(train_p, train_q, target.divergence, n, target.alpha)
    windows = []
    for x in scale.rescaled(train_p, train_q):
        mean = float(np.clip(np.mean(x), 1e-9, 1.0 - 1e-9))
        width = min(WINDOW_WIDTH * float(np.std(x)) / math.sqrt(n) / (mean * (1.0 - mean)), 8.0)
        windows.append(expit(logit(mean) + np.linspace(-width, width, 2 * WINDOW + 1)))
    return ClippedBetting(scale, *(BettingSequence.start(DESIGN_LEVEL, window) for window in windows))


@dataclass(frozen=True)
class StreamedWitness:
    """The confirm-stage summary of a witness with a clipped bound: its moments (order-free, added) and its
    betting sequences (order-dependent, fed).

    A block's summary carries its rescaled values (``pending``); ``a + b``
    feeds a's pending values to a's sequences (on ``threads`` threads, the
    confirm stage's workers) and keeps b's pending, so blocks added in drawing
    order give, when :meth:`fed`, the sequences of the whole sample in that
    order, holding one block's values at a time."""

    moments: Any  # attacks.witness_moments.WitnessMoments
    betting: ClippedBetting
    pending: tuple[np.ndarray, np.ndarray] | None = None
    threads: int = 1

    @classmethod
    def block(cls, moments, betting: ClippedBetting, w_p: np.ndarray, w_q: np.ndarray,
              threads: int = 1) -> StreamedWitness:
        """A block's summary: ``moments`` and the witness values rescaled, waiting to be fed to ``betting`` on
        ``threads`` threads."""
        return cls(moments, betting, betting.rescaling.rescaled(w_p, w_q), threads)

    def fed(self) -> ClippedBetting:
        """The sequences with the pending values fed, on up to :attr:`threads` threads."""
        return self.betting if self.pending is None else self.betting.update(*self.pending, self.threads)

    def __add__(self, other: StreamedWitness) -> StreamedWitness:
        if other.pending is None:
            raise ValueError("other must be a block's summary (StreamedWitness.block), added in drawing order.")
        return StreamedWitness(self.moments + other.moments, self.fed(), other.pending, self.threads)


@dataclass(frozen=True, eq=False)
class ClippedWitnessEstimate:
    """A witness's delta-method estimate and its clipped betting bound, each at half the error (module docstring).

    ``moments``: the delta-method estimate (:func:`attacks.held_out.witness_estimate`: the counts and every
    descriptive attribute, read through this object); ``betting``: the clipped witness's sequences.
    Evidence (:class:`attacks.evidence.Evidence`) of max(theta_delta, theta_clipped).  ``at_look``: read at a
    look inside the confirm sample (:mod:`attacks.confirm_looks`), where only the betting half is valid (its
    sequences are time-uniform, the delta method holds at the sample's fixed end only): the delta half is not
    read and its share of the error is left to the end of the sample; bounds and p-value are the betting half's,
    still at half the error.
    """

    moments: DivergenceEstimate
    betting: ClippedBetting
    at_look: bool = False

    def __getattr__(self, name: str):
        if name == "moments":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.moments, name)

    def __eq__(self, other: object) -> bool:
        """Equal records (the capital arrays compared element by element)."""
        return isinstance(other, ClippedWitnessEstimate) and self.to_record() == other.to_record()

    __hash__ = None

    @property
    def caveat(self) -> str | None:
        return None

    def _delta_trusted(self) -> bool:
        error = self.moments.standard_error
        return not self.at_look and not self.moments.caveat and math.isfinite(self.moments.estimate) and math.isfinite(error) and error > 0

    @property
    def estimate(self) -> float:
        """The larger of the two plug-ins (the delta method's only where its interval is trusted)."""
        plug_in = self.betting.plug_in()
        return max(self.moments.estimate, plug_in) if self._delta_trusted() else plug_in

    def _sides(self, error: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """((delta low, delta high), (betting low, betting high)), each at 1 - error / 2; (-inf, inf) for an
        untrusted delta method."""
        delta = (self.moments.lower_bound(1.0 - error / 2.0), self.moments.confidence_interval(1.0 - error)[1]) \
            if self._delta_trusted() else (-math.inf, math.inf)
        return delta, self.betting.bounds(error / 2.0)

    def lower_bound(self, level: float = 0.95) -> float:
        delta, betting = self._sides(1.0 - level)
        return max(delta[0], betting[0])

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        delta, betting = self._sides((1.0 - confidence) / 2.0)
        return max(delta[0], betting[0]), max(delta[1], betting[1])

    def note(self) -> str:
        """The clipped witness in words, for the row's note."""
        scale = self.betting.rescaling
        steep = "" if scale.slope == 1.0 else f" times {scale.slope:g}"
        bound = (f"the clipped witness's betting bound at half the error, read at a look after {self.betting.n} "
                 "confirm outputs per dataset (the delta method's half is left to the confirm sample's end)"
                 if self.at_look else
                 "the larger of its delta method and the clipped witness's betting bound, each at half the error")
        return (f"{CLIPPED}: the {self.moments.function_class} witness{steep} clipped to [{scale.lo:.4g}, "
                f"{scale.hi:.4g}] (chosen on the training split); the row's bound is {bound}")

    def interval(self, level: float = 0.95) -> str:
        """Which half gives :meth:`lower_bound` at ``level``: ``"betting CS"`` or ``"delta method"``."""
        delta, betting = self._sides(1.0 - level)
        return "betting CS" if betting[0] >= delta[0] else "delta method"

    def p_value(self, claim: float) -> float:
        """min(1, 2 p_delta, a_betting): a_betting the smallest error a at which the betting half (at a / 2)
        reaches ``claim``, found exactly among the errors where it moves (a / 4 = e^-peak of a capital peak)."""
        delta = 2.0 * self.moments.p_value(claim) if self._delta_trusted() else 1.0
        peaks = self.betting.log_peaks()
        errors = np.unique(np.maximum(4.0 * np.exp(-peaks[peaks > math.log(4.0)]), np.finfo(float).tiny))
        low, high = 0, errors.size
        while low < high:
            middle = (low + high) // 2
            if self.betting.bounds(errors[middle] / 2.0)[0] >= claim:
                high = middle
            else:
                low = middle + 1
        betting = float(errors[low]) if low < errors.size else 1.0
        return float(min(1.0, delta, betting))

    def ceiling(self, level: float = 0.95) -> float:
        """The larger of the delta method's ceiling (not at a look) and the clipped objective's largest value
        (P's mean at the top of the range, Q's at the bottom)."""
        clipped = self.betting.rescaling.objective(1.0, 0.0)
        return clipped if self.at_look else max(self.moments.ceiling(level), clipped)

    def with_details(self, **details: Any) -> ClippedWitnessEstimate:
        """The estimate with ``details`` added to its moments' (read as ``details``)."""
        return replace(self, moments=replace(self.moments, details={**self.moments.details, **details}))

    def to_record(self) -> dict:
        """Plain JSON: ``kind``, the delta-method estimate's record, the sequences' and ``at_look``."""
        return dict(kind=CLIPPED, moments=self.moments.to_record(), betting=self.betting.to_record(),
                    at_look=self.at_look)

    @classmethod
    def from_record(cls, record: Mapping) -> ClippedWitnessEstimate:
        """The estimate of :meth:`to_record`'s record: bounds and p-values equal the original's."""
        return cls(DivergenceEstimate.from_record(dict(record["moments"])), ClippedBetting.from_record(record["betting"]),
                   bool(record.get("at_look", False)))
