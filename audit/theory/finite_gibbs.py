"""A Gibbs learner over a finite hypothesis set and a finite record domain: every OAKL quantity exactly.

The learner samples h in {h_1, ..., h_K} with probability proportional to
pi(h) exp(-gamma sum_i l(z_i, h)) (OAKL Thm 4 with Remark 2's temperature;
the exponential mechanism of a bounded loss), records z from a finite domain
{v_1, ..., v_R} with probabilities D.  The output law depends on a dataset
only through its counts c in N^R (sum c = n), whose law under D^n is
multinomial, so every expectation over datasets is a finite sum over the
C(n + R - 1, R - 1) count vectors: no Monte Carlo.  This makes it the
reference on which OAKL's relations are checked with exact numbers
(docs/theory.md section 8): Thm 4 (on-average KL = gamma x generalization
gap), Lemma 14 with Lemma 6 (mutual information <= n epsilon), Lemma 11
(epsilon <= max-information / n) and Cor. 15.

Every function is pure.  ``loss`` is the R x K table l(v_r, h_k).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from audit.config.validation import check_positive, positive_int


def count_vectors(n: int, values: int) -> np.ndarray:
    """Every count vector of n records over ``values`` record values, shape (C(n + R - 1, R - 1), R)."""
    n, values = positive_int("n", n), positive_int("values", values)
    rows = [np.diff([-1, *bars, n + values - 1]) - 1 for bars in itertools.combinations(range(n + values - 1), values - 1)]
    return np.asarray(rows, dtype=int).reshape(-1, values)


def posterior(loss: ArrayLike, counts: ArrayLike, temperature: float, prior: ArrayLike | None = None) -> np.ndarray:
    """p(h_k | Z) for datasets of ``counts`` (shape (..., R)): softmax_k(log pi_k - gamma sum_r c_r l(v_r, h_k))."""
    table = np.asarray(loss, dtype=float)
    log_prior = 0.0 if prior is None else np.log(np.asarray(prior, dtype=float))
    logits = log_prior - check_positive(temperature, "temperature") * np.asarray(counts, dtype=float) @ table
    return special.softmax(logits, axis=-1)


@dataclass(frozen=True)
class FiniteGibbsValues:
    """Exact OAKL quantities of one finite Gibbs learner (:func:`finite_gibbs_values`).

    Attributes
    ----------
    on_average_kl : float
        epsilon of OAKL Def. 2 (first record replaced by a fresh one).
    generalization_gap : float
        E R(h) - E R_hat(h, Z) in the loss l (OAKL Def. 3, signed).
    mutual_information : float
        I(M(Z); Z) in nats (OAKL Def. 13).
    max_information : float
        Pure max-information sup_{Z, Z'} D_inf(M(Z) || M(Z')) in nats (OAKL Def. 10 at beta = 0).
    conditional_entropy : float
        H(M(Z) | Z) (OAKL Def. 8).
    subgaussian_scale : float
        sigma with L(h, Z) - R(h) sigma^2-subgaussian for every h, L the total loss: sqrt(n) (max l - min l) / 2
        (Hoeffding's lemma for a sum of n independent terms in an interval).
    """

    on_average_kl: float
    generalization_gap: float
    mutual_information: float
    max_information: float
    conditional_entropy: float
    subgaussian_scale: float


def finite_gibbs_values(loss: ArrayLike, probabilities: ArrayLike, n: int, temperature: float,
                        prior: ArrayLike | None = None) -> FiniteGibbsValues:
    """Every quantity of :class:`FiniteGibbsValues`, by exact sums over the count vectors of n records.

    Parameters
    ----------
    loss : array (R, K)
        l(v_r, h_k), finite.
    probabilities : array (R,)
        D over the record values, summing to 1.
    n : int
        Records per dataset.
    temperature : float
        gamma > 0.
    prior : array (K,), optional
        pi over the hypotheses (uniform when omitted); strictly positive.

    The work grows with M = C(n + R - 1, R - 1) count vectors: R^2 M K for the on-average KL, M^2 K for the
    max-information (every two datasets): small n and R only (n = 10, R = 3: M = 66).
    """
    table = np.asarray(loss, dtype=float)
    weights = np.asarray(probabilities, dtype=float)
    if table.ndim != 2 or not np.all(np.isfinite(table)):
        raise ValueError(f"loss must be a finite R x K table. Found shape {table.shape}.")
    if weights.shape != (table.shape[0],) or np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"probabilities must be {table.shape[0]} numbers >= 0 summing to 1. Found {weights!r}.")
    counts = count_vectors(n, table.shape[0])
    law = stats.multinomial.pmf(counts, n, weights)
    p = posterior(table, counts, temperature, prior)
    epsilon = 0.0
    for r, r_new in itertools.product(range(table.shape[0]), repeat=2):
        moved = counts.copy()
        moved[:, r] -= 1
        moved[:, r_new] += 1
        valid = moved[:, r] >= 0  # the first record is v_r with probability c_r / n
        q = posterior(table, np.where(valid[:, None], moved, counts), temperature, prior)
        kl = special.rel_entr(p, q).sum(axis=1)
        epsilon += weights[r_new] * np.sum(law * counts[:, r] / n * np.where(valid, kl, 0.0))
    risk = weights @ table
    empirical = counts @ table / n
    marginal = law @ p
    log_p = np.log(p)
    return FiniteGibbsValues(
        on_average_kl=float(epsilon),
        generalization_gap=float(np.sum(law[:, None] * p * (risk - empirical))),
        mutual_information=float(law @ special.rel_entr(p, marginal).sum(axis=1)),
        max_information=float(np.max(log_p[:, None, :] - log_p[None, :, :])),
        conditional_entropy=float(law @ special.entr(p).sum(axis=1)),
        subgaussian_scale=float(np.sqrt(n) * np.ptp(table) / 2.0),
    )
