"""Coupled (common-random-numbers) samples: paired dp bounds, paired standard errors, the runner's coupled draw.

The samples come from the built-in Laplace mechanism on its default pair:
P = Lap(0, b), Q = Lap(1, b), b = 1/epsilon.  Coupled, both outputs of row i
come from one generator state, so Y_i = X_i + 1; independent, from two
seeds.  The estimand of an estimate (the population objective of its fitted
witness) is known in closed form here, so validity is checked against it.

The user mechanisms below follow the protocol ``f(dataset, n, rng) -> (n, d)``;
configs name them ``test_coupled:<function>`` (pytest puts this directory
on sys.path).
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from attacks import binomial_ratio, estimate_divergence, paired_ratio
from audit import run_audit
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import make_pairs
from audit.engine.plan import task_seed
from audit.sampling.sampler import COUPLING_REFUSED, draw_pair


def laplace_sum(dataset, n, rng):
    """The sum of the records plus Lap(1): the same random numbers whatever the dataset."""
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def extra_draw_on_d_prime(dataset, n, rng):
    """Like laplace_sum, but a dataset with a positive sum costs one more random number."""
    if np.sum(dataset) > 0:
        rng.random()
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def _laplace_samples(epsilon: float, n: int, seed: int, coupled: bool):
    mechanism = make_mechanism("laplace", {"epsilon": epsilon})
    d, d_prime = mechanism.default_pairs()[0]
    seeds = (seed, seed) if coupled else ([seed, 0], [seed, 1])
    p, q = (mechanism.sample(x, n, np.random.default_rng(s)) for x, s in zip((d, d_prime), seeds))
    return p, q, mechanism.output_laws(d, d_prime)


def _set_mass(result, law) -> float:
    """law's probability of the fitted set S = {side (g(x) - threshold) > 0}; g is affine in x for these classes."""
    adversary = result.adversary
    g0, g1 = adversary.discriminant(np.array([[0.0], [1.0]]))
    edge = (adversary.threshold_ - g0) / (g1 - g0)
    return float(law.sf(edge) if adversary.side_ * (g1 - g0) > 0 else law.cdf(edge))


def _estimand(result, laws, scale: float) -> float:
    """The population objective of the fitted witness (docs/theory.md section 2).

    ipm: E_P h - E_Q h = 2 (P(S) - Q(S)).  kl, linear h = a x + c:
    E_P h - log E_Q e^h = c - (a + c) + log(1 - a^2 b^2), by the Laplace
    moment generating function E e^{a Z} = 1 / (1 - a^2 b^2), |a| b < 1.
    """
    if result.divergence == "ipm":
        return 2 * (_set_mass(result, laws[0]) - _set_mass(result, laws[1]))
    h0, h1 = result.adversary.witness(np.array([[0.0], [1.0]]))
    slope = h1 - h0
    return -slope + np.log(1 - (slope * scale) ** 2)


# --- dp: the paired score bound -----------------------------------------------------------------------------------


def _dp_misses(epsilon: float, n: int, repetitions: int) -> tuple[int, int]:
    """How often the coupled 95% lower bound exceeds the fitted set's true log-ratio, and epsilon itself."""
    above_set = above_epsilon = 0
    for seed in range(repetitions):
        p, q, (law_p, law_q) = _laplace_samples(epsilon, n, seed, coupled=True)
        result = estimate_divergence(p, q, "threshold", "dp", random_state=seed, coupled=True)
        bound = result.lower_bound(0.95)
        above_set += bound > np.log(_set_mass(result, law_p) / _set_mass(result, law_q))
        above_epsilon += bound > epsilon
    return above_set, above_epsilon


def _allowed_misses(repetitions: int) -> int:
    """The 99.9% quantile of Binomial(repetitions, 0.05): exceeded with probability < 0.1% at exact 95% coverage."""
    return int(stats.binom.ppf(0.999, repetitions, 0.05))


@pytest.mark.parametrize("epsilon", [1.0, 0.05])
def test_coupled_dp_bound_is_valid_light(epsilon):
    """100 repetitions at n = 2000: at most 13 misses of the fitted set's log-ratio (or of epsilon) at 95%."""
    above_set, above_epsilon = _dp_misses(epsilon, n=2000, repetitions=100)
    assert above_set <= _allowed_misses(100) and above_epsilon <= _allowed_misses(100)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 0.05])
