"""The steps a feature map chains without scikit-learn: standardisation, monomials, and the chain itself.

A feature map phi (:mod:`attacks.features`) is a :class:`FeatureMap`, a
chain of transformers fitted in turn, each on the previous one's output.
The ``linear`` and ``polyK`` maps need only :class:`Standardize` and
:class:`Monomials`, written here so that an audit of those classes never
imports scikit-learn (:mod:`attacks.estimator`); the learners of the other
classes (random Fourier features and PCA, the MLP classifier, the decision
tree) are scikit-learn's, chained the same way.

Both steps compute what ``sklearn.preprocessing.StandardScaler`` and
``PolynomialFeatures(include_bias=False)`` compute on dense arrays, the same
operations in the same order, so every fitted witness and every audit number
is bit for bit what those estimators gave: the mean and the corrected
two-pass variance of Chan, Golub and LeVeque ("Algorithms for computing the
sample variance: analysis and recommendations", The American Statistician
37(3), 1983), accumulated in float64; a feature whose variance is within
the two-pass algorithm's rounding error of 0 is left unscaled; each monomial
of degree k is a monomial of degree k - 1 times one coordinate.
tests/test_feature_steps.py compares them with scikit-learn's bit for bit.
"""

from __future__ import annotations

import numpy as np

from attacks.estimator import Transformer, check_fitted


class FeatureMap:
    """phi as a chain of fitted transformers: ``fit_transform`` fits each on the previous one's output.

    Indexing gives a step (``phi[1]``), slicing a chain of the steps
    (``phi[2:]``, the map after its first two steps), as for a scikit-learn
    ``Pipeline``.
    """

    def __init__(self, *steps):
        self.steps = list(steps)

    def fit_transform(self, X, y=None):
        """Fit every step in turn on the previous one's output (``y`` for those that read the laws); phi(X)."""
        for step in self.steps:
            X = step.fit_transform(X, y)
        return X

    def transform(self, X):
        """phi(X) by the fitted steps."""
        for step in self.steps:
            X = step.transform(X)
        return X

    def __getitem__(self, index):
        return FeatureMap(*self.steps[index]) if isinstance(index, slice) else self.steps[index]

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return f"FeatureMap({', '.join(map(repr, self.steps))})"


class Standardize(Transformer):
    """(x - mean_) / scale_ per coordinate, the scale the standard deviation (1 for a constant coordinate).

    Attributes
    ----------
    mean_, var_, scale_ : ndarray of shape (n_features,)
        The training mean and (biased) variance of each coordinate, and the
        divisor: sqrt(var_), or 1 where var_ is within the two-pass
        algorithm's rounding error of 0 (module docstring).
    n_samples_seen_ : float or ndarray
        The rows that entered the mean (NaN entries excluded), one number when
        every coordinate has as many.
    n_features_in_ : int
    """

    def fit(self, X, y=None):
        X = _float_array(X, allow_nan=True)
        self.n_features_in_ = X.shape[1]
        nan = np.isnan(X)
        total = np.nansum if nan.any() else np.sum
        count = X.shape[0] - _accumulate(total, nan.astype(X.dtype))
        seen = np.zeros(X.shape[1]) + count
        column_sum = _accumulate(total, X)
        self.mean_ = (np.zeros(X.shape[1]) + column_sum) / seen
        deviation = X - column_sum / count
        correction = _accumulate(total, deviation)
        deviation **= 2
        self.var_ = (_accumulate(total, deviation) - correction**2 / count) / seen
        self.n_samples_seen_ = seen[0] if seen.max() == seen.min() else seen
        eps = np.finfo(np.float64).eps
        constant = self.var_ <= self.n_samples_seen_ * eps * self.var_ + (self.n_samples_seen_ * self.mean_ * eps) ** 2
        self.scale_ = np.sqrt(self.var_)
        self.scale_[constant] = 1.0
        return self

    def transform(self, X):
        check_fitted(self, "scale_")
        X = np.array(_float_array(X, allow_nan=True))
        X -= self.mean_.astype(X.dtype)
        X /= self.scale_.astype(X.dtype)
        return X


class Monomials(Transformer):
    """Every monomial of total degree 1 to ``degree`` of the coordinates, in scikit-learn's order (no constant).

    With d coordinates: the d coordinates, then for each k = 2..degree the
    products of a degree-(k - 1) monomial with a coordinate x_j at or after
    its own last one, grouped by j (C(d + degree, degree) - 1 columns).
    """

    def __init__(self, degree: int = 2):
        self.degree = degree

    def fit(self, X, y=None):
        self.n_features_in_ = _float_array(X).shape[1]
        return self

    def transform(self, X):
        check_fitted(self, "n_features_in_")
        X = np.asarray(_float_array(X), order="F")
        n_samples, n_features = X.shape
        starts = [list(range(n_features)) + [n_features]]  # where each coordinate's block of a degree begins
        for _ in range(2, self.degree + 1):
            previous, end, blocks = starts[-1], starts[-1][-1], []
            column = end
            for j in range(n_features):
                blocks.append(column)
                column += end - previous[j]
            starts.append([*blocks, column])
        columns = np.empty((n_samples, starts[-1][-1]), dtype=X.dtype)
        columns[:, :n_features] = X
        for previous, blocks in zip(starts, starts[1:]):
            end = previous[-1]
            for j in range(n_features):
                np.multiply(columns[:, previous[j]:end], X[:, j:j + 1], out=columns[:, blocks[j]:blocks[j + 1]],
                            casting="no")
        return columns


def _float_array(X, allow_nan: bool = False) -> np.ndarray:
    """X as an array of its own float dtype, float64 for any other (as scikit-learn's transformers take it).

    Infinite entries, and NaN unless ``allow_nan`` (the standardisation's
    mean and variance skip NaN), are refused by scikit-learn's ``check_array``,
    with its message.
    """
    X = np.asarray(X)
    X = X if X.dtype in (np.float64, np.float32) else X.astype(np.float64)
    if not np.isfinite(X).all() and (not allow_nan or np.isinf(X).any()):
        from sklearn.utils import check_array

        check_array(X, ensure_all_finite="allow-nan" if allow_nan else True)
    return X


def _accumulate(total, X: np.ndarray) -> np.ndarray:
    """Column sums, accumulated in float64 whatever the float dtype of X."""
    return total(X, axis=0, dtype=np.float64) if X.dtype.itemsize < 8 else total(X, axis=0)
