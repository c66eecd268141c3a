"""OAKL Def. 8 to Cor. 15 and the DP-GD learner's on-average KL: closed forms against exact sums and the mechanisms.

Tolerances: exact sums agree to 1e-10 (rounding); a Monte Carlo mean within 4 of
its standard errors at the sample size used (a correct formula fails with
probability about 6e-5 at a fixed seed).
"""

import itertools

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from audit.mechanisms.learners import DPGradientDescent
from audit.theory import finite_gibbs, learner_on_average, oakl_information
from audit.theory.gibbs import gaussian_mean_on_average_kl, gaussian_mean_posterior, normal_kl

GAUSSIAN = {"noise_scale": 0.8, "prior_scale": 1.5, "temperature": 2.0}


# ---------------------------------------------------------------- the finite Gibbs learner


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_finite_gibbs_values_of_the_two_point_learner_by_hand(gamma):
    """n = 1, records and hypotheses {0, 1}, l(z, h) = 1{z != h}, D uniform: p(h = z | z) = sigmoid(gamma)."""
    right = special.expit(gamma)
    values = finite_gibbs.finite_gibbs_values([[0.0, 1.0], [1.0, 0.0]], [0.5, 0.5], 1, gamma)
    assert values.on_average_kl == pytest.approx(0.5 * gamma * np.tanh(gamma / 2), rel=1e-12)
    assert values.generalization_gap == pytest.approx(right - 0.5, rel=1e-12)
    assert values.mutual_information == pytest.approx(np.log(2) - special.entr([right, 1 - right]).sum(), rel=1e-12)
    assert values.max_information == pytest.approx(gamma, rel=1e-12)
    assert values.conditional_entropy == pytest.approx(special.entr([right, 1 - right]).sum(), rel=1e-12)


def _by_sequences(loss, weights, n, gamma, prior):
    """On-average KL and mutual information summed over every dataset as a sequence of records (R^n of them)."""
    sequences = np.array(list(itertools.product(range(len(weights)), repeat=n)))
    counts = np.stack([np.bincount(s, minlength=len(weights)) for s in sequences])
    law = np.prod(np.asarray(weights)[sequences], axis=1)
    p = finite_gibbs.posterior(loss, counts, gamma, prior)
    epsilon = 0.0
    for fresh, w in enumerate(weights):
        replaced = counts.copy()
        replaced[np.arange(len(sequences)), sequences[:, 0]] -= 1
        replaced[:, fresh] += 1
        epsilon += w * law @ special.rel_entr(p, finite_gibbs.posterior(loss, replaced, gamma, prior)).sum(axis=1)
    return epsilon, law @ special.rel_entr(p, law @ p).sum(axis=1)


@pytest.fixture
def learner():
    rng = np.random.default_rng(3)
    return {"loss": rng.uniform(0.0, 1.0, size=(3, 4)), "probabilities": [0.2, 0.3, 0.5], "n": 5, "temperature": 3.0,
            "prior": rng.dirichlet(np.ones(4))}


def test_finite_gibbs_count_sums_equal_the_sums_over_sequences(learner):
    values = finite_gibbs.finite_gibbs_values(**learner)
    epsilon, information = _by_sequences(learner["loss"], learner["probabilities"], learner["n"],
                                         learner["temperature"], learner["prior"])
    assert values.on_average_kl == pytest.approx(epsilon, rel=1e-10)
    assert values.mutual_information == pytest.approx(information, rel=1e-10)
    assert len(finite_gibbs.count_vectors(5, 3)) == special.comb(7, 2, exact=True)


def test_oakl_relations_hold_with_exact_numbers(learner):
    """Thm 4 (equality), Lemma 14 with Lemma 6, Lemma 11 / Cor. 12, Cor. 15 on exact values."""
    values = finite_gibbs.finite_gibbs_values(**learner)
    n, gamma = learner["n"], learner["temperature"]
    assert values.on_average_kl == pytest.approx(gamma * values.generalization_gap, rel=1e-10)  # Thm 4
    assert 0 < values.mutual_information <= oakl_information.mutual_information_bound(values.on_average_kl, n)
    kl_bound, gap_bound = oakl_information.max_information_bounds(values.max_information, n, gamma)
    assert values.on_average_kl <= kl_bound and values.generalization_gap <= gap_bound
    low, high = oakl_information.corollary15_bounds(values.mutual_information, gamma, values.subgaussian_scale)
    assert low <= n * values.generalization_gap <= high


