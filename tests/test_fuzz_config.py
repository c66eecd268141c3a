"""Config fuzzing: every mutated config is either a one-line ConfigError naming a field or a valid config,
and a valid one runs through the CLI to exit 0 / 1 (an audit) or 2 (a one-line error), never an exception.

The mutations are seeded (``random.Random``), so a failure names the seed and the mutation that caused it:
leaves replaced by values of the wrong type or out of range (bools and strings for numbers, +-1e308, nan,
huge integers, empty tables), fields deleted, renamed and invented, numbers nudged, values wrapped in lists, tables or
deep nesting, and class / divergence / mechanism names replaced by near misses.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
import reprlib

import pytest

from audit.commands.cli import main
from audit.config.load import AuditConfig, ConfigError, load_config

BASES = (
    {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0, "sensitivity": 1.0}},
        "claims": [
            {"divergence": "kl", "function_class": "linear", "epsilon": 0.5},
            {"divergence": "renyi", "alpha": [2, 4], "function_class": "poly2", "epsilon": 1.0},
            {"divergence": "dp", "function_class": "all", "epsilon": 1.0, "delta": 0.0},
            {"divergence": "ipm", "function_class": "threshold", "epsilon": 1.0},
        ],
        "attacks": {
            "classes": ["linear", "poly2", "threshold"], "n_samples": 200, "confidence": 0.95,
            "train_fraction": 0.5, "class_params": {"linear": {"ridge": 0.001}}, "coupled": False,
        },
        "run": {"seed": 0, "n_jobs": 1, "backend": "loky"},
    },
    {
        "mechanism": {"name": "gaussian", "params": {"sigma": 1.0}},
        "pairs": [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]], "relation": "replace-one"}],
        "claims": [{"divergence": "kl", "function_class": "all", "epsilon": 0.5}],
        "attacks": {"classes": ["linear"], "n_samples": 200},
    },
    {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}},
        "neighbours": {"strategy": "random", "count": 2, "relation": "add-remove",
                       "domain": {"low": [0.0], "high": [1.0], "size": 3}},
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
        "attacks": {"classes": ["linear"], "n_samples": 200, "coupled": True},
    },
)
ODD_VALUES = (
    True, False, "1", "", "linear", 0, -1, 1, 2, 10**12, 2**63, 1e308, -1e308, 1e-308, math.nan, math.inf, -math.inf,
    0.5, 0.999, 1.0000001, [], {}, None, [[0.0]], [[1e308]], {"x": 1}, [1, "a"], [True],
)
ODD_NAMES = (
    "poly00", "poly\u0968", "tree0", "tree21", "poly11", "Linear", " linear", "all", "threshold", "mlp", "kernel",
    "tree3", "kl", "renyi", "dp", "ipm", "tv", "gaussian", "nonprivate", "noisy_hist_2", "laplace", "random",
    "extremes", "search", "replace-one", "add-remove", "threading", "dask", "x" * 300,
)
FIELD = re.compile(r"^(the config|config|mechanism|pairs|neighbours|claims|attacks|run)\b")


def _paths(node, prefix=()):
    """Every (path, value) below ``node``: table keys and list indices, parents before children."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield prefix + (key,), value
        yield from _paths(value, prefix + (key,))


def _parent(config, path):
    for key in path[:-1]:
        config = config[key]
    return config


def mutate(config: dict, rng: random.Random) -> tuple[dict, str]:
    """One random mutation of ``config`` (a deep copy) and a description of it."""
    config = copy.deepcopy(config)
    kind = rng.choice(["nudge"] * 4 + ["value", "value", "name", "delete", "rename", "invent", "wrap", "deep"])
    paths = list(_paths(config))
    leaves = [(path, value) for path, value in paths if not isinstance(value, (dict, list))]
    path, value = rng.choice(leaves if kind == "nudge" else paths)
    parent, key = _parent(config, path), path[-1]
    where = ".".join(map(str, path))
    if kind in ("rename", "invent") and not isinstance(parent, dict):
        kind = "value"
    if kind == "nudge" and isinstance(value, bool):
        parent[key] = not value
    elif kind == "nudge" and isinstance(value, (int, float)):
        parent[key] = type(value)(rng.choice([0.5, 2, 3, 10]) * value + rng.choice([0, 1]))
    elif kind in ("name", "nudge") or (kind == "value" and isinstance(value, str)):
        parent[key] = rng.choice(ODD_NAMES)
    elif kind == "value":
        parent[key] = rng.choice(ODD_VALUES)
    elif kind == "delete":
        del parent[key]
    elif kind in ("rename", "invent"):
        new = rng.choice([key[:-1], key + "s", key.upper(), "colour", "n_jobs", "alpha", "relation"])
        parent[new] = parent.pop(key) if kind == "rename" else rng.choice(ODD_VALUES)
    elif kind == "wrap":
        parent[key] = rng.choice([[value], {"value": value}, [value, value]])
    else:  # deep
        deep = value
        for _ in range(rng.choice([10, 1000, 5000])):
            deep = [deep]
        parent[key] = deep
    new_value = parent.get(key) if isinstance(parent, dict) else parent[key] if key < len(parent) else None
    return config, f"{kind} at {where}" + ("" if kind == "deep" else f" -> {reprlib.repr(new_value)}")


