"""The last-iterate heuristic for DP-SGD: the privacy of the final parameters when the loss is linear.

Steinke, Nasr, Ganesh, Balle, Choquette-Choo, Jagielski, Hayes, Thakurta,
Smith and Terzis, "The last iterate advantage: empirical auditing and
principled heuristic analysis of differentially private SGD", ICLR 2025
("the heuristic", stated there for linear losses): when every loss
is linear, the gradients do not depend on the parameters, so after T steps
of Poisson-subsampled DP-SGD (sampling rate q, clipping norm C, noise
N(0, (sigma C)^2 I) per step) the canary's contribution to theta_T, along
its own gradient's direction and in units of C, is K + Z with K ~
Binomial(T, q) (the steps that sampled it) and Z ~ N(0, T sigma^2) (the
noise of all steps, summed).  The pair the heuristic states is therefore

    P = sum_k Binomial(T, q)(k) N(k, T sigma^2)   (the canary in: M(D'))
    Q = N(0, T sigma^2)                           (the canary out: M(D)),

and its (epsilon, delta) is the smallest epsilon whose hockey-stick
divergences max(E_{e^eps}(P || Q), E_{e^eps}(Q || P)) are at most delta.
Only the final parameters are released, so the heuristic is below the
composition of all T steps (the accountant's value), e.g. 1.955 against
4.618 (PLD) at T = 1000, q = 0.01, sigma = 0.7, delta = 1e-5.  It is a
heuristic, not a bound, for other losses (the paper gives
counterexamples); for a linear loss it is the exact privacy of theta_T, and
since the privacy loss ln P/Q is monotone in the released coordinate it is
attained by a threshold on it: the linear class on the parameters.

The likelihood ratio of P to Q, sum_k w_k exp((k x - k^2 / 2) / s^2) with
s^2 = T sigma^2, increases in x, so {P > e^eps Q} = {x > x*} and
{Q > e^eps P} = {x < x_*}: each divergence is a sum of Gaussian tails at a
point found by Brent's method (:func:`last_iterate_delta`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr, logsumexp

from audit.config.validation import check_positive

WEIGHT_FLOOR = 1e-300
"""Binomial weights below this are dropped (their Gaussians add nothing at any delta a float can hold)."""


def check_parameters(steps: int, sampling_rate: float, noise_multiplier: float,
                     delta: float | None = None) -> tuple[int, float, float]:
    """(T, q, sigma) checked: T a whole number >= 1, q in (0, 1], sigma > 0, and ``delta`` (when given) in (0, 1).

    Raises
    ------
    ValueError
        Naming the parameter and the value found.
    """
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a whole number >= 1. Found {steps!r}.")
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1]. Found {sampling_rate!r}.")
    if delta is not None and not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {delta!r}.")
    return int(steps), float(sampling_rate), check_positive(noise_multiplier, "noise_multiplier")


def _mixture(steps: int, sampling_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """(k, ln Binomial(T, q)(k)) over the k of non-negligible weight."""
    k = np.arange(steps + 1, dtype=float)
    log_weights = stats.binom.logpmf(k, steps, sampling_rate)
    keep = log_weights > math.log(WEIGHT_FLOOR)
    return k[keep], log_weights[keep]


def last_iterate_delta(epsilon: float, steps: int, sampling_rate: float, noise_multiplier: float) -> float:
    """The heuristic's delta at ``epsilon``: max(E_{e^eps}(P || Q), E_{e^eps}(Q || P)) of the module's pair.

    With s = sqrt(T) sigma and Phi-bar the normal upper tail,

        E_{e^eps}(P || Q) = sum_k w_k Phi-bar((x* - k) / s) - e^eps Phi-bar(x* / s),
        E_{e^eps}(Q || P) = Phi(x_* / s) - e^eps sum_k w_k Phi((x_* - k) / s),

    x* and x_* the points where ln P/Q = eps and = -eps (Steinke et al. 2025;
    the hockey-stick divergence of a monotone likelihood ratio).

    Examples
    --------
    >>> round(last_iterate_delta(0.0, 1, 1.0, 1.0), 4)  # TV of N(1, 1) and N(0, 1)
    0.3829
    """
    steps, rate, sigma = check_parameters(steps, sampling_rate, noise_multiplier)
    epsilon = float(epsilon)
    scale = math.sqrt(steps) * sigma
    k, log_w = _mixture(steps, rate)

    def log_ratio(x: float) -> float:  # ln P/Q at x, increasing in x
        return float(logsumexp(log_w + (k * x - k * k / 2.0) / scale**2))

    def crossing(level: float) -> float:
        low, high = -scale, scale
        while log_ratio(low) > level:
            low *= 2.0
        while log_ratio(high) < level:
            high *= 2.0
        return float(optimize.brentq(lambda x: log_ratio(x) - level, low, high, xtol=1e-12 * scale))

    upper, lower = crossing(epsilon), crossing(-epsilon)
    p_over_q = (math.exp(logsumexp(log_w + log_ndtr((k - upper) / scale)))
                - math.exp(epsilon + log_ndtr(-upper / scale)))
    q_over_p = (math.exp(log_ndtr(lower / scale))
                - math.exp(epsilon + logsumexp(log_w + log_ndtr((lower - k) / scale))))
    return max(p_over_q, q_over_p, 0.0)


def last_iterate_epsilon(steps: int, sampling_rate: float, noise_multiplier: float, delta: float) -> float:
    """The last-iterate heuristic's epsilon at ``delta`` for T Poisson-subsampled DP-SGD steps.

    The smallest epsilon >= 0 with :func:`last_iterate_delta` at most
    ``delta`` (Steinke et al., ICLR 2025): the privacy of the
    final parameters of DP-SGD on a linear loss, in the module's units
    (``noise_multiplier``: the noise standard deviation over the clipping
    norm, the canary's gradient of norm C at every step that samples it).

    Examples
    --------
    >>> round(last_iterate_epsilon(1000, 0.01, 0.7, 1e-5), 3)
    1.955
    """
    steps, rate, sigma = check_parameters(steps, sampling_rate, noise_multiplier, delta)
    if last_iterate_delta(0.0, steps, rate, sigma) <= delta:
        return 0.0
    high = 1.0
    while last_iterate_delta(high, steps, rate, sigma) > delta:
        high *= 2.0
    return float(optimize.brentq(lambda eps: last_iterate_delta(eps, steps, rate, sigma) - delta, 0.0, high,
                                 xtol=1e-10))
