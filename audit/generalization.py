"""Measured on-average KL privacy, generalization gap and small-group cost of posterior-sampling mechanisms.

The quantities of OAKL (Wang, Lei and Fienberg 2016; docs/theory.md
section 8), each measured, not computed: averages over independent units
(neighbouring pairs or datasets drawn from the mechanism's data distribution
D) with a Student-t interval over the units.

* :func:`on_average_divergence`: E_{Z ~ D^n, z ~ D} of the restricted
  divergence between the outputs on Z and on Z with its first ``replaced``
  records redrawn from D, each pair estimated by the audit's own estimator
  (:func:`attacks.estimate.estimate_divergence`, held-out, coupled samples).
  The per-pair estimates are independent, so their sample variance holds
  both sources of noise, the draw of the pair and the estimation within it;
  the t interval over pairs covers both.  Each pair's estimand is the
  population value of its fitted witness, at most KL^H of that pair: the
  average is a lower bound on on-average KL^H, up to the interval.
* :func:`generalization_gap`: gamma (E R(h) - E R_hat(h, Z)) for h ~ M(Z),
  the risk R on fresh records from D, averaged over datasets Z ~ D^n (OAKL
  Def. 3 in the tempered loss gamma l; OAKL Thm 4 equates it with the
  on-average KL privacy).
* :func:`small_group_check`: the on-average KL with k records replaced
  against k times the value with one (OAKL Lemma 6).

Until the runner's on-average neighbour strategy is connected, pairs are
drawn here by :func:`draw_neighbours` (a small local loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from attacks.estimate import estimate_divergence
from audit.mechanisms.base import sample_coupled
from audit.neighbours import on_average_pairs
from audit.on_average import average_over_pairs


@dataclass(frozen=True)
class AverageEstimate:
    """The mean of independent per-unit values with a Student-t confidence interval.

    Evidence (:class:`attacks.evidence.Evidence`): its ``estimate``,
    ``standard_error``, bounds and p-value are those of
    :func:`audit.on_average.average_over_pairs` of the values.

    Attributes
    ----------
    values : numpy.ndarray
        One value per unit (pair or dataset).
    caveats : int
        How many per-pair estimates carried an estimator caveat (kept in the mean).
    """

    values: np.ndarray
    caveats: int = 0

    @property
    def estimate(self) -> float:
        return float(np.mean(self.values))

    @property
    def standard_error(self) -> float:
        return average_over_pairs(self.values).standard_error

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def caveat(self) -> str | None:
        """How many per-pair estimates carried a caveat, None when none did."""
        if not self.caveats:
            return None
        return f"{self.caveats} of {self.n} per-pair estimates carry a caveat (kept in the mean)"

    def lower_bound(self, level: float = 0.95) -> float:
        """One-sided Student-t lower bound mean - t_{level, n-1} SE."""
        return average_over_pairs(self.values).lower_bound(level)

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided Student-t interval mean +- t_{(1+confidence)/2, n-1} SE (:func:`audit.on_average.average_over_pairs`)."""
        return average_over_pairs(self.values).confidence_interval(confidence)

    def p_value(self, claim: float) -> float:
        """One-sided t-test p-value of H0: the mean <= ``claim``."""
        return average_over_pairs(self.values).p_value(claim)

    def to_record(self) -> dict[str, Any]:
        """Plain JSON: the values (a list) and the caveat count."""
        return dict(kind="average", values=[float(value) for value in self.values], caveats=int(self.caveats))


def difference_interval(
    first: AverageEstimate, second: AverageEstimate, factor: float = 1.0, confidence: float = 0.95
) -> tuple[float, float]:
    """Interval for mean(first) - factor mean(second) from independent estimates (normal approximation).

    SE = sqrt(SE_1^2 + factor^2 SE_2^2); z quantile at (1 + confidence) / 2.
    """
    difference = first.estimate - factor * second.estimate
    half = stats.norm.ppf((1 + confidence) / 2) * np.hypot(first.standard_error, factor * second.standard_error)
    return difference - half, difference + half


