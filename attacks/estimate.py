"""Held-out estimates of restricted divergences, with confidence intervals.

:func:`estimate_divergence` fits an :class:`~attacks.adversary.Adversary` on a
train split of the samples of P and Q and scores its witness on the held-out
rest. The *estimand* is the population value of the fitted witness's
objective: a lower bound on the restricted divergence of the class (docs/theory.md
section 2), so a lower confidence bound above a claim is evidence against it.

Intervals (all conditional on the fitted witness, with the held-out samples
independent of the training split).  Each objective is, to first order, a
difference of means, mean(infl_P) - mean(infl_Q) + const, of per-sample
influence terms of the two sides; the delta method gives the variance

* var(infl_P)/n_P + var(infl_Q)/n_Q for independent samples of P and Q;
* var(infl_P - infl_Q)/n for ``coupled`` samples: n pairs (X_i, Y_i) drawn
  from the same random numbers (common random numbers), independent across
  i.  The pair is the unit of sampling, so the variance is that of the
  pair's contribution; it is much smaller than the independent one when the
  two outputs of a pair, hence their terms, move together.

The influence terms:

* ``kl``: estimate = mean(h_P) - log mean(exp h_Q) (Donsker-Varadhan, CBDP
  appendix Lemma 1); infl_P = h_P, infl_Q = exp(h_Q) / mean(exp h_Q).
* ``renyi``: estimate = beta log|mean g_P| - log mean|g_Q|^beta (docs/theory.md
  section 4, scale-optimised); infl_P = beta g_P / mean(g_P),
  infl_Q = |g_Q|^beta / mean(|g_Q|^beta).
* ``ipm``: estimate = mean(h_P) - mean(h_Q) = 2 (P_n(S) - Q_n(S)) with
  h = +-1 on the attack set S (CBDP Def. 4); the interval is twice one for a
  difference of two proportions from the held-out counts of S, not the delta
  method (whose standard error vanishes on separable samples):
  :func:`attacks.binomial_ratio.difference_bound`, or
  :func:`attacks.paired_ratio.difference_bound` for coupled samples.
* ``dp``: estimate = log((P~(S) - delta) / Q~(S)) with the held-out
  proportions smoothed by a half count, (k + 1/2) / (n + 1), so that a zero
  count of Q gives a finite estimate (docs/theory.md section 7); the bound for a
  shifted ratio of two independent binomial proportions
  (:func:`attacks.binomial_ratio.log_ratio_bound`), or, for coupled samples,
  of paired proportions from the cells (both in S, only X, only Y, neither)
  (:func:`attacks.paired_ratio.log_ratio_bound`).

``ipm`` and ``dp`` bounds are the score bounds where the counts are large
enough and Clopper-Pearson bounds on P(S) and Q(S) at Bonferroni-split
levels where they are not, so that they hold at zero and tiny counts and on
separable samples; they assume only that the held-out outputs are
independent draws (independent pairs when coupled).  No ``ipm`` or ``dp``
estimate is ever unbounded: a finite sample never proves an infinite ratio.

``kl`` and ``renyi`` lower bounds (:func:`attacks.divergences.variational_bound`).
Both objectives subtract log E_Q w, the log of a mean of non-negative weights
w = exp(h) or |g|^beta, and a sample mean of such weights falls short of
E_Q w most of the time when a few large values carry it: the plug-in then
overstates the estimand and a normal interval is too narrow.  The lower
bound at level 1 - a is::

    estimate - log(1 + u r) - Phi^-1(1 - 0.9 a) se,

a union bound over two errors:

* *unseen mass*: with probability 1 - a/10, Q puts at most
  u = 1 - (a/10)^(1/n_Q) above the largest of its n_Q held-out weights
  (exact, :func:`attacks.divergences.unseen_mass_bound`); where it does the
  weight is **assumed** at most the largest held-out weight of P or Q, r times
  the mean Q weight (:func:`attacks.divergences.log_unseen_ratio`).  This is
  what keeps separable samples (Laplace at high epsilon, a rich class on a
  few hundred samples) from proving a divergence the law does not have;
* *sampling*: the delta-method step, which **assumes** that w has a finite
  variance under Q and enough effective terms for a normal approximation.

The witness is fitted to make both assumptions plausible
(:mod:`attacks.adversary`: its scale is chosen on the training split by this
bound, and a ``kl`` witness's exp(h) is kept to a Hill tail index <= 0.4),
and the held-out Q weights are checked: a ``caveat`` is set, so the row can
never read "violation", when the standard error is (numerically) zero, when a
``kl`` weight's Hill tail index exceeds 1/2 (an infinite variance is
plausible; :func:`attacks.divergences.tail_index`) unless the witness is
bounded above by a supremum known from its coefficients within log 2 of
the largest weight seen (a ``poly2`` quadratic, ``Adversary.supremum_``: its
weights then have every moment, and the unseen mass's weight is bounded by
the supremum instead of assumed), or when Kish's effective
sample size of the weights is below 30
(:func:`attacks.divergences.effective_sample_size`).  The upper bound is
estimate + Phi^-1(level) se.  p-values invert the lower bound.  No estimate
is unbounded: separable samples, and even samples that each repeat one output
(a deterministic release, CBDP Lemma 2, or a randomized response at high
epsilon), get a finite estimate; with no spread to measure, a ``kl`` or
``renyi`` estimate of a witness carries a caveat (the staged search counts such a
witness's separating event instead, chosen before its confirm sample:
:func:`attacks.held_out.event_attack`).

``kl`` and ``renyi`` from the counts of one event (``event``): the attacks of
the set classes (``threshold``, ``atoms``, ``floatbits``), and a witness
whose values show no spread (:mod:`attacks.staged`), are scored by the binary
divergence of an event S, estimate d(P~(S), Q~(S)) of the half-count smoothed
proportions, bounded by the minimum of d over the Clopper-Pearson box of
P(S) and Q(S) (:func:`attacks.event_divergence.event_divergence_bound`):
exact at any count, finite, at most :meth:`DivergenceEstimate.ceiling` at
its sample sizes, and a lower bound on the divergence of every class that
contains S's indicator (the data processing inequality).

The delta-method intervals are asymptotic; their coverage is checked by
simulation in ``tests/test_estimate.py``, ``tests/test_coupled.py`` and, for
small n, high epsilon and heavy-tailed witnesses, ``tests/test_honest_intervals.py``;
the exact coverage of the ``ipm`` and ``dp`` bounds, by enumeration, in
``tests/test_binomial_ratio.py`` and ``tests/test_paired_ratio.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from scipy.optimize import brentq

from attacks import binomial_ratio, paired_ratio
from attacks.adversary import Adversary, event_objective, witness_objective
from attacks.budget import train_size
from attacks.ceilings import estimate_ceiling
from attacks.classes import parse_function_class
from attacks.divergences import variational_bound
from attacks.estimator import check_random_state
from attacks.gdp_route import threshold_tests
from attacks.event_divergence import event_divergence_bound, event_divergence_p_value
from attacks.vocabulary import DP, IPM, KL, Divergence, divergence_of, parse_divergence
from attacks.witness_moments import WitnessMoments

# Caveat thresholds on the held-out Q terms of kl and renyi (module docstring):
# a tail index above 1/2 allows an infinite variance; fewer effective terms
# than this leave the normal approximation of their mean untrustworthy.
_MAX_TAIL_INDEX = 0.5
_MIN_EFFECTIVE_SIZE = 30
# A standard error at or below this is round-off of terms that are all equal.
_NO_SPREAD = 1e-12
# p-values of kl / renyi are found on [_SMALLEST_P, 1] by inverting the lower bound.
_SMALLEST_P = 1e-15

SCORE_BINS = 40
"""Bins of the held-out score histogram in ``details["scores"]`` (the report's ROC and witness figures)."""


@dataclass(frozen=True)
class DivergenceEstimate:
    """A held-out estimate of a restricted divergence and its uncertainty.

    Attributes
    ----------
    estimate : float
        The held-out objective of the fitted witness (finite: a finite sample never proves infinity).
    n : int
        Samples per distribution used (the smaller of the two sample sizes).
    n_test : int
        Held-out samples per distribution (the smaller of the two).
    function_class, divergence : str
    alpha : float or None
    adversary : Adversary
        The fitted adversary.
    details : dict
        ``train_score``; ``scores``, the held-out scores binned
        (:func:`score_histogram`); for ``ipm``: ``auc``, ``advantage``, ``threshold``;
        for ``dp``: ``threshold``, ``side``; for both the held-out counts of
        the attack set S, ``k_p``, ``n_p``, ``k_q``, ``n_q``; when
        ``coupled``, also ``cells``, the
        held-out pairs' counts [both in S, only P's, only Q's, neither]
        (:func:`attacks.paired_ratio.paired_counts`); for ``kl`` and
        ``renyi``: ``log_unseen_ratio`` (log r of the lower bound, module
        docstring) and ``n_q``, the held-out samples of Q.
    standard_error : float
        Delta-method standard error (``nan`` for ``dp``, whose bounds invert
        a score test; for ``ipm`` descriptive only, its
        bounds being those of a difference of proportions).
        The ``kl`` and ``renyi`` lower bounds add an unseen-mass term to it
        (module docstring).
    delta : float
        The delta of a ``dp`` estimate (0 otherwise).
    coupled : bool
        The samples were coupled pairs (row i of P and of Q drawn from the
        same random numbers): the standard error is that of the paired
        differences and the ``dp`` bounds are the paired score bounds (module
        docstring).
    caveat : str or None
        Why the interval of this estimate cannot be trusted (e.g. a few
        held-out terms carry the objective), or None when it can.  A row with
        a caveat is never reported as a violation: its verdict is at most
        "inconclusive", with the caveat as the reason.
    event : bool
        A ``kl`` or ``renyi`` estimate from the counts of one event (module
        docstring): its bounds are the event bounds of
        :mod:`attacks.event_divergence` on ``k_p``, ``n_p``, ``k_q``, ``n_q``
        of ``details`` (independent samples' counts; coupled pairs' marginal
        counts, which the bounds need no more than).
    """

    estimate: float
    n: int
    n_test: int
    function_class: str
    divergence: str
    alpha: float | None
    adversary: Adversary = field(repr=False)
    details: dict
    standard_error: float = np.nan
    delta: float = 0.0
    coupled: bool = False
    caveat: str | None = None
    event: bool = False

    def to_record(self) -> dict[str, Any]:
        """The estimate as plain JSON numbers, without its fitted adversary.

        Numpy scalars become Python numbers; ``inf`` and ``nan`` stay floats
        (``json`` writes them as ``Infinity`` and ``NaN`` and reads them back).
        Every field but ``adversary``; ``details`` keeps all its entries.
        """
        return {item.name: _plain(getattr(self, item.name)) for item in fields(self) if item.name != "adversary"}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> DivergenceEstimate:
        """The estimate of :meth:`to_record`'s record, with ``adversary=None``.

        Its ``lower_bound``, ``confidence_interval`` and ``p_value`` equal those
        of the estimate the record was made from; a record without ``coupled``
        reads as independent.
        """
        return cls(**record, adversary=None)

    def lower_bound(self, level: float = 0.95) -> float:
        """One-sided lower confidence bound on the estimand at confidence ``level``."""
        return self._bound(_check_level(level, "level"), lower=True)

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided interval (low, high): two one-sided bounds at (1 + confidence)/2."""
        level = (1.0 + _check_level(confidence, "confidence")) / 2
        return self._bound(level, lower=True), self._bound(level, lower=False)

    def p_value(self, claim: float) -> float:
        """One-sided p-value for H0: estimand <= claim.

        Consistent with :meth:`lower_bound`: p_value(c) <= 1 - level exactly
        when lower_bound(level) >= c (both from one normal or score
        statistic; for ``kl`` and ``renyi``, whose bound has an unseen-mass
        term, the level at which the bound equals c, found by root finding
        on [1e-15, 1], so a zero standard error needs no division).
        """
        match divergence_of(self):
            case DP(delta=delta):
                if self.coupled:
                    return paired_ratio.p_value(self.details["cells"], delta, claim)
                return binomial_ratio.p_value(*self._counts(), delta, claim)
            case IPM():
                if self.coupled:
                    return paired_ratio.difference_p_value(self.details["cells"], claim / 2)
                return binomial_ratio.difference_p_value(*self._counts(), claim / 2)
        if self.event:
            return event_divergence_p_value(*self._counts(), divergence_of(self), claim)
        return self._inverted_p_value(claim)  # kl, renyi

    def ceiling(self, level: float = 0.95) -> float:
        """The largest lower bound at ``level`` that the estimate's sample sizes allow: its set's or event's
        counts at complete separation, or its witness's unseen-mass term (:func:`attacks.ceilings.estimate_ceiling`)."""
        return estimate_ceiling(self, _check_level(level, "level"))

    def _inverted_p_value(self, claim: float) -> float:
        """The error rate 1 - level at which :meth:`lower_bound` equals ``claim`` (it grows with the rate)."""
        def excess(log_error: float) -> float:
            return self._bound(1.0 - np.exp(log_error), lower=True) - claim

        low, high = np.log(_SMALLEST_P), np.log1p(-_SMALLEST_P)
        if not excess(high) >= 0:  # also NaN: no level refutes the claim
            return 1.0
        if excess(low) >= 0:
            return 0.0
        return float(np.exp(brentq(excess, low, high, xtol=1e-12)))

    def _bound(self, level: float, lower: bool) -> float:
        match divergence_of(self):
            case IPM():
                if self.coupled:
                    return 2 * paired_ratio.difference_bound(self.details["cells"], level, lower)
                return 2 * binomial_ratio.difference_bound(*self._counts(), level, lower)
            case DP(delta=delta):
                if self.coupled:
                    return paired_ratio.log_ratio_bound(self.details["cells"], delta, level, lower)
                return binomial_ratio.log_ratio_bound(*self._counts(), delta, level, lower)
        if self.event:
            return event_divergence_bound(*self._counts(), divergence_of(self), level, lower)
        return variational_bound(self.estimate, self.standard_error, self.details["log_unseen_ratio"],  # kl, renyi
                                 self.details["n_q"], level, lower)

    def _counts(self) -> tuple[int, int, int, int]:
        """Held-out counts (k_p, n_p, k_q, n_q) of a ``dp``, ``ipm`` or event estimate's attack set."""
        return tuple(int(self.details[key]) for key in ("k_p", "n_p", "k_q", "n_q"))


def estimate_divergence(
    samples_p,
    samples_q,
    function_class: str,
    divergence: str | Divergence,
    *,
    alpha: float | None = None,
    delta: float = 0.0,
    train_fraction: float = 0.5,
    random_state=None,
    class_params: dict | None = None,
    coupled: bool = False,
) -> DivergenceEstimate:
    """Fit an adversary on a train split and estimate D^H(P, Q) on the rest.

    Parameters
    ----------
    samples_p, samples_q : array-like of shape (n, d)
        Outputs of the mechanism on D (law P) and on D' (law Q); 1-D arrays
        are read as d = 1.
    function_class : str
        The attack class (see :mod:`attacks.classes`).
    divergence : {"kl", "renyi", "ipm", "dp"} or Divergence
        Read by :func:`attacks.vocabulary.parse_divergence` with ``alpha`` and ``delta``.
    alpha : float, optional
        The Renyi order, for ``renyi``.
    delta : float, default=0.0
        For ``dp``.
    train_fraction : float, default=0.5
        Fraction of each sample used to fit the witness, in (0, 1).
    random_state : int, RandomState or None
        Seeds the split and the adversary.
    class_params : dict, optional
        Extra :class:`~attacks.adversary.Adversary` parameters
        (``n_components``, ``bandwidth``, ``width``, ``ridge``).
    coupled : bool, default=False
        Row i of ``samples_p`` and row i of ``samples_q`` are a pair drawn from
        the same random numbers (common random numbers), the pairs
        independent of one another; both samples then have the same length.
        Both are split by the same permutation so that held-out rows stay
        paired, the adversary chooses a ``dp`` set by the paired criterion
        (``Adversary(coupled=True)``), and the intervals are the paired ones
        (module docstring).  Independent pairs are coupled pairs too: the
        paired intervals stay valid for them.

    Returns
    -------
    DivergenceEstimate

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> result = estimate_divergence(rng.normal(0, 1, 20000), rng.normal(1, 1, 20000),
    ...                              "linear", "kl", random_state=0)
    >>> low, high = result.confidence_interval()
    >>> bool(low < 0.5 < high)
    True
    """
    kind = parse_divergence(divergence, alpha, delta)
    samples_p, samples_q = _as_samples(samples_p, "samples_p"), _as_samples(samples_q, "samples_q")
    if samples_p.shape[1] != samples_q.shape[1]:
        raise ValueError(
            f"samples_p and samples_q must have the same dimension. Found {samples_p.shape[1]} and "
            f"{samples_q.shape[1]}."
        )
    if not (isinstance(train_fraction, (int, float)) and 0.0 < train_fraction < 1.0):
        raise ValueError(f"train_fraction must be a number in (0, 1). Found {train_fraction!r}.")
    if not isinstance(coupled, (bool, np.bool_)):
        raise ValueError(f"coupled must be True or False. Found {coupled!r}.")
    if coupled and len(samples_p) != len(samples_q):
        raise ValueError(
            "coupled=True needs as many samples of P as of Q (row i of each is one pair). "
            f"Found {len(samples_p)} and {len(samples_q)}."
        )
    random_state = check_random_state(random_state)
    order_p = random_state.permutation(len(samples_p))
    order_q = order_p if coupled else random_state.permutation(len(samples_q))
    train_p, test_p = _split(samples_p, order_p, train_fraction)
    train_q, test_q = _split(samples_q, order_q, train_fraction)
    name = parse_function_class(function_class).name
    adversary = Adversary(
        function_class=name,
        divergence=kind.name,
        alpha=kind.alpha,
        delta=delta,
        dp_eval_size=len(test_q),
        coupled=bool(coupled),
        random_state=random_state.randint(np.iinfo(np.int32).max),
        **(class_params or {}),
    ).fit(*_stack(train_p, train_q))
    w_p, w_q = adversary.witness(test_p), adversary.witness(test_q)
    event = kind.weighted and adversary.function_class_.events
    estimate = event_objective(w_p, w_q, kind) if event else witness_objective(w_p, w_q, kind)
    weights = (weight_evidence(w_p, w_q, kind, None, coupled, adversary.supremum_) if kind.weighted and not event
               else {})
    standard_error = (
        np.nan if isinstance(kind, DP) or event
        else weights.get("standard_error", _difference_error(w_p, w_q, coupled))
    )
    scores_p, scores_q = held_out_scores(adversary, w_p, w_q, test_p, test_q)
    details = {
        "train_score": adversary.score(*_stack(train_p, train_q)),
        "scores": score_histogram(scores_p, scores_q, adversary.threshold_, adversary.side_, independent=not coupled),
    }
    details.update(weights.get("details", {}))
    if isinstance(kind, IPM):
        g = np.r_[scores_p, scores_q]
        labels = np.r_[np.ones(len(test_p)), np.zeros(len(test_q))]
        from sklearn.metrics import roc_auc_score  # ipm only: not on an audit's import

        details.update(auc=float(roc_auc_score(labels, g)), advantage=estimate / 2, threshold=adversary.threshold_)
    if isinstance(kind, DP):
        details.update(threshold=adversary.threshold_, side=adversary.side_)
    if not kind.weighted or event:
        details.update(_set_counts(w_p > 0, w_q > 0, coupled))
    return DivergenceEstimate(
        estimate=float(estimate),
        n=min(len(samples_p), len(samples_q)),
        n_test=min(len(test_p), len(test_q)),
        function_class=name,
        divergence=kind.name,
        alpha=kind.alpha,
        adversary=adversary,
        details=details,
        standard_error=standard_error,
        delta=float(delta),
        coupled=bool(coupled),
        caveat=weights.get("caveat"),
        event=bool(event),
    )


def score_histogram(
    scores_p: np.ndarray, scores_q: np.ndarray, threshold: float | None = None, side: int | None = None,
    bins: int = SCORE_BINS, independent: bool = True,
) -> dict:
    """Held-out scores of P and Q binned on shared edges: enough for a ROC curve and a witness histogram.

    Parameters
    ----------
    scores_p, scores_q : arrays of shape (n_p,), (n_q,)
        The held-out scores (:func:`held_out_scores`): large on P.
    threshold, side : optional
        The attack set S = {side (g - t) > 0} of ``ipm`` and ``dp``; stored as
        the threshold ``side * t`` of the oriented score.
    bins : int
        At most this many bins: scores with at most ``bins`` distinct values
        get one bin each (edges halfway between them), others bins between
        quantiles of the pooled scores.
    independent : bool
        Whether the scores of P and Q are independent (not coupled): only then
        are the Gaussian-DP route's threshold tests kept.

    Returns
    -------
    dict
        ``edges`` (list of floats), ``p`` and ``q`` (counts per bin, lists of
        ints; a score on an inner edge counts in the bin above it, the last
        bin is closed), ``threshold`` (float or None) and, for independent
        scores, ``gdp_tests`` (:func:`attacks.gdp_route.threshold_tests`).
    """
    pooled = np.concatenate([scores_p, scores_q])
    pooled = pooled[np.isfinite(pooled)] if np.isfinite(pooled).any() else np.zeros(1)
    values = np.unique(pooled)
    if values.size <= bins:
        half_gap = np.diff(values).min() / 2 if values.size > 1 else 0.5
        half_gap = max(half_gap, 1e-6 * np.abs(values).max())  # an outer edge differs from its value at any magnitude
        edges = np.r_[values[0] - half_gap, (values[1:] + values[:-1]) / 2, values[-1] + half_gap]
    else:
        edges = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, bins + 1)))
    return {
        "edges": edges.tolist(),
        "p": np.histogram(np.clip(scores_p, edges[0], edges[-1]), edges)[0].tolist(),
        "q": np.histogram(np.clip(scores_q, edges[0], edges[-1]), edges)[0].tolist(),
        "threshold": None if threshold is None else float(side * threshold),
    } | ({"gdp_tests": threshold_tests(scores_p, scores_q)} if independent and len(scores_p) and len(scores_q) else {})


