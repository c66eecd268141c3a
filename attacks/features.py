"""Feature maps phi of the function classes: every witness is g(x) = phi(x) . coef + intercept.

:meth:`attacks.classes.FunctionClass.feature_map` builds one of these
scikit-learn pipelines for its class (docs/theory.md sections 3 and 4); an
:class:`attacks.Adversary` fits it and then the coefficients:

* ``linear`` / ``polyK`` (:func:`polynomials`): standardised monomials of
  total degree <= K (<= min(K, 2) for the KL and set fits: the heavy-tail
  trap, :data:`attacks.classes.DV_MAX_DEGREE`);
* ``kernel`` (:func:`random_fourier`): random Fourier features of an RBF
  kernel (:class:`sklearn.kernel_approximation.RBFSampler`), bandwidth by the
  median heuristic unless given, reduced to the whitened principal components
  that hold 99.9% of their variance (a linear map of the features, so the
  class is unchanged up to numerically degenerate directions; it makes the
  convex fits well conditioned and stops them chasing noise);
* ``mlp`` (:func:`network`): the output of a one-hidden-layer ReLU network of
  ``width`` units (:mod:`attacks.mlp`).  For ``kl`` and ``renyi`` the network
  is trained on the divergence's own objective (Donsker-Varadhan,
  scale-optimised Renyi) by full-batch L-BFGS, starting from the logit of a
  :class:`sklearn.neural_network.MLPClassifier` (and from units with knots
  spread over the data, whichever does better), stopped early on 20% of the
  training rows; for ``ipm`` and ``dp`` it is the classifier's logit, which
  estimates log dP/dQ, the Neyman-Pearson score.  The adversary then takes an
  affine map a u + b of that output, again a network of the class (same
  hidden layer, new output weights);
* ``treeK`` (:func:`tree_cells`): the one-hot cell of a depth-K
  :class:`sklearn.tree.DecisionTreeClassifier`; the witness is the
  closed-form optimum per cell (histogram divergence, docs/theory.md section 4);
* ``threshold`` (:func:`best_coordinate`): one output coordinate (the one with
  the largest training IPM);
* ``canary`` (:func:`declared_direction`): x . v / |v| for a direction v
  declared before the data (no fit);
* ``atoms`` (:func:`atoms`): the smoothed log ratio of how often the exact
  value occurs among P's and Q's training outputs, leave-one-out on the
  training rows (:class:`attacks.representation.AtomTable`);
* ``floatbits`` (:func:`float_bits`): the one-hot leaf of a depth-3 tree on
  the IEEE-754 features of the outputs
  (:class:`attacks.representation.FloatFeatures`), scored like ``treeK``.

The last three are set classes: their attacks threshold the feature into one
set, whatever the divergence (:mod:`attacks.attack_sets`).

Every value-reading map starts with :class:`CommonScale`, an affine map of
the outputs that every class is closed under.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from sklearn.utils import check_random_state

from attacks import mlp
from attacks.attack_sets import best_ipm_set
from attacks.representation import FLOATBITS_DEPTH, AtomTable, FloatFeatures
from attacks.vocabulary import Divergence, Renyi, parse_divergence

# Random Fourier features are reduced to the principal components holding
# this fraction of their variance, whitened: the dropped directions are
# numerically degenerate and only let the fit chase noise.
_KERNEL_VARIANCE = 0.999
# Share of each law's training rows on which the mlp network's training stops early.
_MLP_VALIDATION_FRACTION = 0.2
# The mlp's classifier stops early on 10% of its rows, which must hold both laws: from 20 rows on.
_CLASSIFIER_MIN_ROWS = 20


def polynomials(X: np.ndarray, degree: int) -> Pipeline:
    """Standardised monomials of total degree <= ``degree`` of the standardised outputs."""
    return make_pipeline(CommonScale().fit(X), StandardScaler(), PolynomialFeatures(degree, include_bias=False),
                         StandardScaler())


def random_fourier(X: np.ndarray, n_components: int, bandwidth: float | None, seed: int,
                   random_state: np.random.RandomState) -> Pipeline:
    """``n_components`` random Fourier features of k(x, x') = exp(-|x - x'|^2 / (2 bandwidth^2)), whitened.

    ``bandwidth`` is in the units of X; None takes the median pairwise
    distance of up to 1000 rows (drawn with ``random_state``).
    """
    common = CommonScale().fit(X)
    if bandwidth is None:
        bandwidth = _median_distance(common.transform(X), random_state)
    else:
        bandwidth = bandwidth / common.scale_
    from sklearn.decomposition import PCA  # each class's estimators loaded by its own feature map
    from sklearn.kernel_approximation import RBFSampler

    sampler = RBFSampler(gamma=0.5 / bandwidth**2, n_components=n_components, random_state=seed)
    return make_pipeline(common, sampler, PCA(n_components=_KERNEL_VARIANCE, whiten=True, svd_solver="covariance_eigh"))


def network(X: np.ndarray, width: int, divergence: Divergence, alpha: float | None, ridge: float,
            seed: int) -> Pipeline:
    """The standardised output of a one-hidden-layer ReLU network of ``width`` units (:class:`NetworkWitness`)."""
    return make_pipeline(CommonScale().fit(X), StandardScaler(), NetworkWitness(width, divergence, alpha, ridge, seed),
                         StandardScaler())


def tree_cells(X: np.ndarray, depth: int, seed: int) -> Pipeline:
    """The one-hot leaf of a depth-``depth`` decision tree on the outputs."""
    return make_pipeline(CommonScale().fit(X), TreeCells(depth, seed))


def best_coordinate(X: np.ndarray) -> Pipeline:
    """The output coordinate with the largest training IPM."""
    return make_pipeline(CommonScale().fit(X), BestCoordinate())


def declared_direction(direction) -> Pipeline:
    """The projection x . v / |v| on a declared direction v (:class:`Projection`; an error naming the fix when
    none was declared)."""
    if direction is None:
        raise ValueError("class 'canary' needs a direction: give class_params = {canary = {direction = [...]}} "
                         "(one number per output coordinate), or audit a mechanism that declares its canary's.")
    return make_pipeline(Projection(direction))


def atoms() -> Pipeline:
    """The smoothed log ratio of the exact value's frequencies (no rescaling: exact values are the feature)."""
    return make_pipeline(AtomTable())


