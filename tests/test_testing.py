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
    # headline, the claim's verdict per layer, its evidence, where the report is (was a 112-line table)
    assert len(lines) == 4
    assert lines[1] == "  dp (all) <= 0.5: violation by layer: values violation, representation not audited"
    assert lines[2].startswith("  dp (all) <= 0.5: estimate") and "lower bound" in lines[2]
    assert lines[2].endswith("violation") and "pass out_dir=" in lines[3]


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


def test_uses_the_defaults_of_run_and_names_the_layer_of_a_float_leak():
    """The README's textbook mechanism claimed 1.5-DP (its values are 1-DP) with no classes or n_samples: the
    default classes of ``capaudit run`` (both layers) and its sequential budget; the message says the values
    pass and the representation is refuted, and why."""
    from test_layers import _readme_mechanism

    with pytest.raises(AssertionError) as failure:
        assert_claim_holds(_readme_mechanism(), {"divergence": "dp", "function_class": "all", "epsilon": 1.5},
                           pairs=[([[0.0], [0.0]], [[0.0], [1.0]]), ([[1.0], [1.0]], [[1.0], [0.0]])])
    lines = str(failure.value).splitlines()
    assert lines[1].startswith("  dp (all) <= 1.5: violation by layer: values pass, representation violation")
    assert "Mironov 2012" in lines[1] and "float-safe" in lines[1]
    assert "floatbits" in lines[2]


def test_a_failure_shows_the_message_not_the_helpers_source(tmp_path):
    """pytest's report of a failing assert_claim_holds: its message, without the ~110 lines of the helper's
    source and docstring that a plain traceback prints."""
    import subprocess
    import sys

    test = tmp_path / "test_user.py"
    test.write_text("from audit.testing import assert_claim_holds\n\n"
                    "def test_hist():\n"
                    "    assert_claim_holds('noisy_hist_2', {'divergence': 'dp', 'function_class': 'all', "
                    "'epsilon': 0.5}, params={'epsilon': 0.5}, n_samples=2000, classes=['linear'])\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 1 and "capaudit: VIOLATION for mechanism 'noisy_hist_2'" in run.stdout
    assert "def assert_claim_holds" not in run.stdout and "Parameters" not in run.stdout
    assert len(run.stdout.splitlines()) < 40, run.stdout


def test_several_pairs_or_one_not_both():
    with pytest.raises(ValueError, match="either d and d_prime"):
        assert_claim_holds("laplace", DP_HALF, d=[[0.0]], d_prime=[[1.0]], pairs=[([[0.0]], [[1.0]])])