def held_out_scores(adversary: Adversary, w_p, w_q, test_p, test_q) -> tuple[np.ndarray, np.ndarray]:
    """The real-valued score behind the witness, oriented to be large on P: g for kl and renyi, side g else."""
    if adversary.side_ is None:
        return w_p, w_q
    return adversary.side_ * adversary.discriminant(test_p), adversary.side_ * adversary.discriminant(test_q)


def weight_evidence(w_p: np.ndarray, w_q: np.ndarray, divergence: str | Divergence, alpha: float | None,
                    coupled: bool, log_weight_bound: float = np.inf) -> dict[str, Any]:
    """What held-out witness values fix of a ``kl`` or ``renyi`` estimate beyond its objective.

    :func:`moments_evidence` of their :class:`~attacks.witness_moments.WitnessMoments`;
    used by :func:`estimate_divergence` and the staged search's screen stage.
    """
    return moments_evidence(WitnessMoments.from_values(w_p, w_q, divergence, alpha,
                                                       log_weight_bound=log_weight_bound), coupled)


def moments_evidence(moments: WitnessMoments, coupled: bool) -> dict[str, Any]:
    """What a witness's summary fixes of a ``kl`` or ``renyi`` estimate beyond its objective.

    ``standard_error`` (delta method, independent or paired), ``caveat`` (why
    the interval cannot be trusted, or None) and ``details``
    (``log_unseen_ratio``, ``n_q``: the unseen-mass term of
    :func:`attacks.divergences.variational_bound`); the formulas are those of
    the module docstring, computed from power sums
    (:mod:`attacks.witness_moments`), so the staged search's check and confirm
    stages add up summaries of blocks instead of keeping the values.
    """
    standard_error = moments.standard_error(coupled)
    return dict(
        standard_error=standard_error,
        caveat=_caveat(moments, standard_error),
        details=dict(log_unseen_ratio=moments.log_unseen_ratio(), n_q=moments.n_q),
    )


