"""Mergeable sufficient statistics of a ``kl`` or ``renyi`` witness's held-out values.

The evidence of a fixed witness (:mod:`attacks.estimate`: the objective, its
delta-method standard error, the tail-index and effective-size caveats and
the unseen-mass ratio) is a function of a few power sums, maxima and the
largest log weights of Q.  :class:`WitnessMoments` keeps exactly those, so
that samples can be summarised block by block and the summaries added up:
the evidence of the sum equals that of the concatenated values up to
floating-point rounding, and a summary's size does not grow with n.

Notation (docs/theory.md sections 2 and 4): a is the witness on P (h for
``kl``, g for ``renyi``); l = log w the log weight of a witness value
(:func:`attacks.adversary.witness_log_weights`: h, or beta log|g| with
beta = alpha / (alpha - 1)), M the largest l of Q's sample and
v = exp(l - M) in (0, 1] its weights shifted so that they cannot overflow.

* objective: mean a - log mean exp l_Q (Donsker-Varadhan, CBDP appendix
  Lemma 1) or beta log|mean a| - log mean exp l_Q (scale-optimised Renyi),
  log mean exp l_Q = M + log mean v;
* delta method (:mod:`attacks.estimate` module docstring): influence terms
  infl_P = k a (k = 1 for ``kl``, beta / mean a for ``renyi``) and
  infl_Q = v / mean v, so var(infl_P) = k^2 var(a),
  var(infl_Q) = var(v) / mean(v)^2 and, over coupled pairs,
  var(infl_P - infl_Q), the variance of D = k a - v / mean v;
* Kish's effective sample size (sum v)^2 / sum v^2, with
  sum v^2 = sum (v - mean v)^2 + n mean(v)^2;
* Hill's tail index over the ``tail_count(n_q)`` largest l_Q
  (:func:`attacks.divergences.tail_index`) and the unseen-mass ratio
  max(l_P, l_Q) - log mean exp l_Q (:func:`attacks.divergences.log_unseen_ratio`).

Means and centred sums of squares and products are merged by Chan, Golub and
LeVeque's pairwise update (1979), which keeps the accuracy of a two-pass
variance.  D's normalisers k and mean v are each block's own; on adding, each
block's sum of squares of D is moved to the merged normalisers, D' = D +
da a - db v with small da, db (the difference of a block's means from the
merged ones), so that it keeps the accuracy of the paired differences even
where var(D) is a tiny fraction of var(infl_P) (a witness that moves alike on
both outputs of a pair), which var(infl_P) - 2 cov + var(infl_Q) would lose
to cancellation.  a's values are divided by a power of two at least their largest
magnitude (exact) and v's are rescaled when a larger M arrives, so witnesses
of any size (h ~ 700, g ~ 1e200 with beta = 11) neither overflow nor
underflow where the array computation does not.  Blocks whose values are all
equal give a centred sum of exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from attacks.adversary import witness_log_weights
from attacks.divergences import conjugate_exponent, tail_count, tail_index
from attacks.vocabulary import KL, WEIGHTED, Divergence, Renyi, divergence_of, parse_divergence

_NO_SPREAD = 1e-12
"""Relative spread of a side's values at or below which :meth:`WitnessMoments.separating_event` reads them as one value."""



