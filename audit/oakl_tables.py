"""The tables of ``capaudit oakl``: on-average KL privacy of posterior sampling, closed forms against measurements.

OAKL Figure 2 (Wang, Lei and Fienberg 2016, section 6) as the paper draws it:
for its two examples, the DP epsilon, the on-average KL privacy, gamma times
the generalization gap and the excess population risk against gamma
(:func:`gamma_table`); on-average KL beside the worst case as the number of
records n grows (:func:`figure_table`); OAKL Thm 4 (on-average KL =
on-average generalization gap for Gibbs mechanisms, :func:`thm4_table`) and
Lemma 6 (k replaced records cost k times one, :func:`small_group_table`)
with measured values and their intervals (docs/theory.md section 8).  Every
measured number comes from the audit's engine and sampler
(:mod:`audit.generalization`: pairs audited by :func:`audit.engine.run_engine`,
averaged by :mod:`audit.on_average`; datasets of the generalization gap drawn
by :class:`audit.sampling.ChunkSampler`); the Monte Carlo of closed forms
(exact per-pair KLs; OAKL's first example at each gamma, its outputs drawn
from their Laplace law in numpy) calls no mechanism.  Every closed form from
:mod:`audit.theory.gibbs` through the mechanisms of :mod:`audit.mechanisms.gibbs`.

The report (:mod:`audit.oakl_report`) renders these tables; it computes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from audit import generalization
from audit.parallel import RunSpec
from audit.mechanisms.gibbs import GaussianPosteriorMean, LaplaceTruncatedMean, LinearRegressionPosterior
from audit.on_average import OnAverageEstimate, average_over_pairs
from audit.theory import gibbs as gibbs_theory

CONFIDENCE = 0.95
RESOLUTION = 5e-3
"""Per-pair KL below which the figure's budget (5 000 outputs per dataset) cannot resolve a pair's KL:
the held-out estimate shrinks toward 0 there (drawn hollow)."""


@dataclass(frozen=True)
class Budget:
    """How much each measurement spends: pairs per on-average KL, outputs per pair, datasets per gap."""

    records: tuple[int, ...]
    pairs: int
    samples: int
    datasets: int
    exact_pairs: int


FULL = Budget(records=(1, 3, 10, 30, 100), pairs=150, samples=5000, datasets=20000, exact_pairs=20000)
QUICK = Budget(records=(1, 10), pairs=30, samples=2000, datasets=2000, exact_pairs=2000)

GAMMAS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
"""OAKL plots Figure 2 "over an exponential grid of parameter gamma" without giving the grid: this one is ours."""
MEAN_OF = 100
"""OAKL's first example: the record Z is "the mean of 100 samples" from N(0, 1) truncated to [-2, 2]."""
REGRESSION_RECORDS = 10
"""OAKL's second example does not state n; 10 records, prior N(0, 1) (also unstated) as in THM4_CASES."""
FRESH = 10
"""Fresh records per dataset for the generalization gap and the excess risk of OAKL's first example."""

# (mechanism, its attack class): linear is exact for a Gaussian mean shift (CBDP appendix Thm 10);
# poly2 for Gaussians whose variances differ (the log-ratio is quadratic).
THM4_CASES = (
    (GaussianPosteriorMean(temperature=1.0, records=5), "linear"),
    (GaussianPosteriorMean(temperature=4.0, records=20), "linear"),
    (LinearRegressionPosterior(temperature=1.0, records=10), "poly2"),
    (LinearRegressionPosterior(temperature=4.0, records=20), "poly2"),
)


def figure_table(budget: Budget, seed: int = 0, run: RunSpec = RunSpec(),
                 progress: bool = False) -> pd.DataFrame:
    """OAKL Figure 2's quantities against n: closed-form worst case and on-average values, measured points.

    One row per (mechanism, n): the Gaussian posterior mean (gamma = 1,
    s = tau = 1) and the Laplace mean of truncated normals (gamma = 1), both
    with records from N(0, 1) truncated to [-2, 2].  ``measured``: the
    on-average (lin, KL) of :func:`audit.generalization.on_average_divergence`
    with its t interval; ``gap``: gamma times the measured generalization gap
    (Gaussian only: the Laplace mean's loss is not a sum over records).
    """
    rows = []
    for n in budget.records:
        for mechanism in (GaussianPosteriorMean(records=n), LaplaceTruncatedMean(records=n)):
            measured = generalization.on_average_divergence(
                mechanism, budget.pairs, samples=budget.samples, function_class="linear", seed=seed + n, run=run,
                progress=progress,
            )
            gibbs = isinstance(mechanism, GaussianPosteriorMean)
            gap = (generalization.generalization_gap(mechanism, budget.datasets, seed=seed + n, run=run) if gibbs
                   else None)
            rows.append({
                "mechanism": mechanism.name,
                "n": n,
                "worst-case epsilon (DP)": np.nan if gibbs else mechanism.true_epsilon,
                "worst-case KL": mechanism.worst_case_kl(),
                "on-average KL": mechanism.on_average_kl(),
                "on-average (lin, KL)": mechanism.on_average_kl() if gibbs else mechanism.on_average_kl(
                    function_class="linear"),
                **_interval_columns("measured (lin, KL)", measured),
                **(_interval_columns("measured gamma x gap", gap) if gap is not None else {}),
            })
    return pd.DataFrame(rows)