def _caveat(moments: WitnessMoments, standard_error: float) -> str | None:
    """Why the delta-method interval of a ``kl`` or ``renyi`` estimate cannot be trusted, or None (module docstring).

    Reads the held-out Q terms of the objective, the weights exp(h) (``kl``)
    or |g|^beta (``renyi``): a zero or non-finite standard error, a Hill
    tail index above 1/2 (the variance may be infinite), or a Kish effective
    sample size below 30 (a few samples carry the mean).
    """
    divergence = divergence_of(moments)
    if not standard_error > _NO_SPREAD:  # also NaN
        return (f"the standard error is {standard_error:.3g}: the held-out terms show no spread, so the data give "
                "no measure of uncertainty")
    index = moments.tail_index()
    if isinstance(divergence, KL) and index > _MAX_TAIL_INDEX and not moments.weights_bounded():
        return (f"heavy-tailed witness: the held-out weights {divergence.weights} of Q have tail index {index:.2f} "
                f"> {_MAX_TAIL_INDEX} (their variance may be infinite), so the interval may be too narrow")
    size = moments.effective_sample_size()
    if size < _MIN_EFFECTIVE_SIZE:
        return (f"a few held-out samples carry the objective: the weights {divergence.weights} of Q have an "
                f"effective sample size of {size:.1f} < {_MIN_EFFECTIVE_SIZE}, so the interval may be too narrow")
    return None


