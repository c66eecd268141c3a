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
(:mod:`audit.engine.generalization`: pairs audited by :func:`audit.engine.run.run_engine`,
averaged by :mod:`audit.results.on_average`; datasets of the generalization gap drawn
by :class:`audit.sampling.sampler.ChunkSampler`); the Monte Carlo of closed forms
(exact per-pair KLs; OAKL's first example at each gamma, its outputs drawn
from their Laplace law in numpy) calls no mechanism.  Every closed form from
:mod:`audit.theory.gibbs` through the mechanisms of :mod:`audit.mechanisms.gibbs`.

The report (:mod:`audit.commands.oakl_report`) renders these tables; it computes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from audit.engine import generalization
from audit.sampling.parallel import RunSpec
from audit.mechanisms.gibbs import GaussianPosteriorMean, LaplaceTruncatedMean, LinearRegressionPosterior
from audit.results.on_average import OnAverageEstimate, average_over_pairs
from audit.theory import finite_gibbs, oakl_information
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
TRUNCATION = 2.0
"""OAKL's first example draws from N(0, 1) truncated to [-2, 2]."""

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
    on-average (lin, KL) of :func:`audit.engine.generalization.on_average_divergence`
    with its t interval; ``gap``: gamma times the measured generalization gap
    (Gaussian only: the Laplace mean's loss is not a sum over records).
    The two mechanisms at one n draw the same pairs (``datasets``: one
    shared draw per n).
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
                "datasets": shared_draw(f"n = {n}", seed + n),
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
    ``on-average KL (closed form)``: the Laplace mean's exact value
    (:func:`audit.theory.gibbs.laplace_of_means_on_average_kl`), which its
    Monte Carlo interval covers with probability 0.95 row by row.  The rows of
    one example share one draw of datasets (``datasets``,
    :func:`shared_draw`): common random numbers keep the curves smooth, and
    their errors move together, so one unlucky draw (a 2.7-standard-error one
    at ``--quick``, seed 0) leaves every row of the example on one side.
    """
    rng = np.random.default_rng(seed)
    means = _truncated_means(budget.datasets * (2 + FRESH), rng).reshape(budget.datasets, 2 + FRESH)
    rows = []
    for gamma in GAMMAS:
        rows.append({"example": "Laplace mean", "gamma": gamma, "DP epsilon (paper)": 4.0 * gamma,
                     "on-average KL (closed form)": gibbs_theory.laplace_of_means_on_average_kl(gamma, MEAN_OF,
                                                                                                TRUNCATION),
                     **_laplace_mean_point(gamma, means, rng), "datasets": shared_draw("Laplace mean", seed)})
    for gamma in GAMMAS:
        rows.append({"example": "linear regression", "gamma": gamma, "DP epsilon (paper)": 64.0 * gamma,
                     "on-average KL (closed form)": np.nan,
                     **_regression_point(gamma, budget.datasets, rng, seed, run),
                     "datasets": shared_draw("linear regression", seed)})
    return pd.DataFrame(rows)


def shared_draw(name: str, seed: int) -> str:
    """The label of a draw of datasets that several rows share: rows with one label have dependent errors
    (each row's interval holds on its own; one unlucky draw moves them all the same way)."""
    return f"{name}, seed {seed}"


def _truncated_means(m: int, rng: np.random.Generator) -> np.ndarray:
    """m records of OAKL's first example: each the mean of MEAN_OF draws from N(0, 1) truncated to [-2, 2]."""
    return stats.truncnorm.rvs(-TRUNCATION, TRUNCATION, size=(m, MEAN_OF), random_state=rng).mean(axis=1)


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
    section 6 computes it.  The two measurements answer Thm 4 differently
    (:func:`thm4_decision`): gamma times the gap estimates the on-average KL
    without bias, while the measured KL^H is a held-out lower bound (each
    pair's witness scaled toward the constant for its own lower bound: 17-32 %
    low for the Gaussian mean at gamma 4, n 20).  All rows draw their pairs
    and datasets from ``seed`` (``datasets``: one shared draw).
    """
    rows = []
    for mechanism, function_class in THM4_CASES:
        measured = generalization.on_average_divergence(
            mechanism, budget.pairs, samples=budget.samples, function_class=function_class, seed=seed, run=run,
            progress=progress,
        )
        gap = generalization.generalization_gap(mechanism, budget.datasets, seed=seed, run=run)
        if isinstance(mechanism, GaussianPosteriorMean):
            exact, source = exactly(mechanism.on_average_kl()), "closed form"
        else:
            exact = generalization.exact_on_average_kl(mechanism, budget.exact_pairs, seed=seed)
            source = f"exact KL, mean over {budget.exact_pairs} pairs"
        decision = thm4_decision(measured, gap, exact)
        rows.append({
            "mechanism": mechanism.name,
            "gamma": mechanism.temperature,
            "n": mechanism.records,
            "class": function_class,
            "on-average KL": exact.estimate,
            "source": source,
            **_interval_columns("measured KL^H", measured),
            **_interval_columns("measured gamma x gap", gap),
            "gap - KL": "[{:.4g}, {:.4g}]".format(*decision.gap_minus_kl),
            "KL^H - gap": "[{:.4g}, {:.4g}]".format(*decision.lower_bound_minus_gap),
            "Thm 4 consistent": "yes" if decision.consistent else "NO",
            "datasets": shared_draw("Thm 4", seed),
        })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Thm4Decision:
    """What the data say of OAKL Thm 4 (E gamma gap = on-average KL) on one mechanism (:func:`thm4_decision`)."""

    gap_minus_kl: tuple[float, float]
    lower_bound_minus_gap: tuple[float, float]

    @property
    def consistent(self) -> bool:
        """The gap's interval holds the on-average KL, and the lower bound KL^H is not above the gap."""
        return self.gap_minus_kl[0] <= 0.0 <= self.gap_minus_kl[1] and self.lower_bound_minus_gap[0] <= 0.0


def thm4_decision(measured: OnAverageEstimate, gap: OnAverageEstimate, exact: OnAverageEstimate,
                  confidence: float = CONFIDENCE) -> Thm4Decision:
    """Thm 4 is contradicted only where an interval excludes it, at ``confidence`` over both checks (Bonferroni).

    * gamma x gap estimates E gamma gap without bias; Thm 4 says that is the
      on-average KL (``exact``: a closed form, standard error 0, or a Monte
      Carlo of exact per-pair KLs): NO where the interval of their difference
      excludes 0.
    * the measured KL^H estimates E of held-out objectives, each at most its
      pair's KL^H <= KL (a lower bound): a KL^H interval below the gap is
      what Thm 4 predicts, not a "NO"; only a difference whose lower end is
      above 0 contradicts it.

    Each check errs with probability (1 - confidence) / 2: the first is a
    two-sided interval at 1 - (1 - confidence) / 2, the second the lower end
    of a two-sided interval at ``confidence``
    (:func:`audit.engine.generalization.difference_interval`, normal approximation;
    the measurements are independent), so a true Thm 4 reads NO with
    probability at most 1 - confidence (Bonferroni).
    """
    level = 1.0 - (1.0 - confidence) / 2
    return Thm4Decision(gap_minus_kl=generalization.difference_interval(gap, exact, confidence=level),
                        lower_bound_minus_gap=generalization.difference_interval(measured, gap, confidence=confidence))


def exactly(value: float) -> OnAverageEstimate:
    """A value known without error as an estimate (standard error 0), to stand in a difference of estimates."""
    return OnAverageEstimate(estimate=float(value), standard_error=0.0, n_pairs=0, worst_case=float(value))


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
             "closed form k epsilon": mechanism.on_average_kl(1), "difference": "", "within interval": "",
             "datasets": shared_draw("k = 1", seed + 1)}]
    for row in group_rows:
        rows.append({
            "k": row.k, **_interval_columns("measured (lin, KL)", row.measured),
            "k x measured(k = 1)": row.expected, "closed form k epsilon": row.closed_form,
            "difference": f"[{row.interval[0]:.4g}, {row.interval[1]:.4g}]",
            "within interval": "yes" if row.consistent else "NO",
            "datasets": f"{shared_draw(f'k = {row.k}', seed + row.k)}; difference with k = 1's",
        })
    return pd.DataFrame(rows)