def gamma_table(budget: Budget, seed: int = 0, run: RunSpec = RunSpec()) -> pd.DataFrame:
    """OAKL Figure 2's curves against gamma: one row per (example, gamma), ``budget.datasets`` datasets each.

    As OAKL section 6 computes them: the on-average KL privacy is the exact
    KL of each pair averaged over pairs drawn from D (Monte Carlo), the
    generalization gap is measured on fresh records; both with a t interval
    over datasets.  The excess population risk is E R(h) - min R, R the
    expected loss on a fresh record.  The DP epsilon is the paper's: 4 gamma
    (Laplace mean) and 64 gamma (regression, for h restricted to [-2, 2]).
    """
    rng = np.random.default_rng(seed)
    means = _truncated_means(budget.datasets * (2 + FRESH), rng).reshape(budget.datasets, 2 + FRESH)
    rows = []
    for gamma in GAMMAS:
        rows.append({"example": "Laplace mean", "gamma": gamma, "DP epsilon (paper)": 4.0 * gamma,
                     **_laplace_mean_point(gamma, means, rng)})
    for gamma in GAMMAS:
        rows.append({"example": "linear regression", "gamma": gamma, "DP epsilon (paper)": 64.0 * gamma,
                     **_regression_point(gamma, budget.datasets, rng, seed, run)})
    return pd.DataFrame(rows)


def _truncated_means(m: int, rng: np.random.Generator) -> np.ndarray:
    """m records of OAKL's first example: each the mean of MEAN_OF draws from N(0, 1) truncated to [-2, 2]."""
    return stats.truncnorm.rvs(-2.0, 2.0, size=(m, MEAN_OF), random_state=rng).mean(axis=1)


def _laplace_mean_point(gamma: float, means: np.ndarray, rng: np.random.Generator) -> dict:
    """OAKL's first example at one gamma: the one record Z, h ~ exp(-gamma |Z - h|) (a flat prior).

    A replaced record gives the KL of two Laplace laws of one scale,
    t + exp(-t) - 1 with t = gamma |Z - Z'| (docs/theory.md section 8).  The normaliser 2 / gamma does not depend on Z, so OAKL Thm 4
    holds: on-average KL = gamma x generalization gap.  R(h) = E|Z' - h| is
    smallest at the median of Z', 0 by symmetry.  ``means``: rows of
    (Z, the replacing Z', FRESH fresh records).
    """
    z, replacing, fresh = means[:, 0], means[:, 1], means[:, 2:]
    h = z + rng.laplace(0.0, 1.0 / gamma, z.size)
    fresh_loss = np.abs(fresh - h[:, None]).mean(axis=1)
    return {
        **_interval_columns("on-average KL", average_over_pairs(_laplace_pair_kl(gamma * np.abs(z - replacing)))),
        **_interval_columns("gamma x gap", average_over_pairs(gamma * (fresh_loss - np.abs(z - h)))),
        **_interval_columns("excess risk", average_over_pairs(fresh_loss - np.abs(fresh).mean(axis=1))),
    }


def _laplace_pair_kl(t: np.ndarray) -> np.ndarray:
    """KL of two Laplace laws of one scale whose locations differ by t scales: t + exp(-t) - 1."""
    return t + np.expm1(-t)


