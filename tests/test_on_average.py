"""On-average audits: data distributions, the on-average strategy, on-average claims (docs/theory.md section 8)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from attacks.evidence import NormalEstimate
from audit import run_audit
from audit.config.load import ConfigError, load_config
from audit.inputs.data_distributions import check_distribution, make_sampler
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import make_pairs
from audit.results.on_average import PAIR, OnAverageEstimate, aggregate_rows, average_over_pairs, worst_case_level
from audit.results.schema import Row

GAUSSIAN = make_mechanism("gaussian", {"sigma": 1.0})


def _spec(**fields):
    return {"strategy": "on-average", "count": 4, "size": 6, "distribution": {"name": "normal"}, **fields}


@pytest.mark.parametrize(
    "spec, mean, var",
    [
        ({"name": "normal", "mean": 2.0, "std": 3.0}, 2.0, 9.0),
        ({"name": "uniform", "low": -1.0, "high": 3.0}, 1.0, 16 / 12),
        ({"name": "bernoulli", "p": 0.3}, 0.3, 0.21),
        ({"name": "truncated-normal", "low": 0.0, "high": 1.0}, *stats.truncnorm(0, 1).stats("mv")),
    ],
)
def test_builtin_distributions_have_their_moments(spec, mean, var):
    """Sample mean and variance within 5 standard errors (n = 20000) of the law's."""
    n = 20_000
    records = make_sampler({**spec, "dim": 2})(n, np.random.default_rng(0))
    assert records.shape == (n, 2)
    assert np.all(np.abs(records.mean(axis=0) - mean) < 5 * np.sqrt(var / n))
    # var of the sample variance ~ 2 var^2 / n (normal) and at most E[(x - mu)^4] / n: 5 sigma on a bound of it
    fourth = np.mean((records - mean) ** 4)
    assert np.all(np.abs(records.var(axis=0) - var) < 5 * np.sqrt(fourth / n))
    if spec["name"] == "truncated-normal":
        assert records.min() >= 0.0 and records.max() <= 1.0


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"name": "gamma"}, r"distribution.name must be one of normal, uniform, bernoulli, truncated-normal"),
        ({"name": "normal", "std": 0}, r"distribution.std must be > 0. Found 0.0"),
        ({"name": "normal", "sd": 1}, r"unknown field\(s\) sd for 'normal'"),
        ({"name": "uniform", "low": 1, "high": 1}, r"low must be < high"),
        ({"name": "bernoulli", "p": 1.5}, r"distribution.p must be in \[0, 1\]"),
        ({"name": "bernoulli", "p": True}, r"distribution.p must be a finite number. Found True"),
        ({"name": "truncated-normal", "low": 0}, r"distribution.high is required for 'truncated-normal'"),
        ({"name": "normal", "dim": 0}, r"distribution.dim \(record width\) must be an integer from 1"),
        ("no_colon", r"or user code \"module:function\""),
    ],
)
def test_bad_distributions_name_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        check_distribution(spec)


def test_user_distribution_is_imported_and_its_output_checked(tmp_path, monkeypatch):
    (tmp_path / "my_data.py").write_text(
        "def good(size, rng):\n    return rng.uniform(size=size)\n\n"
        "def short(size, rng):\n    return rng.uniform(size=size - 1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert make_sampler("my_data:good")(4, np.random.default_rng(0)).shape == (4, 1)
    with pytest.raises(ValueError, match=r"my_data:short' must return 4 finite records"):
        make_sampler("my_data:short")(4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        make_sampler("my_data:missing")


def test_on_average_pairs_replace_the_first_record_with_a_fresh_draw():
    pairs = make_pairs(_spec(size=5, count=3, distribution={"name": "uniform", "dim": 2}), GAUSSIAN, 7)
    assert [pair.name for pair in pairs] == ["p0", "p1", "p2"]
    for pair in pairs:
        assert pair.d.shape == pair.d_prime.shape == (5, 2)
        assert pair.distance == 1 and np.all(pair.d[0] != pair.d_prime[0])
        np.testing.assert_array_equal(pair.d[1:], pair.d_prime[1:])
    again = make_pairs(_spec(size=5, count=3, distribution={"name": "uniform", "dim": 2}), GAUSSIAN, 7)
    assert all(np.array_equal(a.d_prime, b.d_prime) for a, b in zip(pairs, again))
    assert not np.array_equal(pairs[0].d, pairs[1].d)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"distribution": None}, "neighbours.distribution is required"),
        ({"size": None}, r"neighbours.size \(records per dataset, n\) is required"),
        ({"size": 0}, "neighbours.size"),
        ({"relation": "add-remove"}, 'neighbours.relation must be "replace-one" for strategy = "on-average"'),
        ({"domain": {"low": [0], "high": [1]}}, "does not take domain"),
        ({"count": 1000, "size": 100_000, "distribution": {"name": "normal", "dim": 2}}, "lower count, size or dim"),
    ],
)
def test_bad_on_average_specs_name_the_field(fields, message):
    spec = {key: value for key, value in _spec(**fields).items() if value is not None}
    with pytest.raises(ValueError, match=message):
        make_pairs(spec, GAUSSIAN, 0)


