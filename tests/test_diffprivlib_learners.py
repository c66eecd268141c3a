"""diffprivlib's learners as mechanisms: releases, seeding, canary pairs, audits (skipped without diffprivlib)."""

from __future__ import annotations

import numpy as np
import pytest

from audit import run_audit
from audit.mechanisms import make_mechanism
from audit.mechanisms.adapters.diffprivlib_learners import (
    DiffprivlibGaussianNB,
    DiffprivlibLinearRegression,
    DiffprivlibLogisticRegression,
)

pytest.importorskip("diffprivlib.models", exc_type=ImportError)


def _library(name: str, params: dict | None = None):
    """The adapter, or a skip when this diffprivlib does not run with this scikit-learn (0.6.6's
    LogisticRegression passes multi_class, which scikit-learn 1.7 removed)."""
    try:
        return make_mechanism(name, params or {"epsilon": 1.0})
    except ValueError as error:
        pytest.skip(f"{name} does not run here: {error}")


@pytest.mark.parametrize("name, width", [(DiffprivlibGaussianNB.name, 2 * 3 * 2 + 2),
                                         (DiffprivlibLogisticRegression.name, 3 + 1),
                                         (DiffprivlibLinearRegression.name, 3 + 1)])
def test_one_output_is_one_fit_reproducible_from_the_seed(name, width):
    # GaussianNB: theta_ and var_ (2 classes x 3 features) and 2 class counts; the regressions: coef_, intercept_
    mechanism = _library(name)
    d, _ = mechanism.default_pairs()[0]
    first = mechanism.sample(d, 4, np.random.default_rng(7))
    assert first.shape == (4, width) and np.all(np.isfinite(first))
    assert np.array_equal(first, mechanism.sample(d, 4, np.random.default_rng(7)))
    assert not np.array_equal(first[0], first[1])  # each fit has its own seed


def test_canary_pairs_replace_a_record_by_the_largest_record_or_a_mislabelled_point():
    mechanism = DiffprivlibGaussianNB.__new__(DiffprivlibGaussianNB)  # the pairs need no library
    mechanism.params = {"epsilon": 1.0, "bounds": [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]], "n_jobs": 1}
    (base, with_canary), (_, with_mislabelled) = mechanism.default_pairs()
    assert base.shape == with_canary.shape == (20, 4) and np.array_equal(with_canary[:-1], base[:-1])
    assert set(base[:, -1]) == {0.0, 1.0} and np.all(base[:, 2] == 0.0)
    assert with_canary[-1].tolist() == [0.0, 0.0, 2.0, 1.0]  # the unused feature at its upper bound
    assert with_mislabelled[-1].tolist() == [2.0, 2.0, 0.0, 0.0]  # label 0 where the data say 1
    assert base[base[:, 0] + base[:, 1] > 3.0, -1].mean() > 0.5


def _gaussian_nb_audit(pairs: list | None = None) -> str:
    config = {"mechanism": {"name": DiffprivlibGaussianNB.name, "params": {"epsilon": 1.0}},
              "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
              "attacks": {"classes": ["linear"], "n_samples": 200}, "run": {"seed": 0, "n_jobs": 1}}
    if pairs:
        config["pairs"] = pairs
    return run_audit(config, progress=False).verdict


@pytest.mark.slow
def test_correct_gaussian_nb_is_not_refuted_at_its_epsilon_on_replace_one_canaries():
    assert _gaussian_nb_audit() != "violation"


@pytest.mark.slow
def test_gaussian_nb_releases_the_dataset_size_under_add_remove():
    """Its class counts are adjusted to sum to the exact number of records: a record added shows."""
    mechanism = _library(DiffprivlibGaussianNB.name)
    base, with_canary = mechanism.default_pairs()[0]
    counts = mechanism.sample(base, 50, np.random.default_rng(0))[:, -2:].sum(axis=1)
    assert np.all(counts == len(base))
    added = np.vstack([base, with_canary[-1:]])
    assert _gaussian_nb_audit([{"d": base.tolist(), "d_prime": added.tolist()}]) == "violation"


def test_logistic_regression_reads_its_classes_from_the_data_106():
    """diffprivlib #106: the default pair p2 replaces a record by one of label 2, and coef_ gains rows (one-vs-rest);
    with a public label set the width is the same on every dataset."""
    d, with_new_label = _library(DiffprivlibLogisticRegression.name).default_pairs()[2]
    assert set(d[:, -1]) == {0.0, 1.0} and with_new_label[-1, -1] == 2.0
    widths = [_library(DiffprivlibLogisticRegression.name).sample(data, 2, np.random.default_rng(0)).shape[1]
              for data in (d, with_new_label)]  # one adapter per dataset: each sees one width
    assert widths == [3 + 1, 3 * (3 + 1)]
    public = _library(DiffprivlibLogisticRegression.name, {"epsilon": 1.0, "labels": [0, 1, 2]})
    assert [public.sample(data, 2, np.random.default_rng(0)).shape[1] for data in (d, with_new_label)] == [12, 12]
    with pytest.raises(ValueError, match="labels"):
        make_mechanism(DiffprivlibLogisticRegression.name, {"epsilon": 1.0, "labels": [1]})


@pytest.mark.slow
def test_logistic_regression_reads_violation_at_default_settings_106():
    mechanism = _library(DiffprivlibLogisticRegression.name)
    config = {"mechanism": {"name": mechanism.name, "params": {"epsilon": 1.0}},
              "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
              "attacks": {"classes": ["linear"], "n_samples": 100}, "run": {"seed": 0, "n_jobs": 1}}
    result = run_audit(config, progress=False)
    assert result.verdict == "violation", {row.error for row in result.rows}
    assert {row.pair for row in result.rows if row.verdict == "violation"} == {"p2"}  # the new label, only


def test_linear_regression_pairs_keep_features_and_target_within_bounds():
    mechanism = DiffprivlibLinearRegression.__new__(DiffprivlibLinearRegression)  # the pairs need no library
    mechanism.params = {"epsilon": 1.0, "bounds_X": [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]], "bounds_y": [-1.0, 3.0],
                        "fit_intercept": True, "n_jobs": 1}
    (base, with_canary), (_, with_far_point) = mechanism.default_pairs()
    assert set(base[:, -1]) == {-1.0, 3.0} and np.all(base[:, 2] == 0.0)
    assert with_canary[-1].tolist() == [0.0, 0.0, 2.0, 3.0]  # the unused feature at its upper bound
    assert with_far_point[-1].tolist() == [2.0, 2.0, 0.0, -1.0]  # the lower target where the data say upper


@pytest.mark.slow
def test_correct_linear_regression_is_not_refuted_at_its_epsilon():
    _library(DiffprivlibLinearRegression.name)
    config = {"mechanism": {"name": DiffprivlibLinearRegression.name, "params": {"epsilon": 1.0}},
              "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 1.0}],
              "attacks": {"classes": ["linear"], "n_samples": 200, "confidence": 0.999},
              "run": {"seed": 0, "n_jobs": 1}}
    assert run_audit(config, progress=False).verdict != "violation"
