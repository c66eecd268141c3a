"""What the audit absorbed is said: calls that raised and were redrawn one output per call, structural outputs.

The mechanisms follow the user-mechanism protocol ``f(dataset, n, rng)``;
configs name them ``test_events:<function>`` (pytest puts this directory on
sys.path).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from audit import run_audit
from audit.commands.cli import main
from audit.sampling.events import EventCounter, event_summary
from audit.sampling.structure import StructureEncoder

ROOT = Path(__file__).resolve().parents[1]
NAN_RATE = 0.01


def raises_on_batches(dataset, n, rng):
    """Sum + Lap(1), but a call for 100 outputs or more raises: one output per call always works."""
    if n >= 100:
        raise ValueError(f"batch of {n} too large")
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def nan_sometimes(dataset, n, rng):
    """Sum + Lap(1), each output NaN with probability 1 %."""
    out = np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)
    out[rng.random(n) < NAN_RATE] = np.nan
    return out


def _config(function, n_samples=2000):
    return {
        "mechanism": {"callable": f"test_events:{function}"},
        "pairs": [{"d": [[0.0]], "d_prime": [[1.0]]}],
        "claims": [{"divergence": "kl", "function_class": "linear", "epsilon": 5.0}],
        "attacks": {"classes": ["linear"], "n_samples": n_samples, "policy": "every"},
        "run": {"seed": 0, "n_jobs": 1},
    }


def _toml(tmp_path, config):
    text = (f'[mechanism]\ncallable = "{config["mechanism"]["callable"]}"\n\n'
            '[[pairs]]\nd = [[0.0]]\nd_prime = [[1.0]]\n\n'
            '[[claims]]\ndivergence = "kl"\nfunction_class = "linear"\nepsilon = 5.0\n\n'
            f'[attacks]\nclasses = ["linear"]\nn_samples = {config["attacks"]["n_samples"]}\npolicy = "every"\n\n'
            '[run]\nseed = 0\nn_jobs = 1\n')
    path = tmp_path / "audit.toml"
    path.write_text(text)
    return path


def _first_screen(report: str) -> str:
    """report.md up to its first section after the verdict."""
    return report.split("## What was audited")[0]


def test_calls_that_raised_and_were_redrawn_are_said(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(_toml(tmp_path, _config("raises_on_batches"))), "--out", str(out), "--quiet"]) == 0
    stdout = capsys.readouterr().out
    assert "MECHANISM EVENTS: 2 call(s) for many outputs raised and were redrawn one output per call" in stdout
    (entry,) = json.loads((out / "results.json").read_text())["events"]
    assert entry["pair"] == "p0" and entry["redrawn_draws"] == 2  # policy every: the train and the confirm draw
    assert "ValueError: batch of 1000 too large" in entry["redraw_error"]
    assert entry["d"]["outputs"] == entry["d_prime"]["outputs"] == 2000 and entry["d"]["raised"] == 0
    for name in ("report.md", "report.html"):
        screen = _first_screen((out / name).read_text())
        assert "Mechanism events (absorbed, not errors)" in screen
        assert "2 call(s) for many outputs raised and were absorbed" in screen and "ValueError: batch of" in screen


def test_nan_outputs_are_counted_per_dataset(tmp_path):
    n = 4000
    result = run_audit(_config("nan_sometimes", n), progress=False, out_dir=tmp_path / "out")
    assert result.exit_code == 0
    (entry,) = result.events
    assert entry["redrawn_draws"] == 0
    for side in ("d", "d_prime"):
        counts = entry[side]
        assert counts["outputs"] == n and counts["inf"] == counts["length"] == counts["raised"] == 0
        # binomial(n, 1 %): within 5 standard errors
        assert abs(counts["nan"] - NAN_RATE * n) <= 5 * np.sqrt(n * NAN_RATE * (1 - NAN_RATE))
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["events"] == [dict(entry)]
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "schema" / "results.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(document)) == []
    screen = _first_screen((tmp_path / "out" / "report.md").read_text())
    expected = f"- pair `p0`: NaN outputs: {entry['d']['nan']} of {n} on d, {entry['d_prime']['nan']} of {n} on d'"
    assert expected in screen
    resumed = run_audit(_config("nan_sometimes", n), progress=False, out_dir=tmp_path / "out", resume=True)
    assert list(resumed.events) == list(result.events)  # kept in tasks.jsonl: a resume says the same


def test_a_mechanism_without_events_says_nothing(tmp_path):
    result = run_audit({**_config("nan_sometimes"), "mechanism": {"name": "laplace", "params": {"epsilon": 1.0}}},
                       progress=False, out_dir=tmp_path)
    assert result.events == []
    assert "events" not in json.loads((tmp_path / "results.json").read_text())
    assert "Mechanism events" not in (tmp_path / "report.md").read_text()


def test_units_are_counted_once_and_added_up_per_pair():
    encoder = StructureEncoder()
    encoder.encode(np.zeros((2, 1)), 2)
    encoder.fixed = True
    counter = EventCounter(encoder)
    before = counter.snapshot()
    rows = encoder.encode(np.array([0.0, np.nan, np.inf, 1.0]), 4)
    counter.drawn("p0", rows, encoder.encode(np.zeros(4), 4))
    counter.redrawn("p0", "ValueError: x")
    first = counter.since(before)
    assert first["p0"]["d"] == {"outputs": 4, "nan": 1, "inf": 1, "length": 0, "raised": 0}
    before = counter.snapshot()
    counter.drawn("p0", encoder.raised(3), encoder.encode(np.zeros(3), 3))
    second = counter.since(before)
    assert second["p0"]["d"] == {"outputs": 3, "nan": 0, "inf": 0, "length": 0, "raised": 3}
    assert second["p0"]["redrawn_draws"] == 0 and second["p0"]["redraw_error"] is None
    records = [{"search": "u1", "events": first}, {"search": "u1", "events": first}, {"search": "u2", "events": second}]
    (total,) = event_summary(records)
    assert total["d"] == {"outputs": 7, "nan": 1, "inf": 1, "length": 0, "raised": 3}
    assert total["redrawn_draws"] == 1 and total["redraw_error"] == "ValueError: x"