def test_distribution_and_size_belong_to_on_average_only():
    with pytest.raises(ValueError, match='distribution and size are for strategy = "on-average" only'):
        make_pairs({"strategy": "random", "size": 3}, GAUSSIAN, 0)


# ---------------------------------------------------------------- the statistic (audit.results.on_average)


def test_average_over_pairs_is_the_t_interval_over_pairs():
    values = [0.1, 0.4, 0.2, 0.7, 0.3]
    result = average_over_pairs(values, lower_bounds=[0.0, 0.2, -0.1, 0.5, 0.1])
    se = np.std(values, ddof=1) / np.sqrt(5)
    assert result.estimate == pytest.approx(0.34) and result.standard_error == pytest.approx(se)
    assert (result.n_pairs, result.worst_case, result.worst_case_low) == (5, 0.7, 0.5)
    low, high = stats.t.interval(0.9, 4, loc=0.34, scale=se)
    assert result.confidence_interval(0.9) == pytest.approx((low, high))
    # the p-value inverts the one-sided bound: H0 "mean <= lower_bound(c)" has p = 1 - c
    assert result.p_value(result.lower_bound(0.95)) == pytest.approx(0.05)
    assert result.p_value(0.34) == pytest.approx(0.5)


def test_equal_estimates_and_too_few_pairs():
    assert average_over_pairs([0.2, 0.2]).p_value(0.1) == 0.0
    assert average_over_pairs([0.2, 0.2]).p_value(0.2) == 1.0
    with pytest.raises(ValueError, match="at least 2 finite per-pair estimates"):
        average_over_pairs([0.2])
    with pytest.raises(ValueError, match="at least 2 finite per-pair estimates"):
        average_over_pairs([0.2, np.inf])
    assert worst_case_level(0.95, 10) == pytest.approx(0.995)


def _rows(evidence, attack_class="linear", direction="P|Q"):
    """Per-pair rows of an on-average claim, pair i carrying ``evidence[i]``."""
    return [
        Row(pair=f"p{i}", direction=direction, function_class=attack_class, divergence="kl", n_samples=1000,
            claim=0.5, claim_class="all", task=f"p{i}|{direction}|{attack_class}", on_average=True,
            estimate=math.nan if found is None else found.estimate, evidence=found)
        for i, found in enumerate(evidence)
    ]


def _normal(estimate, caveat=None):
    """A per-pair estimate with standard error 0.1."""
    return NormalEstimate(estimate, 0.1, caveat)


def test_aggregate_rows_one_per_class_and_direction():
    rows = _rows(map(_normal, [0.1, 0.3, 0.2])) + _rows(map(_normal, [0.2, 0.2, 0.5]), "tree3", "Q|P")
    new_rows = aggregate_rows(rows + [replace(rows[0], on_average=False, task="x")], 0.95)
    assert [(r.direction, r.function_class, r.pair) for r in new_rows] == [
        ("P|Q", "linear", PAIR), ("Q|P", "tree3", PAIR)
    ]
    first = new_rows[0]
    assert first.estimate == pytest.approx(0.2) and first.pairs_averaged == 3 and first.refutes_claim
    assert first.worst_case == pytest.approx(0.3)
    assert first.worst_case_low == pytest.approx(0.3 - stats.norm.ppf(1 - 0.05 / 3) * 0.1)
    assert isinstance(first.evidence, OnAverageEstimate) and first.evidence.caveat is None
    assert first.estimate == first.evidence.estimate


