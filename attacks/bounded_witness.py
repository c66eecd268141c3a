"""``kl`` and ``renyi`` lower bounds of a clipped witness from betting confidence sequences: no normal approximation.

Both objectives are a mean under P and a mean under Q of functions of one
witness (docs/theory.md sections 2 and 4):

* ``kl`` (Donsker-Varadhan, CBDP appendix Lemma 1): KL^H >= E_P[f] - log E_Q[e^f];
* ``renyi`` (scale-optimised, CBDP eq. 3): D_R^H >= beta log E_P[g] - log E_Q[|g|^beta], beta = alpha / (alpha - 1),
  for E_P[g] > 0 and H closed under scaling.

With the witness clipped to a range [lo, hi] fixed before the confirm
sample, f = min(max(h, lo), hi), both means are of bounded values: f in
[lo, hi] and e^f in [e^lo, e^hi]; g in [lo, hi] and |g|^beta in
[m, max(|lo|, |hi|)^beta] (m = 0 when the range holds 0, else
min(|lo|, |hi|)^beta).  Rescaled to [0, 1], each gets a one-sided betting
confidence sequence (Waudby-Smith and Ramdas 2024; :func:`attacks.betting.mean_lower_bound`):
a lower bound L_P on the mean under P and an upper bound U_Q on the mean
under Q, each at error a / 2.  A union bound (valid for coupled pairs too,
each stream being iid on its own) gives, with probability >= 1 - a,

    kl:    L_P - log U_Q,        renyi:  beta log L_P - log U_Q   (0 when L_P <= 0),

and, the divergence being non-negative, the bound is at least 0.  The
sequences are valid at every sample size, so the bound holds in finite
samples (no finite-variance or unseen-mass assumption: the clip makes the
tails of the values irrelevant) and at any stopping time.

Which claims such a bound may face.  The bound is of the divergence
restricted to any class that contains the clipped witness (and, for
``renyi``, its multiples).  The clip of a linear or polynomial witness is
*not* linear or polynomial: for Laplace outputs the clipped linear function
is the log-likelihood ratio itself, whose Donsker-Varadhan value is the
unrestricted KL, above (linear, KL).  So a clipped bound is never used for
a claim of the witness's own class unless that class is closed under
clipping (:func:`clipped_bound_applies`): ``all``, and the trees (a clipped
function constant on a tree's cells is constant on them).  A witness that
is bounded already (its range known from its coefficients before the
confirm sample, e.g. a tree's cell values) loses nothing to the clip and its
bound serves its own class.

The range is chosen on the training split (:func:`training_range`: the
smallest and largest witness values of the training outputs of both laws)
or from a claim known before the data (a pure epsilon-DP mechanism's
log-likelihood ratio lies in [-epsilon, epsilon], the range of the optimal
``kl`` witness), never from the confirm sample.

Reference
---------
I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting", J. R. Stat. Soc. B
86(1):1-27, 2024.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.betting import mean_lower_bound
from attacks.classes import All, FunctionClass, Trees, parse_function_class
from attacks.divergences import conjugate_exponent
from attacks.vocabulary import KL, Divergence, parse_divergence

RANGE_QUANTILES = (0.0, 0.001, 0.01, 0.03, 0.1, 0.2)
"""Quantiles of the training witness values cut off below and above by the candidate clip ranges (:func:`chosen_rescaling`)."""
SLOPES = (1.0, 1.5, 2.0, 3.0, 4.0)
"""Multiples of a ``kl`` witness tried before clipping (:func:`chosen_rescaling`): a flat witness (a linear one
fitted to a Laplace pair) clipped after steepening is nearer the clipped log-likelihood ratio."""
RANGE_PENALTY = 3.0
"""Standard errors charged to a candidate clip range: about the betting bound's width at 1e3 to 1e6 values
(two one-sided sequences at a / 4 each, with their log factor), wider than a normal interval's z = 1.96."""
RANGE_SLACK = float(np.log(80.0))
"""The betting bound's cost, in units of 1 / n, on a rescaled mean near the end of its range: about log(1 / a) / n
at the bets' design error a = 0.0125 (a / 4 at 95 %, :data:`attacks.clipped_witness.DESIGN_LEVEL`), a term the
standard errors miss.  It is what a wide range pays at the pilot rounds' sizes, where Q's rescaled exponential
moment e^(f - hi) is near 0: at 500 confirm outputs it moves that mean by 0.009, more than the whole mean of a range
13 nats wide, and nothing at 1e5."""
BETTING = "betting CS"
"""The ``interval`` label of a bound of this module."""


def training_range(train_p, train_q) -> tuple[float, float]:
    """[lo, hi]: the smallest and largest witness values on the training outputs of P and Q (fixed before the
    confirm sample; a witness constant on them gives a range of width 0, which the bounds refuse)."""
    values = np.concatenate([np.asarray(train_p, dtype=float).ravel(), np.asarray(train_q, dtype=float).ravel()])
    if not values.size or not np.all(np.isfinite(values)):
        raise ValueError("the training witness values must be finite and not empty; fit the witness first.")
    return float(values.min()), float(values.max())


