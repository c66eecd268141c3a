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
g(x) = phi(x) . coef_ + intercept_ (docs/theory.md section 3 and 4): the
class (:mod:`attacks.classes`) builds phi (:mod:`attacks.features`) and says
how its coefficients are fitted (:class:`attacks.classes.FitRule`: the
convex fits below, the closed-form optimum per cell for ``treeK`` and
``floatbits``, or phi itself for ``threshold``, ``canary`` and ``atoms``).  ``mlp``'s
network output is its one feature; the fit takes an affine map a u + b of
it, again a network of the class, with the same scale safeguards as every
class.

The set classes (``threshold``, ``atoms``, ``floatbits``:
``FunctionClass.events``) fit, whatever the divergence, the indicator of a set
{s (g - t) > 0} of the score g; for ``kl`` and ``renyi`` the set maximises the
projected lower bound on its binary divergence
(:func:`attacks.event_divergence.projected_event_bound`) and the score is that
binary divergence of the smoothed proportions.

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
    witness at eps = 1 (k = 0.414) loses almost nothing.  A ``poly2``
    witness whose quadratic form is negative definite is bounded above
    (``supremum_``, :func:`attacks.bounded_witness.quadratic_supremum`);
    when its supremum is within log 2 of its largest training value,
    exp(h) is at most twice the largest weight seen under any law and
    the cap is skipped (Hill's estimate reads such a bounded, wide law
    as heavy-tailed: 0.78 at Laplace eps = 4, which halved the scale);
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

import numpy as np
from scipy.linalg import null_space, solve
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator
from sklearn.utils import ClassifierTags, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from attacks.attack_sets import best_dp_set, best_event_set, best_ipm_set
from attacks.binomial_ratio import smoothed_log_ratio
from attacks.bounded_witness import quadratic_supremum
from attacks.classes import PARAMETERS, FitRule, Polynomials, parse_function_class
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
from attacks.event_divergence import smoothed_event_divergence
from attacks.vocabulary import DP, IPM, KL, Divergence, Renyi, parse_divergence

# Largest tail index k of exp(h) under Q a KL witness may have: E_Q exp(r h)
# is finite for r < 1/k = 2.5 (see the module docstring).
_MAX_TAIL_INDEX = 0.4
# Scales c of the KL witness tried on (0, cap]: cap * (1, 2, ..., n) / n.
_SCALE_GRID = 40
# Confidence of the projected lower bound that chooses the KL witness's scale.
_SCALE_SELECTION_LEVEL = 0.95

