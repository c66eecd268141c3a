"""The dask and ray backends: the same rows as loky for the same seed, the mechanism run on the cluster's
workers, local clusters started and stopped.

Each backend's tests skip, naming the package, where it is not installed
(``pip install -e ".[dask]"`` / ``".[ray]"``).  The small audit of
``tests/test_runner.py`` runs on two workers: 1 pair x 2 directions x 2 classes.
The mechanism records where it ran in the file named by ``$CAPAUDIT_TEST_PIDS``
(its process and that process's parent), set before any worker starts.
"""

import os
import re
import signal
import sys
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from audit import run_audit
from audit.config.load import ConfigError, load_config
from audit.config.one_run import OneRunSpec
from audit.engine.one_run import one_run_audit, train_isolated
from audit.inputs.neighbours import NeighbourPair
from audit.mechanisms.learners import DPGradientDescent
from audit.results.provenance import PROBE_OUTPUTS
from audit.sampling.chunk_pools import ClusterPool, cluster_call
from audit.sampling.chunks import plan_chunks
from audit.sampling.errors import MechanismError
from audit.sampling.structure import PILOT_OUTPUTS
from test_faults import hangs, kills_its_process  # noqa: F401 - the configs below name them as test_backends:<name>
from test_runner import _config, laplace_sum

CLAIMS = [{"divergence": "renyi", "alpha": [2], "function_class": "poly2", "epsilon": 0.5}]


def laplace_noting_pid(dataset, n, rng):
    """test_runner's Laplace sum, noting ``pid parent-pid n`` of the process that draws it."""
    with open(os.environ["CAPAUDIT_TEST_PIDS"], "a") as pids:
        pids.write(f"{os.getpid()} {os.getppid()} {n}\n")
    return laplace_sum(dataset, n, rng)


@pytest.fixture(scope="module", autouse=True)
def pid_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("pids") / "pids.txt"
    os.environ["CAPAUDIT_TEST_PIDS"] = str(path)  # before the clusters' workers start: they inherit it
    yield path
    del os.environ["CAPAUDIT_TEST_PIDS"]


def _audit(backend, function="laplace_noting_pid", policy="every", **run):
    config = _config(claims=CLAIMS, classes=("linear", "poly2"), policy=policy,
                     n_samples=400 if policy == "every" else 800)
    config["mechanism"]["callable"] = f"test_backends:{function}"
    config["run"].update(run)
    return run_audit(config, n_jobs=2, backend=backend, progress=False).table


@pytest.fixture(scope="module")
def loky_table():
    return _audit("loky")


def test_dask_gives_the_rows_of_loky_and_stops_its_cluster(loky_table):
    distributed = pytest.importorskip("distributed", reason="the dask backend needs capaudit[dask]")
    pd.testing.assert_frame_equal(_audit("dask"), loky_table)
    with pytest.raises(ValueError):
        distributed.get_client()  # the runner's local cluster and client are gone


@pytest.fixture(scope="module")
def dask_client():
    """A caller's local cluster: two worker processes of one thread."""
    distributed = pytest.importorskip("distributed", reason="the dask backend needs capaudit[dask]")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client


def test_dask_samples_on_the_callers_workers_and_leaves_them_running(loky_table, dask_client, pid_file):
    import distributed

    pid_file.write_text("")
    pd.testing.assert_frame_equal(_audit("dask"), loky_table)
    assert distributed.get_client() is dask_client and dask_client.status == "running"
    _assert_chunks_drawn_by(pid_file, set(dask_client.run(os.getpid).values()))


def _assert_chunks_drawn_by(pid_file, workers):
    """Every chunk (the memory check's two outputs too) is drawn in a child forked by a worker; the audit's
    process forks only the two small pilots (the structure pilot, audit.sampling.structure, and the reproducibility
    probe, audit.results.provenance) and never draws itself."""
    drawn_by = [tuple(map(int, line.split())) for line in pid_file.read_text().splitlines()]
    local = {n for _, parent, n in drawn_by if parent not in workers}
    assert drawn_by and os.getpid() not in workers and all(pid != os.getpid() for pid, _, _ in drawn_by)
    assert {parent for _, parent, _ in drawn_by if parent not in workers} <= {os.getpid()}
    assert local <= {PILOT_OUTPUTS, PROBE_OUTPUTS} and any(parent in workers for _, parent, _ in drawn_by)


