"""Looks inside the confirm sample of a kl / renyi witness with a clipped bound (attacks/confirm_looks.py).

The looks read the clipped witness's betting half alone, at half the round's weight; the sample's end reads the
delta method and the betting half, each at half the weight (the looks and the end share the betting half's
time-uniform error).  References: the exact KL of a Laplace pair (scale 1 / epsilon, shift 1),
epsilon + e^-epsilon - 1, which bounds every restricted KL; the witness values computed by hand.
"""

from __future__ import annotations

import dataclasses
import json
import math

import joblib
import pytest

from attacks.candidates import Target
from attacks.clipped_witness import ClippedWitnessEstimate
from attacks.sequential import PILOT_WEIGHT, VIOLATION, Limits, interval_of, sequential_search
from audit.config.attacks import DEFAULT_CLASSES
from audit.engine.store import evidence_from_record
from test_clipped_witness import _estimate
from test_staged import laplace_sampler

LEVEL = 0.05
VALUE_KL = Target.for_claim("kl", "all", DEFAULT_CLASSES, layer="value")
"""The value layer's search of a (kl, all) claim (the built-in ``laplace``'s float leak is the representation
layer's: an (all, kl) claim at the exact value is false for it, so validity is checked on numpy's Laplace pairs)."""


def _laplace_kl(epsilon: float) -> float:
    return epsilon + math.exp(-epsilon) - 1.0


def _search(epsilon: float, claim: float, seed: int, max_outputs: int = 4_000_000, tolerance: float = 0.05,
            n_jobs: int = 1):
    return sequential_search(laplace_sampler(epsilon, seed=seed), 1, VALUE_KL, claim,
                             Limits(max_outputs, math.inf, tolerance, LEVEL), seed=seed, n_jobs=n_jobs)


def test_a_look_reads_the_betting_half_alone_and_round_trips():
    """At a look the delta method (valid at the sample's fixed end only) is not read: bounds, p-value, ceiling and
    interval are the betting half's at half the error."""
    whole = _estimate("laplace", "kl", 1_000, seed=3)
    look = dataclasses.replace(whole, at_look=True)
    assert look.lower_bound(0.9) == whole.betting.bounds(0.05)[0] <= whole.lower_bound(0.9)
    assert look.estimate == whole.betting.plug_in() and look.interval(0.9) == "betting CS"
    assert look.ceiling(0.95) == whole.betting.rescaling.objective(1.0, 0.0)
    for claim in (0.1, 0.3, look.lower_bound(0.9)):
        assert (look.p_value(claim) <= 0.1) == (look.lower_bound(0.9) >= claim)
        assert look.p_value(claim) >= whole.p_value(claim)
    assert "read at a look after 1000 confirm outputs" in look.note() and "at a look" not in whole.note()
    back = evidence_from_record(json.loads(json.dumps(look.to_record())))
    assert isinstance(back, ClippedWitnessEstimate) and back.at_look and back.lower_bound(0.9) == look.lower_bound(0.9)


def test_a_gross_kl_violation_stops_at_a_look_before_the_round_ends():
    """Laplace at epsilon 5 (exact KL 4.007) against a (kl, all) claim of 1: seed 7 stops in the second pilot
    round (1 000 outputs per dataset, 500 confirm, 6 looks: after 50, 100, 150, 225, 337 and 500) at a look before
    the last, so the search draws 2 x (500 - n) fewer outputs than the round's 2 000 (n: the confirm outputs per
    dataset at the look).  The bound is the betting half at half the pilot's weight, between the claim and the
    exact value; the numbers do not depend on n_jobs."""
    result = _search(5.0, 1.0, seed=7)
    look = result.evidence.evidence
    assert (result.stop, result.rounds) == (VIOLATION, 2)
    assert isinstance(look, ClippedWitnessEstimate) and look.at_look and look.n == look.betting.n
    assert look.details["looks"] < 6 and look.n == (50, 100, 150, 225, 337)[look.details["looks"] - 1]
    assert result.evidence.looks[-1]["outputs"] == 2_000 - 2 * (500 - look.n) and result.evidence.weight == PILOT_WEIGHT
    assert interval_of(result.evidence) == result.evidence.looks[-1]["interval"] == "betting CS"
    assert 1.0 < result.evidence.lower_bound(1.0 - LEVEL) == look.betting.bounds(LEVEL * PILOT_WEIGHT / 2)[0] \
        < _laplace_kl(5.0)
    with joblib.parallel_backend("threading"):  # two workers without the processes' start-up
        parallel = _search(5.0, 1.0, seed=7, n_jobs=2).evidence
    assert parallel.to_record() == result.evidence.to_record()


def _false_violations(runs: int) -> int:
    """Searches of a true (kl, all) claim at the exact KL of Laplace at epsilon 1 (e^-1), three rounds (250,
    1 000, 4 000 outputs per dataset, each confirm read after every batch), a tolerance nothing decides."""
    stops = [_search(1.0, _laplace_kl(1.0), seed, max_outputs=10_500, tolerance=1e-9).stop for seed in range(runs)]
    assert set(stops) <= {VIOLATION, "output limit"}
    return stops.count(VIOLATION)


def test_a_true_kl_claim_is_not_refuted_by_looking():
    """2 searches looking at every batch of three rounds: neither refutes the exact KL (binomial(2, 0.05) is 0
    with probability 0.90; the bounds being conservative, the slow test below finds none in 40 seeds)."""
    assert _false_violations(2) == 0


@pytest.mark.slow
def test_a_true_kl_claim_is_refuted_at_most_five_percent_of_the_time():
    """40 searches (about 60 CPU s): false violations at most 5 % of them."""
    runs = 40
    assert _false_violations(runs) <= 0.05 * runs
