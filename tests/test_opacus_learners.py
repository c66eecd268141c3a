"""Opacus DP-SGD as a mechanism (audit/mechanisms/adapters/opacus_learners.py): release, seeding, clipping, noise,
the accountant's claim, and audits of a correct run and of a run with the noise off.

Skipped without Opacus: ``pip install torch==2.13.0`` (a CPU build) then ``pip install ".[opacus,accounting]"`` in a
capaudit checkout runs them.  Fits are one or three steps on 20 or 21 records (a few milliseconds each).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit import run_audit
from audit.mechanisms import make_mechanism

pytest.importorskip("opacus", reason='needs the extra capaudit[opacus]: pip install ".[opacus]" in a capaudit checkout')
torch = pytest.importorskip("torch")

NAME = "opacus.dp_sgd"


def learner(**params):
    return make_mechanism(NAME, params)


@pytest.mark.parametrize("params, width", [({}, 3 + 1), ({"hidden": 2}, 3 * 2 + 2 + 2 + 1),
                                           ({"release": "canary_loss"}, 1), ({"sampling_rate": 0.2}, 3 + 1)])
def test_one_output_is_one_run_reproducible_from_the_seed(params, width):
    """Width: a linear layer's 3 weights and bias; with 2 hidden units 3x2 + 2, then 2 + 1; or one loss.  At
    q = 0.2 Opacus's Poisson batches are drawn from the run's seed too."""
    mechanism = learner(steps=3, **params)
    d, _ = mechanism.default_pairs()[0]
    state = torch.random.get_rng_state()
    first = mechanism.sample(d, 4, np.random.default_rng(7))
    assert torch.equal(state, torch.random.get_rng_state())  # torch's own generator left alone
    assert first.shape == (4, width) and np.all(np.isfinite(first))
    assert np.array_equal(first, mechanism.sample(d, 4, np.random.default_rng(7)))
    assert not np.array_equal(first[0], first[1])  # each run has its own seed


def test_one_noiseless_step_moves_the_parameters_by_the_canarys_gradient_clipped_to_c():
    """z = 0, q = 1, T = 1, a shared initialisation: the runs on d' and d differ by eta times the canary's clipped
    gradient.  Its gradient (sigmoid(w.x + b) - 1)(x, 1) has norm about 50 >> C, so the difference is
    eta C (x, 1) / ||(x, 1)|| with x = (0, 0, 100): Opacus clips each record's gradient to C and sums them."""
    mechanism = learner(noise_multiplier=0.0, steps=1, learning_rate=0.5, max_grad_norm=0.3)
    assert mechanism.true_epsilon == math.inf and "not DP" in mechanism.true_privacy
    d, d_prime = mechanism.default_pairs()[0]
    on_d, on_d_prime = (mechanism.sample(x, 2, np.random.default_rng(0)) for x in (d, d_prime))
    assert np.array_equal(on_d[0], on_d[1])  # no noise, full batch: every run the same
    canary = np.array([0.0, 0.0, 100.0, 1.0])
    np.testing.assert_allclose(on_d_prime[0] - on_d[0], 0.5 * 0.3 * canary / np.linalg.norm(canary), atol=1e-5)


def test_the_noise_has_standard_deviation_eta_z_c_per_coordinate():
    """T = 1, q = 1: each parameter is a constant plus eta N(0, (z C)^2).  n = 200 runs: the sample standard
    deviation's relative standard error is 1 / sqrt(2 (n - 1)) = 5 %; the tolerance is 4 of them."""
    eta, z, c = 0.1, 2.0, 0.5
    released = learner(noise_multiplier=z, max_grad_norm=c, steps=1, learning_rate=eta).sample(
        learner().default_pairs()[0][0], 200, np.random.default_rng(1))
    np.testing.assert_allclose(released.std(axis=0, ddof=1), eta * z * c, rtol=4 / math.sqrt(2 * 199))


@pytest.mark.parametrize("params, field", [({"noise_multiplier": -1.0}, "noise_multiplier"),
                                           ({"sampling_rate": 0.0}, "sampling_rate"), ({"hidden": -1}, "hidden"),
                                           ({"release": "gradients"}, "release"), ({"init_seed": -1}, "init_seed"),
                                           ({"steps": 0}, "steps"), ({"max_grad_norm": 0.0}, "max_grad_norm"),
                                           ({"accountant": "moments"}, "accountant")])
def test_bad_parameters_are_refused_by_name(params, field):
    with pytest.raises(ValueError, match=field):
        learner(**params)


