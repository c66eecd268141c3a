"""Sampling in seeded chunks: the chunks' seeds, coupling refused in one chunk, a failing chunk, the progress count,
and audits whose rows do not depend on n_jobs, the backend or fork when a pair spans several chunks.

``CHUNK_SIZE`` is lowered to 150 so that n = 400 spans three chunks (150, 150, 100) and the tests stay fast;
the forked children inherit the lowered value.  Mechanisms are named ``test_sampling:<function>`` in configs.
"""

import functools
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import audit
import audit.sampling.chunk_pools
import audit.sampling.chunks
import audit.sampling.sampler
from audit import run_audit
from audit.sampling.chunks import chunk_seed, plan_chunks
from audit.config.import_path import user_import_path
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import NeighbourPair
from audit.engine.plan import task_seed
from audit.sampling.sampler import COUPLING_REFUSED, ChunkSampler, draw_chunk, draw_pair

CHUNK = 150
N = 400  # chunks of 150, 150 and 100 outputs


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(audit.sampling.chunks, "CHUNK_SIZE", CHUNK)  # the plan
    monkeypatch.setattr(audit.sampling.sampler, "CHUNK_SIZE", CHUNK)  # its messages


def laplace_sum(dataset, n, rng):
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def extra_draw_in_short_chunks(dataset, n, rng):
    """Spends one more random number on d' in a chunk shorter than CHUNK: coupling is refused in the last chunk only."""
    if np.sum(dataset) > 0 and n < CHUNK:
        rng.random()
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


def fails_in_short_chunks(dataset, n, rng):
    if np.sum(dataset) > 0 and n < CHUNK:
        raise ArithmeticError("boom in the last chunk")
    return laplace_sum(dataset, n, rng)


def _mechanism(function):
    return make_mechanism(callable=function, params={})


PAIR = NeighbourPair("p0", np.array([[0.0]]), np.array([[1.0]]))


def test_chunks_have_a_fixed_size():
    assert [(c.index, c.size) for c in plan_chunks(N, False)] == [(0, 150), (1, 150), (2, 100)]
    assert [c.size for c in plan_chunks(CHUNK, True)] == [CHUNK] and {c.mode for c in plan_chunks(N, True)} == {"coupled"}


def test_a_pair_is_its_seeded_chunks_in_order():
    """Chunk k of side s comes from its own named seed; chunk 0 keeps the name of the unchunked draw."""
    mechanism = _mechanism(laplace_sum)
    samples = draw_pair(mechanism, PAIR, N, seed=4, coupled=False)
    for side, dataset, drawn in (("d", PAIR.d, samples.d), ("d_prime", PAIR.d_prime, samples.d_prime)):
        expected = [mechanism.sample(dataset, c.size, np.random.default_rng(chunk_seed(4, "p0", side, c.index)))
                    for c in plan_chunks(N, False)]
        np.testing.assert_array_equal(drawn, np.concatenate(expected))
    assert (chunk_seed(4, "p0", "d", 0).generate_state(2) == task_seed(4, "p0|d").generate_state(2)).all()
    assert samples.d.shape == (N, 1) and not samples.coupled


def test_coupling_refused_in_one_chunk_redraws_every_chunk_of_d_prime():
    mechanism = _mechanism(extra_draw_in_short_chunks)
    coupled = draw_pair(mechanism, PAIR, N, seed=4, coupled=True)
    independent = draw_pair(mechanism, PAIR, N, seed=4, coupled=False)
    assert not coupled.coupled
    np.testing.assert_array_equal(coupled.d_prime, independent.d_prime)  # no row of d' stays paired with d
    healthy = draw_pair(_mechanism(laplace_sum), PAIR, N, seed=4, coupled=True)
    assert healthy.coupled
    np.testing.assert_allclose(healthy.d_prime - healthy.d, 1.0, atol=1e-12)


@pytest.mark.parametrize("fork", [True, False])
def test_sampler_counts_every_chunk_and_stops_a_failed_pair(monkeypatch, fork):
    monkeypatch.setattr(audit.sampling.sampler, "FORK", fork)
    mechanism = _mechanism(fails_in_short_chunks)
    healthy = NeighbourPair("p1", np.array([[0.0]]), np.array([[0.0]]))
    counted = []
    sampler = ChunkSampler(lambda pair, chunk: draw_chunk(mechanism, pair, chunk, 4), [PAIR, healthy], N, False,
                           workers=2, timeout=60, on_chunk=counted.append)
    results = dict((pair.name, samples) for pair, samples in sampler)
    assert "boom in the last chunk" in results["p0"] and "on pair p0" in results["p0"]
    np.testing.assert_array_equal(results["p1"].d, draw_pair(mechanism, healthy, N, seed=4, coupled=False).d)
    assert sum(counted) == 2 * len(plan_chunks(N, False))  # a failed pair's chunks count as done: the bar ends full