def chosen_rescaling(train_p, train_q, divergence: str | Divergence, n: int, alpha: float | None = None) -> Rescaling:
    """The slope and clip range, chosen on the training split: among the slopes :data:`SLOPES` (``kl``; 1 for
    ``renyi``, whose objective does not change with the witness's scale) and the ranges [quantile a, quantile
    1 - b] of the slope times the training witness values of both laws (a, b in :data:`RANGE_QUANTILES`; a = b = 0
    at slope 1 is :func:`training_range`), the one whose clipped objective on the training split, its means moved
    by :data:`RANGE_SLACK` / n and less :data:`RANGE_PENALTY` delta-method standard errors at n confirm values, is
    largest (:meth:`Rescaling.penalised_objective`).

    A narrower range removes the witness's tails (which cost the Q mean's upper bound most: e^f spans e^(hi - lo))
    and, for a ``kl`` witness flatter than the log-likelihood ratio, can raise the objective itself (the clip of
    a Laplace pair's linear witness is nearer its clipped log-likelihood ratio); any range is valid, as long as it
    is fixed before the confirm sample."""
    values = np.concatenate([np.asarray(train_p, dtype=float).ravel(), np.asarray(train_q, dtype=float).ravel()])
    training_range(train_p, train_q)  # finite and not empty
    kind = parse_divergence(divergence, alpha)
    cuts = np.quantile(values, np.r_[RANGE_QUANTILES, 1.0 - np.array(RANGE_QUANTILES)])
    best, chosen = -np.inf, None
    for slope in SLOPES if isinstance(kind, KL) else (1.0,):
        for low in cuts[:len(RANGE_QUANTILES)]:
            for high in cuts[len(RANGE_QUANTILES):]:
                if not low < high:
                    continue
                scale = Rescaling.of(kind, (slope * low, slope * high), slope=slope)
                with np.errstate(over="ignore", invalid="ignore"):
                    score = scale.penalised_objective(*scale.rescaled(train_p, train_q), n)
                if np.isfinite(score) and (chosen is None or score > best):
                    best, chosen = score, scale
    if chosen is None:
        raise ValueError("no clip range of the training witness values gives a finite objective (all values equal, "
                         "a renyi witness not positive on P, or |g|^beta overflowing); keep the delta method.")
    return chosen


def clipped_bound_applies(claim_class: str | FunctionClass) -> bool:
    """Whether a clipped witness's bound may face a claim of ``claim_class``: the class holds every clipped
    function of its witnesses (``all``, trees; module docstring).  Linear, polynomial, kernel and network
    classes do not: their claims keep the delta-method interval."""
    kind = parse_function_class(claim_class)
    return isinstance(kind, (All, Trees))


def betting_bound(w_p, w_q, divergence: str | Divergence, value_range: tuple[float, float], level: float = 0.95,
                  alpha: float | None = None) -> float:
    """Lower confidence bound at ``level`` on the ``kl`` or ``renyi`` objective of the clipped witness (module
    docstring), valid at every sample size.

    Parameters
    ----------
    w_p, w_q : array-like
        Witness values on the confirm outputs of P and Q, each in drawing order (the bets use the past only).
    divergence : {"kl", "renyi"} or Divergence
    value_range : (lo, hi)
        The clip range, fixed before these values (:func:`training_range`), lo < hi.
    level : float
        Confidence 1 - a; each mean gets error a / 2.
    alpha : float, optional
        The Renyi order, for ``renyi``.
    """
    scale = Rescaling.of(divergence, value_range, alpha)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Found {level!r}.")
    error = (1.0 - level) / 2
    x_p, x_q = scale.rescaled(w_p, w_q)
    return max(0.0, scale.objective(mean_lower_bound(x_p, error), 1.0 - mean_lower_bound(1.0 - x_q, error)))


