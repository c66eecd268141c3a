"""diffprivlib's LogisticRegression, LinearRegression and GaussianNB as mechanisms: one output = one fit, released
as its parameters.

The dataset is an array of records, one per row: k features then a label
(as for :mod:`audit.mechanisms.learners`; LinearRegression's is a real
target).  Each output fits the
library's estimator on the whole dataset with its own seed
(``random_state``, a ``numpy.random.RandomState`` drawn from the audit's
``rng``: reproducible) and releases its fitted parameters, flattened:

* ``diffprivlib.logistic_regression``: ``coef_`` then ``intercept_``; the
  library's objective perturbation (Chaudhuri, Monteleoni and Sarwate,
  "Differentially private empirical risk minimization", JMLR 2011) with rows
  clipped to L2 norm ``data_norm``, claimed epsilon-DP;
* ``diffprivlib.linear_regression``: ``coef_`` then ``intercept_``; the
  library's functional mechanism (Zhang, Zhang, Xiao, Yang and Winslett,
  "Functional mechanism: regression analysis under differential privacy",
  VLDB 2012): Laplace noise on the coefficients of the quadratic loss, with
  features and target clipped to ``bounds_X`` and ``bounds_y``, claimed
  epsilon-DP;
* ``diffprivlib.gaussian_nb``: ``theta_``, ``var_`` and the noisy
  ``class_count_``; per-class Laplace means and variances within ``bounds``
  (Vaidya, Shafiq, Basu and Hong 2013), claimed epsilon-DP.

diffprivlib's classifiers read the label set from the data (``np.unique(y)``:
its #106), so a record with a label the rest lack adds a row of
LogisticRegression's ``coef_`` (one-vs-rest): the output's length says
whether the record is there, not DP for any epsilon.  LogisticRegression's
default pairs include that record (its ``labels`` parameter is the
correct call: a public label set, one public record of each label added to
every fit so that the classes never depend on the data).

Default pairs: the learner canaries (issue 35), each replacing one of 20
records: a record at the largest size the library allows on a feature the
data do not use, and a mislabelled point of that size along the data's
direction.  Replace-one, because the fits use the dataset's size: GaussianNB
adjusts its noisy class counts until they sum to the exact number of records
and releases them, so under add/remove neighbours the size is released
exactly (not DP for any epsilon; tests/test_diffprivlib_learners.py shows
the audit reading violation), and objective perturbation scales its
regulariser with the size (Chaudhuri et al. analyse replace-one).
diffprivlib 0.6.6 imports only with scikit-learn < 1.9 (the extra
``capaudit[diffprivlib]`` pins one), and its LogisticRegression passes
``multi_class``, which scikit-learn 1.7 removed: it fits only with the
``real-bugs`` extra's scikit-learn < 1.7 (elsewhere building it raises a
ValueError naming the library's error).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from audit.mechanisms.adapters.library import LibraryAdapter


class DiffprivlibLearner(LibraryAdapter):
    """Shared parts: records split into features and labels, one seeded fit per output, the canary pairs."""

    library = "diffprivlib"
    extra = "diffprivlib"
    module = "diffprivlib.models"
    seedable = True
    estimator_class: ClassVar[str]
    classifier: ClassVar[bool] = True
    """Labels are classes (whole numbers); a regression's target is real."""

    def _check_params(self) -> None:
        """The library checks its own parameters: one fit on the first default pair's dataset."""
        self._fit(*_records(self.default_pairs()[0][0], self.classifier), seed=0)

    def _library_params(self) -> dict[str, Any]:
        return {key: value for key, value in self.params.items() if key != "n_jobs"}

    def _estimator(self, seed: int) -> Any:
        library_params = self._library_params()
        try:
            return getattr(self._import(), self.estimator_class)(**library_params,
                                                                random_state=np.random.RandomState(seed))
        except (TypeError, ValueError) as error:
            raise ValueError(f"diffprivlib {self.estimator_class} rejected {library_params}: {error}") from None

    def _fit(self, features: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
        raise NotImplementedError

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        features, labels = _records(dataset, self.classifier)
        seeds = rng.integers(2**32, size=n)
        return np.vstack([self._fit(features, labels, int(seed)) for seed in seeds])

    def _draw_chunk(self, value: float | int, size: int, seed: int) -> np.ndarray:
        raise NotImplementedError("a learner draws fits, not a noisy sum")

    def _canaries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the 20 records, the canary on the unused feature, the mislabelled point)."""
        raise NotImplementedError

    def _canary_records(self) -> list[np.ndarray]:
        """The records that replace the last of the 20 in the default pairs."""
        return list(self._canaries()[1:])

    def default_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """20 records (two informative features, a third the data do not use; labels 0/1), and the same with
        its last record replaced (replace-one neighbours: the libraries' fits use the dataset's size, see the
        module docstring) by: p0, the canary on the third feature at the largest size the library allows,
        label 1; p1, a mislabelled point of that size along the data's direction, label 0 where the data
        say 1 (a target far from the data's, for a regression); LogisticRegression adds p2, a record with the
        label 2 that the data lack (diffprivlib #106, the module docstring)."""
        base = self._canaries()[0]
        return [(base, np.vstack([base[:-1], record[None, :]])) for record in self._canary_records()]


def _records(dataset: np.ndarray, classes: bool) -> tuple[np.ndarray, np.ndarray]:
    records = np.asarray(dataset, dtype=float)
    if records.ndim != 2 or records.shape[1] < 2:
        raise ValueError("a diffprivlib learner takes records (features..., label): shape (m, k + 1), k >= 1. "
                         f"Found shape {records.shape}.")
    return records[:, :-1], records[:, -1].astype(int) if classes else records[:, -1]


def _base(generator: np.random.Generator, low: float, high: float) -> np.ndarray:
    """20 records: two informative features uniform on [low, high], the third at ``low``; labels 1 above the
    diagonal (with noise), both labels present."""
    features = generator.uniform(low, high, size=(20, 2))
    middle = (low + high) / 2.0
    labels = (features.sum(axis=1) + generator.normal(scale=(high - low) / 4.0, size=20) > 2.0 * middle)
    labels[:2] = [False, True]  # both labels in every dataset
    return np.column_stack([features, np.full(20, low), labels.astype(float)])


class DiffprivlibLogisticRegression(DiffprivlibLearner):
    """diffprivlib ``LogisticRegression`` (objective perturbation); releases coef_ and intercept_.

    Parameters
    ----------
    epsilon, data_norm, C, max_iter, tol, fit_intercept : diffprivlib's own
        ``data_norm`` bounds each row's L2 norm (rows above it are clipped).
    labels : list of int, optional
        The public label set.  None (the library's default): the classes are read from the data, diffprivlib
        #106, not DP.  Given: one record of each label (features 0) is added to every fit, so ``coef_`` always
        has the rows of these classes; a label outside the set is an error.
    n_jobs : int
        Not used (kept for the adapters' common interface); fits run one by one.
    """

    name = "diffprivlib.logistic_regression"
    description = "diffprivlib LogisticRegression (objective perturbation), releases coef_ and intercept_"
    privacy_claim = "epsilon-DP (Chaudhuri, Monteleoni and Sarwate 2011), rows clipped to data_norm"
    estimator_class = "LogisticRegression"

    def __init__(self, epsilon: float = 1.0, data_norm: float = 1.0, C: float = 1.0, max_iter: int = 100,
                 tol: float = 1e-4, fit_intercept: bool = True, labels: list | None = None, n_jobs: int = 1) -> None:
        if labels is not None and (not isinstance(labels, (list, tuple)) or len(set(labels)) < 2
                                   or not all(isinstance(label, int) for label in labels)):
            raise ValueError(f"labels must be a list of at least two distinct whole numbers (e.g. [0, 1, 2]) or "
                             f"absent. Found {labels!r}.")
        super().__init__(epsilon=epsilon, data_norm=data_norm, C=C, max_iter=max_iter, tol=tol,
                         fit_intercept=fit_intercept, labels=None if labels is None else sorted(set(labels)),
                         n_jobs=n_jobs)
        self._check_params()

    def _library_params(self) -> dict[str, Any]:
        return {key: value for key, value in super()._library_params().items() if key != "labels"}

    @property
    def one_run_release(self) -> str:
        """The release is coef_ then intercept_ (when fitted): a linear model (:mod:`audit.engine.one_run`)."""
        return "coefficients_intercept" if self.params["fit_intercept"] else "coefficients"

    def _fit(self, features: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
        public = self.params["labels"]
        if public is not None:  # one public record per label: the classes no longer depend on the data
            outside = sorted(set(labels.tolist()) - set(public))
            if outside:
                raise ValueError(f"diffprivlib.logistic_regression: label {outside[0]} is not in labels = {public}; "
                                 "add it to labels.")
            features = np.vstack([np.zeros((len(public), features.shape[1])), features])
            labels = np.r_[np.asarray(public), labels]
        model = self._estimator(seed).fit(features, labels)
        return np.r_[np.ravel(model.coef_), np.ravel(model.intercept_)]

    def _canary_records(self) -> list[np.ndarray]:
        """The canary and the mislabelled point, and the mislabelled point's features with label 2 (#106)."""
        canary, mislabelled = super()._canary_records()
        return [canary, mislabelled, np.r_[mislabelled[:-1], 2.0]]

    def _canaries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        norm = float(self.params["data_norm"])
        base = _base(np.random.default_rng(20261128), -norm / 2.0, norm / 2.0)
        base[:, 2] = 0.0
        base[:, :2] /= np.maximum(1.0, np.linalg.norm(base[:, :2], axis=1, keepdims=True) / norm)
        side = norm / math.sqrt(2.0)
        return base, np.array([0.0, 0.0, norm, 1.0]), np.array([side, side, 0.0, 0.0])


class DiffprivlibGaussianNB(DiffprivlibLearner):
    """diffprivlib ``GaussianNB``; releases theta_, var_ and the noisy class counts.

    Parameters
    ----------
    epsilon : float
        diffprivlib's own.
    bounds : list of two lists
        [lower, upper] per feature (three features); records are clipped to them.
    n_jobs : int
        Not used (kept for the adapters' common interface); fits run one by one.
    """

    name = "diffprivlib.gaussian_nb"
    description = "diffprivlib GaussianNB, releases theta_, var_ and class_count_"
    privacy_claim = "epsilon-DP (Vaidya et al. 2013), features clipped to bounds"
    estimator_class = "GaussianNB"

    def __init__(self, epsilon: float = 1.0, bounds: list | None = None, n_jobs: int = 1) -> None:
        bounds = [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]] if bounds is None else bounds
        super().__init__(epsilon=epsilon, bounds=[list(map(float, side)) for side in bounds], n_jobs=n_jobs)
        self._check_params()

    def _library_params(self) -> dict[str, Any]:
        lower, upper = self.params["bounds"]
        return {"epsilon": self.params["epsilon"], "bounds": (np.asarray(lower), np.asarray(upper))}

    def _fit(self, features: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
        model = self._estimator(seed).fit(features, labels)
        variances = getattr(model, "var_", None)
        variances = model.sigma_ if variances is None else variances
        return np.r_[np.ravel(model.theta_), np.ravel(variances), np.ravel(model.class_count_)]

    def _canaries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lower, upper = (np.asarray(side, dtype=float) for side in self.params["bounds"])
        base = _base(np.random.default_rng(20261128), 0.0, 1.0)
        base[:, :3] = lower + base[:, :3] * (upper - lower)  # the third feature at its lower bound
        return (base, np.r_[lower[0], lower[1], upper[2], 1.0],  # the unused feature at its upper bound
                np.r_[upper[0], upper[1], lower[2], 0.0])  # the data say 1 at the upper corner


class DiffprivlibLinearRegression(DiffprivlibLearner):
    """diffprivlib ``LinearRegression`` (the functional mechanism); releases coef_ and intercept_.

    Parameters
    ----------
    epsilon : float
        diffprivlib's own.
    bounds_X : list of two lists
        [lower, upper] per feature (three features); features are clipped to them.
    bounds_y : list of two numbers
        [lower, upper] of the target; it is clipped to them.
    fit_intercept : bool
        diffprivlib's own.
    n_jobs : int
        Not used (kept for the adapters' common interface); fits run one by one.
    """

    name = "diffprivlib.linear_regression"
    description = "diffprivlib LinearRegression (functional mechanism), releases coef_ and intercept_"
    privacy_claim = "epsilon-DP (Zhang et al. 2012), features and target clipped to bounds_X, bounds_y"
    estimator_class = "LinearRegression"
    classifier = False

    def __init__(self, epsilon: float = 1.0, bounds_X: list | None = None, bounds_y: list | None = None,
                 fit_intercept: bool = True, n_jobs: int = 1) -> None:
        bounds_X = [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]] if bounds_X is None else bounds_X
        bounds_y = [0.0, 1.0] if bounds_y is None else bounds_y
        super().__init__(epsilon=epsilon, bounds_X=[list(map(float, side)) for side in bounds_X],
                         bounds_y=list(map(float, bounds_y)), fit_intercept=fit_intercept, n_jobs=n_jobs)
        self._check_params()

    def _library_params(self) -> dict[str, Any]:
        lower, upper = self.params["bounds_X"]
        return {"epsilon": self.params["epsilon"], "bounds_X": (np.asarray(lower), np.asarray(upper)),
                "bounds_y": tuple(self.params["bounds_y"]), "fit_intercept": self.params["fit_intercept"]}

    def _fit(self, features: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
        model = self._estimator(seed).fit(features, labels)
        return np.r_[np.ravel(model.coef_), np.ravel(model.intercept_)]

    def _canaries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As GaussianNB's, within bounds_X, the target the label scaled into bounds_y: the canary at the upper
        target, the far corner at the lower one (the data say upper)."""
        lower, upper = (np.asarray(side, dtype=float) for side in self.params["bounds_X"])
        low_y, high_y = self.params["bounds_y"]
        base = _base(np.random.default_rng(20261128), 0.0, 1.0)
        base[:, :3] = lower + base[:, :3] * (upper - lower)
        base[:, 3] = low_y + base[:, 3] * (high_y - low_y)
        return (base, np.r_[lower[0], lower[1], upper[2], high_y], np.r_[upper[0], upper[1], lower[2], low_y])


ADAPTERS = (DiffprivlibLogisticRegression, DiffprivlibLinearRegression, DiffprivlibGaussianNB)
"""The diffprivlib learners, registered by :mod:`audit.mechanisms.adapters`."""