def test_a_bound_that_is_not_one_fails_on_the_finite_learner(learner):
    """The checks can fail: the mutual information exceeds epsilon (n = 1's bound) at n = 5."""
    values = finite_gibbs.finite_gibbs_values(**learner)
    assert values.mutual_information > values.on_average_kl


# ---------------------------------------------------------------- the Gaussian mean (Thm 9, Def. 8, Def. 13)


def test_gaussian_conditional_entropy_is_a_normal_entropy():
    _, variance = gaussian_mean_posterior(0.0, 7, prior_mean=0.0, **GAUSSIAN)
    assert oakl_information.gaussian_mean_conditional_entropy(7, **GAUSSIAN) == pytest.approx(
        stats.norm(scale=np.sqrt(variance)).entropy(), rel=1e-12)


def test_gaussian_free_energy_is_the_log_normaliser_and_the_posterior_minimises_thm9():
    data = np.array([0.3, -1.2, 0.8, 2.0, -0.4])
    prior = {"prior_mean": 0.4, **GAUSSIAN}
    gamma, s = GAUSSIAN["temperature"], GAUSSIAN["noise_scale"]
    normaliser, _ = integrate.quad(lambda h: stats.norm.pdf(h, 0.4, GAUSSIAN["prior_scale"])
                                   * np.exp(-gamma * np.sum((data - h) ** 2) / (2 * s * s)), -20, 20)
    free = oakl_information.gaussian_mean_free_energy(data, **prior)
    assert free == pytest.approx(-np.log(normaliser) / gamma, rel=1e-9)
    mean, variance = gaussian_mean_posterior(data.sum(), data.size, **prior)
    assert oakl_information.gaussian_mean_gibbs_objective(mean, variance, data, **prior) == pytest.approx(free, rel=1e-12)
    for m, v in [(0.0, 0.1), (1.0, 0.02), (float(mean), 2 * variance)]:  # Gibbs variational principle
        excess = oakl_information.gaussian_mean_gibbs_objective(m, v, data, **prior) - free
        assert excess == pytest.approx(normal_kl(m, v, mean, variance) / gamma, rel=1e-9)
    found = optimize.minimize(lambda x: oakl_information.gaussian_mean_gibbs_objective(x[0], np.exp(x[1]), data, **prior),
                              [0.0, 0.0], method="BFGS", options={"gtol": 1e-10})
    assert found.x[0] == pytest.approx(mean, abs=1e-5) and np.exp(found.x[1]) == pytest.approx(variance, rel=1e-4)


def test_gaussian_mutual_information_against_monte_carlo_of_def13():
    """Normal data N(0, 0.6): I = E log p(h | S) / p(h), p(h) normal of variance 1/lambda + a^2 n sigma^2."""
    n, sigma2 = 6, 0.6
    rng = np.random.default_rng(0)
    sums = rng.normal(0.0, np.sqrt(n * sigma2), 200_000)
    means, variance = gaussian_mean_posterior(sums, n, prior_mean=0.0, **GAUSSIAN)
    h = means + np.sqrt(variance) * rng.standard_normal(sums.size)
    slope = GAUSSIAN["temperature"] / GAUSSIAN["noise_scale"] ** 2 * variance
    log_ratio = (stats.norm.logpdf(h, means, np.sqrt(variance))
                 - stats.norm.logpdf(h, 0.0, np.sqrt(variance + slope**2 * n * sigma2)))
    exact = oakl_information.gaussian_mean_mutual_information(n, sigma2, **GAUSSIAN)
    assert exact == pytest.approx(log_ratio.mean(), abs=4 * log_ratio.std() / np.sqrt(sums.size))
    epsilon = gaussian_mean_on_average_kl(n, sigma2, **GAUSSIAN)
    assert exact == pytest.approx(0.5 * np.log1p(n * epsilon), rel=1e-12)
    assert exact < oakl_information.mutual_information_bound(epsilon, n)


@pytest.mark.parametrize("call", [
    lambda: oakl_information.mutual_information_bound(-0.1, 3),
    lambda: oakl_information.max_information_bounds(1.0, 0),
    lambda: oakl_information.corollary15_bounds(0.1, 1.0, 0.0),
    lambda: finite_gibbs.finite_gibbs_values([[0.0, 1.0]], [0.5, 0.5], 2, 1.0),
    lambda: learner_on_average.bernoulli_records(1.5, 2),
])
def test_wrong_inputs_name_the_argument(call):
    with pytest.raises(ValueError, match="must"):
        call()


# ---------------------------------------------------------------- the DP-GD learner at one step


