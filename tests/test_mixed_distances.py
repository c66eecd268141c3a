"""Pairs at several distances in one audit: each pair judged against the claim at its own d_in.

``[neighbours] distance = [1, 2, 6]``: a claim typed by hand is carried to k records apart by group privacy
(audit/config/group_privacy.py), a claim from the library is OpenDP's ``map(d_in)`` at each pair's d_in.
The default tests check the claims row by row against closed forms (the built-in Laplace is seeded, so its audit
is deterministic; OpenDP's test is skipped without the extra and reads at confidence 0.999).  The slow tests
show validity over 20 seeds: a correct mechanism is refuted in at most 3 of 20 audits
(P(Bin(20, 0.05) > 3) = 0.016 at the audits' 5 % error rate).
"""

from __future__ import annotations

import math

import pytest

from audit import run_audit
from audit.config.group_privacy import group_claim, group_delta
from audit.config.load import ConfigError, load_config
from audit.inputs.dataset_distance import record_distance
from audit.inputs.neighbours import make_pairs
from audit.mechanisms import make_mechanism

DISTANCES = [1, 2, 6]


def laplace_audit(claims: list[dict], distance=DISTANCES, mechanism: str = "laplace", params: dict | None = None,
                  **attacks) -> dict:
    """Extremes add-remove pairs on one record in [0, 1], one per distance, of a built-in mechanism."""
    return {"mechanism": {"name": mechanism, "params": params or {"epsilon": 1.0, "sensitivity": 1.0}},
            "neighbours": {"strategy": "extremes", "relation": "add-remove", "distance": distance, "count": 1,
                           "domain": {"low": [0.0], "high": [1.0], "size": 1}},
            "claims": claims, "attacks": {"classes": ["threshold"], "n_samples": 2000, **attacks}}


def test_a_hand_typed_dp_claim_is_judged_at_k_epsilon_on_pairs_k_records_apart():
    result = run_audit(laplace_audit([{"divergence": "dp", "function_class": "all", "epsilon": 1.0}], n_samples=1000),
                       progress=False)
    pairs = {pair["name"]: pair for pair in result.pairs}
    assert sorted(pair["d_in"] for pair in pairs.values()) == DISTANCES
    for row in result.rows:
        pair = pairs[row.pair]
        assert row.d_in == pair["d_in"] == record_distance(pair["d"], pair["d_prime"])
        assert row.claim == 1.0 * row.d_in  # Dwork and Roth, Theorem 2.2: k epsilon
        assert math.isnan(row.theory_bound) == (row.d_in > 1)  # the closed-form bounds are for neighbours
    assert sorted(claim["d_in"] for claim in result.claims) == DISTANCES
    assert result.verdict != "violation"


def test_an_opendp_laplace_is_judged_at_its_map_of_each_pairs_d_in():
    """Every row's claim is ``map(d_in)`` of the OpenDP measurement (d_in / scale for the discrete Laplace)."""
    pytest.importorskip("opendp", reason="needs the extra capaudit[opendp]: pip install \".[opendp]\"")
    params = {"input_domain": "vector_domain(atom_domain(T=i64))", "input_metric": "symmetric_distance()",
              "chain": [{"constructor": "make_clamp", "bounds": [0, 1]}, {"constructor": "then_sum"},
                        {"constructor": "then_laplace", "scale": 2.0}]}
    audit = {"mechanism": {"name": "opendp.measurement", "params": params},
             "pairs": [{"d": [0], "d_prime": [0, 1]}, {"d": [0], "d_prime": [0, 1, 1]},
                       {"d": [0], "d_prime": [0, 1, 1, 1, 1, 1, 1]}],
             "claims": [{"from": "library"}],
             "attacks": {"classes": ["atoms"], "n_samples": 1000, "confidence": 0.999}}
    measurement = make_mechanism("opendp.measurement", params)
    result = run_audit(audit, progress=False)
    assert sorted({row.d_in for row in result.rows}) == DISTANCES
    for row in result.rows:
        assert row.claim == pytest.approx(measurement.library_claim(int(row.d_in)).table["epsilon"], rel=1e-12)
        assert row.claim == pytest.approx(row.d_in / 2.0, rel=1e-6)
    assert result.verdict != "violation"


