"""audit.engine.memory.estimate_memory against a measured peak (benchmarks/bench_memory.py, a fresh process)."""

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "bench_memory", Path(__file__).parents[1] / "benchmarks" / "bench_memory.py"
)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


@pytest.mark.slow
def test_estimate_is_within_a_factor_1_5_of_the_measured_peak():
    """kernel on 60 000 samples: about 160 MiB of libraries plus 70 MiB of features; both terms count.

    Slow: it runs real audits; tests/test_runner.py checks the formula itself.  The peak is the audit's own
    after exec (bench_memory.measure): the full slow suite launches it from a pytest process of several
    hundred MiB, whose pages a vfork child shows, and keeps in ru_maxrss, until it execs.
    """
    row = bench.measure(bench.config(60_000, ["kernel"]))
    assert 1 / 1.5 <= row["estimate / peak"] <= 1.5, row


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(bench.CONFIGS)))
def test_estimate_is_within_a_factor_1_5_on_the_bench_configs(index):
    row = bench.measure(bench.CONFIGS[index])
    assert 1 / 1.5 <= row["estimate / peak"] <= 1.5, row