LEMMA_MECHANISM = GaussianPosteriorMean(temperature=4.0, records=20)
"""The mechanism of the Lemma 5 and 7 table (per-pair KLs mostly below 0.5, as for Lemma 6)."""
SECOND_POSTERIOR = {"noise_scale": 0.5, "prior_scale": 0.3, "temperature": 2.0}
"""Lemma 7's second mechanism: a Gaussian posterior mean whose prior N(h1, 0.3^2) is centred on the first's output."""


def lemma_table(budget: Budget, seed: int = 0) -> pd.DataFrame:
    """OAKL Lemma 5 (post-processing) and Lemma 7 (adaptive composition) computed on the Gaussian posterior mean.

    Each value is the exact per-pair KL of the released laws averaged over
    ``budget.exact_pairs`` pairs from D (:func:`audit.engine.generalization.post_processing_check`,
    :func:`audit.engine.generalization.adaptive_composition_check`), with its t
    interval; the bound is the lemma's closed form.  ``holds``: the
    interval's lower end is at most the bound (a lemma is contradicted only
    where the interval lies above it); Lemma 7 is an equality here (the
    chain rule), so its interval should also hold the bound.
    """
    mechanism = LEMMA_MECHANISM
    rows = []
    for threshold in (0.0, 0.5):
        value, bound = generalization.post_processing_check(mechanism, budget.exact_pairs, threshold=threshold,
                                                            seed=seed)
        rows.append(_lemma_row("Lemma 5", f"1{{h > {threshold:g}}}", value, bound, seed))
    value, bound = generalization.adaptive_composition_check(mechanism, SECOND_POSTERIOR, budget.exact_pairs,
                                                             seed=seed)
    second = ", ".join(f"{key} {value:g}" for key, value in SECOND_POSTERIOR.items())
    rows.append(_lemma_row("Lemma 7", f"(h1, h2), h2's prior centred on h1 ({second})", value, bound, seed))
    return pd.DataFrame(rows)


