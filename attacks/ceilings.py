"""The ceiling of an estimate: the largest lower bound its interval can give at its sample sizes.

No data of these sizes give a lower bound above the ceiling, so no claim at
or above it can be refuted by them, and a claim above it that reads "pass"
says nothing about the mechanism.  It grows only like ln n.  Per statistic
(:mod:`attacks.estimate`, :mod:`attacks.held_out`):

* one attack set's counts, at complete separation (every output of P in the
  set, none of Q: k_p = n_p, k_q = 0; coupled cells [0, n, 0, 0]), the data
  that give each count bound its largest value:

  - ``dp``: :func:`attacks.binomial_ratio.log_ratio_bound`, or for coupled
    pairs :func:`attacks.paired_ratio.log_ratio_bound`;
  - ``ipm``: twice :func:`attacks.binomial_ratio.difference_bound`, or
    :func:`attacks.paired_ratio.difference_bound`;
  - an event's ``kl`` or ``renyi``:
    :func:`attacks.event_divergence.event_divergence_ceiling`;

* a ``kl`` or ``renyi`` witness: -log u, u = 1 - (0.1 (1 - level))^(1 / n_q),
  the unseen mass of :func:`attacks.divergences.variational_bound`.  Its
  lower bound is estimate - log(1 + u r) - z se with log r at least the
  estimate (r's largest weight is at least the mean weight on P, which gives
  the objective's term in P: Donsker-Varadhan's mean of h, Renyi's
  beta log |E_P g|), so the bound is below -log u whatever the data;
* a pool of ``dp`` sets (:class:`attacks.held_out.PooledEstimate`):
  log((1 - delta) n) for n outputs per law.  Each pooled log-ratio
  log((p_k - delta) / q_k) has p_k <= 1 and at least one output of Q in its
  set, q_k >= 1 / n (else the pool has no estimate), so their weighted mean is
  at most log((1 - delta) n) and its Wald lower bound below it, at any level.
  (Under complete separation a pool has no estimate at all.)

Every ceiling is a function of the sample sizes, the level and delta only.
"""

from __future__ import annotations

import math
from typing import Any

from attacks import binomial_ratio, paired_ratio
from attacks.divergences import UNSEEN_SHARE, unseen_mass_bound
from attacks.event_divergence import event_divergence_ceiling
from attacks.vocabulary import DP, IPM, divergence_of


def set_ceiling(n_p: int, n_q: int, divergence: Any, level: float, coupled: bool = False) -> float:
    """The count bound of one set at complete separation (module docstring); ``divergence`` as
    :func:`attacks.vocabulary.divergence_of` returns it; ``coupled``: n_p = n_q pairs."""
    if coupled:
        cells = [0, n_p, 0, 0]
        if isinstance(divergence, DP):
            return float(paired_ratio.log_ratio_bound(cells, divergence.delta, level, lower=True))
        if isinstance(divergence, IPM):
            return 2.0 * float(paired_ratio.difference_bound(cells, level, lower=True))
    if isinstance(divergence, DP):
        return float(binomial_ratio.log_ratio_bound(n_p, n_p, 0, n_q, divergence.delta, level, lower=True))
    if isinstance(divergence, IPM):
        return 2.0 * float(binomial_ratio.difference_bound(n_p, n_p, 0, n_q, level, lower=True))
    return float(event_divergence_ceiling(n_p, n_q, divergence, level))


def witness_ceiling(n_q: int, level: float) -> float:
    """-log of the unseen mass of n_q held-out outputs of Q at ``level``: a ``kl`` or ``renyi`` witness's ceiling."""
    return float(-math.log(unseen_mass_bound(int(n_q), UNSEEN_SHARE * (1.0 - level))))


def pooled_ceiling(n: int, delta: float) -> float:
    """log((1 - delta) n): above every bound of a pool of ``dp`` sets on n outputs per law (module docstring)."""
    return float(math.log((1.0 - delta) * n))


def estimate_ceiling(estimate: Any, level: float) -> float:
    """The ceiling of a :class:`attacks.estimate.DivergenceEstimate` at ``level``: its set's or event's counts
    (``details`` ``n_p``, ``n_q``) at complete separation, or its witness's (``details`` ``n_q``); NaN when its
    details lack the sizes (a record of an older version)."""
    details, divergence = estimate.details, divergence_of(estimate)
    if (estimate.event or not divergence.weighted) and {"n_p", "n_q"} <= details.keys():
        return set_ceiling(int(details["n_p"]), int(details["n_q"]), divergence, level, bool(estimate.coupled))
    if divergence.weighted and not estimate.event and "n_q" in details:
        return witness_ceiling(int(details["n_q"]), level)
    return math.nan