@dataclass(frozen=True)
class Rescaling:
    """The clip range [lo, hi] of a ``kl`` or ``renyi`` witness times ``slope`` and the maps of its two means to
    [0, 1].

    x_P = (f - lo) / (hi - lo) with f = min(max(slope h, lo), hi) the clipped witness; x_Q = (w - bottom) / (top - bottom) with w its weight
    on Q: e^f (bottom e^lo, top e^hi; kept as e^(f - hi) so that it cannot overflow) or |f|^beta (bottom 0 when
    the range holds 0, else min(|lo|, |hi|)^beta; top max(|lo|, |hi|)^beta).
    """

    divergence: Divergence
    lo: float
    hi: float
    slope: float = 1.0

    @classmethod
    def of(cls, divergence: str | Divergence, value_range: tuple[float, float], alpha: float | None = None,
           slope: float = 1.0) -> Rescaling:
        """The rescaling of ``value_range`` (finite, lo < hi) for the witness times ``slope`` > 0 (both fixed
        before the data)."""
        lo, hi = (float(end) for end in value_range)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise ValueError(f"value_range must be finite with lo < hi. Found {value_range!r}; take it from the "
                             "training split (training_range).")
        if not slope > 0.0:
            raise ValueError(f"slope must be positive. Found {slope!r}.")
        return cls(parse_divergence(divergence, alpha), lo, hi, float(slope))

    def _ends(self) -> tuple[float, float]:
        """(bottom, top) of the weight on Q, e^f's divided by e^hi."""
        if isinstance(self.divergence, KL):
            return float(np.exp(self.lo - self.hi)), 1.0
        beta = conjugate_exponent(self.divergence.alpha)
        top = max(abs(self.lo), abs(self.hi)) ** beta
        return (0.0 if self.lo <= 0.0 <= self.hi else min(abs(self.lo), abs(self.hi)) ** beta), top

    def rescaled(self, w_p, w_q) -> tuple[np.ndarray, np.ndarray]:
        """(x_P, x_Q) in [0, 1] of the witness values on P and on Q."""
        # a NaN witness value is read as lo: f stays a fixed function of the output, clipped into [lo, hi]
        f_p, f_q = (np.clip(np.nan_to_num(self.slope * np.asarray(w, dtype=float).ravel(), nan=self.lo), self.lo,
                            self.hi) for w in (w_p, w_q))
        bottom, top = self._ends()
        weight = (np.exp(f_q - self.hi) if isinstance(self.divergence, KL)
                  else np.abs(f_q) ** conjugate_exponent(self.divergence.alpha))
        return (f_p - self.lo) / (self.hi - self.lo), np.clip((weight - bottom) / (top - bottom), 0.0, 1.0)

    def penalised_objective(self, x_p: np.ndarray, x_q: np.ndarray, n: int) -> float:
        """The objective at the means of rescaled values, each moved by :data:`RANGE_SLACK` / n to its unfavourable
        side (P's down, Q's up), less :data:`RANGE_PENALTY` delta-method standard errors of means of n values (the
        gradient by central differences, at the means themselves)."""
        mean_p, mean_q = float(np.mean(x_p)), float(np.mean(x_q))
        slack = RANGE_SLACK / n
        value = self.objective(max(mean_p - slack, 0.0), min(mean_q + slack, 1.0))
        if not np.isfinite(value):
            return -np.inf
        step = 1e-6
        grad_p = (self.objective(min(mean_p + step, 1.0), mean_q) - self.objective(max(mean_p - step, 0.0), mean_q))
        grad_q = (self.objective(mean_p, min(mean_q + step, 1.0)) - self.objective(mean_p, max(mean_q - step, 0.0)))
        spread = (grad_p / (2 * step)) ** 2 * np.var(x_p) + (grad_q / (2 * step)) ** 2 * np.var(x_q)
        return float(value - RANGE_PENALTY * np.sqrt(spread / n)) if np.isfinite(spread) else -np.inf

    def objective(self, mean_p: float, mean_q: float) -> float:
        """The objective at the rescaled means: E_P f - log E_Q e^f (``kl``) or beta log E_P f - log E_Q |f|^beta
        (``renyi``; -inf where E_P f <= 0), increasing in ``mean_p`` and decreasing in ``mean_q``."""
        bottom, top = self._ends()
        on_p = self.lo + (self.hi - self.lo) * mean_p
        with np.errstate(divide="ignore"):
            log_q = float(np.log(bottom + (top - bottom) * mean_q))
        if isinstance(self.divergence, KL):
            return float(on_p - self.hi - log_q)
        if on_p <= 0.0:
            return -np.inf
        return float(conjugate_exponent(self.divergence.alpha) * np.log(on_p) - log_q)


def quadratic_supremum(g, dim: int) -> float:
    """sup over z in R^dim of a polynomial g of degree <= 2 (a callable on arrays of shape (m, dim)); inf unless
    its quadratic form is negative definite.

    g(z) = z' A z + b' z + c is read off its values at 0, +-e_i and e_i + e_j
    (exact for such polynomials up to round-off): c = g(0),
    b_i = (g(e_i) - g(-e_i)) / 2, A_ij = (g(e_i + e_j) - g(e_i) - g(e_j) + g(0)) / 2; for A negative definite
    the supremum is c - b' A^-1 b / 4, at z = -A^-1 b / 2.  A ``kl`` witness of ``poly2`` that is bounded
    above has weights e^h bounded above, so they have every moment under any law
    (:func:`attacks.adversary._witness_scale` then needs no tail cap).
    """
    eye = np.eye(dim)
    at_zero = float(g(np.zeros((1, dim)))[0])
    plus, minus = g(eye), g(-eye)
    pairs = g((eye[:, None, :] + eye[None, :, :]).reshape(-1, dim)).reshape(dim, dim)
    quadratic = (pairs - plus[:, None] - plus[None, :] + at_zero) / 2
    quadratic = (quadratic + quadratic.T) / 2
    if not np.all(np.linalg.eigvalsh(quadratic) < 0):
        return np.inf
    linear = (plus - minus) / 2
    return float(at_zero - linear @ np.linalg.solve(quadratic, linear) / 4)
