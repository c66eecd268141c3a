"""Accountant claims: epsilon from training parameters through dp_accounting, checked against Gaussian DP."""

from __future__ import annotations

import json
import math
import re
import sys

import pytest

from audit import run_audit
from audit.config.accounting import claim_source
from audit.theory.accountants import accountant_epsilon
from audit.config.load import ConfigError, load_config
from audit.mechanisms import make_mechanism
from audit.theory.tradeoff import gdp_epsilon

MECHANISM = {"name": "dp_gd_logistic", "params": {"mu": 2.0, "steps": 4}}
ACCOUNTED = {"divergence": "dp", "function_class": "all", "delta": 1e-5, "accountant": "pld"}


def config(claim: dict, mechanism: dict = MECHANISM) -> dict:
    return {"mechanism": mechanism, "claims": [claim], "attacks": {"classes": ["linear"], "n_samples": 200},
            "run": {"seed": 0, "n_jobs": 1}}


def test_full_batch_accounting_is_the_gdp_composition():
    """q = 1: T Gaussian steps of noise multiplier z are exactly (sqrt(T) / z)-GDP (DRS Cor. 3.3), so PLD's epsilon
    is gdp_epsilon's up to its discretization, and RDP's conversion is looser."""
    pytest.importorskip("dp_accounting")
    pld = accountant_epsilon("pld", 1.0, 1.0, 4, 1e-5)
    assert pld == pytest.approx(gdp_epsilon(2.0, 1e-5), rel=1e-4)
    assert accountant_epsilon("rdp", 1.0, 1.0, 4, 1e-5) > pld


def test_the_learner_states_its_training_parameters_and_the_claim_is_the_accountants():
    pytest.importorskip("dp_accounting")
    loaded = load_config(config(ACCOUNTED))
    [claim] = loaded.claims
    assert claim.epsilon == pytest.approx(gdp_epsilon(2.0, 1e-5), rel=1e-4) and claim.delta == 1e-5
    entry = loaded.raw["claims"][0]
    assert entry["accounted"] == {"noise_multiplier": 1.0, "sampling_rate": 1.0, "steps": 4}  # sigma = sqrt(4) / 2
    assert "PLD accountant" in claim_source(entry) and "parameters the mechanism states" in claim_source(entry)


def test_replace_one_accounting_halves_the_noise_multiplier_unless_the_bug_is_planted():
    """T = 10, mu = 1: sigma = sqrt(T) 2 / mu over C_sens = 2C, or (the bug) sigma = sqrt(T) / mu over C; either way
    the accountant reads z = sqrt(10), the claim mu = 1, while the buggy run's true mu is 2."""
    correct = make_mechanism("dp_gd_logistic", {"mu": 1.0, "neighbours": "replace_one"})
    buggy = make_mechanism("dp_gd_logistic",
                           {"mu": 1.0, "neighbours": "replace_one", "replace_one_as_add_remove": True})
    for mechanism, true_mu in ((correct, 1.0), (buggy, 2.0)):
        assert mechanism.training_parameters()["noise_multiplier"] == pytest.approx(math.sqrt(10))
        assert mechanism.true_mu == pytest.approx(true_mu)


@pytest.mark.parametrize("claim, field", [
    ({**ACCOUNTED, "epsilon": 1.0}, "claims[0].epsilon"),
    ({**ACCOUNTED, "divergence": "kl"}, "claims[0].divergence"),
    ({**ACCOUNTED, "accountant": "moments"}, "claims[0].accountant"),
    ({"divergence": "dp", "function_class": "all", "epsilon": 1.0, "steps": 3}, "claims[0].steps"),
    ({**ACCOUNTED, "delta": 0.0, "noise_multiplier": 1.0, "sampling_rate": 1.0, "steps": 1}, "claims[0]"),
])
def test_bad_accountant_claims_are_refused_by_field(claim, field):
    with pytest.raises(ConfigError, match="^" + re.escape(field)):
        load_config(config(claim))


def test_training_parameters_missing_for_a_mechanism_that_states_none():
    with pytest.raises(ConfigError, match=r"^claims\[0\]\.noise_multiplier: missing"):
        load_config(config(ACCOUNTED, {"name": "laplace"}))


def test_without_dp_accounting_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ConfigError, match=r"capaudit\[accounting\]"):
        load_config(config({**ACCOUNTED, "noise_multiplier": 1.0, "sampling_rate": 1.0, "steps": 1}))


def test_report_names_the_claims_source(tmp_path):
    pytest.importorskip("dp_accounting")
    run_audit(config({**ACCOUNTED, "accountant": "rdp"}), out_dir=tmp_path, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["config"]["claims"][0]["epsilon"] > gdp_epsilon(2.0, 1e-5)  # RDP's conversion is looser
    assert "RDP accountant" in results["claims"][0]["note"]
    assert "RDP accountant" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_subsampled_dp_sgd_accounting_matches_the_issue_figures():
    """T = 1000, q = 0.01, sigma = 0.7, delta = 1e-5: PLD 4.618 (issue 35); RDP above it."""
    pytest.importorskip("dp_accounting")
    pld = accountant_epsilon("pld", 0.7, 0.01, 1000, 1e-5)
    assert pld == pytest.approx(4.618, abs=0.01) and accountant_epsilon("rdp", 0.7, 0.01, 1000, 1e-5) > pld


def test_a_dp_sgd_learner_hands_its_sampling_rate_to_the_accountant():
    pytest.importorskip("dp_accounting")
    sgd = {"name": "dp_gd_logistic", "params": {"sigma": 0.7, "sampling_rate": 0.1, "steps": 10}}
    [claim] = load_config(config({**ACCOUNTED, "accountant": "rdp"}, sgd)).claims
    assert claim.epsilon == accountant_epsilon("rdp", 0.7, 0.1, 10, 1e-5)
    assert claim.epsilon < accountant_epsilon("rdp", 0.7, 1.0, 10, 1e-5)  # subsampling amplifies


def test_a_claim_from_the_library_is_the_pld_accountants_whole_privacy_profile():
    """q = 1, T = 4, z = 1 (mu = 2): the PLD profile is mu-GDP's delta(epsilon) (DRS Cor. 2.13) up to its
    discretization, on a grid ending at the epsilon of delta 1e-6; results.json's config as run reads back."""
    pytest.importorskip("dp_accounting")
    import importlib.metadata

    from audit.theory.tradeoff import gaussian_profile

    loaded = load_config(config({"from": "library"}))
    entry = loaded.raw["claims"][0]
    assert entry["divergence"] == "profile" and len(loaded.claims) == len(entry["epsilons"]) == 4
    assert [claim.delta for claim in loaded.claims] == pytest.approx(gaussian_profile(entry["epsilons"], 2.0),
                                                                     rel=1e-3, abs=1e-9)
    assert entry["epsilons"][-1] == pytest.approx(gdp_epsilon(2.0, 1e-6), rel=1e-4)
    assert f"dp_accounting {importlib.metadata.version('dp-accounting')}'s PLD accountant" in entry["reason"]
    assert load_config(config(entry)).claims == loaded.claims


def test_the_pld_profile_is_refused_at_a_distance_it_does_not_state():
    pytest.importorskip("dp_accounting")
    d, _ = make_mechanism(MECHANISM["name"], MECHANISM["params"]).default_pairs()[0]
    far = {**config({"from": "library"}), "pairs": [{"d": d.tolist(), "d_prime": d[:-2].tolist()}]}
    with pytest.raises(ConfigError, match=r"claims\[0\]: dp_accounting's privacy profile .* d_in = 2"):
        load_config(far)
