"""The mlp class trained on the variational objective (attacks/mlp.py, issue 12 item 2).

P = N(0, 1), Q = N(1, 1): the unrestricted Renyi divergence of order alpha is
alpha / 2 and the KL 1 / 2 (docs/theory.md section 5), upper bounds on every
restricted value.  Tolerances: accuracy is compared with the kernel class on
the same samples within two standard errors of the difference of the two
estimates; validity counts lower bounds above the truth and accepts the count
unless a one-sided binomial test rejects a miss rate of 1 - LEVEL at level
0.001 (tests/test_honest_intervals.py's rule).
"""

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import approx_fprime

from attacks import estimate_divergence, mlp
from attacks.divergences import conjugate_exponent, donsker_varadhan, renyi_scale_optimized

LEVEL = 0.975
EXACT = {("renyi", 2.0): 1.0, ("renyi", 4.0): 2.0, ("kl", None): 0.5}


def _gaussian(n, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, n), rng.normal(1.0, 1.0, n)


@pytest.mark.parametrize("divergence, alpha", [("kl", None), ("renyi", 2.0), ("renyi", 4.0), ("renyi", 10.0)])
def test_network_loss_gradient_matches_finite_differences(divergence, alpha):
    """The analytic gradient of the penalised loss against forward differences (step 1e-7: error ~1e-6)."""
    rng = np.random.default_rng(0)
    X_p, X_q = rng.normal(0.0, 1.0, (50, 2)), rng.normal(1.0, 1.0, (60, 2))
    theta = rng.normal(0.0, 0.5, 2 * 5 + 2 * 5)
    beta = conjugate_exponent(alpha) if divergence == "renyi" else None

    def loss(t):
        return mlp.network_loss(t, X_p, X_q, 5, divergence, beta, 0.01)[0]

    gradient = mlp.network_loss(theta, X_p, X_q, 5, divergence, beta, 0.01)[1]
    assert np.allclose(gradient, approx_fprime(theta, loss, 1e-7), atol=1e-5)


def test_unit_network_is_the_same_function():
    rng = np.random.default_rng(1)
    W, c, v, X = rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=4), rng.normal(size=(20, 3))
    network = mlp.unit_network(W, c, v, 0.5)
    assert np.allclose(np.linalg.norm(network.hidden_weights, axis=0), 1.0)
    assert np.allclose(network(X), np.maximum(X @ W + c, 0.0) @ v + 0.5)


@pytest.mark.parametrize("divergence, alpha", [("kl", None), ("renyi", 4.0)])
def test_training_never_loses_to_its_start_on_validation(divergence, alpha):
    """The weights kept are the best met on the validation samples, the start's included."""
    train, validation = _gaussian(2000, 2), _gaussian(500, 3)
    train, validation = tuple(x[:, None] for x in train), tuple(x[:, None] for x in validation)
    start = mlp.spread_network(np.vstack(train), 8, np.random.RandomState(0))
    start = mlp.Network(start.hidden_weights, start.hidden_bias, np.linspace(-1.0, 1.0, 8), 0.0)

    def validation_objective(network):
        b = mlp.output_bias(network.output_weights, network.hidden(train[mlp.NORMALISED_ON[divergence]]), divergence)
        v = network.output_weights
        u_p, u_q = network.hidden(validation[0]) @ v + b, network.hidden(validation[1]) @ v + b
        return donsker_varadhan(u_p, u_q) if divergence == "kl" else renyi_scale_optimized(u_p, u_q, alpha)

    trained = mlp.train_network([start], train, validation, divergence, alpha, 1e-3)
    assert validation_objective(trained) >= validation_objective(start) - 1e-12


@pytest.mark.parametrize("divergence, alpha", [pytest.param("renyi", 2.0, marks=pytest.mark.slow), ("renyi", 4.0)])
def test_mlp_reaches_the_kernel_class(divergence, alpha):
    """Issue 12's target at n = 20 000: mlp at least 95% of kernel, within 2 SE of the difference.

    Before the network was trained on the objective (a classifier's logit,
    refitted affinely) it reached 33% of the exact Renyi at alpha = 4, the
    kernel about 85%: far outside this tolerance.
    """
    p, q = _gaussian(20_000, 0)
    network = estimate_divergence(p, q, "mlp", divergence, alpha=alpha, random_state=0)
    kernel = estimate_divergence(p, q, "kernel", divergence, alpha=alpha, random_state=0)
    tolerance = 2 * np.hypot(network.standard_error, kernel.standard_error)
    assert network.estimate >= 0.95 * kernel.estimate - tolerance, (network.estimate, kernel.estimate, tolerance)
    assert network.estimate <= EXACT[divergence, alpha] + 3 * network.standard_error


def _misses(divergence, alpha, n, seeds):
    misses = 0
    for seed in seeds:
        result = estimate_divergence(*_gaussian(n, seed), "mlp", divergence, alpha=alpha, random_state=seed)
        assert np.isfinite(result.estimate)
        misses += result.caveat is None and result.lower_bound(LEVEL) > EXACT[divergence, alpha]
    return misses


def _plausible(misses, trials):
    return stats.binomtest(misses, trials, 1 - LEVEL, alternative="greater").pvalue > 1e-3


def test_tight_true_claim_is_rarely_refuted_light():
    """Renyi alpha = 4, 4 seeds at n = 1000: the lower bound at 97.5% stays below the exact (unrestricted) value
    (2 misses of 4 pass at p = 0.004, 3 fail; the slow test runs 100 seeds)."""
    assert _plausible(_misses("renyi", 4.0, 1000, range(4)), 4)


@pytest.mark.slow
@pytest.mark.parametrize("divergence, alpha, n", [("kl", None, 1000), ("renyi", 2.0, 1000), ("renyi", 4.0, 1000),
                                                  ("renyi", 4.0, 20_000)], ids=str)
def test_tight_true_claim_is_rarely_refuted(divergence, alpha, n):
    """100 seeds (20 at n = 20 000): the miss count is plausible for a miss rate of at most 2.5%."""
    seeds = range(20 if n > 1000 else 100)
    assert _plausible(_misses(divergence, alpha, n, seeds), len(seeds))