def _records_with_clipping():
    """Bernoulli records and three whose gradients (norm > C = 1) are clipped."""
    support, weights = learner_on_average.bernoulli_records(0.3, 3)
    large = np.array([[4.0, 0.0, 1.0], [0.0, -3.0, 0.0], [2.5, 2.5, 1.0]])
    return np.vstack([support, large]), np.concatenate([0.7 * weights, [0.1, 0.1, 0.1]])


@pytest.mark.parametrize("records", [learner_on_average.bernoulli_records(0.5, 3), _records_with_clipping()])
def test_dpgd_first_step_closed_form_is_the_mechanisms_mean_shift(records):
    """Common noise: the outputs on [base, z] and [base, z'] differ by exactly eta (clip g(z) - clip g(z'))."""
    support, weights = records
    mechanism = DPGradientDescent(mu=1.0, steps=1, learning_rate=0.1, clip_norm=1.0, neighbours="replace_one")
    base = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    outputs = [mechanism.sample(np.vstack([base, record]), 1, np.random.default_rng(7))[0] for record in support]
    epsilon = sum(w * v * np.sum((outputs[i] - outputs[j]) ** 2) for (i, w), (j, v) in
                  itertools.product(enumerate(weights), repeat=2)) / (2 * (0.1 * mechanism.sigma) ** 2)
    closed = learner_on_average.dpgd_first_step_on_average_kl(support, weights, sigma=mechanism.sigma, clip_norm=1.0)
    assert closed == pytest.approx(epsilon, rel=1e-9)
    assert closed < mechanism.mu**2 / 2  # below the worst case


def test_dpgd_example_closed_form():
    """examples/dpgd_on_average.toml: Bernoulli(1/2) records of 3 features and a label, mu = 1, replace-one:
    sigma = 2, tr Cov = 3/8, epsilon = 3/32."""
    support, weights = learner_on_average.bernoulli_records(0.5, 4)
    assert learner_on_average.dpgd_first_step_on_average_kl(support, weights, sigma=2.0, clip_norm=1.0) == 0.09375


@pytest.mark.slow
def test_dpgd_on_average_audit_brackets_the_closed_form():
    """The example audited as users run it: the on-average claim passes and the mean's lower bound is below
    the closed form 0.09375 (the linear class is exact for a Gaussian shift; the estimate is a lower bound), and
    the worst-case claim is judged on the learner's canaries too (default_pairs), the on-average one not."""
    import pathlib

    from audit.commands.api import run_audit

    result = run_audit(pathlib.Path(__file__).parents[1] / "examples" / "dpgd_on_average.toml")
    averaged = [row for row in result.rows if row.pairs_averaged is not None]
    assert averaged and all(row.verdict != "violation" for row in averaged)
    assert all(row.evidence.lower_bound(0.95) <= 0.09375 and row.pairs_averaged == 20 for row in averaged)
    canaries = {row.pair for row in result.rows if row.pair in {"p20", "p21", "p22"}}
    assert canaries == {"p20", "p21", "p22"}
    assert not any(row.on_average for row in result.rows if row.pair in canaries)


# ---------------------------------------------------------------- where users see them


def test_oakl_information_tables_state_exact_relations():
    from audit.commands import oakl_tables

    information = oakl_tables.information_table()
    assert list(information["relations"]) == ["yes"] * 4
    two_point = information.iloc[0]  # OAKL's two-point example at gamma 2: epsilon = tanh(1), max-information 2
    assert two_point["on-average KL"] == pytest.approx(np.tanh(1.0), rel=1e-12) and two_point["max-information"] == 2
    gaussian = information.iloc[-1]
    assert gaussian["I(M(Z); Z)"] == pytest.approx(0.5 * np.log1p(10 / 11), rel=1e-12)  # lambda = 11, epsilon 1/11
    maxent = oakl_tables.maxent_table()
    assert maxent["excess"].iloc[0] == pytest.approx(0.0, abs=1e-12) and (maxent["excess"].iloc[1:] > 0).all()
    np.testing.assert_allclose(maxent["excess"], maxent["KL(q || posterior) / gamma"], rtol=1e-9, atol=1e-12)


def test_on_average_section_states_the_mutual_information_a_kl_claim_implies():
    from audit.report.claims import on_average_section
    from audit.results.on_average import average_over_pairs
    from audit.results.schema import Row

    evidence = average_over_pairs([0.05, 0.07, 0.06])
    row = Row(pair="average", direction="P|Q", function_class="linear", divergence="kl", estimate=evidence.estimate,
              n_samples=100, claim=0.1, claim_class="linear", on_average=True, pairs_averaged=3, worst_case=0.07,
              worst_case_low=0.01, evidence=evidence)
    with_size = "\n".join(on_average_section([row], 0.95, records=20))
    assert "I(M(Z); Z) if the claim holds" in with_size and "| 2 " in with_size
    assert "I(M(Z); Z)" not in "\n".join(on_average_section([row], 0.95))