@pytest.mark.parametrize("divergence, fields, k, expected", [
    ("dp", {"epsilon": 0.5, "delta": 1e-6}, 3, (1.5, 3 * math.exp(1.0) * 1e-6)),
    ("ipm", {"epsilon": 0.2}, 4, (0.8, None)),
    ("zcdp", {"epsilon": 0.125}, 6, (4.5, None)),
    ("gdp", {"epsilon": 0.5}, 2, (1.0, None)),
])
def test_the_group_privacy_rules_give_their_closed_forms(divergence, fields, k, expected):
    scaled = group_claim({"divergence": divergence, "function_class": "all", **fields}, k, "claims[0]")
    assert scaled["epsilon"] == pytest.approx(expected[0], rel=1e-12)
    if expected[1] is not None:
        assert scaled["delta"] == pytest.approx(expected[1], rel=1e-12)


@pytest.mark.parametrize("epsilon, k", [(0.1, 2), (1.0, 6), (2.0, 3)])
def test_the_delta_rule_bounds_the_chain_of_k_neighbours(epsilon, k):
    """delta (1 + e^eps + ... + e^((k-1) eps)), the chain's delta, is at most k e^((k-1) eps) delta."""
    chain = 1e-6 * sum(math.exp(i * epsilon) for i in range(k))
    assert chain <= group_delta(epsilon, 1e-6, k) * (1 + 1e-12)


@pytest.mark.parametrize("claim, neighbours, message", [
    ({"divergence": "kl", "function_class": "all", "epsilon": 0.3}, {},
     r"claims\[0\].divergence: a kl claim typed by hand cannot be carried to pairs 2 records apart .* Found 'kl'"),
    ({"divergence": "zcdp", "function_class": "linear", "epsilon": 0.3}, {},
     r"claims\[0\].function_class: the group-privacy rule of a zcdp claim .* use function_class = \"all\""),
    ({"divergence": "profile", "function_class": "all", "profile": "gaussian", "epsilon": 1.0}, {},
     r"claims\[0\].divergence: a profile claim typed by hand cannot be carried"),
    ({"divergence": "dp", "function_class": "all", "epsilon": 1.0}, {"distance": [1, 1]},
     r"neighbours.distance must be an integer or a list of distinct integers from 1 to 1000, e.g. \[1, 2, 6\]\. "
     r"Found \[1, 1\]"),
    ({"divergence": "dp", "function_class": "all", "epsilon": 1.0}, {"distance": []},
     r"neighbours.distance must be .* Found \[\]"),
    ({"divergence": "kl", "function_class": "all", "epsilon": 1.0, "on_average": True},
     {"strategy": "on-average", "distribution": {"name": "normal"}, "size": 3, "distance": [1, 2]},
     r"neighbours.distance: an on-average claim averages over pairs of one law; give one integer"),
])
def test_claims_at_several_distances_refuse_what_has_no_sound_rule(claim, neighbours, message):
    audit = laplace_audit([claim], distance=[1, 2])
    audit["neighbours"].update(neighbours)
    if neighbours.get("strategy") == "on-average":
        del audit["neighbours"]["domain"]
    with pytest.raises(ConfigError, match=message):
        load_config(audit)