@dataclass(frozen=True, eq=False)
class WitnessMoments:
    """Power sums, maxima and the largest log weights of Q of a witness's values on samples of P and Q.

    Build one per block with :meth:`from_values` and add them (``+``) in a
    fixed order; the sum of blocks gives the evidence of the concatenated
    values up to rounding.  Size: eleven numbers plus ``top_q``, the ``tail``
    largest log weights of Q, tail = ``tail_count(n_q) + 1`` <= 3 sqrt(n_q) + 1
    floats (21 000 at n_q = 5e7): nothing else grows with n.

    Attributes
    ----------
    divergence : {"kl", "renyi"}
    alpha : float or None
        The Renyi order (``renyi``).
    n_p : int
        Values on P.
    scale_p : float
        A power of two at least the largest |a| on P (1 when all are 0).
    mean_p, m2_p : float
        Mean and centred sum of squares of a / scale_p.
    log_max_p : float
        The largest log weight on P.
    n_q : int
        Values on Q.
    log_max_q : float
        M, the largest log weight on Q.
    mean_q, m2_q : float
        Mean and centred sum of squares of v = exp(l_Q - M).
    co_moment, m2_pairs : float or None
        Over row-aligned pairs: the centred sum of products of a / scale_p
        and v, and the centred sum of squares of D = gain a / scale_p - v /
        mean_q (:meth:`gain`); None when some block had different numbers
        of values on P and Q.
    top_q : ndarray
        The ``tail`` largest log weights of Q (in no particular order).
    tail : int
        How many largest log weights are kept.
    log_weight_bound : float
        An upper bound on every log weight under any law, known from the
        witness's coefficients before the data (``kl``: sup h of a ``poly2``
        witness bounded above, :func:`attacks.bounded_witness.quadratic_supremum`);
        inf when none is known.
    """

    divergence: str
    alpha: float | None
    n_p: int
    scale_p: float
    mean_p: float
    m2_p: float
    log_max_p: float
    n_q: int
    log_max_q: float
    mean_q: float
    m2_q: float
    co_moment: float | None
    m2_pairs: float | None
    top_q: np.ndarray
    tail: int
    log_weight_bound: float = np.inf

    @classmethod
    def from_values(cls, w_p: ArrayLike, w_q: ArrayLike, divergence: str, alpha: float | None = None,
                    tail: int | None = None, log_weight_bound: float = np.inf) -> WitnessMoments:
        """The summary of witness values on P and on Q (:meth:`attacks.adversary.Adversary.witness`).

        Parameters
        ----------
        w_p, w_q : arrays of shape (n_p,), (n_q,)
            Non-empty.  When n_p == n_q, row i of both is taken as a pair
            (``co_moment`` and ``m2_pairs``, for coupled samples).
        divergence : {"kl", "renyi"}
        alpha : float, optional
            The Renyi order, for ``renyi``.
        tail : int, optional
            Largest log weights of Q to keep: ``tail_count(n) + 1`` for the
            n_q of the final sum (:meth:`tail_index` refuses fewer); default
            that of this sample's n_q.
        """
        kind = parse_divergence(divergence, alpha)
        if not kind.weighted:
            raise ValueError(f"divergence must be one of {WEIGHTED} (a witness with weights). Found {kind.name!r}.")
        divergence, alpha = kind.name, kind.alpha
        a = np.asarray(w_p, dtype=float).ravel()
        log_q = witness_log_weights(np.asarray(w_q, dtype=float).ravel(), divergence, alpha)
        if a.size == 0 or log_q.size == 0:
            raise ValueError(f"witness values on both samples are needed. Found {a.size} on P and {log_q.size} on Q.")
        tail = tail_count(log_q.size) + 1 if tail is None else int(tail)
        scale_p = _power_of_two_above(np.max(np.abs(a)))
        deviation_p, mean_p = _centred(a / scale_p)
        log_max_q = float(np.max(log_q))
        deviation_q, mean_q = _centred(np.exp(log_q - log_max_q))
        co_moment = m2_pairs = None
        if a.size == log_q.size:
            co_moment = float(deviation_p @ deviation_q)
            deviation_d = _pair_gain(kind, scale_p, mean_p) * deviation_p - deviation_q / mean_q
            m2_pairs = float(deviation_d @ deviation_d)
        return cls(divergence, alpha, a.size, scale_p, mean_p, float(deviation_p @ deviation_p),
                   float(np.max(witness_log_weights(a, kind))), log_q.size, log_max_q, mean_q,
                   float(deviation_q @ deviation_q), co_moment, m2_pairs, _largest(log_q, tail), tail,
                   float(log_weight_bound))

    def __add__(self, other: WitnessMoments) -> WitnessMoments:
        """The summary of both samples (self's values first; Chan, Golub and LeVeque's pairwise update)."""
        if (other.divergence, other.alpha) != (self.divergence, self.alpha):
            raise ValueError(f"other must summarise the same divergence and alpha {(self.divergence, self.alpha)}. "
                             f"Found {(other.divergence, other.alpha)}.")
        scale_p = max(self.scale_p, other.scale_p)
        log_max_q = max(self.log_max_q, other.log_max_q)
        parts = [_rescaled(part, scale_p, log_max_q) for part in (self, other)]
        (mean_p, m2_p, n_p, step_p), (mean_q, m2_q, n_q, step_q) = (
            _merged(parts[0][i], parts[1][i]) for i in (0, 1))
        co_moment = m2_pairs = None
        if self.co_moment is not None and other.co_moment is not None:
            weight = self.n_p * other.n_p / n_p
            co_moment = parts[0][2] + parts[1][2] + step_p * step_q * weight
            gain = _pair_gain(divergence_of(self), scale_p, mean_p)
            m2_pairs = sum(_rebased_pairs(part, gain * part.scale_p / scale_p,
                                          float(np.exp(part.log_max_q - log_max_q)) / mean_q) for part in (self, other))
            m2_pairs += (gain * step_p - step_q / mean_q) ** 2 * weight
        tail = max(self.tail, other.tail)
        return WitnessMoments(self.divergence, self.alpha, n_p, scale_p, mean_p, m2_p,
                              max(self.log_max_p, other.log_max_p), n_q, log_max_q, mean_q, m2_q, co_moment,
                              m2_pairs, _largest(np.concatenate([self.top_q, other.top_q]), tail), tail,
                              max(self.log_weight_bound, other.log_weight_bound))

    @property
    def beta(self) -> float:
        """The conjugate exponent alpha / (alpha - 1) of ``renyi`` (its weights |g|^beta)."""
        return conjugate_exponent(self.alpha)

    def log_mean_weight(self) -> float:
        """log mean exp(l_Q) = M + log mean v: log E_Q of the weights on Q's sample."""
        return float(self.log_max_q + np.log(self.mean_q))

    def objective(self) -> float:
        """The held-out objective (:func:`attacks.divergences.donsker_varadhan`,
        :func:`attacks.divergences.renyi_scale_optimized`): -inf when ``renyi``'s mean g on P is 0, inf when its g
        is 0 on all of Q."""
        kind = divergence_of(self)
        if isinstance(kind, KL):
            return float(self.scale_p * self.mean_p - self.log_mean_weight())
        if self.mean_p == 0.0:
            return -np.inf
        if self.log_max_q == witness_log_weights(0.0, kind):
            return np.inf
        return float(self.beta * (np.log(self.scale_p) + np.log(abs(self.mean_p))) - self.log_mean_weight())

    def standard_error(self, coupled: bool) -> float:
        """Delta-method standard error of :meth:`objective` (module docstring; :mod:`attacks.estimate`).

        Independent samples: sqrt(var(infl_P) / n_P + var(infl_Q) / n_Q);
        ``coupled`` (row-aligned pairs): sqrt(var(infl_P - infl_Q) / n), from
        the centred sum of squares of D (module docstring).  Population
        variances (divided by n), as :func:`numpy.var`; NaN when ``renyi``'s
        mean g on P is 0 (its influence terms are not finite).
        """
        kind = divergence_of(self)
        gain = _pair_gain(kind, self.scale_p, self.mean_p)
        if isinstance(kind, Renyi) and self.mean_p == 0.0:
            return np.nan
        if coupled:
            if self.m2_pairs is None:
                raise ValueError("coupled=True needs row-aligned pairs: every block summarised as many values on "
                                 f"P as on Q. Found n_p={self.n_p}, n_q={self.n_q} with unpaired blocks; summarise "
                                 "coupled draws only.")
            return float(np.sqrt(self.m2_pairs / self.n_p / self.n_p))
        var_p = gain**2 * self.m2_p / self.n_p
        var_q = self.m2_q / self.n_q / self.mean_q**2
        return float(np.sqrt(var_p / self.n_p + var_q / self.n_q))

    def tail_index(self) -> float:
        """Hill's tail index of Q's weights from the kept largest log weights
        (:func:`attacks.divergences.tail_index` with n = n_q: exact)."""
        needed = min(tail_count(self.n_q), self.n_q - 1) + 1
        if self.top_q.size < needed:
            raise ValueError(f"the tail index of {self.n_q} weights needs their {needed} largest; this summary kept "
                             f"{self.top_q.size}. Pass tail=tail_count(n_q) + 1 of the final n_q to from_values.")
        return tail_index(self.top_q, n=self.n_q)

    def effective_sample_size(self) -> float:
        """Kish's (sum v)^2 / sum v^2 of Q's weights (:func:`attacks.divergences.effective_sample_size`)."""
        return float(self.n_q * self.mean_q**2 / (self.m2_q / self.n_q + self.mean_q**2))

    def separating_event(self) -> tuple[float, int] | None:
        """(t, s) of the set {s (w - t) > 0} of witness values w that holds every value on P and none on Q, when
        the values show no spread (one value a on P, log weights of one value on Q: ``kl``'s h_Q, ``renyi``'s
        |g_Q|, each to a relative 1e-12) and the set exists (``renyi``: |a| > |g_Q|); else None.

        A witness h of a class closed under affine maps that takes two values is a h' + b of that set's indicator
        1_S, so the set's binary divergence bounds the class's divergence (:mod:`attacks.event_divergence`).
        """
        spread_p = self.m2_p / self.n_p
        spread_q = self.m2_q / self.n_q / self.mean_q**2
        if not (spread_p <= _NO_SPREAD**2 * self.mean_p**2 and spread_q <= _NO_SPREAD**2):
            return None
        on_p = self.scale_p * self.mean_p
        on_q = self.log_max_q if isinstance(divergence_of(self), KL) else float(np.exp(self.log_max_q / self.beta))
        if isinstance(divergence_of(self), KL):
            return ((on_p + on_q) / 2, 1 if on_p > on_q else -1) if on_p != on_q else None
        side = 1 if on_p > 0 else -1
        return (side * (abs(on_p) + on_q) / 2, side) if abs(on_p) > on_q else None

    def log_unseen_ratio(self) -> float:
        """log r = the largest log weight on P or Q less log mean exp(l_Q)
        (:func:`attacks.divergences.log_unseen_ratio`), or :attr:`log_weight_bound` less it where the weights are
        bounded (:meth:`weights_bounded`): then the weight of Q's unseen mass is bounded, not assumed.  A bound far
        above the weights seen (a quadratic witness nearly linear, whose supremum lies far outside the data) is not
        used: it would charge the unseen mass a weight no output came near."""
        seen = max(self.log_max_p, self.log_max_q)
        return float((max(seen, self.log_weight_bound) if self.weights_bounded() else seen) - self.log_mean_weight())

    def weights_bounded(self) -> bool:
        """Whether :attr:`log_weight_bound` is within log 2 of the largest log weight seen: the weights are at most
        twice the largest, so they have every moment under any law (no tail-index caveat is needed)."""
        return bool(self.log_weight_bound <= max(self.log_max_p, self.log_max_q) + np.log(2.0))