def _config(function="laplace_sum", coupled=False):
    return {
        "mechanism": {"callable": f"test_sampling:{function}"},
        "pairs": [{"d": [[0.0]], "d_prime": [[float(i)]]} for i in (1, 2)],
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
        "attacks": {"policy": "every", "classes": ["threshold"], "n_samples": N, "coupled": coupled},
        "run": {"seed": 3, "n_jobs": 1},
    }


def test_rows_do_not_depend_on_jobs_backend_or_fork_across_chunks(monkeypatch):
    """Coupled chunks (their own seeds and clones) over two pairs; independent chunks: the draw_pair tests above."""
    one = run_audit(_config(coupled=True), progress=False).table
    assert one["error"].isna().all() and len(one) == 2 * 2 and not one["note"].str.contains("coupled").any()
    pd.testing.assert_frame_equal(one, run_audit(_config(coupled=True), n_jobs=2, progress=False).table)
    monkeypatch.setattr(audit.sampling.sampler, "FORK", False)
    pd.testing.assert_frame_equal(
        one, run_audit(_config(coupled=True), n_jobs=2, backend="threading", progress=False).table)


def test_an_audit_refused_coupling_in_one_chunk_says_so():
    table = run_audit(_config("extra_draw_in_short_chunks", coupled=True), progress=False).table
    assert table["note"].str.startswith(COUPLING_REFUSED).all() and table["error"].isna().all()


def test_a_callable_from_the_configs_folder_reaches_a_cluster_worker_by_value(tmp_path):
    """A cluster job unpickles the mechanism in a process that has neither the config's folder nor the current
    directory on its path (ray's workers, a remote machine): the user's module travels by value."""
    folder = tmp_path / "config_folder"
    folder.mkdir()
    (folder / "far_mechanism.py").write_text(
        "import numpy as np\n\ndef noisy_sum(dataset, n, rng):\n    return np.sum(dataset) + rng.laplace(size=n)\n")
    with user_import_path(folder):
        mechanism = make_mechanism(callable="far_mechanism:noisy_sum", params={})
    chunk = plan_chunks(N, False)[0]
    job = pickle.dumps((audit.sampling.chunk_pools._pickle_draw(functools.partial(draw_chunk, mechanism, seed=4)), PAIR, chunk))
    worker = ("import pickle, sys\nfrom audit.sampling.chunk_pools import _cluster_job\n"
              "sys.stdout.buffer.write(pickle.dumps(_cluster_job(*pickle.loads(sys.stdin.buffer.read()), 60.0)))\n")
    done = subprocess.run([sys.executable, "-c", worker], input=job, capture_output=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(audit.__file__).parents[1])})
    assert done.returncode == 0, done.stderr.decode()
    drawn = pickle.loads(done.stdout)
    expected = draw_chunk(mechanism, PAIR, chunk, 4)
    np.testing.assert_array_equal(drawn.d, expected.d)
    np.testing.assert_array_equal(drawn.d_prime, expected.d_prime)
    assert "far_mechanism" in sys.modules and str(folder) not in sys.path


def _hang_noting_pid(path):
    def hang(pair, chunk):
        Path(path).write_text(str(os.getpid()))
        time.sleep(600)
    return hang


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked children and prctl: Linux")
def test_a_hung_child_ends_with_an_audit_killed_by_kill_9(tmp_path):
    noted = tmp_path / "child.pid"
    audit_pid = os.fork()
    if audit_pid == 0:  # stands for the audit: forks a child whose mechanism hangs, then is killed
        try:
            audit.sampling.chunk_pools._spawn(_hang_noting_pid(noted), PAIR, [plan_chunks(1, False)[0]])
            time.sleep(600)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while not noted.exists() or not noted.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(audit_pid, signal.SIGKILL)
    os.waitpid(audit_pid, 0)
    child = int(noted.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{child}/status").read_text().split("\n")[1]
        except FileNotFoundError:  # ended and reaped
            return
        if "Z (zombie)" in state:  # ended, not reaped (no init reaps orphans here)
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail(f"the hung child outlived its parent: {state}")