ACCOUNTED = {"divergence": "dp", "function_class": "all", "delta": 1e-5, "accountant": "pld"}


def audit_config(noise_multiplier: float, claim: dict) -> dict:
    """One step (q = 1) audited by linear adversaries on the canary pair, 200 runs per dataset."""
    params = {"noise_multiplier": noise_multiplier, "steps": 1}
    d, d_prime = learner(**params).default_pairs()[0]
    return {"mechanism": {"name": NAME, "params": params}, "pairs": [{"d": d.tolist(), "d_prime": d_prime.tolist()}],
            "claims": [claim], "attacks": {"classes": ["linear"], "n_samples": 200}, "run": {"seed": 0, "n_jobs": 1}}


def test_the_claim_is_the_accountants_for_the_parameters_the_run_states():
    pytest.importorskip("dp_accounting")
    from audit.theory.accountants import accountant_epsilon
    from audit.config.load import load_config

    loaded = load_config(audit_config(2.0, ACCOUNTED))
    assert loaded.raw["claims"][0]["accounted"] == {"noise_multiplier": 2.0, "sampling_rate": 1.0, "steps": 1}
    assert loaded.claims[0].epsilon == accountant_epsilon("pld", 2.0, 1.0, 1, 1e-5)  # about 1.99


def test_a_claim_from_the_library_is_opacus_accountants_epsilon_at_the_claims_delta():
    """Opacus's RDP accountant is dp_accounting's RDP conversion (same orders); its PRV accountant is, at q = 1,
    the exact composition that dp_accounting's PLD approximates (both within their discretizations)."""
    pytest.importorskip("dp_accounting")
    import importlib.metadata

    from audit.theory.accountants import accountant_epsilon
    from audit.config.load import load_config

    config = audit_config(2.0, {"from": "library", "delta": 1e-5})
    config["mechanism"]["params"]["accountant"] = "rdp"
    loaded = load_config(config)
    assert loaded.claims[0].epsilon == pytest.approx(accountant_epsilon("rdp", 2.0, 1.0, 1, 1e-5), rel=1e-9)
    assert loaded.claims[0].delta == 1e-5
    assert f"opacus {importlib.metadata.version('opacus')}'s RDP accountant" in loaded.raw["claims"][0]["reason"]
    prv = learner(noise_multiplier=2.0, steps=1)  # Opacus's default accountant
    assert prv.library_claim(1, None, 1e-5).table["epsilon"] == pytest.approx(
        accountant_epsilon("pld", 2.0, 1.0, 1, 1e-5), rel=1e-2)
    assert "can underestimate" not in prv.library_claim(1, None, 1e-5).source
    gdp = learner(noise_multiplier=2.0, steps=1, accountant="gdp")
    assert "can underestimate epsilon" in gdp.library_claim(1, None, 1e-5).source  # Opacus's own caveat, kept
    with pytest.raises(ValueError, match="a claim from Opacus's accountant is epsilon at a delta"):
        prv.library_claim(1, None, None)
    with pytest.raises(ValueError, match="d_in = 2"):
        prv.library_claim(2, None, 1e-5)


def test_a_correct_run_is_not_refuted_at_the_accountants_epsilon():
    pytest.importorskip("dp_accounting")
    assert run_audit(audit_config(2.0, ACCOUNTED), progress=False).verdict != "violation"


def test_a_run_with_the_noise_off_reads_violation_at_the_claim_for_z_2():
    """Planted bug: z = 0 while the claim is the accountant's epsilon for z = 2 (1.99 at delta 1e-5).  Without noise
    the release is a point on each side; 200 runs resolve an epsilon up to about ln(n / 3), above 1.99 (not the
    4.38 of z = 1: the ln n ceiling of count bounds)."""
    pytest.importorskip("dp_accounting")
    claim = {**ACCOUNTED, "noise_multiplier": 2.0, "sampling_rate": 1.0, "steps": 1}
    assert run_audit(audit_config(0.0, claim), progress=False).verdict == "violation"


@pytest.mark.slow
def test_correct_runs_read_violation_at_most_at_the_error_rate():
    """20 seeds of the correct audit above: violations at most what a 5 % error rate allows (binomial p >= 0.01)."""
    pytest.importorskip("dp_accounting")
    from scipy import stats

    config = audit_config(2.0, ACCOUNTED)
    violations = sum(run_audit({**config, "run": {"seed": seed, "n_jobs": 1}}, progress=False).verdict == "violation"
                     for seed in range(20))
    assert stats.binomtest(violations, 20, 0.05, alternative="greater").pvalue >= 0.01
