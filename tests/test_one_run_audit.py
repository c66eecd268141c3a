"""One-run audits of learners ([one_run]): the config, the canaries planted, and end to end on a non-private and a
correct DP-GD learner (light by default; over 20 seeds when slow)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attacks.one_run import one_run_ceiling
from audit import run_audit
from audit.config.load import ConfigError, load_config
from audit.mechanisms import make_mechanism
from audit.engine.one_run import guesses_by_margin, plant_canaries, tally
from audit.sampling.isolation import FORK

ROOT = Path(__file__).resolve().parents[1]
CLAIM = {"divergence": "gdp", "function_class": "all", "epsilon": 1.0}


def _config(params: dict, canaries: int = 200, seed: int = 0, **one_run) -> dict:
    return {"mechanism": {"name": "dp_gd_logistic", "params": params}, "claims": [CLAIM],
            "one_run": {"canaries": canaries, **one_run}, "run": {"seed": seed}}


def test_the_one_run_table_is_read_with_its_defaults():
    config = load_config(_config({"mu": 1.0, "steps": 1}, canaries=1000))
    assert (config.one_run.canaries, config.one_run.score, config.one_run.train_fraction,
            config.one_run.guess_fraction) == (1000, "linear", 0.5, None)
    assert load_config({k: v for k, v in _config({}).items() if k != "one_run"}).one_run is None


@pytest.mark.parametrize("change, message", [
    ({"one_run": {"canary": 10}}, "did you mean 'canaries'"),
    ({"one_run": {"canaries": 2}}, "one_run.canaries"),
    ({"one_run": {"train_fraction": 0.0}}, "one_run.guess_fraction"),
    ({"one_run": {"score": "logit"}}, "one_run.score"),
    ({"pairs": [{"d": [[0.0, 1.0]], "d_prime": [[0.0, 1.0], [5.0, 1.0]]}]}, "remove [pairs]"),
    ({"claims": [{"divergence": "kl", "function_class": "all", "epsilon": 1.0}]}, "claims[0].divergence"),
    ({"claims": [{"divergence": "dp", "function_class": "linear", "epsilon": 1.0}]}, "claims[0].function_class"),
])
def test_a_wrong_one_run_config_names_the_field(change, message):
    config = {**_config({}), **change}
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_config(config)


def test_a_mechanism_without_a_linear_release_is_refused():
    config = {**_config({}), "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}}}
    with pytest.raises(ConfigError, match="linear model's coefficients"):
        run_audit(config, progress=False)


@pytest.mark.parametrize("neighbours, rows", [("add_remove", 20 + 3), ("replace_one", 21 + 6)])
def test_canaries_are_added_or_replace_a_blank_record(neighbours, rows):
    learner = make_mechanism("dp_gd_logistic", {"neighbours": neighbours})
    included = np.array([True, False, True, False, False, True])
    dataset, records, k = plant_canaries(learner, 6, included)
    assert k == 3 and dataset.shape == (rows, k + 6 + 1)
    assert np.allclose(records[:, k:k + 6], 100.0 * np.eye(6)) and np.all(records[:, -1] == 1.0)
    assert np.allclose(dataset[-3:, k:k + 6].sum(axis=0), 100.0 * included) if neighbours == "add_remove" else \
        np.allclose(dataset[-6:, k:k + 6], 100.0 * np.diag(included))


def test_guesses_keep_the_scores_farthest_from_the_centre():
    guessed = guesses_by_margin(np.array([0.0, 5.0, -3.0, 0.4, 2.0]), 1.0, 0.4)
    assert guessed.tolist() == [0, 1, -1, 0, 0]
    assert tally(guessed, np.array([True, True, True, False, False])) == (1, 2)


def test_a_non_private_learner_reaches_the_ceiling_and_a_dp_one_keeps_its_claim(tmp_path):
    """200 canaries, 100 held out: sigma = 1e-6 guesses all 100 right (the ceiling, a violation of mu = 1); the
    learner calibrated to mu = 1 stays at or below it (seed 0)."""
    leaky = run_audit(_config({"sigma": 1e-6, "steps": 1}), out_dir=tmp_path, progress=False)
    reading = leaky.one_run["claims"][0]
    assert leaky.verdict == "violation" and leaky.exit_code == 1
    assert leaky.one_run["correct"] == leaky.one_run["guesses"] == 100 and reading["mu_low"] == reading["ceiling"]
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["one_run"]["claims"][0]["verdict"] == "violation" and written["rows"] == []
    schema = json.loads((ROOT / "docs" / "schema" / "results.schema.json").read_text())
    assert list(pytest.importorskip("jsonschema").Draft202012Validator(schema).iter_errors(written)) == []
    assert written["one_run"]["ceiling_all_guessed"] == pytest.approx(one_run_ceiling(200, 0.95))
    assert "ceiling" in (tmp_path / "report.md").read_text()
    private = run_audit(_config({"mu": 1.0, "steps": 1}), progress=False)
    assert private.one_run["claims"][0]["mu_low"] <= 1.0 and private.verdict == "pass"


def test_the_same_seed_gives_the_same_reading():
    first, second = (run_audit(_config({"mu": 1.0, "steps": 1}, score="loss"), progress=False) for _ in range(2))
    assert first.one_run == second.one_run


@pytest.mark.slow
def test_a_correct_dp_learner_keeps_its_claims_over_seeds():
    """1000 canaries, 20 seeds, claims mu = 1 and the (epsilon, 1e-5) it implies: at most 3 seeds read a
    violation (at most 5 % each: P[more than 3 of 20] < 2 %)."""
    from audit.theory.tradeoff import gdp_epsilon

    claims = [CLAIM, {"divergence": "dp", "function_class": "all", "epsilon": gdp_epsilon(1.0, 1e-5), "delta": 1e-5}]
    verdicts = [run_audit({**_config({"mu": 1.0, "steps": 1}, 1000, seed), "claims": claims}, progress=False).verdict
                for seed in range(20)]
    assert verdicts.count("violation") <= 3


@pytest.mark.slow
def test_opacus_without_noise_is_caught_in_one_run():
    """Opacus DP-SGD with one linear layer and noise_multiplier 0 (not DP): 200 canaries read a violation of mu = 1;
    at noise_multiplier 1 (1-GDP for one full-batch step) the claim holds (seed 0)."""
    pytest.importorskip("opacus")
    config = {**_config({}), "mechanism": {"name": "opacus.dp_sgd", "params": {"noise_multiplier": 0.0, "steps": 1}}}
    assert run_audit(config, progress=False).verdict == "violation"
    config["mechanism"]["params"]["noise_multiplier"] = 1.0
    assert run_audit(config, progress=False).one_run["claims"][0]["mu_low"] <= 1.0


def _raises(self, dataset, n, rng):
    raise RuntimeError("diverged")


def _exits(self, dataset, n, rng):
    os._exit(3)


def _calls_sys_exit(self, dataset, n, rng):
    sys.exit(4)


def _is_killed(self, dataset, n, rng):
    os.kill(os.getpid(), signal.SIGKILL)


def _hangs(self, dataset, n, rng):
    time.sleep(60)


@pytest.mark.skipif(not FORK, reason="the training run is isolated in a forked child on Linux only")
@pytest.mark.parametrize("train, message", [
    (_raises, "failed: RuntimeError: diverged"),
    (_exits, "ended its process without a result (exit code 3"),
    (_calls_sys_exit, "failed: called sys.exit(4)"),
    (_is_killed, "ended its process without a result (exit code -9"),
    (_hangs, "took longer than run.sample_timeout = 0.5 s"),
], ids=["raises", "os._exit", "sys.exit", "killed", "hangs"])
def test_a_learner_that_fails_exits_2_with_one_line_and_the_report_written(tmp_path, monkeypatch, capsys, train,
                                                                            message):
    """The training run is isolated as the many-run sampler's chunks are: whatever the learner does costs its
    child, and the audit ends with exit 2, one line naming the cause and an error report (20 canaries)."""
    from audit.commands.cli import main
    from audit.mechanisms.learners import DPGradientDescent

    monkeypatch.setattr(DPGradientDescent, "_sample", train)
    config = tmp_path / "one_run.toml"
    config.write_text('[mechanism]\nname = "dp_gd_logistic"\nparams = { mu = 1.0, steps = 1 }\n\n'
                      '[[claims]]\ndivergence = "gdp"\nfunction_class = "all"\nepsilon = 1.0\n\n'
                      '[one_run]\ncanaries = 20\n\n[run]\nsample_timeout = 0.5\n')
    start = time.monotonic()
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert time.monotonic() - start < 30  # a hung learner is stopped at the timeout, not waited for
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "one-run audit failed" in err and message in err, err
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["verdict"] == "error" and message in written["error"]
    assert "ERROR" in (tmp_path / "out" / "report.md").read_text()
