"""The capacity-bounded adversary: a scikit-learn estimator fitted to a variational objective.

``Adversary.fit(X, y)`` takes samples of two output laws stacked in X, with
**y = 0 marking samples of P and y = 1 marking samples of Q**, and fits a
witness h from its function class that maximises the variational form of the
divergence D(P, Q) on those samples (CBDP eq. 1-3). ``score(X, y)`` evaluates
the same objective for the fitted witness on other samples: on held-out data
it estimates a lower bound on the restricted divergence (docs/theory.md
section 2; unbiased for ipm, a plug-in log of means biased upward at small
samples for kl and renyi), so ``cross_val_score`` gives held-out estimates of
lower bounds.

Every class is represented as a feature map phi followed by a linear map,
g(x) = phi(x) . coef_ + intercept_ (docs/theory.md section 3 and 4):

* ``linear`` / ``polyK``: phi = standardised monomials of total degree <= K
  (<= min(K, 2) for the KL fit, see below);
* ``kernel``: phi = random Fourier features of an RBF kernel
  (:class:`sklearn.kernel_approximation.RBFSampler`), bandwidth by the median
  heuristic unless given, reduced to the whitened principal components that
  hold 99.9% of their variance (a linear map of the features, so the class
  is unchanged up to numerically degenerate directions; it makes the convex
  fits well conditioned and stops them chasing noise);
* ``mlp``: phi = the output of a one-hidden-layer ReLU network of ``width``
  units (:mod:`attacks.mlp`).  For ``kl`` and ``renyi`` the network is
  trained on the divergence's own objective (Donsker-Varadhan, scale-optimised
  Renyi) by full-batch L-BFGS, starting from the logit of a
  :class:`sklearn.neural_network.MLPClassifier` (and from units with knots
  spread over the data, whichever does better), stopped early on 20% of the
  training rows; for ``ipm`` and ``dp`` it is the classifier's logit, which
  estimates log dP/dQ, the Neyman-Pearson score.  The fit below then takes
  an affine map a u + b of that output, again a network of the class (same
  hidden layer, new output weights), and applies the same scale safeguards
  as for every class;
* ``treeK``: phi = the one-hot cell of a depth-K
  :class:`sklearn.tree.DecisionTreeClassifier`; the witness is the
  closed-form optimum per cell (histogram divergence, docs/theory.md section 4);
* ``threshold``: phi = one output coordinate (the one with the largest
  training IPM), for the IPM and DP set attacks only;
* ``atoms``: phi = the smoothed log ratio of how often the exact value
  occurs among P's and Q's training outputs, leave-one-out on the training
  rows (:class:`attacks.representation.AtomTable`); IPM and DP only;
* ``floatbits``: phi = the one-hot leaf of a depth-3 tree on the IEEE-754
  features of the outputs (:class:`attacks.representation.FloatFeatures`),
  scored like ``treeK``; IPM and DP only.

How coef_ is fitted, per divergence:

* ``kl``: maximise the Donsker-Varadhan objective
  a . E_P[phi] - log E_Q[exp(a . phi)] - ridge |a|^2 / 2, concave in a
  (CBDP appendix Lemma 1), by L-BFGS with its analytic gradient. The tiny
  ridge keeps the optimum finite on separable samples. The fitted direction g
  is then scaled, h = c g with c in (0, 1] (the class is closed under
  scaling), for the held-out interval's sake:

  - *tail cap*: the delta-method interval of log E_Q exp(h) needs exp(h) to
    have a finite variance under Q, and its standard error to be
    consistent.  If h has an exponential upper tail of rate lambda under Q
    (Laplace outputs and a linear h), exp(c h) has a Pareto tail of index
    k = c / lambda, with E_Q exp(r c h) finite for r < 1/k.  The optimal
    linear witness of Laplace(1/eps) has k = (sqrt(1 + eps^2) - 1) / eps,
    0.88 at eps = 8: infinite variance, a held-out mean of exp(h) carried by
    a few samples.  So c is capped at k_max / k_hat(g), k_hat the Hill
    estimate of the tail of exp(g) on the training Q sample
    (:func:`attacks.divergences.tail_index`), k_max = 0.4: E_Q exp(r h) is
    finite for r < 2.5, so the variance is finite and its estimate
    converges, with a margin for the noise of k_hat; the optimal linear
    witness at eps = 1 (k = 0.414) loses almost nothing;
  - *projected bound*: below the cap, c maximises the 95% lower bound that
    c g would get on ``dp_eval_size`` held-out samples
    (:func:`attacks.divergences.variational_bound`: the delta-method step
    plus the charge for Q's unseen mass), computed from the training terms
    (as the dp set is chosen), so neither a scale whose gain the held-out
    split cannot resolve nor a witness far larger on P than anything Q's
    sample shows (separable samples) is taken.

  The assumption left is that the tail of h under Q beyond the training
  sample is no heavier than its largest training values show (exponential,
  as for Laplace and Gaussian outputs and polynomial witnesses of degree
  <= 2 with a non-positive leading term).  Heavy-tail trap
  (docs/theory.md section 4): a polynomial witness with a non-zero odd leading
  term of degree >= 3 has E_Q exp(h) = infinity under any law with Laplace or
  Gaussian tails, so its population objective is -infinity while a finite
  sample (which never sees the tail) scores it high -- a held-out estimate
  that overstates its estimand. The KL fit of polyK therefore uses monomials
  of degree <= 2 (a subclass, so the witness stays in polyK); this is exact
  for Laplace and Gaussian laws ((poly3, KL) = (poly2, KL)) and a valid
  lower bound for any law. Trees: h = log(p_cell / q_cell).
* ``renyi``: minimise E_Q |g|^beta subject to E_P g = 1, beta =
  alpha / (alpha - 1), over g = a . (1, phi): a convex problem whose value
  gives D_R = -log min E_Q |g|^beta (docs/theory.md section 4). At alpha = 2 it is
  the closed-form linear solve g = M_Q^{-1} m_P / (m_P' M_Q^{-1} m_P), which
  also starts L-BFGS (on the constraint's null space) for other alpha. Trees:
  g = (p_cell / q_cell)^(alpha - 1), the per-cell optimum.  The direction is
  then shrunk toward the constant witness 1 (objective 0), c g + 1 - c with c
  in (0, 1] chosen by the same projected bound as the kl scale.
* ``ipm``: the class's KL witness g (an estimate of log dP/dQ, the
  Neyman-Pearson optimal score) thresholded: h = +1 on S = {s (g - t) > 0},
  -1 elsewhere, with t and the side s maximising the training
  P(S) - Q(S); score = E_P h - E_Q h = 2 (TPR - FPR) = 2 x advantage
  (CBDP Def. 4).
* ``dp``: the same score g, set S = {s (g - t) > 0} chosen on the training
  samples to maximise the 95% lower bound on log((P(S) - delta) / Q(S)) that
  S would get if scored on ``dp_eval_size`` held-out samples per law
  (:func:`attacks.binomial_ratio.projected_lower_bound`: a rare event with a
  large ratio wins only when enough samples will score it); the witness is the
  indicator of S and score is log((P~(S) - delta) / Q~(S)) of the
  proportions smoothed by a half count, finite at zero counts (docs/theory.md
  section 7).  With ``coupled=True`` (P and Q samples drawn in
  pairs from the same random numbers) the bound projected is the paired one
  of :func:`attacks.paired_ratio.projected_lower_bound`.

Tree cells are smoothed by adding 1/2 to every cell count of each sample
(Krichevsky-Trofimov), so that an empty cell gives a finite witness; the
smoothing only changes which witness is fitted, never the held-out score's
honesty.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from scipy.linalg import null_space, solve
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import ClassifierTags
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import RBFSampler
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from attacks import mlp, paired_ratio
from attacks.binomial_ratio import projected_lower_bound, smoothed_log_ratio
from attacks.classes import FunctionClass, parse_function_class
from attacks.divergences import (
    conjugate_exponent,
    donsker_varadhan,
    donsker_varadhan_influence,
    log_unseen_ratio,
    renyi_influence,
    renyi_scale_optimized,
    tail_index,
    variational_bound,
)
from attacks.representation import FLOATBITS_DEPTH, AtomTable, FloatFeatures
from attacks.vocabulary import DP, IPM, KL, Divergence, Renyi, parse_divergence

# Largest tail index k of exp(h) under Q a KL witness may have: E_Q exp(r h)
# is finite for r < 1/k = 2.5 (see the module docstring).
_MAX_TAIL_INDEX = 0.4
# Scales c of the KL witness tried on (0, cap]: cap * (1, 2, ..., n) / n.
_SCALE_GRID = 40
# Confidence of the projected lower bound that chooses the KL witness's scale.
_SCALE_SELECTION_LEVEL = 0.95
# The Donsker-Varadhan fit of polyK uses monomials of degree <= 2 (see the
# module docstring: the heavy-tail trap).
_DV_MAX_DEGREE = 2
# Random Fourier features are reduced to the principal components holding
# this fraction of their variance, whitened: the dropped directions are
# numerically degenerate and only let the fit chase noise.
_KERNEL_VARIANCE = 0.999
# Confidence at which the DP attack set is chosen on the training split.
_DP_SELECTION_LEVEL = 0.95
# At most this many candidate thresholds per side for the DP attack set.
_DP_CANDIDATES = 1000
# Share of each law's training rows on which the mlp network's training stops early.
_MLP_VALIDATION_FRACTION = 0.2
# The mlp's classifier stops early on 10% of its rows, which must hold both laws: from 20 rows on.
_CLASSIFIER_MIN_ROWS = 20


class Adversary(BaseEstimator):
    """A capacity-bounded adversary: the witness of a restricted divergence.

    Parameters
    ----------
    function_class : str, default="linear"
        ``linear``, ``polyK``, ``kernel``, ``mlp``, ``treeK`` or ``threshold``
        (see :mod:`attacks.classes`).
    divergence : {"kl", "renyi", "ipm", "dp"} or Divergence, default="kl"
        The divergence D(P, Q) whose variational form is maximised.
    alpha : float, optional
        The Renyi order (> 1); required for ``renyi``, must be None otherwise.
    delta : float, default=0.0
        The delta of an (epsilon, delta)-DP claim, for ``dp``; in [0, 1).
    n_components : int, default=100
        Number of random Fourier features (``kernel``).
    bandwidth : float, optional
        RBF bandwidth sigma, k(x, x') = exp(-|x - x'|^2 / (2 sigma^2)), in
        the units of X (``kernel``); default: the median pairwise distance of
        up to 1000 training rows.
    width : int, default=32
        Number of hidden ReLU units (``mlp``).
    ridge : float, default=1e-3
        Ridge penalty ridge |a|^2 / 2 on the coefficients of the standardised
        features in the KL and Renyi fits (see the module docstring); for
        ``mlp`` also on the output weights of the network's training
        (:func:`attacks.mlp.train_network`).
    dp_eval_size : int, optional
        Held-out samples per law on which the witness will be scored: the
        ``dp`` attack set and the ``kl`` / ``renyi`` scale are chosen for the
        bound expected at that size.  Default: the training samples of Q.
    coupled : bool, default=False
        For ``dp``: the i-th sample of P and the i-th sample of Q (in their
        order in X) were drawn from the same random numbers (common random
        numbers, :mod:`attacks.paired_ratio`), so P and Q have as many
        samples; the attack set is chosen by the paired bound, whose variance
        counts only the pairs on which S separates the two outputs.
    random_state : int, RandomState or None
        Seeds the kernel features, the network (its classifier, validation
        rows and spread start), the tree and the subsample of the median
        heuristic.

    Attributes
    ----------
    divergence_ : Divergence
        The divergence parameters as a type (:func:`attacks.vocabulary.parse_divergence`).
    function_class_ : FunctionClass
    feature_map_ : sklearn Pipeline
        The fitted feature map phi.
    coef_ : ndarray of shape (n_features_phi,)
    intercept_ : float
        With ``coef_``: the real-valued score g(x) = phi(x) . coef_ + intercept_
        (:meth:`discriminant`). For ``kl`` it is the witness h, shifted so that
        the training mean of exp(h) on Q is 1 (h estimates log dP/dQ); for
        ``renyi`` it is the witness direction with training mean 1 on P.
    threshold_ : float or None
        t of the attack set S = {side_ (g - t) > 0} (``ipm``, ``dp``).
    side_ : {1, -1} or None
    scale_ : float or None
        ``kl`` and ``renyi``: the scale c in (0, 1] toward the constant
        witness applied to the fitted direction g (``kl``: c g; ``renyi``:
        c g + 1 - c; module docstring); None for ``ipm`` and ``dp``.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(0, 1, (2000, 1)), rng.normal(1, 1, (2000, 1))]
    >>> y = np.r_[np.zeros(2000), np.ones(2000)]
    >>> adversary = Adversary("linear", "kl", random_state=0).fit(X, y)
    >>> 0.4 < adversary.score(X, y) < 0.6
    True
    """

    def __init__(
        self,
        function_class: str = "linear",
        divergence: str = "kl",
        alpha: float | None = None,
        delta: float = 0.0,
        n_components: int = 100,
        bandwidth: float | None = None,
        width: int = 32,
        ridge: float = 1e-3,
        dp_eval_size: int | None = None,
        coupled: bool = False,
        random_state=None,
    ):
        self.function_class = function_class
        self.divergence = divergence
        self.alpha = alpha
        self.delta = delta
        self.n_components = n_components
        self.bandwidth = bandwidth
        self.width = width
        self.ridge = ridge
        self.dp_eval_size = dp_eval_size
        self.coupled = coupled
        self.random_state = random_state

    def fit(self, X, y) -> Adversary:
        """Fit the witness on samples of P (y = 0) and Q (y = 1).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite outputs of the mechanism on both datasets.
        y : array-like of shape (n_samples,)
            0 for a sample of P, 1 for a sample of Q; both must occur.

        Returns
        -------
        self
        """
        divergence = self.divergence_ = self._check_params()
        X, y = validate_data(self, X, y, ensure_min_samples=2, y_numeric=True)
        _check_labels(y)
        random_state = check_random_state(self.random_state)
        self.function_class_ = parse_function_class(self.function_class)
        if divergence.name not in self.function_class_.divergences:
            raise ValueError(
                f"function_class {self.function_class!r} supports divergences "
                f"{self.function_class_.divergences}. Found divergence {self.divergence!r}."
            )
        self.feature_map_ = self._make_feature_map(X, random_state)
        phi = self.feature_map_.fit_transform(X, y)  # atoms: leave-one-out on the training rows
        phi_p, phi_q = phi[y == 0], phi[y == 1]
        self.threshold_, self.side_, self.scale_ = None, None, None
        fit_coef = self._fit_renyi if isinstance(divergence, Renyi) else self._fit_kl
        self.coef_, self.intercept_ = fit_coef(phi_p, phi_q)
        g_p, g_q = _linear(phi_p, self.coef_, self.intercept_), _linear(phi_q, self.coef_, self.intercept_)
        if isinstance(divergence, IPM):
            self.threshold_, self.side_ = _best_ipm_set(g_p, g_q)
        elif isinstance(divergence, DP):
            if self.coupled and g_p.size != g_q.size:
                raise ValueError(
                    f"coupled=True needs as many samples of P (y = 0) as of Q (y = 1), one pair each. "
                    f"Found {g_p.size} and {g_q.size}."
                )
            eval_size = self.dp_eval_size or g_q.size
            self.threshold_, self.side_ = _best_dp_set(g_p, g_q, divergence.delta, eval_size, self.coupled)
        return self

    def __sklearn_tags__(self):
        # y labels the law of each sample (0: P, 1: Q) like a binary class label, so declare a
        # classifier: cross_val_score, GridSearchCV and check_cv then stratify the folds, and every
        # fold holds samples of both laws (P-then-Q stacked data would otherwise give one-law folds).
        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        tags.classifier_tags = ClassifierTags(multi_class=False)
        return tags

    def discriminant(self, X) -> np.ndarray:
        """The real-valued score g(X) = phi(X) . coef_ + intercept_, shape (n_samples,).

        For ``kl``, ``ipm`` and ``dp`` it estimates log dP/dQ (large on P); it
        is the witness itself for ``kl`` and ``renyi``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return _linear(self.feature_map_.transform(X), self.coef_, self.intercept_)

    def witness(self, X) -> np.ndarray:
        """The fitted witness h(X), shape (n_samples,).

        ``kl``: h = g; ``renyi``: the direction g (the score optimises its
        scale); ``ipm``: h = +1 on the attack set S, -1 elsewhere; ``dp``: the
        indicator of S (1 in S, 0 outside).
        """
        g = self.discriminant(X)
        if self.divergence_.weighted:
            return g
        in_set = self.side_ * (g - self.threshold_) > 0
        return np.where(in_set, 1.0, -1.0) if isinstance(self.divergence_, IPM) else in_set.astype(float)

    def score(self, X, y) -> float:
        """The variational objective of the fitted witness on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            0 for samples of P, 1 for samples of Q; both must occur.

        Returns
        -------
        float
            ``kl``: E_P h - log E_Q exp(h) (Donsker-Varadhan); ``renyi``:
            beta log |E_P g| - log E_Q |g|^beta (scale-optimised restricted
            Renyi, docs/theory.md section 4); ``ipm``: E_P h - E_Q h = 2 (TPR - FPR);
            ``dp``: log((P~(S) - delta) / Q~(S)) with the proportions of X in S
            smoothed by a half count, (k + 1/2) / (n + 1). Empirical means over X.
        """
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True)
        _check_labels(y)
        w = self.witness(X)
        return witness_objective(w[y == 0], w[y == 1], self.divergence_)

    def _check_params(self) -> Divergence:
        """The parameters checked; returns the divergence (:func:`attacks.vocabulary.parse_divergence`)."""
        if not (isinstance(self.delta, (int, float)) and 0.0 <= self.delta < 1.0):
            raise ValueError(f"delta must be a number in [0, 1). Found {self.delta!r}.")
        divergence = parse_divergence(self.divergence, self.alpha, self.delta)
        for name in ("n_components", "width"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                raise ValueError(f"{name} must be a positive integer. Found {value!r}.")
        if self.bandwidth is not None and not (np.isscalar(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"bandwidth must be None (median heuristic) or positive. Found {self.bandwidth!r}.")
        if not (np.isscalar(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be a non-negative number. Found {self.ridge!r}.")
        if self.dp_eval_size is not None and not (
            isinstance(self.dp_eval_size, (int, np.integer)) and self.dp_eval_size >= 1
        ):
            raise ValueError(f"dp_eval_size must be None or a positive integer. Found {self.dp_eval_size!r}.")
        if not isinstance(self.coupled, (bool, np.bool_)):
            raise ValueError(f"coupled must be True or False. Found {self.coupled!r}.")
        return divergence

    def _make_feature_map(self, X: np.ndarray, random_state: np.random.RandomState) -> Pipeline:
        """phi of the class, after :class:`_CommonScale` (an affine map every class is closed under)."""
        kind, degree = self.function_class_.kind, self.function_class_.degree
        seed = random_state.randint(np.iinfo(np.int32).max)
        common = _CommonScale().fit(X)
        if kind == "poly":
            if not isinstance(self.divergence_, Renyi):
                degree = min(degree, _DV_MAX_DEGREE)
            return make_pipeline(common, StandardScaler(), PolynomialFeatures(degree, include_bias=False),
                                 StandardScaler())
        if kind == "kernel":
            if self.bandwidth is None:
                bandwidth = _median_distance(common.transform(X), random_state)
            else:
                bandwidth = self.bandwidth / common.scale_
            sampler = RBFSampler(gamma=0.5 / bandwidth**2, n_components=self.n_components, random_state=seed)
            return make_pipeline(common, sampler,
                                 PCA(n_components=_KERNEL_VARIANCE, whiten=True, svd_solver="covariance_eigh"))
        if kind == "mlp":
            return make_pipeline(common, StandardScaler(),
                                 _NetworkWitness(self.width, self.divergence_, self.alpha, self.ridge, seed),
                                 StandardScaler())
        if kind == "tree":
            return make_pipeline(common, _TreeCells(degree, seed))
        if kind == "atoms":  # exact values and bit patterns: no rescaling before these two
            return make_pipeline(AtomTable())
        if kind == "floatbits":
            return make_pipeline(FloatFeatures(), _TreeCells(FLOATBITS_DEPTH, seed))
        return make_pipeline(common, _BestCoordinate())

    def _fit_kl(self, phi_p, phi_q) -> tuple[np.ndarray, float]:
        """Donsker-Varadhan witness h = phi . a + b with log mean_Q exp(h) = 0.

        For ``kl`` the direction is scaled by :func:`_witness_scale` (module docstring).
        """
        kind = self.function_class_.kind
        if kind in ("tree", "floatbits"):
            p, q = _smoothed_cell_frequencies(phi_p, phi_q)
            coef = np.log(p) - np.log(q)
        elif kind in ("threshold", "atoms"):
            coef = np.ones(1)
        else:
            coef = _maximise_donsker_varadhan(phi_p, phi_q, self.ridge)
        if isinstance(self.divergence_, KL):
            self.scale_ = _witness_scale(_linear(phi_p, coef, 0.0), _linear(phi_q, coef, 0.0), self.divergence_,
                                         self.dp_eval_size or phi_q.shape[0])
            coef = self.scale_ * coef
        h_q = _linear(phi_q, coef, 0.0)
        return coef, float(np.log(h_q.size) - logsumexp(h_q))

    def _fit_renyi(self, phi_p, phi_q) -> tuple[np.ndarray, float]:
        """Renyi witness direction g with mean 1 on the training P sample, shrunk by :func:`_witness_scale`."""
        alpha = self.divergence_.alpha
        if self.function_class_.kind == "tree":
            p, q = _smoothed_cell_frequencies(phi_p, phi_q)
            coef = (p / q) ** (alpha - 1.0)
            coef, intercept = coef / np.mean(_linear(phi_p, coef, 0.0)), 0.0
        else:
            a = _minimise_renyi_moment(phi_p, phi_q, conjugate_exponent(alpha), self.ridge)
            coef, intercept = a[1:], float(a[0])
        self.scale_ = _witness_scale(_linear(phi_p, coef, intercept), _linear(phi_q, coef, intercept),
                                     self.divergence_, self.dp_eval_size or phi_q.shape[0])
        return self.scale_ * coef, self.scale_ * intercept + 1.0 - self.scale_


def witness_log_weights(w, divergence: str | Divergence, alpha: float | None = None) -> np.ndarray:
    """Logarithms of the terms whose mean over Q a ``kl`` or ``renyi`` objective takes.

    ``kl``: log exp(h) = h; ``renyi``: beta log|g|, beta = alpha / (alpha - 1)
    (log 0 read as the log of the smallest positive float).
    """
    w = np.asarray(w, dtype=float)
    match parse_divergence(divergence, alpha):
        case KL():
            return w
        case Renyi(alpha=alpha):
            return conjugate_exponent(alpha) * np.log(np.abs(w) + np.finfo(float).tiny)
    raise ValueError(f"divergence must be one of ('kl', 'renyi') (a witness with weights). Found {divergence!r}.")


def witness_objective(w_p, w_q, divergence: str | Divergence, alpha: float | None = None,
                      delta: float = 0.0) -> float:
    """The empirical objective of witness values on samples of P and Q.

    Parameters
    ----------
    w_p, w_q : arrays of shape (n_p,), (n_q,)
        :meth:`Adversary.witness` on samples of P and of Q.
    divergence : {"kl", "renyi", "ipm", "dp"} or Divergence
    alpha : float, optional
        The Renyi order (with a name).
    delta : float, default=0.0
        For ``dp`` (with a name).

    Returns
    -------
    float
        See :meth:`Adversary.score`. ``dp`` is the log-ratio of the
        proportions smoothed by a half count
        (:func:`attacks.binomial_ratio.smoothed_log_ratio`): finite whatever
        the counts (a zero count of Q proves no infinite ratio), -inf when
        the smoothed P(S) is not above delta.
    """
    match parse_divergence(divergence, alpha, delta):
        case KL():
            return donsker_varadhan(w_p, w_q)
        case Renyi(alpha=alpha):
            return renyi_scale_optimized(w_p, w_q, alpha)
        case IPM():
            return float(np.mean(w_p) - np.mean(w_q))
        case DP(delta=delta):
            w_p, w_q = np.asarray(w_p), np.asarray(w_q)
            return float(smoothed_log_ratio(np.count_nonzero(w_p), w_p.size, np.count_nonzero(w_q), w_q.size,
                                            delta)[0])


def _check_labels(y: np.ndarray) -> None:
    labels = np.unique(y)
    if not np.all(np.isin(labels, (0, 1))):
        raise ValueError(f"y must hold 0 (samples of P) and 1 (samples of Q). Found labels {labels.tolist()!r}.")
    if labels.size < 2:
        raise ValueError(
            f"y must hold samples of both P (0) and Q (1); found only label {labels.tolist()!r}."
        )


def _linear(phi, coef: np.ndarray, intercept: float) -> np.ndarray:
    return np.asarray(phi @ coef).ravel() + intercept


def _median_distance(X: np.ndarray, random_state: np.random.RandomState) -> float:
    """Median pairwise distance of up to 1000 rows (the median heuristic)."""
    rows = X[random_state.permutation(X.shape[0])[:1000]]
    distances = np.sqrt(np.maximum(np.sum((rows[:, None, :] - rows[None, :, :]) ** 2, axis=-1), 0.0))
    median = np.median(distances[np.triu_indices(rows.shape[0], k=1)])
    return float(median) if median > 0 else 1.0


def _maximise_donsker_varadhan(phi_p, phi_q, ridge: float) -> np.ndarray:
    """argmax_a a . mean(phi_p) - log mean exp(phi_q a) - ridge |a|^2 / 2 (concave; L-BFGS)."""
    mean_p = np.asarray(phi_p.mean(axis=0)).ravel()
    log_n = np.log(phi_q.shape[0])

    def negative_objective(a):
        u = phi_q @ a
        weights = softmax(u)
        value = a @ mean_p - (logsumexp(u) - log_n) - 0.5 * ridge * a @ a
        gradient = mean_p - phi_q.T @ weights - ridge * a
        return -value, -gradient

    result = minimize(negative_objective, np.zeros(mean_p.size), jac=True, method="L-BFGS-B")
    return result.x


def _witness_scale(g_p: np.ndarray, g_q: np.ndarray, divergence: KL | Renyi, eval_size: int) -> float:
    """Scale c in (0, 1] toward the constant witness, by the projected lower bound (module docstring).

    ``kl``: the witness c g, c capped at k_max / k_hat, k_hat the Hill tail
    index of exp(g) on the Q sample (:func:`attacks.divergences.tail_index`);
    ``renyi``: the direction c g + 1 - c (mean 1 on P like g).  Among the
    candidates, c maximises the lower bound at 95% that the witness would get
    on ``eval_size`` held-out samples per law
    (:func:`attacks.divergences.variational_bound`, with the spread and the
    unseen-mass ratio of these samples).
    """
    cap = 1.0
    if isinstance(divergence, KL):
        unit_index = tail_index(g_q)
        cap = 1.0 if unit_index <= _MAX_TAIL_INDEX else _MAX_TAIL_INDEX / unit_index
    scales = cap * np.arange(1, _SCALE_GRID + 1) / _SCALE_GRID
    offset = 0.0 if isinstance(divergence, KL) else 1.0
    bounds = [_projected_bound(c * g_p + offset * (1 - c), c * g_q + offset * (1 - c), divergence, eval_size)
              for c in scales]
    return float(scales[int(np.argmax(bounds))])


def _projected_bound(w_p: np.ndarray, w_q: np.ndarray, divergence: KL | Renyi, eval_size: int) -> float:
    """The 95% lower bound of a kl / renyi witness with these sample values, were it scored on ``eval_size`` per law."""
    influence = (donsker_varadhan_influence(w_p, w_q) if isinstance(divergence, KL)
                 else renyi_influence(w_p, w_q, divergence.alpha))
    spread = np.sqrt((np.var(influence[0]) + np.var(influence[1])) / eval_size)
    log_ratio = log_unseen_ratio(witness_log_weights(w_p, divergence), witness_log_weights(w_q, divergence))
    value = witness_objective(w_p, w_q, divergence)
    return variational_bound(value, spread, log_ratio, eval_size, _SCALE_SELECTION_LEVEL)


def _minimise_renyi_moment(phi_p, phi_q, beta: float, ridge: float) -> np.ndarray:
    """argmin_a mean |(1, phi_q) a|^beta + ridge |a_1:|^2 / 2 subject to mean (1, phi_p) a = 1.

    A convex problem (docs/theory.md section 4). Starts from the beta = 2
    (alpha = 2) closed form a = A^{-1} m / (m' A^{-1} m) with
    m = mean (1, phi_p), A = mean (1, phi_q)(1, phi_q)' + ridge/2 on the
    non-constant diagonal (plus a round-off jitter), then runs L-BFGS on the constraint's
    null space a = a0 + N z with the analytic gradient.  The ridge keeps the
    solution finite when some direction vanishes on every Q sample (e.g. a
    point mass Q); the held-out interval then decides what the data show.
    """
    design_p = np.column_stack([np.ones(phi_p.shape[0]), phi_p])
    design_q = np.column_stack([np.ones(phi_q.shape[0]), phi_q])
    mean_p = design_p.mean(axis=0)
    penalty = np.full(mean_p.size, 0.5 * ridge)
    penalty[0] = 0.0
    second_moment = design_q.T @ design_q / design_q.shape[0]
    regularised = second_moment + np.diag(penalty + 1e-12 * np.trace(second_moment))
    direction = solve(regularised, mean_p, assume_a="pos")
    a0 = direction / (mean_p @ direction)
    if beta == 2.0:
        return a0
    basis = null_space(mean_p[None, :])
    # the objective at the start, to make L-BFGS's tolerances relative (1 if it is 0: nothing to gain)
    start = np.mean(np.abs(design_q @ a0) ** beta) + 0.5 * ridge * a0[1:] @ a0[1:] or 1.0

    def relative_objective(z):
        a = a0 + basis @ z
        u = design_q @ a
        value = np.mean(np.abs(u) ** beta) + 0.5 * ridge * a[1:] @ a[1:]
        gradient = design_q.T @ (beta * np.abs(u) ** (beta - 1.0) * np.sign(u)) / u.size + 2 * penalty * a
        return value / start, basis.T @ gradient / start

    result = minimize(relative_objective, np.zeros(basis.shape[1]), jac=True, method="L-BFGS-B")
    return a0 + basis @ result.x


def _smoothed_cell_frequencies(cells_p, cells_q) -> tuple[np.ndarray, np.ndarray]:
    """Cell frequencies of P and Q with 1/2 added to every count (Krichevsky-Trofimov)."""
    counts_p = np.asarray(cells_p.sum(axis=0)).ravel() + 0.5
    counts_q = np.asarray(cells_q.sum(axis=0)).ravel() + 0.5
    return counts_p / counts_p.sum(), counts_q / counts_q.sum()


def _cut_points(g_p: np.ndarray, g_q: np.ndarray) -> np.ndarray:
    """Midpoints between consecutive distinct values of the pooled scores."""
    values = np.unique(np.concatenate([g_p, g_q]))
    return (values[:-1] + values[1:]) / 2 if values.size > 1 else values


def _mass_above(sorted_values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Number of sorted values strictly greater than each threshold."""
    return sorted_values.size - np.searchsorted(sorted_values, thresholds, side="right")


def _best_ipm_set(g_p: np.ndarray, g_q: np.ndarray) -> tuple[float, int]:
    """Threshold t and side s maximising P_n(S) - Q_n(S), S = {s (g - t) > 0}."""
    thresholds = _cut_points(g_p, g_q)
    tpr = _mass_above(np.sort(g_p), thresholds) / g_p.size
    fpr = _mass_above(np.sort(g_q), thresholds) / g_q.size
    best = int(np.argmax(np.abs(tpr - fpr)))
    return float(thresholds[best]), 1 if tpr[best] >= fpr[best] else -1


def _best_dp_set(g_p: np.ndarray, g_q: np.ndarray, delta: float, eval_size: int, coupled: bool) -> tuple[float, int]:
    """Threshold t and side s maximising the epsilon lower bound expected on ``eval_size`` held-out samples.

    The bound is the projected lower bound at 95% of the training counts of S
    (docs/theory.md section 7): :func:`attacks.binomial_ratio.projected_lower_bound`
    for independent samples, :func:`attacks.paired_ratio.projected_lower_bound`
    for coupled pairs (g_p[i], g_q[i]), whose outputs both lie above t exactly
    when their minimum does, and both below when their maximum does.
    """
    thresholds = _cut_points(g_p, g_q)
    if thresholds.size > _DP_CANDIDATES:
        thresholds = thresholds[np.linspace(0, thresholds.size - 1, _DP_CANDIDATES).astype(int)]
    above_p = _mass_above(np.sort(g_p), thresholds)
    above_q = _mass_above(np.sort(g_q), thresholds)
    sides = [(1, above_p, above_q), (-1, g_p.size - above_p, g_q.size - above_q)]
    if coupled:
        both = (_mass_above(np.sort(np.minimum(g_p, g_q)), thresholds),
                g_p.size - _mass_above(np.sort(np.maximum(g_p, g_q)), thresholds))
    best = (-np.inf, float(thresholds[0]), 1)
    for index, (side, k_p, k_q) in enumerate(sides):
        if coupled:
            counts = np.column_stack([both[index], k_p - both[index], k_q - both[index], g_p.size - k_p - k_q + both[index]])
            bound = paired_ratio.projected_lower_bound(counts, delta, _DP_SELECTION_LEVEL, eval_size)
        else:
            bound = projected_lower_bound(k_p, g_p.size, k_q, g_q.size, delta, _DP_SELECTION_LEVEL, eval_size)
        at = int(np.argmax(bound))
        if bound[at] > best[0]:
            best = (float(bound[at]), float(thresholds[at]), side)
    return best[1], best[2]


class _CommonScale(TransformerMixin, BaseEstimator):
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


class _NetworkWitness(TransformerMixin, BaseEstimator):
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


class _TreeCells(TransformerMixin, BaseEstimator):
    """Feature map of the treeK class: the one-hot leaf of a depth-K decision tree (sparse)."""

    def __init__(self, max_depth: int = 1, random_state: int | None = None):
        self.max_depth = max_depth
        self.random_state = random_state

    def fit(self, X, y):
        self.tree_ = DecisionTreeClassifier(max_depth=self.max_depth, random_state=self.random_state).fit(X, y)
        leaves = np.flatnonzero(self.tree_.tree_.children_left == -1)
        self.cell_of_node_ = np.full(self.tree_.tree_.node_count, -1)
        self.cell_of_node_[leaves] = np.arange(leaves.size)
        return self

    def transform(self, X):
        cells = self.cell_of_node_[self.tree_.apply(np.asarray(X, dtype=np.float32))]
        n_cells = int(self.cell_of_node_.max()) + 1
        return sp.csr_matrix((np.ones(cells.size), (np.arange(cells.size), cells)), shape=(cells.size, n_cells))


class _BestCoordinate(TransformerMixin, BaseEstimator):
    """Feature map of the threshold class: the coordinate with the largest training IPM."""

    def fit(self, X, y):
        gaps = []
        for column in X.T:
            threshold, side = _best_ipm_set(column[y == 0], column[y == 1])
            gaps.append(np.mean(side * (column[y == 0] - threshold) > 0) - np.mean(side * (column[y == 1] - threshold) > 0))
        self.index_ = int(np.argmax(gaps))
        return self

    def transform(self, X):
        return X[:, [self.index_]]
