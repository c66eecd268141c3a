"""The feature steps written without scikit-learn give its transformers' numbers bit for bit, and the audit
modules import neither scikit-learn nor scipy.stats for a linear or polynomial attack."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from attacks import Adversary
from attacks.estimator import check_random_state
from attacks.feature_steps import FeatureMap, Monomials, Standardize


def _samples() -> list[np.ndarray]:
    """Outputs of every shape the maps meet: one and three coordinates, wide and tiny scales, a constant column,
    float32, an F-ordered array, NaN (the scaler skips it), ties."""
    rng = np.random.default_rng(0)
    three = rng.laplace(size=(500, 3)) * [1.0, 1e-8, 1e8]
    with_nan = rng.normal(size=(200, 2))
    with_nan[::7, 1] = np.nan
    return [rng.normal(size=(1000, 1)), three, np.asfortranarray(three), np.c_[three[:, :2], np.full(500, 3.3)],
            rng.normal(size=(300, 2)).astype(np.float32), with_nan, rng.integers(0, 3, size=(100, 2)).astype(float)]


@pytest.mark.parametrize("index", range(7))
def test_standardize_is_standard_scaler_bit_for_bit(index):
    X = _samples()[index]
    ours, theirs = Standardize().fit(X), StandardScaler().fit(X)
    for name in ("mean_", "var_", "scale_", "n_samples_seen_"):
        np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name), strict=True)
    np.testing.assert_array_equal(ours.transform(X[::-1]), theirs.transform(X[::-1]), strict=True)
    assert ours.transform(X).flags.c_contiguous == theirs.transform(X).flags.c_contiguous


@pytest.mark.parametrize("degree", [1, 2, 3, 5])
@pytest.mark.parametrize("index", [0, 1, 2, 4])
def test_monomials_are_polynomial_features_bit_for_bit(degree, index):
    X = _samples()[index]
    ours = Monomials(degree).fit(X).transform(X)
    theirs = PolynomialFeatures(degree, include_bias=False).fit(X).transform(X)
    np.testing.assert_array_equal(ours, theirs, strict=True)
    assert ours.flags.c_contiguous and theirs.flags.c_contiguous


def _as_scikit_learn(step):
    """The scikit-learn transformer a step replaces (a copy of any other step)."""
    if isinstance(step, Standardize):
        return StandardScaler()
    return PolynomialFeatures(step.degree, include_bias=False) if isinstance(step, Monomials) else clone(step)


@pytest.mark.parametrize(("function_class", "divergence", "alpha"), [("poly3", "renyi", 3.0), ("linear", "kl", None)])
def test_a_fitted_polynomial_map_is_the_scikit_learn_map(function_class, divergence, alpha):
    """The maps of a fitted poly3 Renyi (degree 3 monomials) and linear KL attack, fitted again from their steps
    and from scikit-learn's, give the same features; the fitted map's slices chain as the whole."""
    rng = np.random.default_rng(1)
    X = np.r_[rng.laplace(0, 1, (800, 2)), rng.laplace(0.5, 1, (800, 2))]
    y = np.r_[np.zeros(800), np.ones(800)]
    fitted = Adversary(function_class, divergence, alpha=alpha, random_state=0).fit(X, y).feature_map_
    ours = FeatureMap(*map(clone, fitted.steps)).fit_transform(X, y)
    np.testing.assert_array_equal(ours, FeatureMap(*map(_as_scikit_learn, fitted.steps)).fit_transform(X, y),
                                  strict=True)
    np.testing.assert_array_equal(fitted[2:].transform(fitted[:2].transform(X)), fitted.transform(X), strict=True)


def test_the_estimator_protocol_without_subclassing():
    adversary = Adversary("poly2", "dp", delta=0.1, random_state=3)
    assert repr(adversary) == "Adversary(delta=0.1, divergence='dp', function_class='poly2', random_state=3)"
    assert clone(adversary).get_params() == adversary.get_params()
    with pytest.raises(ValueError, match="Invalid parameter 'widht' for estimator"):
        adversary.set_params(widht=3)
    with pytest.raises(ValueError, match="Found y=None"):
        adversary.fit(np.zeros((4, 1)), None)
    assert check_random_state(5).randint(100) == np.random.RandomState(5).randint(100)
    with pytest.raises(ValueError, match="cannot be used to seed"):
        check_random_state("five")


def test_linear_and_polynomial_attacks_import_neither_scikit_learn_nor_scipy_stats():
    """A KL attack of linear or poly2 loads neither (the exact laws of a built-in mechanism load scipy.stats on
    their own, so the attacks are fitted here, not through an audit); threshold and atoms attacks (dp, ipm:
    exact binomial bounds, scipy.stats) load no scikit-learn."""
    code = (
        "import sys, numpy as np\n"
        "from attacks import Adversary\n"
        "import attacks.sequential, attacks.staged\n"
        "loaded = lambda: sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules)\n"
        "rng = np.random.default_rng(0)\n"
        "X, y = rng.normal(size=(400, 1)), np.r_[np.zeros(200), np.ones(200)]\n"
        "for c in ('linear', 'poly2'):\n"
        "    Adversary(c, 'kl', random_state=0).fit(X, y).score(X, y)\n"
        "print(loaded())\n"
        "for c, d in (('threshold', 'ipm'), ('atoms', 'dp')):\n"
        "    Adversary(c, d, random_state=0).fit(X, y).score(X, y)\n"
        "print(loaded())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "['scipy.stats']"]
