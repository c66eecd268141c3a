"""Measured on-average KL privacy, generalization gap and small-group cost of posterior-sampling mechanisms.

The quantities of OAKL (Wang, Lei and Fienberg 2016; docs/theory.md
section 8), each measured, not computed: averages over independent units
(neighbouring pairs or datasets drawn from the mechanism's data distribution
D) with the Student-t interval over units of :mod:`audit.results.on_average`
(:class:`audit.results.on_average.OnAverageEstimate`).  Every mechanism call goes
through the audit's sampler: forked children (or cluster jobs) within
``run.sample_timeout`` seconds a chunk, ``run.n_jobs`` workers, seeded
chunks, so the numbers do not depend on ``n_jobs`` or the backend and a
failing or hanging mechanism ends the measurement with its pair's message
(:class:`audit.sampling.errors.MechanismError`).

* :func:`on_average_divergence`: E_{Z ~ D^n, z ~ D} of the restricted
  divergence between the outputs on Z and on Z with its first ``replaced``
  records redrawn from D.  The pairs go to the audit's engine
  (:func:`audit.engine.run.run_engine`, policy ``every``: each pair's witness
  trained on half its coupled outputs and confirmed on the other half), and
  the per-pair estimates are averaged by
  :func:`audit.results.on_average.average_over_pairs`, as an on-average claim's are.
  The per-pair estimates are independent, so their sample variance holds
  both sources of noise, the draw of the pair and the estimation within it;
  the t interval over pairs covers both.  Each pair's estimand is the
  population value of its fitted witness, at most KL^H of that pair: the
  average is a lower bound on on-average KL^H, up to the interval.
* :func:`generalization_gap`: gamma (E R(h) - E R_hat(h, Z)) for h ~ M(Z),
  the risk R on fresh records from D, averaged over datasets Z ~ D^n (OAKL
  Def. 3 in the tempered loss gamma l; OAKL Thm 4 equates it with the
  on-average KL privacy); the datasets are drawn in seeded chunks of
  :data:`audit.sampling.chunks.CHUNK_SIZE` by :class:`audit.sampling.sampler.ChunkSampler`.
* :func:`small_group_check`: the on-average KL with k records replaced
  against k times the value with one (OAKL Lemma 6).
* :func:`exact_on_average_kl`: theory, no sampling of outputs: the exact
  per-pair KL (``mechanism.pair_kl``) averaged over pairs from D, as OAKL
  section 6 computes it.
* :func:`post_processing_check` and :func:`adaptive_composition_check`:
  OAKL Lemma 5 (a post-processed release has at most the mechanism's
  on-average KL) and Lemma 7 (adaptive composition adds the
  on-average KLs), the exact per-pair KLs of the released laws averaged over
  pairs from D, beside the lemma's closed-form bound.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import joblib
import numpy as np
from scipy import stats

from audit.config.load import AuditConfig, load_config
from audit.sampling.parallel import RunSpec
from audit.sampling.errors import MechanismError
from audit.inputs.neighbours import NeighbourPair
from audit.inputs.pair_generators import on_average_pairs
from audit.results.on_average import OnAverageEstimate, average_over_pairs
from audit.engine.plan import DIRECTIONS, task_seed

MEASURED_DIRECTION = DIRECTIONS[0]
"""The engine attacks both directions of a pair; on-average KL privacy is KL(M(Z) || M(Z')), the first (P|Q)."""


def difference_interval(
    first: OnAverageEstimate, second: OnAverageEstimate, factor: float = 1.0, confidence: float = 0.95
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


def measurement_config(mechanism: Any, function_class: str, samples: int, run: RunSpec) -> AuditConfig:
    """The audit config of an on-average measurement: the built-in ``mechanism``, a kl claim over
    ``function_class`` (its epsilon, 0, is not judged: the measurement reports the estimate), ``samples``
    coupled outputs per dataset split in half for training and confirming (policy ``every``), ``run`` as its
    ``[run]`` table (seed, n_jobs, backend, sample_timeout)."""
    return load_config({
        "mechanism": {"name": mechanism.name, "params": dict(mechanism.params)},
        "claims": [{"divergence": "kl", "function_class": function_class, "epsilon": 0.0}],
        "attacks": {"n_samples": samples, "train_fraction": 0.5, "classes": [function_class], "coupled": True,
                    "policy": "every"},
        "run": dataclasses.asdict(run),
    })


def on_average_divergence(
    mechanism: Any, n_pairs: int, *, replaced: int = 1, samples: int = 5000, function_class: str = "linear",
    seed: int = 0, run: RunSpec = RunSpec(), progress: bool = False,
) -> OnAverageEstimate:
    """Measured on-average (``function_class``, KL) over ``n_pairs`` pairs drawn from D, through the audit's engine.

    The pairs (:func:`audit.inputs.pair_generators.on_average_pairs`, from the seed
    ``task_seed(seed, "oakl|pairs")``) are audited by
    :func:`audit.engine.run.run_engine` with :func:`measurement_config`
    (``samples`` coupled outputs per dataset, ``run``'s n_jobs, backend and
    sample_timeout, ``seed`` its seed); the P|Q estimates are averaged by
    :func:`audit.results.on_average.average_over_pairs`, with a caveat counting the
    pairs whose estimates carried one (kept in the mean).

    Raises
    ------
    MechanismError
        When the mechanism failed on a pair (an exception, its process
        killed, or ``run.sample_timeout`` passed): the pair's message.
    """
    from audit.engine.run import run_engine  # with the attacks (scikit-learn)

    config = measurement_config(mechanism, function_class, samples, dataclasses.replace(run, seed=seed))
    rng = np.random.default_rng(task_seed(seed, "oakl|pairs"))
    pairs = [NeighbourPair(f"p{index}", d, d_prime, distance=replaced) for index, (d, d_prime) in
             enumerate(on_average_pairs(mechanism.sample_data, mechanism.records, n_pairs, rng, replaced))]
    rows = run_engine(config, mechanism, pairs, progress=progress)
    measured = [row for row in rows if row.direction == MEASURED_DIRECTION]
    failed = [row.error for row in measured if row.error is not None]
    if failed:
        raise MechanismError(f"on-average measurement of {mechanism.name}: {failed[0]}")
    found = [row.evidence for row in measured]
    caveats = sum(estimate.caveat is not None for estimate in found)
    return average_over_pairs([estimate.estimate for estimate in found],
                              caveat=f"{caveats} of {len(found)} pairs' estimates are not trusted" if caveats else None)


def exact_on_average_kl(mechanism: Any, n_pairs: int, *, replaced: int = 1, seed: int = 0) -> OnAverageEstimate:
    """Monte Carlo over pairs from D of the exact per-pair KL (``mechanism.pair_kl``), as OAKL section 6 does."""
    rng = np.random.default_rng(seed)
    return average_over_pairs([mechanism.pair_kl(*draw_neighbours(mechanism, rng, replaced)) for _ in range(n_pairs)])


def post_processing_check(mechanism: Any, n_pairs: int, *, threshold: float = 0.0,
                          seed: int = 0) -> tuple[OnAverageEstimate, float]:
    """OAKL Lemma 5 computed: the on-average KL of the release 1{h > threshold} of the Gaussian posterior mean.

    Monte Carlo over ``n_pairs`` pairs from D (:func:`neighbour_sums`) of the
    exact per-pair KL of the thresholded release
    (:func:`audit.theory.gibbs.thresholded_normal_kl`), returned with the
    lemma's bound, the mechanism's own on-average KL
    (``mechanism.on_average_kl()``): the post-processed value may not exceed it.
    """
    from audit.theory import gibbs

    means, variance = gibbs.gaussian_mean_posterior(
        neighbour_sums(mechanism, n_pairs, np.random.default_rng(seed)), mechanism.records,
        prior_mean=mechanism.prior_mean, **_posterior_parameters(mechanism))
    values = gibbs.thresholded_normal_kl(means[:, 0], means[:, 1], np.sqrt(variance), threshold)
    return average_over_pairs(values), mechanism.on_average_kl()


def adaptive_composition_check(mechanism: Any, second: dict, n_pairs: int, *,
                               seed: int = 0) -> tuple[OnAverageEstimate, float]:
    """OAKL Lemma 7 computed: the on-average KL of (h1, h2), h1 from the Gaussian posterior mean ``mechanism``
    and h2 from a second one with parameters ``second`` (noise_scale, prior_scale, temperature) whose prior is
    centred on h1 (prior means 0: no KL depends on them).

    Monte Carlo over ``n_pairs`` pairs from D (:func:`neighbour_sums`) of the
    exact KL of the two bivariate normal laws of (h1, h2)
    (:func:`audit.theory.gibbs.adaptive_gaussian_means_law`,
    :func:`audit.theory.gibbs.shared_covariance_normal_kl`), returned with
    Lemma 7's sum epsilon_1 + epsilon_2 of the two closed forms
    (:func:`audit.theory.gibbs.adaptive_gaussian_means_on_average_kl`),
    which the chain rule makes the exact value here.
    """
    from audit.theory import gibbs

    first = _posterior_parameters(mechanism)
    sums = neighbour_sums(mechanism, n_pairs, np.random.default_rng(seed))
    means, covariance = gibbs.adaptive_gaussian_means_law(sums, mechanism.records, first=first, second=second)
    values = gibbs.shared_covariance_normal_kl(means[:, 0], means[:, 1], covariance)
    bound = gibbs.adaptive_gaussian_means_on_average_kl(mechanism.records, mechanism.data_variance(), first=first,
                                                        second=second)
    return average_over_pairs(values), bound


def neighbour_sums(mechanism: Any, n_pairs: int, rng: np.random.Generator) -> np.ndarray:
    """Sums of the records of ``n_pairs`` pairs (Z, Z'), Z ~ D^n, Z' = Z with its first record redrawn from D
    (OAKL Def. 2), shape (n_pairs, 2): n + 1 draws per pair, all at once (D lies in the mechanism's clipping
    interval, so the sums are those the mechanism sees)."""
    records = mechanism.sample_data(n_pairs * (mechanism.records + 1), rng).reshape(n_pairs, mechanism.records + 1)
    total = records[:, :-1].sum(axis=1)
    return np.column_stack([total, total - records[:, 0] + records[:, -1]])


def _posterior_parameters(mechanism: Any) -> dict:
    """The Gaussian posterior mean's parameters as :mod:`audit.theory.gibbs` takes them."""
    return {"noise_scale": mechanism.noise_scale, "prior_scale": mechanism.prior_scale,
            "temperature": mechanism.temperature}


def generalization_gap(
    mechanism: Any, n_datasets: int, *, outputs: int = 10, fresh: int = 100, seed: int = 0,
    run: RunSpec = RunSpec(),
) -> OnAverageEstimate:
    """Measured on-average generalization gap gamma (E R(h) - E R_hat(h, Z)) of a Gibbs mechanism.

    Per dataset Z ~ D^n: ``outputs`` draws h ~ M(Z) and ``fresh`` new
    records from D; the dataset's value is gamma times the mean over h of
    (mean loss on the fresh records - mean loss on Z) (OAKL Def. 3 with the
    tempered loss gamma l of Remark 2).  Its mean over datasets estimates the
    on-average generalization gap without bias; the t interval is over
    datasets.  The datasets are drawn in chunks of
    :data:`audit.sampling.chunks.CHUNK_SIZE` (chunk k from
    ``chunk_seed(seed, "gap", "pair", k)``), each in a child of the audit's
    sampler (:class:`audit.sampling.sampler.ChunkSampler` with ``run``'s n_jobs,
    backend and sample_timeout).

    Raises
    ------
    MechanismError
        When the mechanism failed or ran past ``run.sample_timeout`` on a chunk.
    """
    from audit.sampling.parallel import backend
    from audit.sampling.sampler import ChunkSampler

    draw = functools.partial(_gap_chunk, mechanism, outputs=outputs, fresh=fresh, seed=seed)
    datasets = NeighbourPair("gap", np.empty((0, 1)), np.empty((0, 1)))
    with backend(run.backend, run.n_jobs):
        sampler = ChunkSampler(draw, [datasets], n_datasets, True, max(joblib.effective_n_jobs(run.n_jobs), 1),
                               run.sample_timeout, backend=run.backend)
        try:
            [(_, drawn)] = list(sampler)
        finally:
            sampler.close()
    if isinstance(drawn, str):
        raise MechanismError(f"generalization gap of {mechanism.name}: {drawn}")
    return average_over_pairs(drawn.d[:, 0])


def _gap_chunk(mechanism: Any, datasets: NeighbourPair, chunk: Any, *, outputs: int, fresh: int, seed: int):
    """One chunk of :func:`generalization_gap`: ``chunk.size`` datasets' values as the chunk's samples on both
    sides (the sampler's ``draw(pair, chunk)``), or the mechanism's error message."""
    from audit.sampling.chunks import PairSamples, chunk_seed

    rng = np.random.default_rng(chunk_seed(seed, datasets.name, "pair", chunk.index))
    values = np.empty((chunk.size, 1))
    try:
        for j in range(chunk.size):
            dataset = mechanism.sample_data(mechanism.records, rng)
            h = mechanism.sample(dataset, outputs, rng)[:, 0]
            fresh_loss = mechanism.loss(h, mechanism.sample_data(fresh, rng)).mean()
            values[j] = mechanism.temperature * (fresh_loss - mechanism.loss(h, dataset).mean())
    except (Exception, SystemExit) as error:  # the audited code's failure ends the measurement with its message
        return f"mechanism {mechanism.name!r}: {' '.join(str(error).split())}"
    return PairSamples(values, values, True)


@dataclass(frozen=True)
class SmallGroupRow:
    """One k of OAKL Lemma 6: measured on-average KL with k records replaced against k times the k = 1 value.

    ``interval`` covers measured_k - k measured_1 (:func:`difference_interval`,
    independent pairs); ``consistent``: it contains 0.
    """

    k: int
    measured: OnAverageEstimate
    expected: float
    interval: tuple[float, float]
    closed_form: float | None = None

    @property
    def consistent(self) -> bool:
        return self.interval[0] <= 0.0 <= self.interval[1]


def small_group_check(
    mechanism: Any, ks: tuple[int, ...] = (2, 3), *, n_pairs: int = 100, samples: int = 5000,
    function_class: str = "linear", confidence: float = 0.95, seed: int = 0, run: RunSpec = RunSpec(),
    progress: bool = False,
) -> tuple[OnAverageEstimate, list[SmallGroupRow]]:
    """OAKL Lemma 6 measured: on-average KL with k replaced records is k times that with one.

    Returns the k = 1 estimate and one row per k in ``ks`` (each k >= 2).
    Every k gets its own pairs and outputs (seed + k), so the estimates are
    independent and :func:`difference_interval` applies.  ``closed_form`` is
    ``mechanism.on_average_kl(k)`` when the mechanism has it.
    """
    if any(k < 2 for k in ks):
        raise ValueError(f"ks must be group sizes >= 2 (k = 1 is the reference). Found {ks!r}.")

    def measure(k: int) -> OnAverageEstimate:
        return on_average_divergence(mechanism, n_pairs, replaced=k, samples=samples, function_class=function_class,
                                     seed=seed + k, run=run, progress=progress)

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
