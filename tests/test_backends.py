"""The dask and ray backends: the same rows as loky for the same seed, local clusters started and stopped.

Each backend's tests skip, naming the package, where it is not installed
(``pip install -e ".[dask]"`` / ``".[ray]"``).  The small audit of
``tests/test_runner.py`` runs on two workers: 1 pair x 2 directions x 2 classes.
"""

import sys

import pandas as pd
import pytest

from audit import run_audit
from audit.config import ConfigError, load_config
from test_runner import _config

CLAIMS = [{"divergence": "renyi", "alpha": [2], "function_class": "poly2", "epsilon": 0.5}]


def _audit(backend):
    return run_audit(_config(claims=CLAIMS, classes=("linear", "poly2")), n_jobs=2, backend=backend,
                     progress=False).table


@pytest.fixture(scope="module")
def loky_table():
    return _audit("loky")


def test_dask_gives_the_rows_of_loky_and_stops_its_cluster(loky_table):
    distributed = pytest.importorskip("distributed", reason="the dask backend needs capaudit[dask]")
    pd.testing.assert_frame_equal(_audit("dask"), loky_table)
    with pytest.raises(ValueError):
        distributed.get_client()  # the runner's local cluster and client are gone


def test_dask_uses_the_callers_cluster_and_leaves_it_running(loky_table):
    distributed = pytest.importorskip("distributed", reason="the dask backend needs capaudit[dask]")
    with distributed.Client(n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        pd.testing.assert_frame_equal(_audit("dask"), loky_table)
        assert distributed.get_client() is client and client.status == "running"


def test_ray_gives_the_rows_of_loky_and_stops_its_instance(loky_table):
    ray = pytest.importorskip("ray", reason="the ray backend needs capaudit[ray]")
    pd.testing.assert_frame_equal(_audit("ray"), loky_table)
    assert not ray.is_initialized()  # the runner started ray, so it shut it down


@pytest.mark.slow  # a second ray start: ~8 s more
def test_ray_uses_the_callers_instance_and_leaves_it_running(loky_table):
    ray = pytest.importorskip("ray", reason="the ray backend needs capaudit[ray]")
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        pd.testing.assert_frame_equal(_audit("ray"), loky_table)
        assert ray.is_initialized()
    finally:
        ray.shutdown()


@pytest.mark.parametrize(("backend", "module"), [("dask", "distributed"), ("ray", "ray")])
def test_missing_backend_package_names_the_extra(monkeypatch, backend, module):
    monkeypatch.setitem(sys.modules, module, None)  # importlib finds no such package, installed or not
    with pytest.raises(ConfigError, match=rf"run\.backend: '{backend}' needs the '{module}' package.*capaudit\[{backend}\]"):
        load_config(_config(), {"backend": backend})
