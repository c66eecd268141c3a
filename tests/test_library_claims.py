"""Claims read from OpenDP's privacy maps (``opendp.measurement``, ``[[claims]] from = "library"``).

Skipped, naming the extra, when OpenDP does not import.  The default tests
are deterministic (distances, the maps' values, config reading); OpenDP
cannot be seeded, so the audits that sample are slow validity tests over 20
runs: a claim read from a correct measurement's map is refuted in at most 3
of 20 runs (P(Bin(20, 0.05) > 3) = 0.016 at the audits' 5 % error rate).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("opendp", reason="needs the extra capaudit[opendp]: pip install \".[opendp]\"")

from audit import run_audit  # noqa: E402
from audit.config.load import ConfigError, load_config  # noqa: E402
from audit.mechanisms import make_mechanism  # noqa: E402
from audit.mechanisms.adapters.opendp_measurement import opendp_value  # noqa: E402

FLOATS = "vector_domain(atom_domain(T=f64, nan=False))"
INTEGERS = "vector_domain(atom_domain(T=i64))"


def noisy_sum(noise: str = "then_laplace", scale: float = 1.0, metric: str = "symmetric_distance()",
              domain: str = FLOATS) -> dict:
    """Clamp to [0, 1], sum, add noise; under change-one and Hamming distance on 3 records (sized data)."""
    bounds = [0, 1] if domain == INTEGERS else [0.0, 1.0]
    sized = metric in ("change_one_distance()", "hamming_distance()")
    return {"input_domain": domain.replace("))", "), size=3)") if sized else domain, "input_metric": metric,
            "chain": [*([{"constructor": "then_metric_unbounded"}] if sized else []),
                      {"constructor": "then_clamp", "bounds": bounds}, {"constructor": "then_sum"},
                      {"constructor": noise, "scale": scale}]}


NOISY_MAX = {"input_domain": INTEGERS, "input_metric": "linf_distance(T=i64)",
             "chain": [{"constructor": "make_noisy_max", "output_measure": "zero_concentrated_divergence()",
                        "scale": 1.0}]}


def config(params: dict, claim: dict | None = None, **tables) -> dict:
    return {"mechanism": {"name": "opendp.measurement", "params": params},
            "claims": [claim or {"from": "library"}], **tables}


@pytest.mark.parametrize("metric, d, d_prime, expected", [
    ("symmetric_distance()", [0, 1], [0, 1, 1, 1], 2),
    ("symmetric_distance()", [0, 0, 0], [0, 1, 1], 4),
    ("change_one_distance()", [0, 0, 0], [0, 1, 1], 2),
    ("hamming_distance()", [0, 1, 0], [1, 0, 0], 2),
    ("insert_delete_distance()", [0, 1], [1, 0], 2),
])
def test_the_pairs_distance_is_read_in_the_input_metric(metric, d, d_prime, expected):
    mechanism = make_mechanism("opendp.measurement", noisy_sum(metric=metric))
    assert mechanism.input_distance(np.array(d, float), np.array(d_prime, float)) == expected


def test_a_score_vector_is_at_its_linf_distance():
    mechanism = make_mechanism("opendp.measurement", NOISY_MAX)
    assert mechanism.input_distance(np.array([0.0, 0.0]), np.array([1.0, -1.0])) == 1


@pytest.mark.parametrize("relation, distance, metric, expected", [
    ("add-remove", 3, "symmetric_distance()", 3), ("replace-one", 3, "symmetric_distance()", 6),
    ("replace-one", 3, "change_one_distance()", 3),
])
def test_generated_pairs_have_the_d_in_of_their_relation(relation, distance, metric, expected):
    assert make_mechanism("opendp.measurement", noisy_sum(metric=metric)).relation_distance(relation, distance) == expected


@pytest.mark.parametrize("d_in", [1, 2, 6])
def test_the_claims_are_the_maps_closed_forms(d_in):
    laplace = make_mechanism("opendp.measurement", noisy_sum(scale=2.0)).library_claim(d_in)
    assert laplace.table["divergence"] == "dp" and math.isclose(laplace.table["epsilon"], d_in / 2.0, rel_tol=1e-6)
    assert "MaxDivergence" in laplace.source and f"d_in = {d_in}" in laplace.source
    gaussian = make_mechanism("opendp.measurement", noisy_sum("then_gaussian", 2.0)).library_claim(d_in)
    assert gaussian.table["divergence"] == "zcdp"
    assert math.isclose(gaussian.table["epsilon"], d_in**2 / (2 * 2.0**2), rel_tol=1e-6)


def test_a_noisy_max_index_under_zcdp_gives_renyi_claims_at_rho_alpha():
    loaded = load_config(config(NOISY_MAX, {"from": "library", "alpha": [2, 4]}, pairs=[{"d": [0, 0], "d_prime": [1, -1]}]))
    assert [(c.divergence, c.function_class, c.alpha, c.epsilon) for c in loaded.claims] == [
        ("renyi", "all", (2.0,), 1.0), ("renyi", "all", (4.0,), 2.0)]
    assert loaded.claim_distances == (1,)
    assert load_config(loaded.raw).claims == loaded.claims  # the zCDP claim as run, with its reason, reads back
    assert "opendp" in loaded.raw["claims"][0]["reason"] and "rho = 0.5" in loaded.raw["claims"][0]["reason"]


def test_neighbours_at_distance_k_give_the_map_at_k_and_the_config_as_run_reads_back():
    loaded = load_config(config(noisy_sum(), neighbours={"strategy": "extremes", "relation": "add-remove",
                                                         "distance": 3, "domain": {"low": [0.0], "high": [1.0]}}))
    assert loaded.claim_distances == (3,) and math.isclose(loaded.claims[0].epsilon, 3.0, rel_tol=1e-6)
    assert load_config(loaded.raw).claims == loaded.claims  # results.json's config holds the map's values
    wrong = {**loaded.raw, "claims": [{**loaded.raw["claims"][0], "epsilon": 1.0}]}
    with pytest.raises(ConfigError, match=r"claims\[0\].epsilon: a claim from the library takes its values"):
        load_config(wrong)


@pytest.mark.parametrize("claim, tables, message", [
    ({"from": "docs"}, {}, r'claims\[0\].from: must be "library"'),
    ({"from": "library", "on_average": True}, {}, r"claims\[0\].on_average: a claim from the library takes its"),
    ({"from": "library", "epsilon": 0.1}, {}, r"claims\[0\].epsilon: .* the privacy map, which gives epsilon = 2.0"),
    ({"from": "library", "alpha": [2]}, {}, r"claims\[0\].alpha: this measurement's map gives a dp claim"),
    ({"from": "library"}, {"pairs": [{"d": [0.0], "d_prime": [1.0]}, {"d": [0.0], "d_prime": [0.0]}]},
     r"pairs\[1\]: d and d_prime are one dataset \(0 apart\)"),
    ({"from": "library"}, {}, r"has no default pairs; give \[\[pairs\]\] or \[neighbours\]"),
])
def test_claims_from_the_library_refuse_what_they_cannot_read(claim, tables, message):
    tables = tables or ({"pairs": [{"d": [0.0], "d_prime": [1.0]}]} if "no default" not in message else {})
    with pytest.raises(ConfigError, match=message):
        load_config(config(noisy_sum(), claim, **tables))


def test_a_callable_states_no_privacy_map():
    with pytest.raises(ConfigError, match='from = "library" reads a library'):
        load_config({"mechanism": {"callable": "numpy:zeros"}, "pairs": [{"d": [0.0], "d_prime": [1.0]}],
                     "claims": [{"from": "library"}]})


@pytest.mark.parametrize("text", ["__import__('os')", "vector_domain(atom_domain(T=f64)).__class__", "open('x')"])
def test_expressions_read_only_opendp_constructors(text):
    with pytest.raises(ValueError, match="only calls of OpenDP's domain, metric and measure constructors"):
        opendp_value(text)


def test_one_audit_of_a_correct_map_at_d_in_2_reads_no_violation():
    """One run (OpenDP is not seedable) at confidence 0.999: a chance violation has probability below 0.001."""
    result = run_audit(config(noisy_sum(domain=INTEGERS), pairs=[{"d": [0, 0], "d_prime": [0, 0, 1, 1]}],
                              attacks={"classes": ["atoms"], "n_samples": 2000, "confidence": 0.999}))
    assert result.rows[0].claim == pytest.approx(2.0, rel=1e-6)
    assert result.verdict != "violation"


@pytest.mark.slow
@pytest.mark.parametrize("noise, domain", [("then_laplace", FLOATS), ("then_gaussian", FLOATS),
                                           ("then_laplace", INTEGERS)])
@pytest.mark.parametrize("d_in", [1, 2, 6])
def test_correct_maps_at_d_in_1_2_6_are_refuted_in_at_most_3_of_20_runs(noise, domain, d_in):
    neighbours = {"strategy": "extremes", "relation": "add-remove", "distance": d_in, "count": 1,
                  "domain": {"low": [0.0], "high": [1.0], "size": 2}}
    audit = config(noisy_sum(noise, domain=domain), neighbours=neighbours,
                   attacks={"classes": ["linear", "atoms"], "n_samples": 4000})
    verdicts = [run_audit({**audit, "run": {"seed": seed}}).verdict for seed in range(20)]
    assert verdicts.count("violation") <= 3, verdicts


@pytest.mark.slow
def test_the_search_audits_a_user_owning_three_records_against_the_map_at_d_in_3():
    """search at distance 3 (add-remove: one user's 3 records): every pair at d_in = 3, the claim epsilon = 3 / scale."""
    neighbours = {"strategy": "search", "relation": "add-remove", "distance": 3, "count": 2, "candidates": 4,
                  "screen_samples": 200, "domain": {"low": [0], "high": [1], "size": 3}}
    result = run_audit(config(noisy_sum(domain=INTEGERS, scale=2.0), neighbours=neighbours,
                              attacks={"classes": ["linear", "atoms"], "n_samples": 2000, "confidence": 0.999}))
    assert all(pair["d_prime"] and len(pair["d_prime"]) - len(pair["d"]) == 3 for pair in result.pairs)
    assert result.rows[0].claim == pytest.approx(1.5, rel=1e-6)
    assert result.verdict != "violation"


@pytest.mark.parametrize("params, message", [
    ({"chain": "then_laplace"}, "chain must be a non-empty list of tables"),
    ({"chain": [{"constructor": "then_nothing"}]}, r"chain\[0\].constructor: OpenDP has no constructor 'then_nothing'"),
    ({"chain": [{"scale": 1.0}]}, r"chain\[0\] must be a table with constructor"),
    ({"chain": [{"constructor": "then_clamp", "bounds": [0.0, 1.0]}]}, "the chain must end in a measurement"),
    ({"input_metric": "l1_distance(T=f64)"}, "OpenDP refused the measurement"),
])
def test_a_chain_opendp_refuses_is_a_one_line_error(params, message):
    with pytest.raises(ValueError, match=message):
        make_mechanism("opendp.measurement", {**noisy_sum(), **params})


@pytest.mark.parametrize("name, params, expected", [
    ("opendp.laplace", {"scale": 2.0}, ("dp", 0.5)), ("opendp.laplace_int", {"scale": 4.0}, ("dp", 0.25)),
    ("opendp.gaussian", {"scale": 2.0}, ("zcdp", 0.125)),
])
def test_the_sum_adapters_claim_is_their_map_at_one_record(name, params, expected):
    loaded = load_config({"mechanism": {"name": name, "params": params}, "claims": [{"from": "library"}]})
    divergence, value = expected
    assert loaded.claim_distances == (1,) and loaded.raw["claims"][0]["divergence"] == divergence
    assert math.isclose(loaded.raw["claims"][0]["epsilon"], value, rel_tol=1e-6)
    assert "at d_in = sensitivity = 1" in loaded.raw["claims"][0]["reason"]
    far = {"d": [[0.0], [0.0]], "d_prime": [[1.0], [1.0]]}
    with pytest.raises(ConfigError, match="states its claim for neighbouring datasets"):
        load_config({"mechanism": {"name": name, "params": params}, "pairs": [far], "claims": [{"from": "library"}]})


def test_the_measurement_is_drawn_in_batches_of_independent_releases():
    """opendp.measurement draws BATCH releases a call through OpenDP's composition of copies of the measurement:
    2 500 noisy-max indices on [1, -1] (3 calls, the last a partial batch) give index 1 with the exponential
    mechanism's 1 / (1 + e^2) (scale 1) and no lag-1 correlation, within 5 standard errors; a measure OpenDP does
    not compose (zCDP to (epsilon, delta)) is called once per output: its Gaussian has mean 0 and sd 1."""
    from audit.mechanisms.adapters.opendp_measurement import BATCH

    n = 2 * BATCH + 500
    index = make_mechanism("opendp.measurement", NOISY_MAX)._sample(np.array([[1], [-1]]), n, np.random.default_rng(0))
    p = 1 / (1 + math.e**2)
    assert index.shape == (n, 1) and set(np.unique(index)) <= {0.0, 1.0}
    assert abs(index.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    assert abs(np.corrcoef(index[:-1, 0], index[1:, 0])[0, 1]) < 5 / math.sqrt(n)
    profile = {"input_domain": "atom_domain(T=f64, nan=False)", "input_metric": "absolute_distance(T=f64)",
               "chain": [{"constructor": "make_gaussian", "scale": 1.0}, {"combinator": "make_zCDP_to_approxDP"}]}
    gaussian = make_mechanism("opendp.measurement", profile)._sample(np.array([[0.0]]), 1100, np.random.default_rng(0))
    assert gaussian.shape == (1100, 1)
    assert abs(gaussian.mean()) < 5 / math.sqrt(1100) and abs(gaussian.std() - 1) < 5 / math.sqrt(2 * 1100)


@pytest.mark.slow
def test_permute_and_flip_under_the_zcdp_map_is_refuted_on_the_index():
    """OpenDP #2911's scenario (benchmarks/bench_real_bugs.py --claims): Renyi 1.091, 1.377 against 0.75, 1.0."""
    result = run_audit(_real_bugs()._noisy_max_case(described=True), progress=False)
    assert result.verdict == "violation"


def _real_bugs():
    """benchmarks/bench_real_bugs.py read from its file (a ``benchmarks`` package installed elsewhere may shadow it)."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "bench_real_bugs", Path(__file__).parents[1] / "benchmarks" / "bench_real_bugs.py")
    bench = sys.modules["bench_real_bugs"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(bench)
    return bench


STAND_IN = {"callable": "numpy:zeros"}
"""A callable in place of the benchmark's own (the claims and pairs are what these tests read)."""


def test_the_score_vectors_of_opendp_2911_are_declared_neighbours_so_the_zcdp_claim_is_not_carried():
    """A callable's inputs are no records: [0, 0] against [1, -1] counts 2 records, but the pair declares its
    distance 1 (L-infinity), so the claim is rho alpha as typed; carried it would be 4 rho alpha and hide the bug."""
    noisy_max = load_config({**_real_bugs()._noisy_max_case(described=True), "mechanism": STAND_IN})
    assert noisy_max.claim_distances == () and [c.epsilon for c in noisy_max.claims] == pytest.approx([0.75, 1.0, 2.0])


def test_the_group_by_claim_of_opendp_2945_is_stated_for_its_pairs_3_records():
    pytest.importorskip("polars")
    group_by = load_config({**_real_bugs()._group_by_case(3), "mechanism": STAND_IN})
    assert group_by.claim_distances == () and [c.epsilon for c in group_by.claims] == pytest.approx([1.0])


def test_the_group_by_map_of_opendp_2945_states_half_the_true_epsilon_at_d_in_6():
    """OpenDP #2945 (benchmarks/bench_real_bugs.py --claims): with max_length = 3 the grouped sum's map at d_in = 6
    is 3 rows x 10 / scale 30 = 1, though the issue's pair (sums 30 and -30, every row replaced) is at epsilon 2;
    max_length = 6 gives the fix's 2.  Needs polars (OpenDP's extra)."""
    pytest.importorskip("polars")
    bench = _real_bugs()
    buggy, fixed = bench._group_by_case(3), bench._group_by_case(6)
    assert [buggy["claims"][0]["epsilon"], fixed["claims"][0]["epsilon"]] == pytest.approx([1.0, 2.0])
    released = bench.grouped_sum(np.array(bench.GROUP_PAIR["d"]), 400, np.random.default_rng(0))
    assert abs(released.mean() - 30.0) < 5 * 30.0 * math.sqrt(2) / math.sqrt(400)  # discrete Laplace sd ~ 30 sqrt 2


def test_the_grouped_sum_drawn_in_batches_is_the_one_sum_release_drawn_independently():
    """grouped_sum draws GROUP_BATCH outputs a library call, each a column of copies of the one noisy sum: over
    2 500 outputs (3 calls, the last a partial batch) their mean is the sum 30, their variance the discrete Laplace's
    2 e^(-1/s) / (1 - e^(-1/s))^2 at s = 30 (1 799.7), and consecutive outputs are uncorrelated (z-score bounds of 5
    at this sample size: the excess kurtosis 3 of the Laplace widens the variance's)."""
    pytest.importorskip("polars")
    bench = _real_bugs()
    n = 2 * bench.GROUP_BATCH + 500
    released = bench.grouped_sum(np.array(bench.GROUP_PAIR["d"]), n, np.random.default_rng(0)).ravel()
    decay = math.exp(-1 / bench.GROUP_SCALE)
    variance = 2 * decay / (1 - decay) ** 2
    assert released.shape == (n,)
    assert abs(released.mean() - 30.0) < 5 * math.sqrt(variance / n)
    assert abs(released.var() / variance - 1) < 5 * math.sqrt((2 + 3) / n)  # var of s^2 / sigma^2: (2 + kurtosis) / n
    assert abs(np.corrcoef(released[:-1], released[1:])[0, 1]) < 5 / math.sqrt(n)
