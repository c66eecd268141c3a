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

import numpy as np

from attacks.betting import mean_lower_bound
from attacks.classes import All, FunctionClass, Trees, parse_function_class
from attacks.divergences import conjugate_exponent
from attacks.vocabulary import KL, Divergence, parse_divergence

BETTING = "betting CS"
"""The ``interval`` label of a bound of this module."""


def training_range(train_p, train_q) -> tuple[float, float]:
    """[lo, hi]: the smallest and largest witness values on the training outputs of P and Q (fixed before the
    confirm sample; a witness constant on them gives a range of width 0, which the bounds refuse)."""
    values = np.concatenate([np.asarray(train_p, dtype=float).ravel(), np.asarray(train_q, dtype=float).ravel()])
    if not values.size or not np.all(np.isfinite(values)):
        raise ValueError("the training witness values must be finite and not empty; fit the witness first.")
    return float(values.min()), float(values.max())


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
    kind = parse_divergence(divergence, alpha)
    lo, hi = (float(end) for end in value_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"value_range must be finite with lo < hi. Found {value_range!r}; take it from the "
                         "training split (training_range).")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1). Found {level!r}.")
    error = (1.0 - level) / 2
    f_p = np.clip(np.asarray(w_p, dtype=float).ravel(), lo, hi)
    f_q = np.clip(np.asarray(w_q, dtype=float).ravel(), lo, hi)
    if isinstance(kind, KL):
        mean_p = lo + (hi - lo) * mean_lower_bound((f_p - lo) / (hi - lo), error)
        # e^f / e^hi in [e^(lo - hi), 1]: the upper bound of its mean, in logs
        floor = np.exp(lo - hi)
        upper = 1.0 - mean_lower_bound((1.0 - np.exp(f_q - hi)) / (1.0 - floor), error)
        return max(0.0, float(mean_p - hi - np.log(floor + (1.0 - floor) * upper)))
    beta = conjugate_exponent(kind.alpha)
    mean_p = lo + (hi - lo) * mean_lower_bound((f_p - lo) / (hi - lo), error)
    if mean_p <= 0.0:
        return 0.0
    top = max(abs(lo), abs(hi)) ** beta
    bottom = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi)) ** beta
    upper = 1.0 - mean_lower_bound((top - np.abs(f_q) ** beta) / (top - bottom), error)
    return max(0.0, float(beta * np.log(mean_p) - np.log(bottom + (top - bottom) * upper)))


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