def mutated_configs(count: int, seed: int):
    """``count`` configs, each one to three mutations of a base config, from ``seed``."""
    rng = random.Random(seed)
    for i in range(count):
        config, steps = rng.choice(BASES), []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            config, step = mutate(config, rng)
            steps.append(step)
            if step.startswith("deep"):  # nothing can walk or copy it further
                break
        yield i, config, "; ".join(steps)


def validate(config: dict) -> AuditConfig | None:
    """The validated config, or None after checking that its ConfigError is one line naming a field."""
    try:
        return load_config(config)
    except ConfigError as error:
        message = str(error)
        assert "\n" not in message and FIELD.match(message), message
        return None


def toml(value) -> str:
    """``value`` as an inline TOML value (tables inline); None is not representable."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, str)):
        return str(value) if isinstance(value, int) else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def tiny(config: AuditConfig) -> dict | None:
    """The raw config of a validated audit made cheap (200 samples, linear attacks, one worker), or None."""
    raw = copy.deepcopy(dict(config.raw))
    attacks = raw.setdefault("attacks", {})
    attacks.update(n_samples=200, classes=["linear"], train_fraction=0.5)
    attacks.pop("class_params", None)
    raw["run"] = {**raw.get("run", {}), "n_jobs": 1, "backend": "loky"}
    if "neighbours" in raw:
        raw["neighbours"].update(count=2, candidates=2, screen_samples=100)
        if isinstance(raw["neighbours"].get("domain"), dict):
            raw["neighbours"]["domain"]["size"] = min(raw["neighbours"]["domain"].get("size", 1), 5)
    try:
        load_config(raw)
        toml(raw)
    except (ConfigError, TypeError):  # linear attacks cannot test its claims, or not representable in TOML
        return None
    return raw


def check_configs(count: int, seed: int, audits: int, tmp_path, capsys) -> tuple[int, int]:
    """Validate ``count`` mutated configs and run up to ``audits`` of the valid ones through the CLI."""
    valid, ran = 0, 0
    for i, config, steps in mutated_configs(count, seed):
        try:
            loaded = validate(config)
        except AssertionError as error:
            raise AssertionError(f"config {i} ({steps}): ConfigError not one line naming a field: {error}") from None
        except Exception as error:  # noqa: BLE001 - the point: nothing but ConfigError may escape
            raise AssertionError(f"config {i} ({steps}): {type(error).__name__}: {error}") from error
        if loaded is None:
            continue
        valid += 1
        raw = tiny(loaded) if ran < audits else None
        if raw is None:
            continue
        path = tmp_path / f"config{i}.toml"
        path.write_text("\n".join(f"{key} = {toml(value)}" for key, value in raw.items()) + "\n", encoding="utf-8")
        code = main(["run", str(path), "--out", str(tmp_path / f"out{i}")])
        err = capsys.readouterr().err
        assert code in (0, 1, 2), (i, steps, code)
        if code == 2:
            errors = [line for line in err.splitlines() if "error:" in line]
            assert errors and "Traceback" not in err, (i, steps, err)
        ran += 1
    return valid, ran


def test_mutated_configs_are_refused_cleanly_or_audited(tmp_path, capsys):
    valid, ran = check_configs(200, seed=0, audits=2, tmp_path=tmp_path, capsys=capsys)
    assert 20 <= valid < 200 and ran == 2, (valid, ran)  # the generator reaches both outcomes


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mutated_configs_at_scale(seed, tmp_path, capsys):
    valid, ran = check_configs(1000, seed=seed, audits=20, tmp_path=tmp_path, capsys=capsys)
    assert ran == 20, (valid, ran)