def test_the_best_policy_samples_on_dask_workers_with_the_numbers_of_loky(dask_client, pid_file):
    loky = _audit("loky", policy="best")
    pid_file.write_text("")
    pd.testing.assert_frame_equal(_audit("dask", policy="best"), loky)
    _assert_chunks_drawn_by(pid_file, set(dask_client.run(os.getpid).values()))


@pytest.mark.parametrize(("function", "expected"), [("kills_its_process", "exit code 3"),
                                                     ("hangs", "run.sample_timeout = 1 s")])
def test_a_mechanism_that_dies_or_hangs_on_a_dask_worker_costs_its_pair(dask_client, function, expected):
    start = time.perf_counter()
    table = _audit("dask", function, sample_timeout=1)
    assert table["error"].notna().all() and table["error"].str.contains(expected).all()
    assert time.perf_counter() - start < 60
    assert set(dask_client.run(os.getpid)) == set(dask_client.scheduler_info()["workers"])  # both workers live on


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


class NotingLearner(DPGradientDescent):
    """The built-in DP-GD learner noting where it trains (as :func:`laplace_noting_pid`); pickled by value with this
    module, so that a cluster's workers run this class."""

    def _sample(self, dataset, n, rng):
        laplace_noting_pid(dataset, n, rng)
        return super()._sample(dataset, n, rng)


class DyingLearner(DPGradientDescent):
    def _sample(self, dataset, n, rng):
        os._exit(3)


class HangingLearner(DPGradientDescent):
    def _sample(self, dataset, n, rng):
        time.sleep(600)


ONE_RUN_CLAIMS = [{"divergence": "gdp", "function_class": "all", "epsilon": 1.0}]


def _one_run(backend):
    """A one-run audit of 50 canaries on the noting learner (mu = 1, one step), trained on ``backend``."""
    return one_run_audit(NotingLearner(mu=1.0, steps=1), OneRunSpec(canaries=50), ONE_RUN_CLAIMS, 0.95, 0, 60.0,
                         backend)


def _drawn_by(pid_file):
    return [tuple(map(int, line.split()[:2])) for line in pid_file.read_text().splitlines()]


def test_a_one_run_audit_trains_on_a_dask_worker_with_the_numbers_of_threading(dask_client, pid_file):
    """The one training run is one job of the caller's cluster, in a child its worker forks (not in the audit's
    process, not in the worker), and reads as the run forked from the audit's process does; so does run_audit's."""
    pid_file.write_text("")
    threading = _one_run("threading")
    [(child, parent)] = _drawn_by(pid_file)
    assert parent == os.getpid() and child != os.getpid()
    pid_file.write_text("")
    assert _one_run("dask") == threading
    workers = set(dask_client.run(os.getpid).values())
    [(child, parent)] = _drawn_by(pid_file)
    assert parent in workers and child not in workers | {os.getpid()}
    config = {"mechanism": {"name": "dp_gd_logistic", "params": {"mu": 1.0, "steps": 1}}, "claims": ONE_RUN_CLAIMS,
              "one_run": {"canaries": 50}, "run": {"seed": 0}}
    assert run_audit(config, backend="dask", progress=False).one_run == run_audit(config, progress=False).one_run
    assert dask_client.status == "running"


@pytest.mark.parametrize(("learner", "expected"), [(DyingLearner, "without a result (exit code 3"),
                                                   (HangingLearner, "run.sample_timeout = 1 s")])
def test_a_one_run_learner_that_dies_or_hangs_on_a_dask_worker_raises_naming_it(dask_client, learner, expected):
    """As in the audit's process (tests/test_one_run_audit.py): a MechanismError (exit 2) naming the cause; the
    worker lives on."""
    from audit.sampling.errors import MechanismError

    start = time.perf_counter()
    data = NotingLearner(mu=1.0, steps=1).default_pairs()[0][0]
    with pytest.raises(MechanismError, match=re.escape(expected)):
        train_isolated(learner(mu=1.0, steps=1), data, np.random.default_rng(0), 1.0, "dask")
    assert time.perf_counter() - start < 30
    assert set(dask_client.run(os.getpid)) == set(dask_client.scheduler_info()["workers"])


def _kills_its_worker(*args):
    """A draw or a training run that kills the process that forked it: on a cluster, the worker running its job."""
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)


