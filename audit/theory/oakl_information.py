"""OAKL sections 3.3 and 4 computed: maximum entropy, max-information and mutual information.

OAKL is Wang, Lei and Fienberg, "On-Average KL-Privacy and its equivalence to
Generalization for Max-Entropy Mechanisms" (2016); docs/theory.md section 8.

* Def. 8 and Thm 9 (maximum entropy): the tempered posterior
  p(h | Z) proportional to pi(h) exp(-gamma sum_i l(z_i, h)) is the
  distribution q that minimises E_q sum_i l(z_i, h) - H(q) / gamma (Thm 9;
  with a prior pi the entropy becomes -KL(q || pi), the paragraph after the
  theorem).  For the Gaussian mean of :mod:`audit.theory.gibbs` the
  objective, its minimum (the free energy) and the conditional entropy are
  closed forms (:func:`gaussian_mean_gibbs_objective`,
  :func:`gaussian_mean_free_energy`, :func:`gaussian_mean_conditional_entropy`).
* Lemma 14 with Lemma 6: for posterior sampling the mutual information
  between the data and the output is at most n times the on-average KL
  (:func:`mutual_information_bound`); the Gaussian mean's is
  1/2 log(1 + n epsilon) exactly (:func:`gaussian_mean_mutual_information`).
* Lemma 11 and Cor. 12: a pure max-information of k bounds the on-average KL
  by k / n and the generalization gap by k / (n gamma)
  (:func:`max_information_bounds`).
* Cor. 15: I / gamma <= |E[L(h, Z) - R(h)]| <= sigma sqrt(2 I) for a
  sigma^2-subgaussian L - R (:func:`corollary15_bounds`).

Every function is pure: numbers in, numbers out.  The finite Gibbs learner of
:mod:`audit.theory.finite_gibbs` computes every one of these quantities
exactly; the tests check the relations on it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from audit.config.validation import check_positive, positive_int
from audit.theory.gibbs import gaussian_mean_on_average_kl, gaussian_mean_posterior


def _precision(n: int, noise_scale: float, prior_scale: float, temperature: float) -> float:
    """lambda = 1/tau^2 + gamma n / s^2: the precision of the Gaussian mean's tempered posterior."""
    _, variance = gaussian_mean_posterior(0.0, n, noise_scale=noise_scale, prior_mean=0.0, prior_scale=prior_scale,
                                          temperature=temperature)
    return 1.0 / variance


def gaussian_mean_conditional_entropy(n: int, *, noise_scale: float = 1.0, prior_scale: float = 1.0,
                                      temperature: float = 1.0) -> float:
    """OAKL Def. 8: H(M(Z) | Z) = -E_Z E_{h ~ M(Z)} log p(h | Z) of the Gaussian mean posterior.

    M(Z) = N(m(Z), 1/lambda) with one variance for every dataset, so the
    conditional entropy is the entropy of one normal: 1/2 log(2 pi e / lambda),
    whatever the data distribution.
    """
    return 0.5 * float(np.log(2.0 * np.pi * np.e / _precision(n, noise_scale, prior_scale, temperature)))


def gaussian_mean_gibbs_objective(
    mean: ArrayLike, variance: ArrayLike, data: ArrayLike, *, noise_scale: float = 1.0, prior_mean: float = 0.0,
    prior_scale: float = 1.0, temperature: float = 1.0,
) -> np.ndarray:
    """OAKL Thm 9's objective at q = N(mean, variance) for one dataset ``data``, loss l(z, h) = (z - h)^2 / (2 s^2).

    E_q sum_i l(z_i, h) - H(q) / gamma - E_q log pi(h) / gamma, pi = N(mu0, tau^2)
    (Thm 9 with the prior of the paragraph after it; a flat prior drops the
    last term): (sum_i (z_i - m)^2 + n v) / (2 s^2) - 1/2 log(2 pi e v) / gamma
    + (1/2 log(2 pi tau^2) + ((m - mu0)^2 + v) / (2 tau^2)) / gamma.  Its value
    is :func:`gaussian_mean_free_energy` plus KL(q || posterior) / gamma, so
    the tempered posterior (:func:`audit.theory.gibbs.gaussian_mean_posterior`)
    is its unique minimiser.
    """
    z = np.asarray(data, dtype=float).ravel()
    s, tau, gamma = (check_positive(x, name) for x, name in
                     ((noise_scale, "noise_scale"), (prior_scale, "prior_scale"), (temperature, "temperature")))
    m, v = np.asarray(mean, dtype=float), np.asarray(variance, dtype=float)
    loss = (np.sum(z * z) - 2.0 * m * np.sum(z) + z.size * m * m + z.size * v) / (2.0 * s * s)
    entropy = 0.5 * np.log(2.0 * np.pi * np.e * v)
    cross_entropy = 0.5 * np.log(2.0 * np.pi * tau * tau) + ((m - prior_mean) ** 2 + v) / (2.0 * tau * tau)
    return loss + (cross_entropy - entropy) / gamma


