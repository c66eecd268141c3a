"""Pairs at any distance (audit/inputs/group_pairs.py and ``[neighbours] distance``): exact record counts, no sampling."""

from __future__ import annotations

import numpy as np
import pytest

from audit.inputs.dataset_distance import record_distance
from audit.inputs.group_pairs import widen
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import check_spec, make_pairs

DOMAIN = {"low": [0.0], "high": [1.0], "size": 4}


@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
@pytest.mark.parametrize("strategy", ["random", "extremes"])
@pytest.mark.parametrize("distance", [1, 3])
def test_generated_pairs_are_exactly_distance_records_apart(relation, strategy, distance):
    pairs = make_pairs({"strategy": strategy, "relation": relation, "distance": distance, "count": 2,
                        "domain": DOMAIN}, make_mechanism("laplace", {"epsilon": 1.0}), 0)
    assert len(pairs) == 2
    for pair in pairs:
        assert pair.distance == record_distance(pair.d, pair.d_prime) == distance
        sizes = (len(pair.d), len(pair.d_prime))
        assert sizes == ((4, 4 + distance) if relation == "add-remove" else (4, 4))


def test_a_user_owning_three_records_is_added_with_all_three():
    d = np.zeros((2, 1))
    d_prime = np.vstack([d, [[1.0]]])
    wide_d, wide_prime = widen(d, d_prime, "add-remove", 3)
    assert wide_d is d and wide_prime.ravel().tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]


def test_replacing_more_records_than_a_dataset_holds_is_refused_or_dropped():
    d, d_prime = np.zeros((2, 1)), np.array([[0.0], [1.0]])
    assert widen(d, d_prime, "replace-one", 3) is None
    with pytest.raises(ValueError, match="neighbours.distance: 5 records cannot be replaced"):
        make_pairs({"strategy": "random", "distance": 5, "domain": DOMAIN}, make_mechanism("laplace", {}), 0)


@pytest.mark.parametrize("value", [0, 1.5, True, 1001])
def test_distance_must_be_an_integer_from_1_to_1000(value):
    with pytest.raises(ValueError, match=r"neighbours.distance \(records added, removed or replaced per pair\)"):
        check_spec({"strategy": "random", "distance": value})


def test_on_average_pairs_at_distance_k_replace_the_first_k_records():
    spec = {"strategy": "on-average", "count": 2, "size": 5, "distance": 2,
            "distribution": {"name": "normal", "mean": 0, "std": 1}}
    for pair in make_pairs(spec, make_mechanism("laplace", {}), 0):
        assert pair.distance == 2 and np.array_equal(pair.d[2:], pair.d_prime[2:])


def test_pairs_at_a_library_claims_distance_are_not_warned_of():
    from audit.results.provenance import not_neighbours

    pairs = [{"name": "p0", "d": [[0.0]], "d_prime": [[0.0], [1.0], [1.0], [1.0]], "relation": None}]
    assert "differ in 3 records" in not_neighbours(pairs)[0]
    assert not_neighbours(pairs, {"claims": [{"from": "library"}]}) == []
    identical = [{**pairs[0], "d_prime": [[0.0]]}]
    assert "d' = d" in not_neighbours(identical, {"claims": [{"from": "library"}]})[0]


def test_the_search_labels_its_widened_candidates_and_keeps_random_ones_countable():
    spec = {"strategy": "search", "relation": "add-remove", "distance": 2, "count": 1, "candidates": 2,
            "screen_samples": 10, "probes": [], "domain": DOMAIN}
    screening = make_pairs(spec, make_mechanism("laplace", {}), 0).screening
    assert [entry.label for entry in screening].count("random") == 2
    assert all(entry.label.endswith(", x2") for entry in screening if entry.label != "random")