def _lemma_row(lemma: str, release: str, value: OnAverageEstimate, bound: float, seed: int) -> dict:
    low, _ = value.confidence_interval(CONFIDENCE)
    return {"lemma": lemma, "release": release, "bound (closed form)": bound,
            **_interval_columns("on-average KL of the release", value), "holds": "yes" if low <= bound else "NO",
            "datasets": shared_draw("lemmas", seed)}


def _interval_columns(name: str, estimate: OnAverageEstimate) -> dict:
    low, high = estimate.confidence_interval(CONFIDENCE)
    return {name: estimate.estimate, f"{name} low": low, f"{name} high": high}


FINITE_LEARNERS = (
    {"loss": ((0.0, 1.0), (1.0, 0.0)), "probabilities": (0.5, 0.5), "n": 1, "temperature": 2.0},
    {"loss": ((0.0, 0.5, 1.0, 1.0), (1.0, 0.0, 0.5, 1.0), (1.0, 1.0, 0.5, 0.0)), "probabilities": (0.2, 0.3, 0.5),
     "n": 10, "temperature": 1.0},
    {"loss": ((0.0, 0.5, 1.0, 1.0), (1.0, 0.0, 0.5, 1.0), (1.0, 1.0, 0.5, 0.0)), "probabilities": (0.2, 0.3, 0.5),
     "n": 10, "temperature": 4.0},
)
"""Finite Gibbs learners of the information table: OAKL's two-point example at n = 1, and three record values
with four hypotheses (the third a compromise of loss 1/2) at n = 10."""
INFORMATION_GAUSSIAN = GaussianPosteriorMean(temperature=1.0, records=10)
"""The Gaussian posterior mean of the information table, on records from N(0, 1) (not truncated: the closed form
of the mutual information is exact for normal records)."""


def information_table() -> pd.DataFrame:
    """OAKL Def. 8 and 10 to Cor. 15 with exact numbers (no sampling): one row per learner.

    Finite Gibbs learners (:func:`audit.theory.finite_gibbs.finite_gibbs_values`, exact sums over count
    vectors) and the Gaussian posterior mean (closed forms of :mod:`audit.theory.oakl_information`; its
    max-information is infinite and its loss not subgaussian, so Lemma 11 and Cor. 15 do not apply; its
    gap is measured in :func:`thm4_table`).
    ``relations``: "yes" when Thm 4 (epsilon = gamma gap), Lemma 14 with 6 (I <= n epsilon), Lemma 11
    (epsilon <= I_inf / n) and Cor. 15 (I / gamma <= n gap <= sigma sqrt(2 I)) all hold where they apply.
    """
    rows = []
    for learner in FINITE_LEARNERS:
        values = finite_gibbs.finite_gibbs_values(**learner)
        n, gamma = learner["n"], learner["temperature"]
        low, high = oakl_information.corollary15_bounds(values.mutual_information, gamma, values.subgaussian_scale)
        rows.append(_information_row(
            f"finite Gibbs, {len(learner['probabilities'])} record values, {len(learner['loss'][0])} hypotheses",
            n, gamma, values.on_average_kl, gamma * values.generalization_gap, values.mutual_information,
            values.max_information, values.conditional_entropy, (low, n * values.generalization_gap, high)))
    mechanism = INFORMATION_GAUSSIAN
    parameters = {"noise_scale": mechanism.noise_scale, "prior_scale": mechanism.prior_scale,
                  "temperature": mechanism.temperature}
    epsilon = gibbs_theory.gaussian_mean_on_average_kl(mechanism.records, 1.0, **parameters)
    rows.append(_information_row(
        "Gaussian posterior mean, records N(0, 1)", mechanism.records, mechanism.temperature, epsilon,
        None, oakl_information.gaussian_mean_mutual_information(mechanism.records, 1.0, **parameters), np.inf,
        oakl_information.gaussian_mean_conditional_entropy(mechanism.records, **parameters), None))
    return pd.DataFrame(rows)