def gaussian_mean_free_energy(data: ArrayLike, *, noise_scale: float = 1.0, prior_mean: float = 0.0,
                              prior_scale: float = 1.0, temperature: float = 1.0) -> float:
    """The minimum of :func:`gaussian_mean_gibbs_objective`: -(1/gamma) log int pi(h) exp(-gamma sum_i l(z_i, h)) dh.

    Completing the square, with lambda the posterior precision,
    b = mu0 / tau^2 + gamma sum z_i / s^2 and c = mu0^2 / tau^2 + gamma sum z_i^2 / s^2:
    (1/2 log(tau^2 lambda) + (c - b^2 / lambda) / 2) / gamma (OAKL Thm 9's value at its solution).
    """
    z = np.asarray(data, dtype=float).ravel()
    precision = _precision(positive_int("records", z.size), noise_scale, prior_scale, temperature)
    linear = prior_mean / prior_scale**2 + temperature * np.sum(z) / noise_scale**2
    constant = prior_mean**2 / prior_scale**2 + temperature * np.sum(z * z) / noise_scale**2
    return float((0.5 * np.log(prior_scale**2 * precision) + 0.5 * (constant - linear**2 / precision)) / temperature)


def mutual_information_bound(on_average_kl: float, n: int) -> float:
    """OAKL Lemma 14 with Lemma 6: I(M(Z); Z) <= n epsilon for a posterior-sampling mechanism of on-average KL epsilon.

    Lemma 14: I(M(Z); Z) <= E KL(M(Z) || M(Z')) for independent datasets Z, Z'
    (Jensen); Z' is Z with all n records redrawn, which Lemma 6 prices at n
    epsilon for posterior sampling.  The same n epsilon holds for any
    mechanism whose output law does not depend on the order of the records:
    by the chain rule I(h; Z) = sum_i I(h; z_i | z_<i) <= sum_i I(h; z_i | z_-i)
    (the records are independent), and each term is at most the on-average
    KL with record i replaced (convexity of KL), which symmetry makes epsilon.
    It needs epsilon to bound the unrestricted KL: a bound on a restricted
    KL^H bounds the mutual information only where KL^H = KL (e.g. the linear
    class on a Gaussian mean shift).
    """
    if not np.isfinite(on_average_kl) or on_average_kl < 0:
        raise ValueError(f"on_average_kl must be a finite number >= 0. Found {on_average_kl!r}.")
    return positive_int("n", n) * float(on_average_kl)


def gaussian_mean_mutual_information(n: int, data_variance: float, *, noise_scale: float = 1.0,
                                     prior_scale: float = 1.0, temperature: float = 1.0) -> float:
    """OAKL Def. 13 for the Gaussian mean posterior on normal data: I(M(Z); Z) = 1/2 log(1 + n epsilon).

    h = a S + b + N(0, 1/lambda) with S the data sum (a sufficient statistic,
    so I(h; Z) = I(h; S)), a = gamma / (s^2 lambda) and Var S = n sigma_D^2:
    a Gaussian channel, I = 1/2 log(1 + a^2 n sigma_D^2 lambda), and
    a^2 sigma_D^2 lambda is the on-average KL epsilon
    (:func:`audit.theory.gibbs.gaussian_mean_on_average_kl`).  For records
    of variance sigma_D^2 that are not normal it is an upper bound (a normal
    input maximises a Gaussian channel's information at a given variance).
    Always at most :func:`mutual_information_bound`'s n epsilon
    (log(1 + x) <= x).
    """
    epsilon = gaussian_mean_on_average_kl(n, data_variance, noise_scale=noise_scale, prior_scale=prior_scale,
                                          temperature=temperature)
    return 0.5 * float(np.log1p(n * epsilon))


def max_information_bounds(max_information: float, n: int, temperature: float = 1.0) -> tuple[float, float]:
    """OAKL Lemma 11 and Cor. 12: a posterior-sampling mechanism of pure max-information k over n records is
    (k / n)-on-average KL private for every data distribution, so its generalization gap in the loss l is
    at most k / (n gamma) (Thm 4 with Remark 2's temperature gamma).  Returns (k / n, k / (n gamma)).

    Pure max-information (OAKL Def. 10 at beta = 0) is
    sup_{Z, Z'} D_inf(M(Z) || M(Z')) over any two datasets of n records
    (Dwork et al. 2015, Lemma 12, as OAKL's proof uses it).
    """
    if not max_information >= 0:
        raise ValueError(f"max_information must be a number >= 0. Found {max_information!r}.")
    bound = float(max_information) / positive_int("n", n)
    return bound, bound / check_positive(temperature, "temperature")


def corollary15_bounds(mutual_information: float, temperature: float, subgaussian_scale: float) -> tuple[float, float]:
    """OAKL Cor. 15: for h ~ exp(-gamma L(h, Z)) with L(h, Z) - R(h) sigma^2-subgaussian for every h,
    I / gamma <= |E_Z E_h [L(h, Z) - R(h)]| <= sigma sqrt(2 I).  Returns (I / gamma, sigma sqrt(2 I)).

    L is the total loss sum_i l(z_i, h) and R(h) its expectation: the gap of
    L is n times the per-record gap.  The lower end is Lemma 14 with Thm 4;
    the upper end Russo and Zou's Proposition 1 (I(h; L) = I(h; Z) for
    posterior sampling).
    """
    if not mutual_information >= 0:
        raise ValueError(f"mutual_information must be a number >= 0. Found {mutual_information!r}.")
    gamma = check_positive(temperature, "temperature")
    sigma = check_positive(subgaussian_scale, "subgaussian_scale")
    return float(mutual_information) / gamma, sigma * float(np.sqrt(2.0 * mutual_information))
