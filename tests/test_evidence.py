"""Every kind of evidence implements one protocol (attacks.evidence.Evidence) and its readings agree.

For each class: its bounds, interval and p-value are one statistic read
three ways, so ``confidence_interval(c)`` is the pair of one-sided bounds at
``(1 + c) / 2`` and ``p_value(lower_bound(l)) = 1 - l`` (the level at which
the bound equals a claim).  Tolerances: the count bounds of ``dp`` and ``ipm``
and the kl / renyi bound are found by root finding (``xtol`` 1e-12 on the
log-level or the claim), so 1e-6 relative is loose for all of them.
"""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest

from attacks import estimate as estimate_module
from attacks import evidence as evidence_module
from attacks import held_out, selection, sequential, staged
from attacks.estimate import DivergenceEstimate, estimate_divergence
from attacks.evidence import Evidence, NormalEstimate
from attacks.sequential import SequentialEstimate
from attacks.held_out import PooledEstimate
from audit.engine import checks, generalization
from audit.results import on_average
from audit.engine.checks import Measurement
from audit.results.on_average import OnAverageEstimate, average_over_pairs
from audit.engine.store import evidence_from_record

N = 4_000
RTOL = 1e-6


def _samples(coupled: bool = False, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Laplace(0, 1) against Laplace(1, 1) outputs; coupled: row i of both from the same noise."""
    rng = np.random.default_rng(seed)
    noise = rng.laplace(size=N)
    return noise, (noise if coupled else rng.laplace(size=N)) + 1.0


def _estimate(divergence: str, coupled: bool = False, **options) -> DivergenceEstimate:
    p, q = _samples(coupled)
    return estimate_divergence(p, q, options.pop("function_class", "linear"), divergence, coupled=coupled,
                               random_state=1, **options)


EVIDENCE = {
    "witness kl": lambda: _estimate("kl"),
    "witness renyi": lambda: _estimate("renyi", alpha=2.0),
    "witness kl coupled": lambda: _estimate("kl", coupled=True),
    "count dp": lambda: _estimate("dp", function_class="threshold"),
    "count dp coupled": lambda: _estimate("dp", coupled=True, function_class="threshold"),
    "count ipm": lambda: _estimate("ipm"),
    "pooled": lambda: PooledEstimate(0.93, 0.04, n=3_000, weights=(0.25, 0.75), delta=0.0, coupled=True),
    "sequential": lambda: SequentialEstimate(_estimate("dp", function_class="threshold"), 0.25),
    "over pairs": lambda: average_over_pairs([0.31, 0.42, 0.27, 0.38, 0.35], [0.1, 0.2]),
    "measurement": lambda: Measurement("M", _estimate("kl"), 0.99, exact=None),
    "normal": lambda: NormalEstimate(0.2, 0.05),
}
CLASSES = {DivergenceEstimate, PooledEstimate, SequentialEstimate, OnAverageEstimate, Measurement,
           NormalEstimate}


@pytest.fixture(scope="module", params=sorted(EVIDENCE))
def evidence(request):
    return EVIDENCE[request.param]()


def test_every_evidence_class_of_the_code_is_tested():
    """A class with the protocol's methods in an evidence module is one of :data:`CLASSES` (so this file checks it)."""
    modules = (estimate_module, evidence_module, sequential, staged, held_out, selection, on_average, generalization, checks)
    found = {cls for module in modules for _, cls in inspect.getmembers(module, inspect.isclass)
             if cls.__module__ == module.__name__ and callable(getattr(cls, "p_value", None))
             and callable(getattr(cls, "confidence_interval", None))}
    assert found - {Evidence} == CLASSES
    assert {type(build()) for build in EVIDENCE.values()} == CLASSES


def test_implements_the_protocol_with_its_names(evidence):
    assert isinstance(evidence, Evidence)
    assert isinstance(evidence.estimate, float) and math.isfinite(evidence.estimate)
    assert isinstance(evidence.standard_error, float)  # NaN where the bounds come from no standard error
    assert evidence.caveat is None or isinstance(evidence.caveat, str)


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_interval_is_the_two_one_sided_bounds(evidence, confidence):
    low, high = evidence.confidence_interval(confidence)
    assert low == pytest.approx(evidence.lower_bound((1 + confidence) / 2), rel=RTOL)
    assert low <= evidence.estimate <= high
    wider_low, wider_high = evidence.confidence_interval(0.99)
    assert wider_low <= low and high <= wider_high


@pytest.mark.parametrize("level", [0.9, 0.99])
def test_p_value_at_the_lower_bound_is_one_minus_its_level(evidence, level):
    bound = evidence.lower_bound(level)
    assert evidence.p_value(bound) == pytest.approx(1 - level, rel=1e-4)
    assert evidence.p_value(bound - 0.05) < 1 - level < evidence.p_value(bound + 0.05)


def test_record_is_plain_json_and_stored_evidence_reads_back(evidence):
    record = json.loads(json.dumps(evidence.to_record(), allow_nan=True))
    assert record == json.loads(json.dumps(evidence.to_record(), allow_nan=True))
    if isinstance(evidence, (DivergenceEstimate, PooledEstimate, SequentialEstimate)):  # what tasks.jsonl holds
        back = evidence_from_record(record)
        assert type(back) is type(evidence)
        assert back.lower_bound(0.95) == pytest.approx(evidence.lower_bound(0.95), rel=1e-12)
        assert back.p_value(evidence.estimate / 2) == pytest.approx(evidence.p_value(evidence.estimate / 2), rel=1e-12)


def test_measurement_record_keeps_results_json_layout():
    measured = Measurement("M", NormalEstimate(0.2, 0.05), 0.975, exact=0.25)
    record = measured.to_record()
    assert list(record) == ["role", "estimate", "low", "high", "exact", "caveat"]
    assert record["low"] == pytest.approx(0.2 - 1.959964 * 0.05, rel=1e-6)
    assert record["high"] == pytest.approx(0.2 + 1.959964 * 0.05, rel=1e-6)
    assert measured.upper() == 0.25 and Measurement("M", NormalEstimate(0.2, 0.05), 0.975).upper() == record["high"]


@pytest.mark.parametrize("level", [0.9, 0.99])
def test_ceiling_is_above_the_lower_bound_or_unknown(evidence, level):
    """The ceiling caps every lower bound the sample sizes allow, so it caps this one; NaN where none is known."""
    ceiling = evidence.ceiling(level)
    assert isinstance(ceiling, float)
    assert math.isnan(ceiling) or ceiling >= evidence.lower_bound(level)