def _information_row(learner: str, n: int, gamma: float, epsilon: float, gamma_gap: float | None,
                     information: float, max_information: float, entropy: float,
                     corollary15: tuple[float, float, float] | None) -> dict:
    """One row of :func:`information_table`; ``gamma_gap`` and ``corollary15`` (I / gamma, n gap,
    sigma sqrt(2 I)) None where not computed apart from epsilon."""
    kl_bound, _ = oakl_information.max_information_bounds(max_information, n, gamma)
    holds = [information <= oakl_information.mutual_information_bound(epsilon, n), epsilon <= kl_bound]
    if gamma_gap is not None:
        holds.append(np.isclose(epsilon, gamma_gap, rtol=1e-9))
    if corollary15 is not None:
        holds.append(corollary15[0] <= corollary15[1] <= corollary15[2])
    low, gap, high = corollary15 if corollary15 is not None else (np.nan, np.nan, np.nan)
    return {"learner": learner, "n": n, "gamma": gamma, "on-average KL": epsilon,
            "gamma x gap (Thm 4)": np.nan if gamma_gap is None else gamma_gap,
            "I(M(Z); Z)": information, "n x on-average KL (Lemma 14, 6)": n * epsilon,
            "max-information": max_information, "max-information / n (Lemma 11)": kl_bound,
            "I / gamma (Cor. 15)": low, "n x gap": gap, "sigma sqrt(2 I) (Cor. 15)": high,
            "H(M(Z) | Z) (Def. 8)": entropy, "relations": "yes" if all(holds) else "NO"}


MAXENT_DATA = (0.3, -1.2, 0.8, 2.0, -0.4)
"""The dataset of the maximum-entropy table (five records; any would do: Thm 9 holds for every dataset)."""


def maxent_table() -> pd.DataFrame:
    """OAKL Thm 9 on the Gaussian posterior mean (n = 5, gamma = 1): its objective at candidate laws q = N(m, v).

    The tempered posterior attains the free energy
    (:func:`audit.theory.oakl_information.gaussian_mean_free_energy`); every other q exceeds it by
    KL(q || posterior) / gamma (the Gibbs variational principle), shown beside the excess.
    """
    mechanism = GaussianPosteriorMean(temperature=1.0, records=len(MAXENT_DATA))
    parameters = {"noise_scale": mechanism.noise_scale, "prior_mean": mechanism.prior_mean,
                  "prior_scale": mechanism.prior_scale, "temperature": mechanism.temperature}
    data = np.asarray(MAXENT_DATA)
    mean, variance = gibbs_theory.gaussian_mean_posterior(data.sum(), data.size, **parameters)
    free = oakl_information.gaussian_mean_free_energy(data, **parameters)
    candidates = {"the tempered posterior (Thm 9's solution)": (float(mean), variance),
                  "the posterior mean, twice the variance": (float(mean), 2 * variance),
                  "the sample mean, the posterior variance": (float(data.mean()), variance),
                  "the prior N(0, 1)": (mechanism.prior_mean, mechanism.prior_scale**2)}
    rows = []
    for name, (m, v) in candidates.items():
        objective = float(oakl_information.gaussian_mean_gibbs_objective(m, v, data, **parameters))
        rows.append({"q": name, "mean": m, "variance": v, "objective": objective, "free energy": free,
                     "excess": objective - free,
                     "KL(q || posterior) / gamma": float(gibbs_theory.normal_kl(m, v, mean, variance))
                     / mechanism.temperature})
    return pd.DataFrame(rows)
