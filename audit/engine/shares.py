"""Each search's share of ``[attacks] max_outputs``: weighted, run in a fixed order, what a search leaves flowing on.

The units of policy ``best`` (a claim at one Renyi order in one layer, and a ``dp`` claim's declared statistics) run
one after another in the order :meth:`audit.engine.run._Best.units` lists them (each claim's value search before its
representation search).  Unit i of weights w_1, ..., w_k may draw

    m_i = floor((M - D_i) * w_i / (w_i + ... + w_k)),

where M is ``max_outputs`` and D_i the outputs the units before it drew.  So

* ``max_outputs`` caps the audit: m_i <= M - D_i, hence D_i + m_i <= M, for every unit that keeps to its share (a
  search in rounds starts no round it expects to pass it; :func:`attacks.sequential.sequential_search`);
* each unit gets at least its weighted share of the whole, M w_i / (w_1 + ... + w_k) (by induction: the units
  before it leave at least their weights' share of M), and what they leave unused flows on to the later ones;
* the shares depend on the config and seed only: D_i counts the outputs the searches asked for (the same for any
  ``n_jobs`` or backend, and read back from tasks.jsonl on resume).

A fixed design (a ``dp`` claim's declared statistics, :mod:`audit.engine.declared`, scored on every output of its
share) draws all it is given, so it takes its weighted share of the whole, floor(M w_i / (w_1 + ... + w_k)), never
what the searches before it left (by the second point, that share fits in what they left).  So does a search of a
claim that an earlier unit of the same claim already refuted (its record's ``stop`` is ``"violation"``, a lower
bound above the claim at Holm's first level, so the claim's verdict is a violation whatever the later units find):
it can only add a second finding, which its weighted share of the whole still finds where it is gross, and what
the refuting search left is not spent on it (on report_noisy_max_4 the representation search took 2.0 to 2.3 M
outputs after a value search that refuted the claim at about 0.5 M).

The representation search (``floatbits``) weighs :data:`REPRESENTATION_WEIGHT` against a value search's
:data:`VALUE_WEIGHT`: a float leak is gross where it exists (an output off the grid of one dataset only), found in
the first rounds, so it takes a small share and does not halve the value search's, which decides a subtle bug only
in its largest rounds (svt_6 at 2.2 to 2.3 M outputs, benchmarks/results/bench_sequential.md).  The error is split apart from the outputs: every unit stops at Holm's
first level over all of them, whatever its share (:mod:`audit.results.verdicts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from attacks.classes import REPRESENTATION, parse_function_class
from attacks.sequential import VIOLATION

VALUE_WEIGHT = 32
"""The weight of a value search (and of a claim's declared statistics)."""
REPRESENTATION_WEIGHT = 1
"""The weight of a representation search: 1/33 of ``max_outputs`` at least with one claim (121 212 of the default
4 000 000, the rounds up to 16 000 outputs per dataset of one pair), plus what the value search left."""


def unit_weight(function_classes: Sequence[str]) -> int:
    """The weight of a unit searching ``function_classes`` (one layer's; none: an error unit, a value weight)."""
    layers = {parse_function_class(name).layer for name in function_classes}
    return REPRESENTATION_WEIGHT if layers == {REPRESENTATION} else VALUE_WEIGHT


def output_share(max_outputs: int, weights: Sequence[int], index: int, drawn: int) -> int:
    """The outputs unit ``index`` may draw when the units before it drew ``drawn``:
    ``(max_outputs - drawn) * weights[index] // sum(weights[index:])`` (module docstring; integer arithmetic, so
    exact), at least 1."""
    if not 0 <= index < len(weights) or min(weights) <= 0:
        raise ValueError(f"index must name one of {len(weights)} positive weights. Found index={index!r}, "
                         f"weights={list(weights)!r}.")
    return max(max(max_outputs - drawn, 0) * weights[index] // sum(weights[index:]), 1)


@dataclass
class Shares:
    """The running split of one audit's limits over its units, in their order: :meth:`of` the next unit,
    :meth:`spend` each unit's record as it ends (or is read back on resume).  ``[run] max_seconds`` (None: no
    limit) is split as the outputs are, by the seconds the units before took.  ``fixed``: the units of a fixed
    design, on their weighted share of the whole (module docstring)."""

    max_outputs: int
    max_seconds: float | None
    weights: Sequence[int]
    fixed: Sequence[bool] = ()
    claims: Sequence[int | None] = ()
    drawn: int = 0
    seconds: float = 0.0
    refuted: set[int] = field(default_factory=set)

    @classmethod
    def for_units(cls, max_outputs: int, max_seconds: float | None, units: Sequence[Any]) -> Shares:
        """The split over ``units`` (:class:`audit.engine.run.Unit`: weighed by their first target's classes,
        :func:`unit_weight`; a declared unit a fixed design)."""
        return cls(max_outputs, max_seconds, [unit_weight(unit.targets[0].classes if unit.targets else ())
                                              for unit in units], [unit.declared for unit in units],
                   [unit.claim_index for unit in units])

    def of(self, index: int) -> dict:
        """Unit ``index``'s ``max_outputs`` (:func:`output_share`) and ``max_seconds``."""
        claim = self.claims[index] if index < len(self.claims) else None
        fixed = (index < len(self.fixed) and self.fixed[index]) or (claim is not None and claim in self.refuted)
        # a fixed design or a refuted claim's search: its share of the whole, the share it would get if it ran first
        # (module docstring)
        weights = [self.weights[index], *self.weights[:index], *self.weights[index + 1:]] if fixed else self.weights
        at, drawn, spent = (0, 0, 0.0) if fixed else (index, self.drawn, self.seconds)
        seconds = self.max_seconds
        if seconds is not None:
            seconds = max(seconds - spent, 0.0) * weights[at] / sum(weights[at:])
        return dict(max_outputs=output_share(self.max_outputs, weights, at, drawn), max_seconds=seconds)

    def spend(self, record: Mapping[str, Any]) -> None:
        """Count a unit's record (:func:`audit.engine.run._record`: its ``staged`` outputs drawn, its seconds; a
        ``stop`` of ``"violation"`` marks its ``claim_index`` refuted)."""
        staged = record.get("staged", {})
        self.drawn += staged.get("outputs_drawn", 0)
        self.seconds += record.get("seconds", 0.0)
        if staged.get("stop") == VIOLATION and record.get("claim_index") is not None:
            self.refuted.add(record["claim_index"])
