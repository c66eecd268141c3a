"""On-average audits: data distributions, the on-average strategy, on-average claims (docs/theory.md section 8)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audit.data_distributions import check_distribution, make_sampler
from audit.mechanisms import make_mechanism
from audit.neighbours import make_pairs

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
    ],
)
def test_bad_on_average_specs_name_the_field(fields, message):
    spec = {key: value for key, value in _spec(**fields).items() if value is not None}
    with pytest.raises(ValueError, match=message):
        make_pairs(spec, GAUSSIAN, 0)


def test_distribution_and_size_belong_to_on_average_only():
    with pytest.raises(ValueError, match='distribution and size are for strategy = "on-average" only'):
        make_pairs({"strategy": "random", "size": 3}, GAUSSIAN, 0)