def _power_of_two_above(value: float) -> float:
    """The smallest power of two >= value (1 for 0): dividing by it is exact."""
    if not value > 0:
        return 1.0
    mantissa, exponent = np.frexp(value)
    return float(np.ldexp(1.0, int(exponent) - (mantissa == 0.5)))


def _centred(values: np.ndarray) -> tuple[np.ndarray, float]:
    """(deviations from the mean, mean); shifted by the first value first, so equal values deviate by exactly 0."""
    shifted = values - values[0]
    offset = float(np.mean(shifted))
    return shifted - offset, float(values[0] + offset)


def _pair_gain(divergence: Divergence, scale_p: float, mean_p: float) -> float:
    """k with infl_P = k a / scale_p: scale_p (``kl``) or beta / mean(a / scale_p) (``renyi``; 0 when that mean
    is 0, a normaliser that keeps D finite: such a summary's standard error is NaN)."""
    if isinstance(divergence, KL):
        return scale_p
    return conjugate_exponent(divergence.alpha) / mean_p if mean_p != 0.0 else 0.0


def _rebased_pairs(part: WitnessMoments, gain: float, inverse_mean: float) -> float:
    """``part``'s centred sum of squares of D' = gain a / part.scale_p - inverse_mean v (normalisers of a sum it
    enters, in part's units) from that of its own D = k a / scale_p - v / mean_q: D' = D + da a - db v with
    da = gain - k, db = inverse_mean - 1 / mean_q, so
    m2(D') = m2(D) + 2 da c(D, a) - 2 db c(D, v) + da^2 m2(a) - 2 da db c(a, v) + db^2 m2(v),
    c(D, a) = k m2(a) - c(a, v) / mean_q, c(D, v) = k c(a, v) - m2(v) / mean_q (centred sums)."""
    k = _pair_gain(divergence_of(part), part.scale_p, part.mean_p)
    da, db = gain - k, inverse_mean - 1.0 / part.mean_q
    with_a = k * part.m2_p - part.co_moment / part.mean_q
    with_v = k * part.co_moment - part.m2_q / part.mean_q
    return (part.m2_pairs + 2 * da * with_a - 2 * db * with_v + da**2 * part.m2_p - 2 * da * db * part.co_moment
            + db**2 * part.m2_q)


def _rescaled(part: WitnessMoments, scale_p: float, log_max_q: float) -> tuple[tuple, tuple, float]:
    """((mean_p, m2_p, n_p), (mean_q, m2_q, n_q), co_moment) of ``part`` on the common scale of a and shift of l."""
    f_p, f_q = part.scale_p / scale_p, float(np.exp(part.log_max_q - log_max_q))
    co_moment = part.co_moment * f_p * f_q if part.co_moment is not None else None
    return (part.mean_p * f_p, part.m2_p * f_p**2, part.n_p), (part.mean_q * f_q, part.m2_q * f_q**2, part.n_q), co_moment


def _merged(first: tuple, second: tuple) -> tuple[float, float, int, float]:
    """(mean, centred sum of squares, n, difference of the means) of two samples' (mean, m2, n): Chan et al. 1979."""
    (mean_a, m2_a, n_a), (mean_b, m2_b, n_b) = first, second
    n = n_a + n_b
    step = mean_b - mean_a
    return mean_a + step * n_b / n, m2_a + m2_b + step**2 * n_a * n_b / n, n, step


def _largest(values: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` largest of ``values`` (all of them when there are no more)."""
    if values.size <= count:
        return values.copy()
    return np.partition(values, values.size - count)[values.size - count:]