def _difference_error(w_p: np.ndarray, w_q: np.ndarray, coupled: bool) -> float:
    """Standard error of mean(w_P) - mean(w_Q) (``ipm``: descriptive only), independent or paired."""
    if coupled:
        return float(np.sqrt(np.var(w_p - w_q) / w_p.size))
    return float(np.sqrt(np.var(w_p) / w_p.size + np.var(w_q) / w_q.size))


def _set_counts(in_p: np.ndarray, in_q: np.ndarray, coupled: bool) -> dict:
    """Held-out counts of the attack set S: ``k_p`` of ``n_p`` outputs of P and ``k_q`` of ``n_q`` of Q in S,
    and when ``coupled`` the pairs' ``cells`` (:func:`attacks.paired_ratio.paired_counts`)."""
    counts = dict(k_p=int(in_p.sum()), n_p=in_p.size, k_q=int(in_q.sum()), n_q=in_q.size)
    if coupled:
        counts["cells"] = [int(count) for count in paired_ratio.paired_counts(in_p, in_q)]
    return counts


def _as_samples(samples, name: str) -> np.ndarray:
    samples = np.asarray(samples, dtype=float)
    if samples.ndim == 1:
        samples = samples[:, None]
    if samples.ndim != 2 or samples.shape[0] < 2:
        raise ValueError(f"{name} must be an array of shape (n, d) with n >= 2. Found shape {samples.shape}.")
    if not np.all(np.isfinite(samples)):
        raise ValueError(f"{name} must be finite. Found {int(np.sum(~np.isfinite(samples)))} NaN or inf values.")
    return samples


def _split(samples: np.ndarray, order: np.ndarray, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Train and held-out rows of ``samples`` taken in the random ``order``."""
    n_train = train_size(len(samples), train_fraction)
    return samples[order[:n_train]], samples[order[n_train:]]


def _stack(samples_p: np.ndarray, samples_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([samples_p, samples_q]), np.r_[np.zeros(len(samples_p)), np.ones(len(samples_q))]


def _check_level(level: float, name: str) -> float:
    if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1). Found {level!r}.")
    return float(level)


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars, also inside dicts, made Python numbers (for JSON)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.item() if isinstance(value, np.generic) else value