class Adversary(BaseEstimator):
    """A capacity-bounded adversary: the witness of a restricted divergence.

    Parameters
    ----------
    function_class : str or FunctionClass, default="linear"
        ``linear``, ``polyK``, ``kernel``, ``mlp``, ``treeK``, ``threshold``,
        ``atoms`` or ``floatbits`` (:mod:`attacks.classes`: the class builds
        the feature map and says how its coefficients are fitted).
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
    direction : list of float, optional
        The declared direction v of ``canary`` (its witness x . v / |v|).
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
    supremum_ : float
        ``kl``: sup of the witness h over all outputs, finite for a ``poly2``
        witness whose quadratic form is negative definite
        (:func:`attacks.bounded_witness.quadratic_supremum`): its weights
        exp(h) are then bounded, which frees the scale from the tail cap and
        bounds the unseen mass's weight (:class:`attacks.witness_moments.WitnessMoments`);
        inf otherwise.
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
        direction: list[float] | None = None,
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
        self.direction = direction
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
        seed = random_state.randint(np.iinfo(np.int32).max)
        self.feature_map_ = self.function_class_.feature_map(X, self, seed, random_state)
        phi = self.feature_map_.fit_transform(X, y)  # atoms: leave-one-out on the training rows
        phi_p, phi_q = phi[y == 0], phi[y == 1]
        self.threshold_, self.side_, self.scale_, self.supremum_ = None, None, None, np.inf
        fit_coef = self._fit_renyi if isinstance(divergence, Renyi) and not self.function_class_.events else self._fit_kl
        self.coef_, self.intercept_ = fit_coef(phi_p, phi_q)
        g_p, g_q = _linear(phi_p, self.coef_, self.intercept_), _linear(phi_q, self.coef_, self.intercept_)
        if isinstance(divergence, IPM):
            self.threshold_, self.side_ = best_ipm_set(g_p, g_q)
        elif isinstance(divergence, DP):
            if self.coupled and g_p.size != g_q.size:
                raise ValueError(
                    f"coupled=True needs as many samples of P (y = 0) as of Q (y = 1), one pair each. "
                    f"Found {g_p.size} and {g_q.size}."
                )
            eval_size = self.dp_eval_size or g_q.size
            self.threshold_, self.side_ = best_dp_set(g_p, g_q, divergence.delta, eval_size, self.coupled)
        elif self.function_class_.events:
            self.threshold_, self.side_ = best_event_set(g_p, g_q, divergence, self.dp_eval_size or g_q.size)
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
        scale); ``ipm``: h = +1 on the attack set S, -1 elsewhere; ``dp``, and
        ``kl`` and ``renyi`` of a set class: the indicator of S (1 in S, 0 outside).
        """
        g = self.discriminant(X)
        if self.divergence_.weighted and not self.function_class_.events:
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
            smoothed by a half count, (k + 1/2) / (n + 1); ``kl`` and ``renyi``
            of a set class: the binary divergence of those smoothed proportions
            (:func:`attacks.event_divergence.smoothed_event_divergence`).
            Empirical means over X.
        """
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True)
        _check_labels(y)
        w = self.witness(X)
        if self.divergence_.weighted and self.function_class_.events:
            return event_objective(w[y == 0], w[y == 1], self.divergence_)
        return witness_objective(w[y == 0], w[y == 1], self.divergence_)

    def _check_params(self) -> Divergence:
        """The parameters checked; returns the divergence (:func:`attacks.vocabulary.parse_divergence`)."""
        if not (isinstance(self.delta, (int, float)) and 0.0 <= self.delta < 1.0):
            raise ValueError(f"delta must be a number in [0, 1). Found {self.delta!r}.")
        divergence = parse_divergence(self.divergence, self.alpha, self.delta)
        for parameter in PARAMETERS.values():
            parameter.check(getattr(self, parameter.name))
        if self.dp_eval_size is not None and not (
            isinstance(self.dp_eval_size, (int, np.integer)) and self.dp_eval_size >= 1
        ):
            raise ValueError(f"dp_eval_size must be None or a positive integer. Found {self.dp_eval_size!r}.")
        if not isinstance(self.coupled, (bool, np.bool_)):
            raise ValueError(f"coupled must be True or False. Found {self.coupled!r}.")
        return divergence

    def _fit_kl(self, phi_p, phi_q) -> tuple[np.ndarray, float]:
        """Donsker-Varadhan witness h = phi . a + b with log mean_Q exp(h) = 0.

        For ``kl`` the direction is scaled by :func:`_witness_scale` (module docstring).
        """
        match self.function_class_.fit_rule:
            case FitRule.CELLS:
                p, q = _smoothed_cell_frequencies(phi_p, phi_q)
                coef = np.log(p) - np.log(q)
            case FitRule.FIXED:
                coef = np.ones(1)
            case FitRule.CONVEX:
                coef = _maximise_donsker_varadhan(phi_p, phi_q, self.ridge)
        supremum = np.inf
        if isinstance(self.divergence_, KL) and not self.function_class_.events:
            supremum = self._supremum(coef)
            self.scale_ = _witness_scale(_linear(phi_p, coef, 0.0), _linear(phi_q, coef, 0.0), self.divergence_,
                                         self.dp_eval_size or phi_q.shape[0], supremum)
            coef, supremum = self.scale_ * coef, self.scale_ * supremum
        h_q = _linear(phi_q, coef, 0.0)
        intercept = float(np.log(h_q.size) - logsumexp(h_q))
        self.supremum_ = supremum + intercept
        return coef, intercept

    def _supremum(self, coef: np.ndarray) -> float:
        """sup_x phi(x) . coef for a polynomial class's degree-2 features (the standardised outputs' quadratic,
        :func:`attacks.bounded_witness.quadratic_supremum`); inf for every other class and degree."""
        if not isinstance(self.function_class_, Polynomials) or self.feature_map_[2].degree != 2:
            return np.inf
        tail = self.feature_map_[2:]  # after the outputs' standardisation
        return quadratic_supremum(lambda z: _linear(tail.transform(z), coef, 0.0), self.feature_map_[1].n_features_in_)

    def _fit_renyi(self, phi_p, phi_q) -> tuple[np.ndarray, float]:
        """Renyi witness direction g with mean 1 on the training P sample, shrunk by :func:`_witness_scale`."""
        alpha = self.divergence_.alpha
        if self.function_class_.fit_rule is FitRule.CELLS:
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


def event_objective(w_p, w_q, divergence: Divergence) -> float:
    """The binary ``kl`` or ``renyi`` divergence of an event from its indicator's values on samples of P and Q,
    the proportions smoothed by a half count (:func:`attacks.event_divergence.smoothed_event_divergence`)."""
    w_p, w_q = np.asarray(w_p), np.asarray(w_q)
    return float(smoothed_event_divergence(np.count_nonzero(w_p), w_p.size, np.count_nonzero(w_q), w_q.size,
                                           divergence))


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


def _witness_scale(g_p: np.ndarray, g_q: np.ndarray, divergence: KL | Renyi, eval_size: int,
                   supremum: float = np.inf) -> float:
    """Scale c in (0, 1] toward the constant witness, by the projected lower bound (module docstring).

    ``kl``: the witness c g, c capped at k_max / k_hat, k_hat the Hill tail
    index of exp(g) on the Q sample (:func:`attacks.divergences.tail_index`),
    unless g is bounded above by ``supremum`` (its sup over all outputs, known
    from its coefficients) within log 2 of its largest value on these samples:
    then exp(c g) is at most twice the largest weight seen, every moment is
    finite under any law, and the Hill estimate (which reads a bounded but
    wide law as a heavy tail) is not consulted;
    ``renyi``: the direction c g + 1 - c (mean 1 on P like g).  Among the
    candidates, c maximises the lower bound at 95% that the witness would get
    on ``eval_size`` held-out samples per law
    (:func:`attacks.divergences.variational_bound`, with the spread and the
    unseen-mass ratio of these samples).
    """
    cap = 1.0
    if isinstance(divergence, KL) and supremum > max(g_p.max(), g_q.max()) + np.log(2.0):
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