def draw_neighbours(mechanism: Any, rng: np.random.Generator, replaced: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Z ~ D^n and Z with its first ``replaced`` records redrawn from D (OAKL Def. 2, Lemma 6)."""
    [pair] = on_average_pairs(mechanism.sample_data, mechanism.records, 1, rng, replaced)
    return pair


def on_average_divergence(
    mechanism: Any, n_pairs: int, *, replaced: int = 1, samples: int = 5000,
    function_class: str = "linear", divergence: str = "kl", alpha: float | None = None, seed: int = 0,
) -> AverageEstimate:
    """Measured on-average restricted divergence over ``n_pairs`` pairs drawn from D.

    Per pair: ``samples`` outputs on Z and on Z' from clones of one generator
    (:func:`audit.mechanisms.sample_coupled`; paired intervals when the
    mechanism spent the same randomness on both), then
    :func:`attacks.estimate.estimate_divergence`.  Seeds: pair j uses child j
    of ``numpy.random.SeedSequence(seed)``, whatever else runs.
    """
    values, caveats = [], 0
    for child in np.random.SeedSequence(seed).spawn(n_pairs):
        data_seed, output_seed, split_seed = child.spawn(3)
        pair = draw_neighbours(mechanism, np.random.default_rng(data_seed), replaced)
        (p, q), coupled = sample_coupled(mechanism, pair, samples, output_seed)
        estimate = estimate_divergence(
            p, q, function_class, divergence, alpha=alpha, coupled=coupled,
            random_state=int(split_seed.generate_state(1)[0]),
        )
        values.append(estimate.estimate)
        caveats += estimate.caveat is not None
    return AverageEstimate(np.asarray(values, dtype=float), caveats)


def exact_on_average_kl(mechanism: Any, n_pairs: int, *, replaced: int = 1, seed: int = 0) -> AverageEstimate:
    """Monte Carlo over pairs from D of the exact per-pair KL (``mechanism.pair_kl``), as OAKL section 6 does."""
    rng = np.random.default_rng(seed)
    values = [mechanism.pair_kl(*draw_neighbours(mechanism, rng, replaced)) for _ in range(n_pairs)]
    return AverageEstimate(np.asarray(values, dtype=float))


def generalization_gap(
    mechanism: Any, n_datasets: int, *, outputs: int = 10, fresh: int = 100, seed: int = 0
) -> AverageEstimate:
    """Measured on-average generalization gap gamma (E R(h) - E R_hat(h, Z)) of a Gibbs mechanism.

    Per dataset Z ~ D^n: ``outputs`` draws h ~ M(Z) and ``fresh`` new
    records from D; the dataset's value is gamma times the mean over h of
    (mean loss on the fresh records - mean loss on Z) (OAKL Def. 3 with the
    tempered loss gamma l of Remark 2).  Its mean over datasets estimates the
    on-average generalization gap without bias; the t interval is over
    datasets.
    """
    rng = np.random.default_rng(seed)
    values = np.empty(n_datasets)
    for j in range(n_datasets):
        dataset = mechanism.sample_data(mechanism.records, rng)
        h = mechanism.sample(dataset, outputs, rng)[:, 0]
        fresh_loss = mechanism.loss(h, mechanism.sample_data(fresh, rng)).mean()
        values[j] = mechanism.temperature * (fresh_loss - mechanism.loss(h, dataset).mean())
    return AverageEstimate(values)


@dataclass(frozen=True)
class SmallGroupRow:
    """One k of OAKL Lemma 6: measured on-average KL with k records replaced against k times the k = 1 value.

    ``interval`` covers measured_k - k measured_1 (:func:`difference_interval`,
    independent pairs); ``consistent``: it contains 0.
    """

    k: int
    measured: AverageEstimate
    expected: float
    interval: tuple[float, float]
    closed_form: float | None = None

    @property
    def consistent(self) -> bool:
        return self.interval[0] <= 0.0 <= self.interval[1]


def small_group_check(
    mechanism: Any, ks: tuple[int, ...] = (2, 3), *, n_pairs: int = 100, samples: int = 5000,
    function_class: str = "linear", confidence: float = 0.95, seed: int = 0,
) -> tuple[AverageEstimate, list[SmallGroupRow]]:
    """OAKL Lemma 6 measured: on-average KL with k replaced records is k times that with one.

    Returns the k = 1 estimate and one row per k in ``ks`` (each k >= 2).
    Every k gets its own pairs (seed + k), so the estimates are independent
    and :func:`difference_interval` applies.  ``closed_form`` is
    ``mechanism.on_average_kl(k)`` when the mechanism has it.
    """
    if any(k < 2 for k in ks):
        raise ValueError(f"ks must be group sizes >= 2 (k = 1 is the reference). Found {ks!r}.")

    def measure(k: int) -> AverageEstimate:
        return on_average_divergence(mechanism, n_pairs, replaced=k, samples=samples,
                                     function_class=function_class, seed=seed + k)

    base, closed = measure(1), getattr(mechanism, "on_average_kl", None)
    rows = []
    for k in ks:
        measured = measure(k)
        rows.append(SmallGroupRow(
            k=k, measured=measured, expected=k * base.estimate,
            interval=difference_interval(measured, base, factor=k, confidence=confidence),
            closed_form=closed(replaced=k) if closed is not None else None,
        ))
    return base, rows
