"""On-average KL privacy of the built-in DP-GD learner at one step, in closed form (docs/theory.md section 8).

OAKL Def. 2 (Wang, Lei and Fienberg 2016) averages KL(M(Z) || M(Z')) over
Z ~ D^n and Z' = Z with its first record replaced by a fresh draw from D.
A Gaussian sum query f(Z) = sum_i g(z_i) + N(0, s^2 I) moves by
g(z_1) - g(z) between such neighbours, so its on-average KL is
E ||g(z_1) - g(z)||^2 / (2 s^2) = tr Cov_D g / s^2 (:func:`gaussian_sum_on_average_kl`).
One full-batch step of :class:`audit.mechanisms.learners.DPGradientDescent`
from theta = 0 is such a query, scaled by the learning rate (which the KL
does not see): g the clipped logistic gradient at 0 and s = sigma C
(:func:`dpgd_first_step_on_average_kl`).  After more steps the gradients
depend on theta and the value has no closed form.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike

from audit.config.validation import check_positive, positive_int


def gaussian_sum_on_average_kl(covariance_trace: float, noise_scale: float) -> float:
    """On-average KL of sum_i g(z_i) + N(0, s^2 I) with one record replaced: tr Cov_D g(z) / s^2 (OAKL Def. 2).

    E ||g(z_1) - g(z)||^2 = 2 tr Cov g for independent z_1, z ~ D, and a
    Gaussian shift of Delta has KL ||Delta||^2 / (2 s^2).
    """
    if not np.isfinite(covariance_trace) or covariance_trace < 0:
        raise ValueError(f"covariance_trace must be a finite number >= 0. Found {covariance_trace!r}.")
    return float(covariance_trace) / check_positive(noise_scale, "noise_scale") ** 2


def first_step_gradients(records: ArrayLike, clip_norm: float) -> np.ndarray:
    """The clipped logistic gradients at theta = 0 of records (features..., label): (1/2 - y) x, clipped to norm C.

    As :class:`audit.mechanisms.learners.DPGradientDescent` computes them:
    residual sigmoid(0) - y = 1/2 - y times the features, scaled by
    min(1, C / ||g||).
    """
    values = np.asarray(records, dtype=float)
    features, labels = values[:, :-1], values[:, -1]
    gradients = (0.5 - labels)[:, None] * features
    norms = np.linalg.norm(gradients, axis=1)
    with np.errstate(divide="ignore"):
        scale = np.minimum(1.0, check_positive(clip_norm, "clip_norm") / norms)
    return gradients * scale[:, None]


def dpgd_first_step_on_average_kl(records: ArrayLike, probabilities: ArrayLike, *, sigma: float,
                                  clip_norm: float) -> float:
    """On-average KL of one full-batch DP-GD step from theta = 0 for records from a finite D (OAKL Def. 2).

    theta_1 = -eta (sum_i clip_C(g_i) + N(0, (sigma C)^2 I)) is a Gaussian sum
    query (:func:`gaussian_sum_on_average_kl`) of the clipped gradients of
    :func:`first_step_gradients`, noise sigma C: the value is
    tr Cov_D clip_C(g) / (sigma C)^2, exact for D on the ``records`` (rows
    (features..., label)) with ``probabilities``.  The worst case over
    replace-one neighbours is 2 / sigma^2 (two gradients 2C apart): the
    claimed mu = 2 / sigma of ``neighbours = "replace_one"`` gives mu^2 / 2.
    """
    weights = np.asarray(probabilities, dtype=float)
    gradients = first_step_gradients(records, clip_norm)
    if weights.shape != (gradients.shape[0],) or np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"probabilities must be {gradients.shape[0]} numbers >= 0 summing to 1. Found {weights!r}.")
    mean = weights @ gradients
    trace = float(weights @ np.sum((gradients - mean) ** 2, axis=1))
    return gaussian_sum_on_average_kl(trace, check_positive(sigma, "sigma") * clip_norm)


def bernoulli_records(p: float, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The support and probabilities of ``[neighbours] distribution = { name = "bernoulli", p, dim }``: records
    in {0, 1}^dim with independent coordinates, P(1) = p; shape (2^dim, dim) and (2^dim,)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1]. Found {p!r}.")
    support = np.array(list(itertools.product((0.0, 1.0), repeat=positive_int("dim", dim))))
    ones = support.sum(axis=1)
    return support, p**ones * (1.0 - p) ** (dim - ones)