def test_coupled_dp_bound_is_valid(epsilon):
    """1000 repetitions at n = 10000: at most 73 misses at 95% (binomial SE 0.7% at 5%)."""
    above_set, above_epsilon = _dp_misses(epsilon, n=10_000, repetitions=1000)
    assert above_set <= _allowed_misses(1000) and above_epsilon <= _allowed_misses(1000)


def test_coupled_dp_bound_is_tighter_than_independent():
    """Laplace at epsilon = 0.05 with n = 20000: the coupled margin (plug-in - 95% bound) is > 3 times smaller.

    On the set S = {x < 0} where both choose to attack, the log-ratio's
    variance per sample is 1/p + 1/q - 2 for independent samples and
    1/q - 1/p for coupled ones (Y = X + 1: only the only-X cell is
    discordant, :func:`attacks.paired_ratio.smoothed_log_ratio`), a margin
    ratio of sqrt(e^eps / (e^eps - 1)) = 4.5 at eps = 0.05 (1.26 at eps = 1:
    there the outputs of a pair disagree on S too often for coupling to
    help much).  Medians of five fixed seeds; both margins shrink as
    1/sqrt(n) with a relative spread of a few percent at this n, so 3 holds
    with room for the set chosen on the training split.  On the very same
    counts, the independent score bound's margin is > 3 times the paired
    one's: the paired bound reads the cells the independent one cannot.
    """
    coupled, independent, same_counts = [], [], []
    for seed in range(5):
        p, q, _ = _laplace_samples(0.05, 20_000, seed, coupled=True)
        result = estimate_divergence(p, q, "threshold", "dp", random_state=seed, coupled=True)
        coupled.append(result.estimate - result.lower_bound(0.95))
        counts = [result.details[key] for key in ("k_p", "n_p", "k_q", "n_q")]
        same_counts.append(result.estimate - binomial_ratio.log_ratio_bound(*counts, 0.0, 0.95, lower=True))
        p, q, _ = _laplace_samples(0.05, 20_000, seed, coupled=False)
        result = estimate_divergence(p, q, "threshold", "dp", random_state=seed)
        independent.append(result.estimate - result.lower_bound(0.95))
    assert np.median(independent) > 3 * np.median(coupled) > 0
    assert np.median(same_counts) > 3 * np.median(coupled)


def test_coupled_dp_estimate_reads_the_paired_cells():
    p, q, _ = _laplace_samples(1.0, 4000, 0, coupled=True)
    result = estimate_divergence(p, q, "threshold", "dp", delta=0.01, random_state=0, coupled=True)
    both, only_p, only_q, neither = cells = result.details["cells"]
    assert result.coupled and sum(cells) == result.n_test == 2000
    assert (both + only_p, both + only_q) == (result.details["k_p"], result.details["k_q"])
    assert min(only_p, only_q) == 0  # Y = X + 1 and S is a half-line: one of the discordant cells is empty
    assert result.lower_bound(0.9) == paired_ratio.log_ratio_bound(cells, 0.01, 0.9, lower=True)
    assert result.p_value(0.5) == paired_ratio.p_value(cells, 0.01, 0.5)


def test_coupled_needs_samples_of_equal_length():
    with pytest.raises(ValueError, match="coupled=True needs as many samples of P as of Q.*Found 300 and 200"):
        estimate_divergence(np.zeros(300), np.ones(200), "linear", "kl", coupled=True)


def test_coupled_split_keeps_pairs():
    """Q = P + 0.1 row by row: a held-out pair disagrees on a half-line S only when X is within 0.1 of its edge.

    h = +-1, so the paired variance var(h(X) - h(Y)) is about 4 P(disagree)
    <= 0.16 against about 2 for the independent formula: a ratio of SEs near
    3.5 if the split kept the pairs, near 1 if it did not.
    """
    p = np.random.default_rng(1).normal(size=1000)
    paired = estimate_divergence(p, p + 0.1, "threshold", "ipm", random_state=0, coupled=True)
    independent = estimate_divergence(p, p + 0.1, "threshold", "ipm", random_state=0)
    assert paired.standard_error < 0.5 * independent.standard_error


# --- kl and ipm: standard errors of paired differences ---------------------------------------------------------


def _spread(divergence: str, function_class: str, n: int, repetitions: int) -> tuple[float, float, float]:
    """(sd of estimate - estimand, mean paired SE, mean independent-formula SE) over coupled Laplace samples, eps = 0.2.

    The SE is conditional on the fitted witness, so the spread is taken
    about each repetition's own estimand.
    """
    deviations, paired, independent = [], [], []
    for seed in range(repetitions):
        p, q, laws = _laplace_samples(0.2, n, seed, coupled=True)
        result = estimate_divergence(p, q, function_class, divergence, random_state=seed, coupled=True)
        deviations.append(result.estimate - _estimand(result, laws, scale=5.0))
        paired.append(result.standard_error)
        independent.append(estimate_divergence(p, q, function_class, divergence, random_state=seed).standard_error)
    return float(np.std(deviations, ddof=1)), float(np.mean(paired)), float(np.mean(independent))