def test_the_search_generates_count_pairs_at_each_distance_named_in_order():
    spec = {"strategy": "search", "relation": "add-remove", "distance": [1, 3], "count": 2, "candidates": 2,
            "screen_samples": 50, "probes": [], "domain": {"low": [0.0], "high": [1.0], "size": 3}}
    pairs = make_pairs(spec, make_mechanism("laplace", {"epsilon": 1.0}), 0)
    assert [pair.name for pair in pairs] == ["p0", "p1", "p2", "p3"]
    assert [pair.distance for pair in pairs] == [1, 1, 3, 3]
    kept = {entry.pair for entry in pairs.screening if entry.pair}
    assert kept == {"p0", "p1", "p2", "p3"}


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, params, claim", [
    ("laplace", {"epsilon": 1.0, "sensitivity": 1.0}, {"divergence": "dp", "function_class": "all", "epsilon": 1.0}),
    ("gaussian", {"sigma": 2.0, "sensitivity": 1.0},
     {"divergence": "zcdp", "function_class": "all", "epsilon": 0.125}),  # rho = 1 / (2 sigma^2), k^2 rho at k
])
def test_correct_mechanisms_at_mixed_distances_are_refuted_in_at_most_3_of_20_seeds(mechanism, params, claim):
    audit = laplace_audit([claim], mechanism=mechanism, params=params, n_samples=4000,
                          classes=["linear", "threshold"])
    verdicts = [run_audit({**audit, "run": {"seed": seed}}, progress=False).verdict for seed in range(20)]
    assert verdicts.count("violation") <= 3, verdicts


@pytest.mark.slow
def test_an_opendp_laplace_from_its_map_at_mixed_distances_is_refuted_in_at_most_3_of_20_runs():
    pytest.importorskip("opendp", reason="needs the extra capaudit[opendp]: pip install \".[opendp]\"")
    params = {"input_domain": "vector_domain(atom_domain(T=i64))", "input_metric": "symmetric_distance()",
              "chain": [{"constructor": "make_clamp", "bounds": [0, 1]}, {"constructor": "then_sum"},
                        {"constructor": "then_laplace", "scale": 2.0}]}
    audit = {"mechanism": {"name": "opendp.measurement", "params": params},
             "neighbours": {"strategy": "extremes", "relation": "add-remove", "distance": DISTANCES, "count": 1,
                            "domain": {"low": [0], "high": [1], "size": 2}},
             "claims": [{"from": "library"}], "attacks": {"classes": ["linear", "atoms"], "n_samples": 4000}}
    verdicts = [run_audit({**audit, "run": {"seed": seed}}, progress=False).verdict for seed in range(20)]
    assert verdicts.count("violation") <= 3, verdicts


# ---------------------------------------------------------------- explicit [[pairs]] at their own distance

DP_CLAIM = {"divergence": "dp", "function_class": "all", "epsilon": 0.6}


def explicit_audit(pairs: list[dict], claims: list[dict], mechanism: str = "laplace", params: dict | None = None) -> dict:
    return {"mechanism": {"name": mechanism, "params": params or {"epsilon": 1.0, "sensitivity": 1.0}},
            "pairs": pairs, "claims": claims, "attacks": {"classes": ["threshold"], "n_samples": 1000}}


FAR = [{"d": [[0.0]], "d_prime": [[1.0]]},  # one record replaced: 1
       {"d": [[0.0]], "d_prime": [[0.0], [1.0], [1.0]]},  # two added: 2
       {"d": [[0.0], [0.0]], "d_prime": [[1.0], [1.0]], "relation": "add-remove", "distance": 4}]  # 2 replaced: 4


def test_explicit_pairs_carry_a_hand_typed_claim_to_each_pairs_distance_and_rows_name_it():
    config = load_config(explicit_audit(FAR, [DP_CLAIM]))
    assert [(claim.epsilon, claim.d_in) for claim in config.claims] == [(0.6, 1), (1.2, 2), (2.4, 4)]
    assert config.pair_d_in == (1, 2, 4) and config.claim_distances == (1, 2, 4)
    result = run_audit({**explicit_audit(FAR, [DP_CLAIM]), "attacks": {"classes": ["threshold"], "n_samples": 200},
                        "run": {"n_jobs": 1}}, progress=False)
    assert [pair["d_in"] for pair in result.pairs] == [1, 2, 4]
    assert {(row.pair, row.d_in, row.claim) for row in result.rows} == {("p0", 1, 0.6), ("p1", 2, 1.2), ("p2", 4, 2.4)}
    assert [(claim["claim"], claim["d_in"]) for claim in result.claims] == [(0.6, 1), (1.2, 2), (2.4, 4)]