def _lost_worker_error(backend, path):
    """What a job whose worker dies gives: its pair's error message for a chunk (``ClusterPool``), the
    ``MechanismError``'s message for one call (``cluster_call``, a one-run audit's training run)."""
    if path == "call":
        with pytest.raises(MechanismError) as raised:
            cluster_call(backend, _kills_its_worker, 60.0)
        return str(raised.value)
    pair, [chunk] = NeighbourPair("p0", np.array([[0.0]]), np.array([[1.0]])), plan_chunks(10, False)
    pool = ClusterPool(backend, _kills_its_worker, 60.0)
    job = pool.start(pair, [chunk])
    running = {job: (SimpleNamespace(pair=pair), [chunk], time.monotonic())}
    results = []
    while not results:
        results = list(pool.collect(running, block=True))
    pool.stop(job)
    [(_, message)] = results
    return message


LOST = {"chunk": "sampling pair p0: the {} job ended without a result ({}: ",
        "call": "the {} job ended without a result ({}: "}
"""The start of each path's message for a job whose worker died, given the backend and the cluster's error."""


@pytest.mark.parametrize("path", ["chunk", "call"])
def test_a_dask_worker_dying_mid_job_reads_as_a_job_without_a_result(dask_client, monkeypatch, path):
    """A chunk's job costs its pair, a one-run training job raises MechanismError (exit 2); both name the cluster's
    error (``KilledWorker``) in one line.  The scheduler runs the job on no other worker (``allowed_failures``: 0);
    the nanny restarts the killed one."""
    monkeypatch.setattr(dask_client.cluster.scheduler, "allowed_failures", 0)
    message = _lost_worker_error("dask", path)
    assert message.startswith(LOST[path].format("dask", "KilledWorker")) and "\n" not in message, message
    dask_client.wait_for_workers(2, timeout=60)


@pytest.mark.slow  # a ray start: ~8 s
def test_a_one_run_audit_trains_on_ray_with_the_numbers_of_threading(pid_file):
    ray = pytest.importorskip("ray", reason="the ray backend needs capaudit[ray]")
    threading = _one_run("threading")
    pid_file.write_text("")
    assert _one_run("ray") == threading
    [(child, parent)] = _drawn_by(pid_file)
    assert os.getpid() not in (child, parent) and not ray.is_initialized()  # a local instance, shut down after


@pytest.mark.slow  # a ray start: ~8 s
def test_a_ray_worker_dying_mid_job_reads_as_a_job_without_a_result():
    """As on dask: ray runs the job on no other worker (``max_retries=0``) and names ``WorkerCrashedError``."""
    ray = pytest.importorskip("ray", reason="the ray backend needs capaudit[ray]")
    ray.init(num_cpus=1, include_dashboard=False)
    try:
        for path in ("chunk", "call"):
            message = _lost_worker_error("ray", path)
            assert message.startswith(LOST[path].format("ray", "WorkerCrashedError")) and "\n" not in message, message
    finally:
        ray.shutdown()


@pytest.mark.parametrize(("backend", "module"), [("dask", "distributed"), ("ray", "ray")])
def test_missing_backend_package_names_the_extra(monkeypatch, backend, module):
    monkeypatch.setitem(sys.modules, module, None)  # importlib finds no such package, installed or not
    with pytest.raises(ConfigError, match=rf"run\.backend: '{backend}' needs the '{module}' package.*capaudit\[{backend}\]"):
        load_config(_config(), {"backend": backend})


@pytest.mark.parametrize("backend", ["dask", "ray"])
def test_a_mechanism_dying_on_a_cluster_reads_as_itself_in_one_line_with_both_reports(tmp_path, capsys, backend):
    """Issue 32's fault matrix on the cluster backends: ``capaudit run`` exits 2 with one stderr line naming the
    mechanism's own failure (its exit code), and still writes report.md, report.html and results.json."""
    from test_faults import _to_toml

    from audit.commands.cli import main

    pytest.importorskip("distributed" if backend == "dask" else "ray",
                        reason=f"the {backend} backend needs capaudit[{backend}]")
    config = _config(claims=CLAIMS, classes=("linear",), policy="every", n_samples=400)
    config["mechanism"]["callable"] = "test_faults:kills_its_process"
    config["run"].update(sample_timeout=5)
    path = tmp_path / "audit.toml"
    path.write_text(_to_toml(config))
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--n-jobs", "2", "--backend", backend])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "exit code 3" in lines[0], lines
    assert all((tmp_path / "out" / name).is_file() for name in ("report.md", "report.html", "results.json"))