def test_a_failed_or_untrusted_pair_makes_the_average_untrusted():
    rows = _rows([None, _normal(0.3), _normal(0.2, "tail")])
    (average,) = aggregate_rows(rows, 0.95)
    caveat = average.evidence.caveat
    assert "1 of 3 pairs failed" in caveat and "1 of 3 pairs' estimates are not trusted" in caveat


# ---------------------------------------------------------------- config


def _config(claim=None, **neighbours):
    return {
        "mechanism": {"name": "gaussian", "params": {"sigma": 1.0}},
        "neighbours": {"strategy": "on-average", "count": 10, "size": 5,
                       "distribution": {"name": "normal", "std": 0.5}, **neighbours},
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 0.25, "on_average": True,
                    **(claim or {})}],
        "attacks": {"classes": ["linear"], "n_samples": 2000},
        "run": {"seed": 0, "n_jobs": 1},
    }


@pytest.mark.parametrize(
    "change, message",
    [
        ({"claim": {"divergence": "dp"}}, r'claims\[0\].on_average: .* use divergence = "kl" or "renyi", .* Found divergence \'dp\''),
        ({"claim": {"on_average": "yes"}}, r"claims\[0\].on_average: must be true or false. Found 'yes'"),
        ({"count": 1}, r"neighbours.count: an on-average claim needs at least 2 pairs .* Found 1"),
        ({"strategy": "random", "distribution": None, "size": None},
         r'claims\[0\].on_average: .* add \[neighbours\] strategy = "on-average" .* Found strategy \'random\''),
        ({"distribution": "no_such_module_s4:draw"}, r"cannot import module 'no_such_module_s4'"),
    ],
)
def test_config_errors_name_the_field_value_and_fix(change, message):
    claim = change.pop("claim", None)
    config = _config(claim, **change)
    config["neighbours"] = {k: v for k, v in config["neighbours"].items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        load_config(config)


def test_on_average_claims_need_generated_pairs():
    config = _config()
    del config["neighbours"]
    with pytest.raises(ConfigError, match="Found explicit or default pairs"):
        load_config(config)
    assert load_config(_config()).claims[0].on_average
    assert not load_config(_config({"on_average": False})).claims[0].on_average


# ---------------------------------------------------------------- audits (policy every: each pair's estimate)
# Gaussian sum query + N(0, sigma^2), records iid N(0, s^2): the pair's outputs differ by the replaced record,
# Delta = z - Z_1 ~ N(0, 2 s^2), KL = Delta^2 / (2 sigma^2) (the linear class attains it: the log-ratio is
# linear), so the on-average KL is E[Delta^2] / (2 sigma^2) = s^2 / sigma^2 (and alpha s^2 / sigma^2 for Renyi).


def test_on_average_kl_agrees_with_its_closed_form(tmp_path):
    """Closed form s^2 / sigma^2 = 0.25 inside the aggregate rows' intervals; every number from run_audit."""
    config = _config()
    config["attacks"]["n_samples"] = 1000
    result = run_audit(config, out_dir=tmp_path, progress=False)
    table = result.table
    average = table[table["pair"] == PAIR]
    assert list(average["direction"]) == ["P|Q", "Q|P"] and (average["pairs_averaged"] == 10).all()
    assert ((average["ci_low"] <= 0.25) & (0.25 <= average["ci_high"])).all()
    assert result.verdict != "violation"
    # the estimate is a lower bound on the mean of the pairs' exact KL, up to its within-pair noise
    per_pair = table[(table["pair"] != PAIR)]
    for direction, rows in per_pair.groupby("direction"):
        se = (rows["ci_high"] - rows["ci_low"]) / (2 * stats.norm.ppf(0.975))  # info rows: plain 95% intervals
        mean_exact, noise = rows["exact"].mean(), np.sqrt(np.sum(se**2)) / len(rows)
        estimate = float(average.loc[average["direction"] == direction, "estimate"].iloc[0])
        assert estimate <= mean_exact + 3 * noise
        assert (rows["verdict"] == "info").all() and not rows["refutes_claim"].any()
    report = (tmp_path / "report.md").read_text()
    assert "## On-average privacy" in report and "on average: (linear, KL) <= 0.25" in report
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["claims"][0]["on_average"] is True and len(document["pairs"]) == 10


def test_a_false_on_average_claim_is_a_violation():
    """Records of 4 coordinates, sigma = 2: on-average KL 4 * 2 / (2 * 4) = 1, claimed 0.1.

    The per-pair KL is sigma^-2 |Delta|^2 / 2, a chi-square with 4 degrees of freedom (coefficient of
    variation sqrt(2 / 4)), so over 10 pairs the mean's standard error is about 0.22: 0.9 above the claim
    is 4 standard errors, beyond Holm's t threshold (about 2.7 for two rows).
    """
    config = _config({"epsilon": 0.1}, distribution={"name": "normal", "std": 1.0, "dim": 4})
    config["mechanism"]["params"] = {"sigma": 2.0, "sensitivity": [1.0] * 4}
    config["attacks"]["n_samples"] = 1000
    result = run_audit(config, progress=False)
    assert result.verdict == "violation" and result.claims[0]["on_average"]


@pytest.mark.parametrize("seed", range(2))
def test_a_true_tight_on_average_claim_is_not_flagged(seed):
    """The claim equals the closed form (tight): at most 1 - confidence of audits may flag it (slow test: 30 seeds)."""
    assert _flagged([seed], divergence="kl", n_samples=200, count=8, std=0.5, classes=["linear"]) == 0


VALIDITY_SETTINGS = [  # docs/validity.md, "What the slow tests count": 0 of 30 seeds flagged in each
    dict(divergence="kl", n_samples=100, count=10, std=1.0, classes=["linear", "poly2", "tree3"], claim_class="all"),
    dict(divergence="kl", n_samples=1000, count=10, std=0.3, classes=["linear", "poly2", "tree3"], claim_class="all"),
    dict(divergence="kl", n_samples=300, count=20, std=0.5, classes=["linear"]),
    dict(divergence="renyi", n_samples=500, count=10, std=0.3, classes=["linear"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("setting", VALIDITY_SETTINGS)
def test_a_true_tight_on_average_claim_is_rarely_flagged_over_seeds(setting):
    seeds = range(30)
    # 0.05 of the audits at most; allow the binomial 0.99 quantile
    assert _flagged(seeds, **setting) <= stats.binom.ppf(0.99, len(seeds), 0.05)


def _flagged(seeds, *, divergence, n_samples, count, std, classes, claim_class="linear", alpha=4.0):
    """How many of the audits (one per seed) of a tight true claim, sigma = 1, read violation."""
    claim = {"divergence": divergence, "function_class": claim_class,
             "epsilon": std**2 * (alpha if divergence == "renyi" else 1.0)}
    if divergence == "renyi":
        claim["alpha"] = alpha
    flagged = 0
    for seed in seeds:
        config = _config(claim, count=count, distribution={"name": "normal", "std": std})
        config["attacks"] = {"classes": list(classes), "n_samples": n_samples}
        config["run"]["seed"] = seed
        flagged += run_audit(config, progress=False).verdict == "violation"
    return flagged


def test_a_user_distribution_is_found_beside_the_config(tmp_path, monkeypatch):
    """distribution = "module:function" imports from the config's folder, as a user mechanism does."""
    folder = tmp_path / "audit_dir"
    folder.mkdir()
    (folder / "s4_records.py").write_text("def draw(size, rng):\n    return rng.uniform(-1, 1, size=size)\n")
    (folder / "audit.toml").write_text(
        '[mechanism]\nname = "gaussian"\n'
        '[neighbours]\nstrategy = "on-average"\ncount = 2\nsize = 3\ndistribution = "s4_records:draw"\n'
        '[[claims]]\ndivergence = "kl"\nfunction_class = "linear"\nepsilon = 1.0\non_average = true\n'
        '[attacks]\nclasses = ["linear"]\nn_samples = 100\n[run]\nn_jobs = 1\n'
    )
    monkeypatch.chdir(tmp_path)  # not the config's folder
    result = run_audit(folder / "audit.toml", progress=False)
    records = np.array([pair["d"] for pair in result.pairs])
    assert records.shape == (2, 3, 1) and np.all(np.abs(records) <= 1)
    assert (result.table["pair"] == PAIR).sum() == 2


def test_on_average_claims_refuse_the_best_policy():
    """Policy best confirms the most distinguishable pair only: a worst-case statistic, not an average."""
    config = _config()
    assert load_config(config).attacks.policy == "every"
    config["attacks"]["policy"] = "best"
    with pytest.raises(ConfigError, match=r'attacks.policy: .* Use policy = "every" for on-average claims. Found "best"'):
        load_config(config)
