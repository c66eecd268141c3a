"""What the audit's sampler saw of each pair's outputs, for the notes of its rows (:mod:`audit.engine.run`).

:class:`OutputWatch` wraps the engine's sampling callable: whether every
output so far on d was one value and every output on d' another (a release
that looks deterministic), what the mechanism did besides regular outputs
(:class:`audit.sampling.events.EventCounter`), and a histogram of the finest bit each
output sets, from which a representation row names the event that tells the
datasets apart (:data:`audit.sampling.events.BIT_EVENT`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from attacks.representation import FINEST_BITS, finest_bits, separating_bit
from attacks.candidates import Draw
from audit.sampling.events import BIT_EVENT, EventCounter

RAISED_NOTE = "the mechanism raised"
"""The start of the note of a pair on which mechanism calls raised: a call that raises is an observable event,
compared by the attacks like any output (:func:`audit.sampling.sampler.draw_pair_isolated`)."""


class OutputWatch:
    """The sampler, watching each pair's outputs: whether every output so far on d was one value, every output on
    d' another (a deterministic release, :data:`audit.engine.run.DETERMINISTIC_NOTE`), what the mechanism did besides regular
    outputs (:class:`audit.sampling.events.EventCounter`: structural outputs, among them the event "the mechanism raised"
    of :func:`audit.sampling.sampler.draw_pair_isolated`, per dataset), and the finest bit each output sets
    (:func:`attacks.representation.finest_bits`), for the event a representation row names (:meth:`bit_note`)."""

    def __init__(self, sample: Callable[[int, int, str, int], Draw], events: EventCounter, names: Sequence[str]):
        self.sample = sample
        self.firsts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.varied: set[int] = set()
        self.events, self.names = events, list(names)
        self.bits: dict[int, np.ndarray] = {}
        """Pair -> histograms of the finest bit set, shape (2, FINEST_BITS): outputs on d, on d'."""
        self.lock = threading.Lock()

    def __call__(self, pair: int, n: int, stage: str, chunk: int) -> Draw:
        draw = self.sample(pair, n, stage, chunk)
        self.events.drawn(self.names[pair], draw.d, draw.d_prime)
        bits = np.stack([finest_bit_histogram(draw.d), finest_bit_histogram(draw.d_prime)])
        with self.lock:  # the staged search draws several pairs at once, in threads
            self.bits[pair] = self.bits.get(pair, 0) + bits
        first_d, first_d_prime = self.firsts.setdefault(pair, (draw.d[0].copy(), draw.d_prime[0].copy()))
        if not (np.all(draw.d == first_d) and np.all(draw.d_prime == first_d_prime)):
            self.varied.add(pair)
        return draw

    def deterministic(self, pair: int) -> bool:
        if pair not in self.firsts or pair in self.varied:
            return False
        first_d, first_d_prime = self.firsts[pair]
        return bool(np.any(first_d != first_d_prime))

    def bit_note(self, pair: int) -> list[str]:
        """The event on the finest bit set that tells the pair's datasets apart most, with its shares of the outputs
        drawn (:func:`attacks.representation.separating_bit`; [] when none does): what a representation finding
        reads, in words."""
        found = separating_bit(*self.bits[pair]) if pair in self.bits else None
        if found is None:
            return []
        bit, share_d, share_d_prime = found
        return [f"{BIT_EVENT}: lowest set bit (of any coordinate) below 2^{bit}: {_share(share_d)} of outputs on d, "
                f"{_share(share_d_prime)} on d'"]

    def raised_note(self, pair: int) -> list[str]:
        """The note of a pair on which the mechanism raised: its counts on each dataset ([] when it never did)."""
        raised_d, n_d, raised_d_prime, n_d_prime = self.events.raised(self.names[pair])
        if not raised_d and not raised_d_prime:
            return []
        where = (" on both datasets" if raised_d and raised_d_prime
                 else " on one dataset only, so the failure itself distinguishes the datasets")
        return [f"{RAISED_NOTE}{where}: {raised_d} of {n_d} outputs on d and {raised_d_prime} of {n_d_prime} "
                f"on d' are the event \"the mechanism raised\" (one output per call once a call raised)"]


def finest_bit_histogram(outputs: np.ndarray) -> np.ndarray:
    """The histogram of :func:`attacks.representation.finest_bits` over the finite float outputs."""
    outputs = np.asarray(outputs)
    if outputs.dtype.kind != "f":
        return np.zeros(FINEST_BITS, dtype=np.int64)
    rows = outputs.reshape(len(outputs), -1)
    finite = rows[np.isfinite(rows).all(axis=1)].astype(np.float64)
    return np.bincount(finest_bits(finite), minlength=FINEST_BITS)


def _share(share: float) -> str:
    """A share of outputs in words: "none", "all", else a percentage with two significant digits."""
    return "none" if share == 0.0 else "all" if share == 1.0 else f"{100 * share:.2g} %"