@pytest.mark.slow
def test_gibbs_learner_on_average_audit_holds_its_closed_form():
    """Thm 9's Gibbs learner audited as users run it (examples/gibbs_on_average.toml): the interval over pairs of
    the mean (linear, KL) holds the closed form gamma^2 Var_D / (s^4 lambda) = 0.0703 (seed 0: 0.0659
    [0.0166, 0.1153]; the exact KL averaged over the same 20 pairs is 0.0662)."""
    import pathlib

    from audit.commands.api import run_audit
    from audit.mechanisms.gibbs import GaussianPosteriorMean

    closed = GaussianPosteriorMean(records=10, truncation=2.0).on_average_kl()
    result = run_audit(pathlib.Path(__file__).parents[1] / "examples" / "gibbs_on_average.toml", progress=False)
    averaged = [row for row in result.rows if row.pairs_averaged is not None]
    assert averaged
    for row in averaged:
        low, high = row.evidence.confidence_interval(0.95)
        assert low <= closed <= high


@pytest.mark.slow
def test_dpgd_on_average_claim_at_its_closed_form_is_rarely_refuted():
    """Validity over seeds: the on-average claim stated at its exact value, 0.09375, reads violation in at most
    2 of 20 seeds (binomial: a 5 % error rate gives 3 or more with probability 0.075)."""
    import pathlib
    import tomllib

    from audit.commands.api import run_audit

    config = tomllib.loads((pathlib.Path(__file__).parents[1] / "examples" / "dpgd_on_average.toml").read_text())
    config["claims"] = [{**config["claims"][0], "epsilon": 0.09375}]
    del config["neighbours"]["default_pairs"]
    config["neighbours"]["count"] = 10
    config["attacks"]["n_samples"] = 2000
    violations = 0
    for seed in range(20):
        result = run_audit(config, seed=seed, progress=False)
        violations += any(row.verdict == "violation" for row in result.rows if row.pairs_averaged is not None)
    assert violations <= 2


def test_default_pairs_follow_the_iid_pairs_and_only_worst_case_claims_read_them():
    """[neighbours] default_pairs = true: the learner's canaries after the iid pairs; an on-average claim gets no
    row on a canary pair, a worst-case claim does."""
    from audit.config.load import load_config
    from audit.engine.run import claim_rows
    from audit.inputs.neighbours import check_spec, make_pairs, on_average_pair_names

    spec = {"strategy": "on-average", "count": 3, "size": 5, "default_pairs": True,
            "distribution": {"name": "bernoulli", "p": 0.5, "dim": 4}}
    mechanism = DPGradientDescent(mu=1.0, steps=1, neighbours="replace_one")
    pairs = make_pairs(spec, mechanism, 0)
    assert [pair.name for pair in pairs] == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert [pair.origin for pair in pairs] == ["on-average"] * 3 + ["the mechanism's default pair"] * 3
    np.testing.assert_array_equal(pairs[3].d, mechanism.default_pairs()[0][0])
    assert on_average_pair_names(spec) == {"p0", "p1", "p2"}
    assert on_average_pair_names({**spec, "default_pairs": False}) is None
    config = load_config({
        "mechanism": {"name": "dp_gd_logistic", "params": {"mu": 1.0, "steps": 1, "neighbours": "replace_one"}},
        "neighbours": spec,
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 0.15, "on_average": True},
                   {"divergence": "kl", "function_class": "linear", "epsilon": 0.5}],
        "attacks": {"classes": ["linear"], "n_samples": 2000},
    })
    record = {"pair": "p0", "direction": "P|Q", "function_class": "linear", "divergence": "kl", "delta": 0.0,
              "alpha": None, "estimate": 0.1, "theory_bound": None, "exact": None, "note": "", "task": "t",
              "error": None}
    assert [row.on_average for row in claim_rows(config.claims, record, averaged=config.averaged_pairs)] == [True, False]
    assert [row.on_average for row in claim_rows(config.claims, {**record, "pair": "p4"}, averaged=config.averaged_pairs)] == [False]
    for wrong, message in [({**spec, "default_pairs": "yes"}, "true or false"),
                           ({"strategy": "random", "default_pairs": True}, "on-average")]:
        with pytest.raises(ValueError, match=message):
            check_spec(wrong)