def test_explicit_pairs_at_one_distance_leave_the_claims_as_typed():
    config = load_config(explicit_audit(FAR[:1] * 2, [DP_CLAIM]))
    assert [(claim.epsilon, claim.d_in) for claim in config.claims] == [(0.6, None)]
    assert config.pair_d_in == () and config.claim_distances == ()


def test_a_claim_stated_at_distance_s_holds_as_typed_up_to_s_and_is_carried_ceil_k_over_s_steps():
    pairs = [{"d": [[0.0]], "d_prime": [[0.0]] + [[1.0]] * k} for k in (1, 2, 3, 5)]
    kl = {"divergence": "kl", "function_class": "threshold", "epsilon": 0.3, "distance": 5}
    config = load_config(explicit_audit(pairs, [{**DP_CLAIM, "epsilon": 0.5, "distance": 2}, kl]))
    # m = ceil(k / 2) = 1, 1, 2, 3; the kl claim, stated for pairs at most 5 apart, is one claim for every pair
    assert [(claim.divergence, claim.epsilon, claim.d_in) for claim in config.claims] == [
        ("dp", 0.5, 1), ("dp", 0.5, 2), ("dp", 1.0, 3), ("dp", 1.5, 5), ("kl", 0.3, None)]


def test_an_integer_neighbours_distance_is_the_claims_default_and_a_stated_distance_carries_them():
    audit = laplace_audit([DP_CLAIM], distance=3)
    audit["neighbours"]["domain"]["size"] = 3
    assert [(claim.epsilon, claim.d_in) for claim in load_config(audit).claims] == [(0.6, None)]
    audit["claims"] = [{**DP_CLAIM, "distance": 1}]
    assert [(claim.epsilon, claim.d_in) for claim in load_config(audit).claims] == [(1.8, 3)]


def test_query_answers_are_apart_by_their_norm_rounded_up():
    """report_noisy_max reads answers of sensitivity 1 each: [0, 0] against [2.5, 0] is ceil(2.5) = 3 apart."""
    pairs = [{"d": [0.0, 0.0], "d_prime": [1.0, -1.0]}, {"d": [0.0, 0.0], "d_prime": [2.5, 0.0]}]
    config = load_config(explicit_audit(pairs, [{**DP_CLAIM, "function_class": "atoms"}], "report_noisy_max",
                                        {"epsilon": 0.6}) | {"attacks": {"classes": ["atoms"], "n_samples": 1000}})
    assert [(claim.epsilon, claim.d_in) for claim in config.claims] == [(0.6, 1), (1.8, 3)]


def test_an_opendp_measurement_counts_distance_in_its_input_metric():
    """Symmetric distance: one record replaced is 2 apart, so the claim typed for add-remove neighbours is 2 epsilon."""
    pytest.importorskip("opendp", reason="needs the extra capaudit[opendp]: pip install \".[opendp]\"")
    params = {"input_domain": "vector_domain(atom_domain(T=i64))", "input_metric": "symmetric_distance()",
              "chain": [{"constructor": "make_clamp", "bounds": [0, 1]}, {"constructor": "then_sum"},
                        {"constructor": "then_laplace", "scale": 2.0}]}
    pairs = [{"d": [0], "d_prime": [0, 1]}, {"d": [0], "d_prime": [1]}]
    config = load_config(explicit_audit(pairs, [{**DP_CLAIM, "epsilon": 0.5}], "opendp.measurement", params)
                         | {"attacks": {"classes": ["atoms"], "n_samples": 1000}})
    assert [(claim.epsilon, claim.d_in) for claim in config.claims] == [(0.5, 1), (1.0, 2)]
    replaced = load_config(explicit_audit([{**pairs[1], "relation": "replace-one"}, pairs[0]],
                                          [{**DP_CLAIM, "epsilon": 0.5}], "opendp.measurement", params)
                           | {"attacks": {"classes": ["atoms"], "n_samples": 1000}})
    # with relation = "replace-one" the pair is 1 apart (one record replaced): both are neighbours, the claim as typed
    assert [(claim.epsilon, claim.d_in) for claim in replaced.claims] == [(0.5, None)] and replaced.pair_d_in == ()


