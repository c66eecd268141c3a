"""audit.testing.assert_claim_holds: fails with the evidence on a buggy mechanism, passes on a correct one."""

import warnings

import pytest

from audit.testing import assert_claim_holds
from audit.theory.bounds import laplace_kl

DP_HALF = {"divergence": "dp", "function_class": "all", "epsilon": 0.5}


def test_fails_on_a_buggy_mechanism_with_the_violating_rows():
    """noisy_hist_2 at epsilon = 0.5 adds Lap(0.5): it is 2-DP, not 0.5-DP."""
    with pytest.raises(AssertionError) as failure:
        assert_claim_holds("noisy_hist_2", DP_HALF, params={"epsilon": 0.5}, n_samples=2000, classes=["linear"])
    message = str(failure.value)
    lines = message.splitlines()
    assert lines[0].startswith("capaudit: VIOLATION for mechanism 'noisy_hist_2'")
    assert len(lines) == 3  # headline, the one claim's evidence, where the report is (was a 112-line table)
    assert lines[1].startswith("  dp (all) <= 0.5: estimate") and "lower bound" in lines[1]
    assert lines[1].endswith("violation") and "pass out_dir=" in lines[2]


def test_passes_on_a_correct_laplace_against_its_true_claims():
    """Laplace(1/epsilon) on a sum with sensitivity 1 is epsilon-DP and its KL is epsilon - 1 + e^-epsilon."""
    claims = [{"divergence": "dp", "function_class": "all", "epsilon": 2.0},
              {"divergence": "kl", "function_class": "all", "epsilon": float(laplace_kl(1.0))}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an inconclusive row may warn; it must not fail
        result = assert_claim_holds("laplace", claims, params={"epsilon": 1.0}, d=[[0.0]], d_prime=[[1.0]],
                                    n_samples=2000, classes=["linear"])
    assert result.verdict in ("pass", "inconclusive")


def test_inconclusive_warns_by_default_and_fails_on_request():
    """Laplace at epsilon = 1 against its tight true claim on 400 samples: estimate above 1, undecided (seed 1)."""
    arguments = dict(params={"epsilon": 1.0}, d=[[0.0]], d_prime=[[1.0]], n_samples=400, classes=["linear"], seed=1)
    claim = {"divergence": "dp", "function_class": "all", "epsilon": 1.0}
    with pytest.warns(UserWarning, match="INCONCLUSIVE"):
        assert assert_claim_holds("laplace", claim, **arguments).verdict == "inconclusive"
    with pytest.raises(AssertionError, match="INCONCLUSIVE"):
        assert_claim_holds("laplace", claim, inconclusive="fail", **arguments)
    with pytest.raises(ValueError, match="inconclusive must be one of"):
        assert_claim_holds("laplace", claim, inconclusive="ignore", **arguments)
