"""Each search's share of ``[attacks] max_outputs`` (audit.engine.shares): exact integer shares, the cap on the audit,
the least each unit gets, the representation search's small share, and numbers that depend on the config and seed
only (any n_jobs, a resumed run)."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from attacks.sequential import schedule
from audit import run_audit
from audit.engine.shares import REPRESENTATION_WEIGHT, VALUE_WEIGHT, Shares, output_share, unit_weight
from audit.engine.store import TASKS_FILE


def test_one_claim_gives_the_value_search_32_of_33_parts_and_the_representation_search_the_rest():
    weights = [VALUE_WEIGHT, REPRESENTATION_WEIGHT]
    assert output_share(4_000_000, weights, 0, 0) == 4_000_000 * 32 // 33 == 3_878_787
    # the last unit gets all that the units before it left
    assert output_share(4_000_000, weights, 1, 129_500) == 4_000_000 - 129_500
    assert output_share(4_000_000, weights, 1, 3_878_787) == 121_213


def test_weights_by_layer():
    assert unit_weight(["floatbits"]) == REPRESENTATION_WEIGHT
    assert unit_weight(["linear", "threshold"]) == unit_weight(["canary"]) == unit_weight([]) == VALUE_WEIGHT


@pytest.mark.parametrize("weights", [[32, 1], [32, 1, 32, 1], [32, 32, 32], [1, 32, 1, 5]])
def test_units_that_keep_to_their_shares_stay_within_max_outputs_and_each_gets_its_weighted_share(weights):
    # every pattern of use (none, half, all of each share): the total never passes max_outputs and each unit's
    # share is at least its weight's part of the whole, floor(M w_i / sum w) (the units before leave at least theirs)
    total = 1_000_003
    for uses in itertools.product([0.0, 0.5, 1.0], repeat=len(weights)):
        drawn = 0
        for index, use in enumerate(uses):
            share = output_share(total, weights, index, drawn)
            assert share >= total * weights[index] // sum(weights)
            drawn += int(use * share)
        assert drawn <= total


def test_a_fixed_design_takes_its_share_of_the_whole_and_leaves_the_rest_to_flow_on():
    shares = Shares(6_500, None, [VALUE_WEIGHT, REPRESENTATION_WEIGHT, VALUE_WEIGHT], [False, False, True])
    shares.spend({"staged": {"outputs_drawn": 100}})
    shares.spend({"staged": {"outputs_drawn": 50}})
    assert shares.of(2)["max_outputs"] == 6_500 * 32 // 65 == 3_200


def test_a_claim_refuted_by_its_value_search_gives_its_representation_search_only_its_share_of_the_whole():
    # claims 0 and 1, each a value then a representation search; claim 0's value search stops at a violation
    shares = Shares(4_000_000, None, [VALUE_WEIGHT, REPRESENTATION_WEIGHT] * 2, claims=[0, 0, 1, 1])
    shares.spend({"staged": {"outputs_drawn": 500_000, "stop": "violation"}, "claim_index": 0})
    assert shares.of(1)["max_outputs"] == 4_000_000 * 1 // 66 == 60_606  # not what the value search left
    shares.spend({"staged": {"outputs_drawn": 60_606, "stop": "output limit"}, "claim_index": 0})
    # claim 1 is not refuted: its searches share what claim 0 left, by weight
    assert shares.of(2)["max_outputs"] == (4_000_000 - 560_606) * 32 // 33
    shares.spend({"staged": {"outputs_drawn": 1_000, "stop": "decided"}, "claim_index": 1})
    assert shares.of(3)["max_outputs"] == 4_000_000 - 561_606


def test_seconds_flow_on_as_outputs_do():
    shares = Shares(1000, 66.0, [VALUE_WEIGHT, REPRESENTATION_WEIGHT])
    assert shares.of(0) == {"max_outputs": 969, "max_seconds": 64.0}
    shares.spend({"staged": {"outputs_drawn": 400}, "seconds": 6.0})
    assert shares.of(1) == {"max_outputs": 600, "max_seconds": 60.0}
    assert Shares(1000, None, [1]).of(0) == {"max_outputs": 1000, "max_seconds": None}


def test_an_index_outside_the_weights_is_refused():
    with pytest.raises(ValueError, match="index must name one of 2 positive weights"):
        output_share(100, [32, 1], 2, 0)


def _float_leak(dataset, n, rng):
    """Lap(1) of the sum, where an exact zero sum is released on a grid of 2^-20 (a representation finding)."""
    noise = rng.laplace(0.0, 1.0, size=n)
    return np.round(noise * 2.0 ** 20) / 2.0 ** 20 if np.sum(dataset) == 0 else np.sum(dataset) + noise


def _config():
    return {"mechanism": {"callable": "test_shares:_float_leak"},
            "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}],
            "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
            "attacks": {"max_outputs": 8_000}, "run": {"seed": 3}}


def test_the_value_search_runs_first_on_32_of_33_parts_and_the_audit_stays_within_max_outputs():
    # the rounds of 250, 1 000 and 4 000 outputs per dataset cost at least 10 500 outputs on one pair: 16 000 * 32 / 33
    # holds them, an equal share (8 000) the first two only (attacks.sequential.schedule)
    config = _config()
    config["attacks"]["max_outputs"] = 16_000
    table = run_audit(config, progress=False).table
    assert len(table) == 2 and table["function_class"].iloc[1] == "floatbits"  # the value search first
    assert [len(schedule(share, 1)) for share in (16_000 * 32 // 33, 16_000 // 2)] == [3, 2]
    assert table["rounds"].iloc[0] == 3 and table["outputs_drawn"].sum() <= 16_000


@pytest.mark.slow
def test_the_sequential_split_gives_the_same_rows_for_any_n_jobs_and_on_resume(tmp_path):
    one = run_audit(_config(), out_dir=tmp_path / "full", progress=False)
    table = one.table.drop(columns=["seconds", "resumed"], errors="ignore")
    two = run_audit(_config(), n_jobs=2, backend="threading", progress=False).table
    pd.testing.assert_frame_equal(table, two.drop(columns=["seconds", "resumed"], errors="ignore"))
    # a run cut after the value search: the representation search's share comes from the record read back
    lines = (tmp_path / "full" / TASKS_FILE).read_text().splitlines()
    first = lines[:json.loads(lines[0])["search_records"]]
    assert 0 < len(first) < len(lines)
    (tmp_path / "full" / TASKS_FILE).write_text("\n".join(first) + "\n")
    resumed = run_audit(_config(), out_dir=tmp_path / "full", resume=True, progress=False).table
    # the note's lowest set bit is that of every output the audit saw, fewer on resume (left as it is)
    pd.testing.assert_frame_equal(table.drop(columns="note"),
                                  resumed.drop(columns=["seconds", "resumed", "note"], errors="ignore"))