@pytest.mark.parametrize("pairs, claim, message", [
    (FAR, {"divergence": "kl", "function_class": "linear", "epsilon": 0.3},
     r"^pairs\[1\]: claims\[0\]\.divergence: a kl claim typed by hand cannot be carried to pairs 2 records apart "
     r"\(it is stated for pairs at most 1 apart.*give claims\[0\]\.distance = 2 .* Found 'kl'\.$"),
    (FAR, {"divergence": "zcdp", "function_class": "linear", "epsilon": 0.3},
     r"^pairs\[1\]: claims\[0\]\.function_class: .* use function_class = \"all\", or give claims\[0\]\.distance = 2"),
    (FAR[:1] + [{"d": [[0.0]], "d_prime": [[0.0]]}], DP_CLAIM,
     r"^pairs\[1\]: d and d_prime are one dataset \(0 apart\): .* remove the pair or give a d_prime that differs\.$"),
    ([{"d": [[0.0]], "d_prime": [[1.0]], "distance": 2}], DP_CLAIM,
     r"^pairs\[0\]\.distance: d and d_prime are 1 records apart \(added, removed or replaced\), not 2; give "
     r"distance = 1 .* Found 2\.$"),
    (FAR, {**DP_CLAIM, "distance": 0}, r"^claims\[0\]\.distance: must be a whole number from 1 to 1000\. Found 0\.$"),
    (FAR, {"from": "library", "distance": 2}, r"^claims\[0\]\.distance: a claim from the library takes .* from the privacy map; remove distance"),
])
def test_explicit_pairs_refuse_what_cannot_be_carried_naming_the_pair(pairs, claim, message):
    with pytest.raises(ConfigError, match=message):
        load_config(explicit_audit(pairs, [claim]))


@pytest.mark.parametrize("epsilon, m, expected", [
    (0.6, 6, 3.6), (0.6, 2, 1.2), (0.1, 3, 0.30000000000000004), (0.7, 3, 2.1), (1 / 3, 3, 1.0),
])
def test_a_carried_value_is_rounded_to_15_digits_only_where_that_is_not_below_the_rule(epsilon, m, expected):
    """6 x 0.6 is 3.5999999999999996 in floating point, below 6 x float(0.6) is float 3.6: written 3.6.  3 x 0.1
    rounds to 0.3, whose float is below 3 x float(0.1): the next float up, 0.30000000000000004, is written."""
    from fractions import Fraction

    from attacks.vocabulary import DP
    from audit.config.group_privacy import group_epsilon

    carried = group_epsilon(DP, epsilon, m)
    assert carried == expected and Fraction(carried) >= m * Fraction(epsilon)


def test_carried_values_are_never_below_the_rule_and_at_most_5e_15_above():
    from fractions import Fraction

    from attacks.vocabulary import DP, ZCDP
    from audit.config.group_privacy import group_delta, group_epsilon

    for epsilon in [i / 10 for i in range(1, 60)] + [1e-9 * i for i in range(1, 30)] + [math.pi, 1 / 7, 123.456]:
        for m in range(2, 13):
            for kind, factor in ((DP, m), (ZCDP, m * m)):
                exact = factor * Fraction(epsilon)
                carried = Fraction(group_epsilon(kind, epsilon, m))
                assert exact <= carried <= exact * (1 + Fraction(5, 10**15)), (epsilon, m, kind)
            delta = group_delta(epsilon, 1e-7, m)
            assert delta == 1.0 or Fraction(delta) >= m * Fraction(math.exp((m - 1) * epsilon)) * Fraction(1e-7)
            assert (delta == 1.0) == (m * math.exp(min((m - 1) * epsilon, 700.0)) * 1e-7 >= 1.0)