def float_bits(seed: int) -> Pipeline:
    """The one-hot leaf of a depth-``FLOATBITS_DEPTH`` tree on the IEEE-754 features (no rescaling: bits are the feature)."""
    return make_pipeline(FloatFeatures(), TreeCells(FLOATBITS_DEPTH, seed))


class CommonScale(TransformerMixin, BaseEstimator):
    """(X - center_) / scale_: every coordinate centred on its median and divided by one common scale.

    A positive scalar scale and a shift are an affine map of the outputs that
    every class is closed under (polynomials, an isotropic RBF kernel with
    the bandwidth in the same units, networks, axis-aligned trees,
    thresholds), so the class is unchanged; it only keeps the arithmetic of
    the later steps finite for outputs of any magnitude (1e-300 to 1e300):
    the scale is found from X / max|X|, which cannot overflow.
    """

    def fit(self, X, y=None):
        magnitude = float(np.max(np.abs(X))) or 1.0
        shrunk = X / magnitude
        center = np.median(shrunk, axis=0)
        spread = float(np.std(shrunk - center))
        self.center_ = center * magnitude
        self.scale_ = magnitude * spread if magnitude * spread > 0 else magnitude
        return self

    def transform(self, X):
        return X / self.scale_ - self.center_ / self.scale_


class NetworkWitness(TransformerMixin, BaseEstimator):
    """Feature map of the mlp class: the output of a one-hidden-layer ReLU network (:mod:`attacks.mlp`).

    The network starts as the logit log P(x)/Q(x) of a
    :class:`sklearn.neural_network.MLPClassifier` (the Neyman-Pearson score,
    kept as it is for ``ipm`` and ``dp``).  For ``kl`` and ``renyi`` the
    classifier is fitted on 80% of the training rows of each law and the
    network is then trained on the divergence's own objective
    (:func:`attacks.mlp.train_network`), stopped early on the other 20%
    (the training rows themselves when a law has fewer than 5).
    """

    def __init__(self, width: int = 32, divergence: str = "kl", alpha: float | None = None, ridge: float = 1e-3,
                 random_state: int | None = None):
        self.width = width
        self.divergence = divergence
        self.alpha = alpha
        self.ridge = ridge
        self.random_state = random_state

    def fit(self, X, y):
        divergence = parse_divergence(self.divergence, self.alpha)
        if not divergence.weighted:
            self.network_ = _classifier_logit(X, y, self.width, self.random_state)
            return self
        random_state = check_random_state(self.random_state)
        train, validation = _validation_split(y, random_state)
        start = _classifier_logit(X[train], y[train], self.width, self.random_state)
        if isinstance(divergence, Renyi):  # u = 1 + (alpha - 1) (logit - mean_P logit): (dP/dQ)^(alpha - 1), 1st order
            start = replace(start, output_weights=(divergence.alpha - 1.0) * start.output_weights)
        starts = [start, mlp.spread_network(X[train], self.width, random_state)]
        self.network_ = mlp.train_network(
            starts, _by_law(X[train], y[train]), _by_law(X[validation], y[validation]), divergence, None, self.ridge,
        )
        return self

    def transform(self, X):
        return self.network_(X)[:, None]