def _regression_point(gamma: float, datasets: int, rng: np.random.Generator, seed: int,
                      run: RunSpec) -> dict:
    """OAKL's second example at one gamma: posterior sampling of the slope (x, e ~ U[-1, 1], y = x + e, slope 1).

    R(h) = E (y - x h)^2 = E x^2 (h - 1)^2 + E e^2, so the excess risk of
    h ~ N(m, v) is ((m - 1)^2 + v) / 3 (E x^2 = 1/3).
    """
    mechanism = LinearRegressionPosterior(temperature=gamma, records=REGRESSION_RECORDS)
    records = mechanism.sample_data(datasets * REGRESSION_RECORDS, rng).reshape(datasets, REGRESSION_RECORDS, 2)
    mean, variance = gibbs_theory.regression_posterior(records[..., 0], records[..., 1], temperature=gamma,
                                                       prior_scale=mechanism.prior_scale)
    return {
        **_interval_columns("on-average KL", generalization.exact_on_average_kl(mechanism, datasets, seed=seed)),
        **_interval_columns("gamma x gap", generalization.generalization_gap(mechanism, datasets, seed=seed, run=run)),
        **_interval_columns("excess risk", average_over_pairs(((mean - 1.0) ** 2 + variance) / 3.0)),
    }


def thm4_table(budget: Budget, seed: int = 0, run: RunSpec = RunSpec(),
               progress: bool = False) -> pd.DataFrame:
    """OAKL Thm 4 measured: on-average KL^H against gamma times the generalization gap on fresh data.

    ``closed form``: :func:`audit.theory.gibbs.gaussian_mean_on_average_kl`
    for the Gaussian mean; for the regression (variances differ with the
    data) the exact per-pair KL averaged over ``exact_pairs`` pairs, as OAKL
    section 6 computes it.  ``KL - gap``: the interval of the difference of
    the two measurements (independent); Thm 4 holds within the interval when
    it contains 0.
    """
    rows = []
    for mechanism, function_class in THM4_CASES:
        measured = generalization.on_average_divergence(
            mechanism, budget.pairs, samples=budget.samples, function_class=function_class, seed=seed, run=run,
            progress=progress,
        )
        gap = generalization.generalization_gap(mechanism, budget.datasets, seed=seed, run=run)
        low, high = generalization.difference_interval(measured, gap, confidence=CONFIDENCE)
        if isinstance(mechanism, GaussianPosteriorMean):
            closed, source = mechanism.on_average_kl(), "closed form"
        else:
            closed = generalization.exact_on_average_kl(mechanism, budget.exact_pairs, seed=seed).estimate
            source = f"exact KL, mean over {budget.exact_pairs} pairs"
        rows.append({
            "mechanism": mechanism.name,
            "gamma": mechanism.temperature,
            "n": mechanism.records,
            "class": function_class,
            "on-average KL": closed,
            "source": source,
            **_interval_columns("measured KL^H", measured),
            **_interval_columns("measured gamma x gap", gap),
            "KL - gap": f"[{low:.4g}, {high:.4g}]",
            "Thm 4 within interval": "yes" if low <= 0.0 <= high else "NO",
        })
    return pd.DataFrame(rows)


def small_group_table(budget: Budget, seed: int = 0, run: RunSpec = RunSpec(),
                      progress: bool = False) -> pd.DataFrame:
    """OAKL Lemma 6 measured on the Gaussian posterior mean (n = 20): k = 2, 3 against k times k = 1.

    n = 20 keeps the per-pair KLs of k = 3 mostly below 0.5, where the
    held-out estimate is close to the pair's KL (the report's note on lower
    bounds).
    """
    mechanism = GaussianPosteriorMean(records=20)
    base, group_rows = generalization.small_group_check(
        mechanism, (2, 3), n_pairs=budget.pairs, samples=budget.samples, confidence=CONFIDENCE, seed=seed, run=run,
        progress=progress,
    )
    rows = [{"k": 1, **_interval_columns("measured (lin, KL)", base), "k x measured(k = 1)": base.estimate,
             "closed form k epsilon": mechanism.on_average_kl(1), "difference": "", "within interval": ""}]
    for row in group_rows:
        rows.append({
            "k": row.k, **_interval_columns("measured (lin, KL)", row.measured),
            "k x measured(k = 1)": row.expected, "closed form k epsilon": row.closed_form,
            "difference": f"[{row.interval[0]:.4g}, {row.interval[1]:.4g}]",
            "within interval": "yes" if row.consistent else "NO",
        })
    return pd.DataFrame(rows)


def _interval_columns(name: str, estimate: OnAverageEstimate) -> dict:
    low, high = estimate.confidence_interval(CONFIDENCE)
    return {name: estimate.estimate, f"{name} low": low, f"{name} high": high}
