"""What the mechanism did besides releasing regular outputs, counted per pair and dataset for the report.

Two things an audit absorbs without a failure, and which a reader must still
be told (report.md's first screen, results.json ``events``):

* *structural outputs* (:mod:`audit.sampling.structure`): outputs that are NaN,
  infinite (or beyond ``MAX_OUTPUT``), of another length than the others,
  or calls that raised.  They are evidence, compared like any output, so
  they never fail an audit, and a mechanism whose outputs are NaN 1 % of the
  time would otherwise pass without a word about NaN;
* *redrawn draws* (:func:`audit.sampling.sampler.draw_pair_isolated`): a call for many
  outputs that raised makes the sampler draw that pair's outputs again one
  output per call.  A mechanism that raises only on large batches then passes
  on outputs it never fails on one at a time: the exception is absorbed.

:class:`EventCounter` counts both as the engine draws (per pair: each
dataset's outputs and their :data:`audit.sampling.structure.EVENTS`, and the redrawn
draws with the first error that caused one); each unit of work stores what it
drew in its records (``events``, so that ``--resume`` keeps them),
:func:`event_summary` adds the units' counts up per pair, and report.md's
first screen (:mod:`audit.report.audit_report`) and the terminal (:func:`event_tally`) say them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from audit.sampling.structure import EVENTS, StructureEncoder

SIDES = ("d", "d_prime")
WORDS = {"nan": "NaN", "inf": "infinite (or beyond 1e30)", "length": "of another length",
         "raised": "\"the mechanism raised\" (one-output calls that raised)"}
"""Each event kind in the report's words."""

BIT_EVENT = "distinguishing event"
"""The start of a representation row's note (:mod:`audit.engine.run`): the event on the outputs' finest set bit that
tells d from d', which report.md's representation section quotes."""


class EventCounter:
    """Per pair: outputs and structural events on each dataset, and draws redone one output per call.

    Thread-safe: the staged search draws several pairs at once, in threads.
    """

    def __init__(self, structure: StructureEncoder | None) -> None:
        self.structure = structure if isinstance(structure, StructureEncoder) and structure.fixed else None
        self.counts: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def _pair(self, pair: str) -> dict[str, Any]:
        return self.counts.setdefault(pair, {**{side: dict.fromkeys(("outputs", *EVENTS), 0) for side in SIDES},
                                             "redrawn_draws": 0, "redraw_error": None})

    def drawn(self, pair: str, d: np.ndarray, d_prime: np.ndarray) -> None:
        """Count one draw's outputs and their structural events on each dataset."""
        found = [(side, rows, self.structure.events(rows) if self.structure is not None else {})
                 for side, rows in zip(SIDES, (d, d_prime))]
        with self.lock:
            counts = self._pair(pair)
            for side, rows, events in found:
                counts[side]["outputs"] += len(rows)
                for kind, count in events.items():
                    counts[side][kind] += count

    def redrawn(self, pair: str, error: str) -> None:
        """Count a draw redone one output per call after a call for many outputs raised ``error``."""
        with self.lock:
            counts = self._pair(pair)
            counts["redrawn_draws"] += 1
            counts["redraw_error"] = counts["redraw_error"] or error

    def raised(self, pair: str) -> tuple[int, int, int, int]:
        """(raised on d, outputs on d, raised on d', outputs on d') of a pair (zeros before it is drawn)."""
        counts = self.counts.get(pair)
        if counts is None:
            return 0, 0, 0, 0
        return (counts["d"]["raised"], counts["d"]["outputs"], counts["d_prime"]["raised"],
                counts["d_prime"]["outputs"])

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """A copy of the counts so far (pair -> counts), for :meth:`since`."""
        with self.lock:
            return {pair: {key: dict(value) if isinstance(value, dict) else value for key, value in counts.items()}
                    for pair, counts in self.counts.items()}

    def since(self, before: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """The counts added since ``before`` (:meth:`snapshot`): one unit's draws; pairs without any left out."""
        added = {}
        for pair, counts in self.snapshot().items():
            old = before.get(pair)
            if old is None:
                added[pair] = counts
                continue
            delta = {side: {key: counts[side][key] - old[side][key] for key in counts[side]} for side in SIDES}
            draws = counts["redrawn_draws"] - old["redrawn_draws"]
            if draws or any(delta[side]["outputs"] for side in SIDES):
                added[pair] = {**delta, "redrawn_draws": draws,
                               "redraw_error": counts["redraw_error"] if draws else None}
        return added


def event_summary(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per pair, the events of all units (each unit's ``events`` counted once, whichever of its records holds
    it): only pairs with something to report (a structural event or a redrawn draw), in the order first seen.

    Returns
    -------
    list of dict
        ``{"pair", "d": {"outputs", "nan", "inf", "length", "raised"}, "d_prime": {...}, "redrawn_draws",
        "redraw_error"}`` (results.json ``events``).
    """
    totals: dict[str, dict[str, Any]] = {}
    seen = set()
    for record in records:
        unit = record.get("search")
        if unit in seen or not record.get("events"):
            continue
        seen.add(unit)
        for pair, counts in record["events"].items():
            total = totals.setdefault(pair, {"pair": pair, **{side: dict.fromkeys(("outputs", *EVENTS), 0)
                                                              for side in SIDES},
                                             "redrawn_draws": 0, "redraw_error": None})
            for side in SIDES:
                for key, value in counts[side].items():
                    total[side][key] += int(value)
            total["redrawn_draws"] += int(counts["redrawn_draws"])
            total["redraw_error"] = total["redraw_error"] or counts["redraw_error"]
    return [total for total in totals.values()
            if total["redrawn_draws"] or any(total[side][kind] for side in SIDES for kind in EVENTS)]


def event_tally(events: Sequence[Mapping[str, Any]]) -> str:
    """The terminal's one line on the events, "" without events."""
    if not events:
        return ""
    redrawn = sum(entry["redrawn_draws"] for entry in events)
    kinds = [WORDS[kind].split(" (")[0] for kind in EVENTS
             if any(entry[side][kind] for entry in events for side in SIDES)]
    parts = ([f"{redrawn} call(s) for many outputs raised and were redrawn one output per call"] if redrawn else [])
    parts += [f"{', '.join(kinds)} outputs seen"] if kinds else []
    return f"MECHANISM EVENTS: {'; '.join(parts)} (report.md, first screen)"
