"""Library adapters: real OpenDP, diffprivlib and PyDP mechanisms, no mocks.

Each library test is skipped, with the reason, when the library does not
import.  OpenDP runs in the project's environment; diffprivlib 0.6.6 needs a
scikit-learn older than 1.9, so its tests (and PyDP's) run in an environment
installed with ``pip install ".[diffprivlib,pydp]"`` in a capaudit checkout.

Statistical tolerances: means and variances are compared with the law's
within ``Z = 5`` standard errors at n = 20 000 (the variance's standard
error from the law's fourth moment); Kolmogorov-Smirnov distances with the
asymptotic critical value at level 1e-4, ``sqrt(log(2 / 1e-4) / 2) / sqrt(n)``
(two-sample: with n_1 n_2 / (n_1 + n_2) in place of n); discrete laws:
frequencies within Z binomial standard errors of the pmf.  OpenDP and PyDP
cannot be seeded, so these levels are what a run fails by chance.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pickle
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from audit.mechanisms import base, list_mechanisms, make_mechanism
from audit.mechanisms.adapters.library import CHUNK_SIZE, diffprivlib_hint
from audit.theory.table import theory_bound

N = 20_000
Z = 5.0
KS_LEVEL = 1e-4

# name -> (module that must import, distribution, params, seedable)
ADAPTERS = {
    "opendp.laplace": ("opendp.prelude", "opendp", {"scale": 2.0, "sensitivity": 1.0}, False),
    "opendp.laplace_int": ("opendp.prelude", "opendp", {"scale": 2.0, "sensitivity": 3}, False),
    "opendp.gaussian": ("opendp.prelude", "opendp", {"scale": 1.5, "sensitivity": 1.0}, False),
    "diffprivlib.laplace": ("diffprivlib.mechanisms", "diffprivlib", {"epsilon": 0.5, "delta": 0.1}, True),
    "diffprivlib.gaussian_analytic": ("diffprivlib.mechanisms", "diffprivlib", {"epsilon": 0.5}, True),
    "diffprivlib.geometric": ("diffprivlib.mechanisms", "diffprivlib", {"epsilon": 0.5, "sensitivity": 2}, True),
    "diffprivlib.snapping": ("diffprivlib.mechanisms", "diffprivlib", {"epsilon": 1.0, "upper": 10.0}, True),
    "pydp.laplace": ("pydp.algorithms.numerical_mechanisms", "python-dp", {"epsilon": 0.5}, False),
    "pydp.gaussian": ("pydp.algorithms.numerical_mechanisms", "python-dp", {"epsilon": 0.5, "delta": 1e-6}, False),
}
WITH_LAWS = [name for name in ADAPTERS if name != "diffprivlib.snapping"]


def build(name: str, **overrides):
    """The adapter at its test parameters; skipped with the import error when its library does not import."""
    module, _, params, _ = ADAPTERS[name]
    try:
        importlib.import_module(module)
    except Exception as error:  # diffprivlib with scikit-learn 1.9 raises more than ImportError
        extra = name.split(".")[0]  # the extra is named after the library: opendp, diffprivlib, pydp
        pytest.skip(f"{module} does not import ({type(error).__name__}: {error}); "
                    f'pip install ".[{extra}]" in a capaudit checkout runs this test')
    return make_mechanism(name, {**params, **overrides})


def ks_critical(n: float) -> float:
    return float(np.sqrt(np.log(2.0 / KS_LEVEL) / 2.0 / n))


@pytest.fixture
def fresh_imports():
    """Forget which modules imported (base caches it) before and after a test that hides a library."""
    base._import_error.cache_clear()
    yield
    base._import_error.cache_clear()


@pytest.mark.parametrize("name", ADAPTERS)
def test_sample_shape_version_and_seedability(name):
    mechanism = build(name)
    _, distribution, _, seedable = ADAPTERS[name]
    d, d_prime = mechanism.default_pairs()[0]
    out = mechanism.sample(d_prime, 1000, np.random.default_rng(0))
    assert out.shape == (1000, 1) and np.all(np.isfinite(out))
    assert mechanism.library_version == importlib.metadata.version(distribution)
    assert mechanism.seedable is seedable
    assert "DP" in mechanism.true_privacy


@pytest.mark.parametrize("name", WITH_LAWS)
def test_law_matches_documented_noise(name):
    """Mean and variance within Z standard errors of the documented law; KS or the pmf near the centre."""
    mechanism = build(name)
    d, d_prime = mechanism.default_pairs()[0]
    law = mechanism.output_laws(d, d_prime)[1]
    x = mechanism.sample(d_prime, N, np.random.default_rng(1))[:, 0]
    mean, var, kurtosis = (float(m) for m in law.stats(moments="mvk"))
    assert mean == pytest.approx(mechanism.query(d_prime))
    assert abs(x.mean() - mean) < Z * np.sqrt(var / N)
    assert abs(x.var() - var) < Z * var * np.sqrt((kurtosis + 2.0) / N)
    if isinstance(law.dist, stats.rv_continuous):
        assert stats.kstest(x, law.cdf).statistic < ks_critical(N)
    else:  # the pmf near the centre tells discrete Laplace from rounded continuous Laplace
        assert np.all(x == np.round(x))
        support = mean + np.arange(-2, 3)
        frequencies = (x[:, None] == support).mean(axis=0)
        pmf = law.pmf(support)
        assert np.all(np.abs(frequencies - pmf) < Z * np.sqrt(pmf * (1 - pmf) / N))


@pytest.mark.parametrize("name", ["opendp.laplace_int", "diffprivlib.geometric"])
def test_discrete_laws_pass_a_chi_square_test(name):
    """Binned counts of N outputs against the discrete Laplace output law, on both inputs of the default pair.

    One bin per atom between the law's 0.5% and 99.5% quantiles (expected counts >= 15), two bins
    for the tails; Pearson's chi-square at level KS_LEVEL = 1e-4 (OpenDP cannot be seeded, so this is
    its failure rate; diffprivlib's outputs are fixed by the seed). The law of the other input must
    be rejected at that level: the test can tell a shift by the sensitivity.
    OpenDP: ``make_laplace`` on integers samples discrete_laplace(scale), P(k) ∝ exp(-|k| / scale)
    (Canonne, Kamath and Steinke 2020); diffprivlib 0.6.6 ``Geometric.randomise`` draws
    U ~ Unif(-1/2, 1/2) (1 + r), r = exp(-epsilon / sensitivity), and returns
    x + sign(U) floor(log|U| / log r): P(0) = (1 - r) / (1 + r), P(±j) = r^j (1 - r) / (1 + r).
    """
    mechanism = build(name)
    d, d_prime = mechanism.default_pairs()[0]
    laws = mechanism.output_laws(d, d_prime)
    rng = np.random.default_rng(11)
    for dataset, law, other in zip((d, d_prime), laws, laws[::-1]):
        x = mechanism.sample(dataset, N, rng)[:, 0]
        low, high = law.ppf(0.005), law.ppf(0.995)
        atoms = np.arange(low, high + 1)
        counts = np.concatenate([[np.sum(x < low)], np.sum(x == atoms[:, None], axis=1), [np.sum(x > high)]])
        assert counts.sum() == N

        def expected(reference):
            return N * np.concatenate([[reference.cdf(low - 1)], reference.pmf(atoms), [reference.sf(high)]])

        assert stats.chisquare(counts, expected(law)).pvalue > KS_LEVEL
        assert stats.chisquare(counts, expected(other)).pvalue < KS_LEVEL


@pytest.mark.parametrize("name", ["opendp.laplace", "opendp.laplace_int", "opendp.gaussian"])
def test_opendp_vector_batch_has_the_scalar_law(name):
    """One vector call of CHUNK_SIZE copies vs one scalar call per sample: same law (two-sample KS)."""
    mechanism = build(name)
    value = mechanism.query(mechanism.default_pairs()[0][1])
    batched = mechanism._draw_chunk(value, CHUNK_SIZE, seed=0)
    scalar = mechanism._measurement(vector=False)
    single = np.array([scalar(value) for _ in range(2000)], dtype=float)
    n_eff = CHUNK_SIZE * single.size / (CHUNK_SIZE + single.size)
    assert stats.ks_2samp(batched, single).statistic < ks_critical(n_eff)


def test_opendp_privacy_map_and_chunks_in_threads():
    laplace = build("opendp.laplace", n_jobs=2)
    assert laplace.true_epsilon == pytest.approx(0.5)  # d_in / scale
    assert build("opendp.gaussian").rho == pytest.approx(1.0 / (2 * 1.5**2))
    out = laplace.sample(np.zeros((1, 1)), 3 * CHUNK_SIZE + 5, np.random.default_rng(0))
    assert out.shape == (3 * CHUNK_SIZE + 5, 1)
    assert stats.kstest(out[:, 0], stats.laplace(scale=2.0).cdf).statistic < ks_critical(out.shape[0])


@pytest.mark.parametrize(
    ("name", "builtin", "params"),
    [
        ("opendp.laplace", "laplace", {"epsilon": 0.5, "sensitivity": 1.0}),
        ("opendp.gaussian", "gaussian", {"sigma": 1.5, "sensitivity": 1.0}),
        ("pydp.laplace", "laplace", {"epsilon": 0.5, "sensitivity": 1.0}),
    ],
)
@pytest.mark.parametrize(("function_class", "divergence", "alpha"), [("linear", "kl", None), ("poly2", "renyi", 4.0)])
def test_theory_bound_is_the_builtin_one_at_the_same_law(name, builtin, params, function_class, divergence, alpha):
    adapter = build(name)
    expected = theory_bound(make_mechanism(builtin, params).theory_law, function_class, divergence, alpha)
    assert expected is not None
    assert theory_bound(adapter.theory_law, function_class, divergence, alpha) == pytest.approx(expected)


def test_theory_bound_reference_value_and_none_for_discrete_laws():
    """docs/theory.md section 6: (lin, KL) of Laplace at epsilon 1 is 0.2260; discrete laws get no closed form."""
    assert theory_bound(build("opendp.laplace", scale=1.0).theory_law, "linear", "kl") == pytest.approx(0.2260, abs=5e-5)
    assert theory_bound(build("opendp.laplace_int").theory_law, "linear", "kl") is None


@pytest.mark.parametrize("name", ["opendp.laplace", "diffprivlib.laplace", "pydp.gaussian"])
def test_adapters_pickle(name):
    """Adapters keep no library objects, so joblib can ship them to worker processes."""
    mechanism = pickle.loads(pickle.dumps(build(name)))
    assert mechanism.sample(np.zeros((1, 1)), 10, np.random.default_rng(0)).shape == (10, 1)


def test_diffprivlib_is_reproducible_and_independent_of_n_jobs():
    """Chunk seeds come from rng in a fixed order: two worker processes give the same outputs as one."""
    data = np.ones((1, 1))
    first = build("diffprivlib.laplace").sample(data, CHUNK_SIZE + 7, np.random.default_rng(3))
    again = build("diffprivlib.laplace", n_jobs=2).sample(data, CHUNK_SIZE + 7, np.random.default_rng(3))
    other = build("diffprivlib.laplace").sample(data, CHUNK_SIZE + 7, np.random.default_rng(4))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_diffprivlib_laplace_scale_includes_delta():
    """diffprivlib calibrates b = sensitivity / (epsilon - log(1 - delta)); the adapter reports that law."""
    mechanism = build("diffprivlib.laplace")
    assert mechanism.scale == pytest.approx(1.0 / (0.5 - np.log(0.9)))
    assert mechanism.true_epsilon == pytest.approx(0.5 - np.log(0.9))


def test_snapping_outputs_lie_on_its_lattice():
    """epsilon = 1, sensitivity 1 on [0, 10]: lattice spacing 2 around the sum 5, atoms at the bounds."""
    mechanism = build("diffprivlib.snapping")
    assert mechanism.output_laws(*mechanism.default_pairs()[0]) is None
    x = mechanism.sample(np.ones((5, 1)), 5000, np.random.default_rng(0))[:, 0]
    assert set(np.unique(x)) <= {0.0, 1.0, 3.0, 5.0, 7.0, 9.0, 10.0}
    assert abs(x.mean() - 5.0) < Z * x.std() / np.sqrt(x.size)  # the law is symmetric about the sum


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("opendp.laplace", {"scale": -1.0}),
        ("opendp.laplace_int", {"sensitivity": 0.5}),
        ("diffprivlib.laplace", {"epsilon": -1.0}),
        ("pydp.gaussian", {"delta": 0.0}),
        ("pydp.laplace", {"n_jobs": 0}),
        ("diffprivlib.geometric", {"sensitivity": 0}),
    ],
)
def test_rejected_parameters_raise_value_error(name, bad):
    with pytest.raises(ValueError, match=name):
        build(name, **bad)


@pytest.mark.parametrize(
    ("name", "module", "extra"),
    [("opendp.laplace", "opendp", "opendp"), ("diffprivlib.geometric", "diffprivlib", "diffprivlib"),
     ("pydp.laplace", "pydp", "pydp"), ("opacus.dp_sgd", "opacus", "opacus")],
)
def test_missing_library_is_unavailable_with_its_extra(monkeypatch, fresh_imports, name, module, extra):
    for loaded in [key for key in sys.modules if key == module or key.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, module, None)  # import of the library now raises ImportError
    info = next(info for info in list_mechanisms() if info.name == name)
    assert not info.available and f'pip install ".[{extra}]" in a capaudit checkout' in info.availability
    with pytest.raises(ValueError, match=rf"{name}.*unavailable.*capaudit\[{extra}\]"):
        make_mechanism(name)


def test_broken_diffprivlib_is_unavailable_with_the_error(monkeypatch, fresh_imports, tmp_path):
    """A library that raises something other than ImportError on import (diffprivlib with scikit-learn 1.9)."""
    fake = tmp_path / "diffprivlib"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise AttributeError('broken by scikit-learn')\n")
    for loaded in [key for key in sys.modules if key == "diffprivlib" or key.startswith("diffprivlib.")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"capaudit\[diffprivlib\].*AttributeError: broken by scikit-learn"):
        make_mechanism("diffprivlib.laplace")


def test_diffprivlib_hint_names_both_versions(monkeypatch):
    versions = {"diffprivlib": "0.6.6", "scikit-learn": "1.9.0"}
    monkeypatch.setattr("audit.mechanisms.adapters.library.installed_version", versions.get)
    checkout = 'install the extra capaudit[diffprivlib]: pip install ".[diffprivlib]" in a capaudit checkout'
    assert diffprivlib_hint() == (
        f"diffprivlib 0.6.6 failed to import with scikit-learn 1.9.0; the extra pins a compatible one: {checkout}"
    )
    monkeypatch.setattr("audit.mechanisms.adapters.library.installed_version", {}.get)
    assert diffprivlib_hint() == checkout


def test_importing_capaudit_never_needs_the_libraries():
    """With every optional library hidden, capaudit imports and lists the adapters as unavailable."""
    code = (
        "import sys\n"
        "for module in ('opendp', 'diffprivlib', 'pydp', 'opacus'): sys.modules[module] = None\n"
        "import audit\n"
        "from audit.mechanisms import list_mechanisms\n"
        "adapters = [info for info in list_mechanisms() if info.kind == 'adapter']\n"
        "assert len(adapters) == 14 and not any(info.available for info in adapters), adapters\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
