"""Neighbouring pairs: relation checks, explicit and default pairs, generators, search."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from audit.mechanisms import make_mechanism
from audit.inputs.dataset_distance import check_neighbours
from audit.inputs.neighbours import NeighbourPair, make_pairs
from audit.inputs.pair_search import search_pairs

DOMAIN = {"low": [0.0, -1.0], "high": [1.0, 1.0], "size": 3}


@pytest.mark.parametrize(
    "d,d_prime,relation",
    [
        ([[0.0], [1.0]], [[0.0], [2.0]], "replace-one"),
        ([0.0, 1.0], [5.0, 1.0], "replace-one"),
        ([[0.0], [1.0]], [[1.0], [2.0], [0.0]], "add-remove"),
        ([[1.0, 2.0], [3.0, 4.0]], [[3.0, 4.0]], "add-remove"),
    ],
)
def test_neighbours_are_accepted(d, d_prime, relation):
    check_neighbours(d, d_prime, relation)


@pytest.mark.parametrize(
    "d,d_prime,relation,message",
    [
        ([[0.0], [1.0]], [[1.0], [2.0]], "replace-one", "not replace-one neighbours.*Found 2 and 2 records differing in 2"),
        ([[0.0]], [[0.0]], "replace-one", "differing in 0"),
        ([[0.0], [1.0]], [[0.0]], "replace-one", "Found 2 and 1 records differing in 1"),
        ([[0.0], [1.0]], [[1.0], [2.0], [3.0]], "add-remove", "not add-remove neighbours.*Found 2 and 3 records differing in 2"),
        ([[0.0]], [[0.0], [1.0], [2.0]], "add-remove", "Found 1 and 3 records differing in 2"),
        ([[0.0, 1.0]], [[0.0]], "add-remove", "same width"),
        ([0.0], [1.0], "swap", "relation must be one of replace-one, add-remove. Found 'swap'"),
    ],
)
def test_non_neighbours_are_rejected(d, d_prime, relation, message):
    with pytest.raises(ValueError, match=message):
        check_neighbours(d, d_prime, relation)


def test_no_spec_gives_the_mechanism_default_pairs_named_in_order():
    mechanism = make_mechanism("report_noisy_max")
    pairs = make_pairs(None, mechanism)
    assert [pair.name for pair in pairs] == [f"p{i}" for i in range(len(mechanism.default_pairs()))]
    assert all(isinstance(pair, NeighbourPair) for pair in pairs)
    assert_allclose(pairs[1].d_prime, mechanism.default_pairs()[1][1])


def test_a_user_mechanism_without_pairs_is_an_error():
    mechanism = make_mechanism(callable="numpy:zeros")
    with pytest.raises(ValueError, match="no default neighbouring pairs"):
        make_pairs(None, mechanism)


def test_explicit_pairs_in_both_forms_and_checked_against_a_relation():
    mechanism = make_mechanism("laplace")
    pairs = make_pairs([([[0.0]], [[1.0]]), {"d": [[0.0], [1.0]], "d_prime": [[0.0]]}], mechanism)
    assert [pair.name for pair in pairs] == ["p0", "p1"] and pairs[1].d_prime.shape == (1, 1)
    with pytest.raises(ValueError, match=r"pairs\[1\]: d and d_prime are not replace-one"):
        make_pairs([([[0.0]], [[1.0]]), ([[0.0], [1.0]], [[0.0]])], mechanism, relation="replace-one")
    with pytest.raises(ValueError, match=r"pairs\[0\] must have exactly the fields d and d_prime"):
        make_pairs([{"d": [0.0], "dprime": [1.0]}], mechanism)


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
@pytest.mark.parametrize("strategy", ["random", "extremes"])
def test_generated_pairs_are_neighbours_inside_the_domain(strategy, relation):
    mechanism = make_mechanism("laplace", {"sensitivity": [1.0, 2.0]})
    spec = {"strategy": strategy, "count": 4, "relation": relation, "domain": DOMAIN}
    pairs = make_pairs(spec, mechanism, rng=0)
    assert len(pairs) == 4
    for pair in pairs:
        check_neighbours(pair.d, pair.d_prime, relation)
        for x in (pair.d, pair.d_prime):
            assert np.all(x >= DOMAIN["low"]) and np.all(x <= DOMAIN["high"])
        assert len(pair.d) == DOMAIN["size"]


def test_random_pairs_are_reproducible_from_the_seed():
    mechanism = make_mechanism("laplace")
    spec = {"strategy": "random", "count": 3}
    first, again, other = (make_pairs(spec, mechanism, rng=seed) for seed in (1, 1, 2))
    assert all(np.array_equal(a.d_prime, b.d_prime) for a, b in zip(first, again))
    assert not np.array_equal(first[0].d, other[0].d)


def test_extremes_move_a_record_between_opposite_corners_first():
    pairs = make_pairs({"strategy": "extremes", "count": 2, "domain": DOMAIN}, make_mechanism("laplace", {"sensitivity": [1.0, 1.0]}))
    d, d_prime = pairs[0].d, pairs[0].d_prime
    assert_allclose(d, np.tile([0.0, -1.0], (3, 1)))
    assert_allclose(d_prime[-1], [1.0, 1.0])


def test_default_domain_is_the_box_of_the_default_pairs():
    # laplace's default pair: records in [0, 1], two per dataset.
    pairs = make_pairs({"strategy": "random", "count": 5}, make_mechanism("laplace"), rng=0)
    for pair in pairs:
        assert pair.d.shape == (2, 1) and np.all((pair.d >= 0.0) & (pair.d <= 1.0))


@pytest.mark.parametrize(
    "spec,message",
    [
        ({"strategy": "grid"}, "strategy must be one of random, extremes, search, on-average. Found 'grid'"),
        ({"strategy": "random", "relation": "swap"}, "relation must be one of replace-one, add-remove"),
        ({"strategy": "random", "count": 0}, r"count \(pairs to generate\) must be an integer from 1 to 1000. Found 0"),
        ({"strategy": "random", "count": 1_000_000}, "count .* from 1 to 1000. Found 1000000"),
        ({"strategy": "random", "count": True}, "count .* Found True"),
        ({"strategy": "search", "candidates": 0}, "candidates .* from 1 to 10000. Found 0"),
        ({"strategy": "search", "screen_samples": 5}, "screen_samples .* from 10 to"),
        ({"strategy": "search", "function_class": "all", "divergence": "kl"}, "a class that estimates 'kl'"),
        ({"strategy": "search", "function_class": "poly00"}, "screening attack.*function_class must be one of"),
        ({"strategy": "random", "domain": {"low": [0.0], "high": [1.0], "size": 10**9}}, "size .* from 1 to 100000"),
        ({"strategy": "random", "domain": {"low": ["0"], "high": [1.0]}}, "domain.low must be a number"),
        ({"strategy": "random", "domain": {"low": [True], "high": [1.0]}}, "domain.low must be a number"),
        ({"strategy": "random", "domain": {"low": [-1e308], "high": [1e308]}}, r"within \+-1e\+100"),
        ({"strategy": "random", "colour": "red"}, "unknown field.*colour"),
        ({"strategy": "random", "domain": {"low": [1.0], "high": [0.0]}}, "low <= high"),
        ({"strategy": "random", "domain": {"low": [0.0], "high": [1.0], "size": 0}}, r"size \(records per dataset\) must be an integer from 1 to 100000"),
        ({"strategy": "random", "domain": [0.0, 1.0]}, "domain must be a table"),
        ({"strategy": "search", "divergence": "renyi"}, "must be 'kl' or 'ipm'"),
    ],
)
def test_bad_specs_name_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        make_pairs(spec, make_mechanism("laplace"), rng=0)


def test_search_ranks_the_more_distinguishable_pair_first():
    pytest.importorskip("attacks.estimate")
    mechanism = make_mechanism("laplace", {"epsilon": 1.0})
    close = (np.array([[0.0]]), np.array([[0.05]]))
    far = (np.array([[0.0]]), np.array([[1.0]]))
    middle = (np.array([[0.0]]), np.array([[0.4]]))
    # At n = 4000 the linear-KL estimates (~0.23 far, ~0.04 middle, ~0.0003 close) are separated by
    # many standard errors (~0.01), so the order is not a coin flip.
    ranked = search_pairs([close, middle, far], mechanism, 2, np.random.default_rng(0), n=4000)
    assert ranked[0] is far and ranked[1] is middle


def test_search_strategy_is_deterministic_given_the_seed():
    pytest.importorskip("attacks.estimate")
    # Without the edge-case probes: the built-in Laplace sum does not clip, so a +inf record wins with them.
    spec = {"strategy": "search", "count": 2, "candidates": 4, "screen_samples": 500, "probes": []}
    mechanism = make_mechanism("laplace")
    first, again = (make_pairs(spec, mechanism, rng=5) for _ in range(2))
    assert all(np.array_equal(a.d_prime, b.d_prime) for a, b in zip(first, again))
    # The extreme pair (a record moved across the whole domain) is the most distinguishable.
    assert np.abs(first[0].d - first[0].d_prime).sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "d,d_prime,distance",
    [
        ([[0.0], [0.0]], [[1.0], [1.0]], 2),
        ([[0.0], [1.0]], [[1.0], [0.0]], 2),  # same size: positions, as the mechanism reads them
        ([[0.0]], [[0.0]], 0),
        ([[0.0], [1.0]], [[1.0], [0.0], [5.0]], 1),  # different sizes: multisets
        ([[0.0], [1.0]], [[2.0], [3.0], [4.0]], 3),
    ],
)
def test_record_distance(d, d_prime, distance):
    from audit.inputs.dataset_distance import record_distance

    assert record_distance(d, d_prime) == record_distance(d_prime, d) == distance


def test_pairs_carry_their_distance():
    far = {"d": [[0.0], [0.0]], "d_prime": [[1.0], [1.0]]}
    pairs = make_pairs([far, ([[0.0]], [[1.0]])], make_mechanism("laplace"))
    assert [pair.distance for pair in pairs] == [2, 1]
    generated = make_pairs({"strategy": "random", "count": 3, "domain": DOMAIN}, make_mechanism("laplace"), rng=0)
    assert all(pair.distance == 1 for pair in generated)