def _check_spread(divergence, function_class, n, repetitions):
    """The paired SE within 4 standard errors of a sample sd (relative 1/sqrt(2 (R - 1))); the independent one above."""
    spread, paired, independent = _spread(divergence, function_class, n, repetitions)
    tolerance = 4 / np.sqrt(2 * (repetitions - 1))
    assert abs(paired / spread - 1) < tolerance
    assert independent > (1 + tolerance) * spread


@pytest.mark.parametrize(("divergence", "function_class"), [("kl", "linear"), ("ipm", "threshold")])
def test_paired_standard_error_matches_spread_light(divergence, function_class):
    """100 repetitions at n = 2000: tolerance 28%; the independent formula overstates by 2.4x (ipm) to 9x (kl)."""
    _check_spread(divergence, function_class, n=2000, repetitions=100)


@pytest.mark.slow
@pytest.mark.parametrize(("divergence", "function_class"), [("kl", "linear"), ("ipm", "threshold")])
def test_paired_standard_error_matches_spread(divergence, function_class):
    """600 repetitions at n = 10000: tolerance 12%."""
    _check_spread(divergence, function_class, n=10_000, repetitions=600)


# --- the runner's coupled draw -------------------------------------------------------------------------------------


def _laplace_pair():
    mechanism = make_mechanism("laplace", {"epsilon": 1.0})
    return mechanism, make_pairs(None, mechanism, np.random.default_rng(0))[0]


def test_draw_couples_rows_of_a_builtin():
    mechanism, pair = _laplace_pair()
    samples = draw_pair(mechanism, pair, 500, seed=4, coupled=True)
    assert samples.coupled
    np.testing.assert_allclose(samples.d_prime - samples.d, 1.0, atol=1e-12)  # the same noise on every row


def test_draw_independent_is_unchanged():
    """coupled = false draws d and d' from the seeds named by the pair and the dataset, as before coupling existed."""
    mechanism, pair = _laplace_pair()
    samples = draw_pair(mechanism, pair, 500, seed=4, coupled=False)
    expected = [mechanism.sample(x, 500, np.random.default_rng(task_seed(4, f"{pair.name}|{name}")))
                for x, name in ((pair.d, "d"), (pair.d_prime, "d_prime"))]
    assert not samples.coupled
    np.testing.assert_array_equal(samples.d, expected[0])
    np.testing.assert_array_equal(samples.d_prime, expected[1])


def _config(callable_name=None, coupled=True):
    mechanism = {"callable": f"test_coupled:{callable_name}"} if callable_name else {"name": "laplace"}
    return {
        "mechanism": mechanism,
        "pairs": [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}],
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 1.0},
                   {"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
        "attacks": {"classes": ["linear", "threshold"], "n_samples": 1000, "coupled": coupled},
        "run": {"seed": 2, "n_jobs": 1},
    }


def test_coupled_audit_same_rows_with_one_and_two_jobs():
    one = run_audit(_config(), n_jobs=1, progress=False).table
    two = run_audit(_config(), n_jobs=2, progress=False).table
    pd.testing.assert_frame_equal(one, two)
    assert not one["note"].str.contains("coupled").any()
    independent = run_audit(_config(coupled=False), progress=False).table
    assert not np.allclose(one["ci_low"], independent["ci_low"])  # the coupled draw is not the independent one


def test_mechanism_spending_input_dependent_randomness_falls_back():
    table = run_audit(_config("extra_draw_on_d_prime"), progress=False).table
    assert table["note"].str.startswith(COUPLING_REFUSED).all() and table["error"].isna().all()
    plain = run_audit(_config("laplace_sum"), progress=False).table
    assert not plain["note"].str.contains("coupled sampling refused").any()


def test_report_method_says_when_samples_are_coupled(tmp_path):
    coupled = run_audit(_config(), progress=False).write(tmp_path / "coupled").read_text()
    independent = run_audit(_config(coupled=False), progress=False).write(tmp_path / "independent").read_text()
    assert "Coupled sampling (`attacks.coupled = true`)" in coupled
    assert "Coupled sampling" not in independent
