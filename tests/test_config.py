"""Audit config validation: every bad input is a ConfigError naming the field, the value and the fix."""

import copy
from pathlib import Path

import pytest

from audit.config import AuditConfig, ConfigError, load_config

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

BASE = {
    "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
    "claims": [
        {"divergence": "renyi", "alpha": [2, 4], "function_class": "linear", "epsilon": 0.8},
        {"divergence": "dp", "function_class": "all", "epsilon": 1.0},
    ],
    "attacks": {"classes": ["linear", "poly2"], "n_samples": 1000},
    "run": {"seed": 3, "n_jobs": 1},
}


def _with(path: str, value):
    """BASE with the field at dotted ``path`` (list indices as numbers) set to ``value`` (None deletes it)."""
    config = copy.deepcopy(BASE)
    *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
    table = config
    for part in parents:
        table = table[part]
    if value is None:
        del table[last]
    else:
        table[last] = value
    return config


def test_valid_config_is_parsed_with_defaults():
    config = load_config(BASE)
    assert isinstance(config, AuditConfig)
    assert config.claims[0].alpha == (2.0, 4.0)
    assert config.claims[1].alpha == (None,) and config.claims[1].delta == 0.0
    assert config.attacks.classes == ("linear", "poly2")
    assert config.attacks.confidence == 0.95 and config.attacks.train_fraction == 0.5
    assert config.attacks.coupled is False
    assert (config.run.seed, config.run.n_jobs, config.run.backend) == (3, 1, "loky")
    assert config.pairs == () and config.neighbours is None


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("claim", [], ["the config", "'claim'", "did you mean 'claims'"]),
        ("attacks.n_sample", 10, ["attacks", "'n_sample'", "did you mean 'n_samples'"]),
        ("claims.0.alpha", [2, 1], ["claims[0].alpha", "1.0", "> 1"]),
        ("claims.0.alpha", "two", ["claims[0].alpha", "'two'", "number"]),
        ("claims.0.epsilon", "big", ["claims[0].epsilon", "'big'", "finite number"]),
        ("claims.0.epsilon", None, ["claims[0].epsilon", "missing required field"]),
        ("claims.0.divergence", "renyii", ["claims[0].divergence", "'renyii'", "did you mean 'renyi'"]),
        ("claims.1.function_class", "poly", ["claims[1].function_class", "'poly'", "polyK"]),
        ("claims.1.alpha", [2], ["claims[1].alpha", "only Renyi claims"]),
        ("claims.0.delta", 0.1, ["claims[0].delta", "only dp claims"]),
        ("claims", [], ["claims", "missing required field"]),
        ("mechanism.name", "laplce", ["mechanism.name", "'laplce'"]),
        ("mechanism.params", {"epsilon": 1.0, "sigma": 2.0}, ["mechanism.name", "sigma"]),
        ("mechanism.callable", "no_such_module_xyz:mechanism", ["mechanism", "exactly one"]),
        ("attacks.n_samples", 10, ["attacks.n_samples", "at least", "Found 10"]),
        ("attacks.n_samples", 1000.5, ["attacks.n_samples", "integer", "1000.5"]),
        ("attacks.classes", ["linear", "poly"], ["attacks.classes[1]", "'poly'"]),
        ("attacks.classes", ["all"], ["attacks.classes", "claims only"]),
        ("attacks.confidence", 1.5, ["attacks.confidence", "1.5"]),
        ("attacks.class_params", {"mlp": {"hidden": 4}}, ["attacks.class_params", "'mlp'"]),
        ("attacks.coupled", "yes", ["attacks.coupled", "true or false", "'yes'"]),
        ("attacks.coupled", 1, ["attacks.coupled", "true or false", "Found 1"]),
        ("attacks.couple", True, ["attacks", "'couple'", "did you mean 'coupled'"]),
        ("run.backend", "spark", ["run.backend", "'spark'", "loky"]),
        ("run.n_jobs", 0, ["run.n_jobs", "Found 0"]),
        ("run.seed", -1, ["run.seed", "-1"]),
        ("pairs", [{"d": [[0.0]]}], ["pairs[0].d_prime", "missing required field"]),
        ("pairs", [{"d": [[0.0]], "d_prime": "one"}], ["pairs[0].d_prime", "'one'"]),
        ("neighbours", {"strategy": "nearest"}, ["neighbours.strategy", "'nearest'", "random"]),
    ],
)
def test_bad_field_is_named(path, value, expected):
    with pytest.raises(ConfigError) as error:
        load_config(_with(path, value))
    for text in expected:
        assert text in str(error.value), (text, str(error.value))


def test_unimportable_callable_is_named():
    config = copy.deepcopy(BASE)
    config["mechanism"] = {"callable": "no_such_module_xyz:mechanism"}
    config["pairs"] = [{"d": [[0.0]], "d_prime": [[1.0]]}]
    with pytest.raises(ConfigError, match=r"mechanism\.callable: .*no_such_module_xyz"):
        load_config(config)


def test_user_mechanism_needs_pairs(monkeypatch):
    monkeypatch.chdir(EXAMPLES)  # a dict config finds user modules in the current directory
    config = copy.deepcopy(BASE)
    config["mechanism"] = {"callable": "my_mechanism:mechanism"}
    with pytest.raises(ConfigError, match="pairs: missing required field"):
        load_config(config)


@pytest.mark.parametrize("coupled", [True, False])
def test_coupled_is_accepted(coupled, tmp_path):
    assert load_config(_with("attacks.coupled", coupled)).attacks.coupled is coupled
    path = tmp_path / "coupled.toml"
    path.write_text(
        '[mechanism]\nname = "laplace"\n[[claims]]\ndivergence = "dp"\nfunction_class = "all"\nepsilon = 1.0\n'
        f"[attacks]\ncoupled = {str(coupled).lower()}\n"
    )
    assert load_config(path).attacks.coupled is coupled


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_overrides_replace_run_fields():
    config = load_config(BASE, {"seed": 11, "n_jobs": 2, "backend": None})
    assert (config.run.seed, config.run.n_jobs, config.run.backend) == (11, 2, "loky")
    assert config.raw["run"]["seed"] == 11
    with pytest.raises(ConfigError, match="run.backend"):
        load_config(BASE, {"backend": "nope"})


@pytest.mark.parametrize("name", ["laplace.toml", "buggy.toml", "custom.toml"])
def test_examples_load(name):
    """The example configs are valid; custom.toml finds my_mechanism.py next to it."""
    config = load_config(EXAMPLES / name)
    assert config.claims


def test_toml_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.toml"
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("[mechanism\nname = 'laplace'\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken)


def test_numpy_pairs_are_recorded_as_lists():
    import numpy as np

    config = copy.deepcopy(BASE)
    config["pairs"] = [{"d": np.zeros((2, 1)), "d_prime": np.array([[0.0], [1.0]])}]
    loaded = load_config(config)
    assert loaded.raw["pairs"] == [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}]
    np.testing.assert_array_equal(loaded.pairs[0][1], [[0.0], [1.0]])