def _classifier_logit(X: np.ndarray, y: np.ndarray, width: int, random_state: int | None) -> mlp.Network:
    """The logit log P(x)/Q(x) of an MLPClassifier with ``width`` hidden ReLU units fitted to tell P (0) from Q (1)."""
    from sklearn.neural_network import MLPClassifier

    network = MLPClassifier(
        hidden_layer_sizes=(width,),
        early_stopping=X.shape[0] >= _CLASSIFIER_MIN_ROWS,
        max_iter=100,
        batch_size=min(512, X.shape[0]),
        random_state=random_state,
    ).fit(X, y)
    # The network's output is the logit of Q (label 1): negate it for log P/Q.
    return mlp.unit_network(network.coefs_[0], network.intercepts_[0], -network.coefs_[1][:, 0],
                            -float(network.intercepts_[1][0]))


def _validation_split(y: np.ndarray, random_state: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, validation): a random 20% of each law's rows to stop on (none below 5 rows: all in both)."""
    train, validation = [], []
    for label in (0, 1):
        rows = random_state.permutation(np.flatnonzero(y == label))
        n_validation = int(_MLP_VALIDATION_FRACTION * rows.size)
        if n_validation == 0:
            train.append(rows)
            validation.append(rows)
        else:
            train.append(rows[n_validation:])
            validation.append(rows[:n_validation])
    return np.concatenate(train), np.concatenate(validation)


def _by_law(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows of P, rows of Q)."""
    return X[y == 0], X[y == 1]


class TreeCells(TransformerMixin, BaseEstimator):
    """Feature map of the treeK class: the one-hot leaf of a depth-K decision tree (sparse)."""

    def __init__(self, max_depth: int = 1, random_state: int | None = None):
        self.max_depth = max_depth
        self.random_state = random_state

    def fit(self, X, y):
        from sklearn.tree import DecisionTreeClassifier

        self.tree_ = DecisionTreeClassifier(max_depth=self.max_depth, random_state=self.random_state).fit(X, y)
        leaves = np.flatnonzero(self.tree_.tree_.children_left == -1)
        self.cell_of_node_ = np.full(self.tree_.tree_.node_count, -1)
        self.cell_of_node_[leaves] = np.arange(leaves.size)
        return self

    def transform(self, X):
        cells = self.cell_of_node_[self.tree_.apply(np.asarray(X, dtype=np.float32))]
        n_cells = int(self.cell_of_node_.max()) + 1
        return sp.csr_matrix((np.ones(cells.size), (np.arange(cells.size), cells)), shape=(cells.size, n_cells))


class BestCoordinate(TransformerMixin, BaseEstimator):
    """Feature map of the threshold class: the coordinate with the largest training IPM."""

    def fit(self, X, y):
        gaps = []
        for column in X.T:
            threshold, side = best_ipm_set(column[y == 0], column[y == 1])
            gaps.append(np.mean(side * (column[y == 0] - threshold) > 0) - np.mean(side * (column[y == 1] - threshold) > 0))
        self.index_ = int(np.argmax(gaps))
        return self

    def transform(self, X):
        return X[:, [self.index_]]


class Projection(TransformerMixin, BaseEstimator):
    """Feature map of the canary class: x . v / |v|, v fixed before the data (fitting reads nothing)."""

    def __init__(self, direction=(1.0,)):
        self.direction = direction

    def fit(self, X=None, y=None):
        v = np.asarray(self.direction, dtype=float)
        self.unit_ = v / np.linalg.norm(v)
        return self

    def transform(self, X):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.unit_.size:
            raise ValueError(f"class 'canary': direction has {self.unit_.size} entries but the outputs have "
                             f"{X.shape[1] if X.ndim == 2 else 1} coordinates; give one per coordinate.")
        return (X @ self.unit_)[:, None]


def _median_distance(X: np.ndarray, random_state: np.random.RandomState) -> float:
    """Median pairwise distance of up to 1000 rows (the median heuristic)."""
    rows = X[random_state.permutation(X.shape[0])[:1000]]
    distances = np.sqrt(np.maximum(np.sum((rows[:, None, :] - rows[None, :, :]) ** 2, axis=-1), 0.0))
    median = np.median(distances[np.triu_indices(rows.shape[0], k=1)])
    return float(median) if median > 0 else 1.0
