"""Learners as mechanisms: full-batch DP-GD logistic regression, with switches that plant known bugs.

The dataset is an array of records, one per row: k features then a label in
{0, 1}.  The release is the final parameter vector theta in R^k (no
intercept: give a column of ones for one), n outputs = n independent
training runs, computed together (docs/design.md, "Contract: config").

Privacy (Dong, Roth and Su, "Gaussian differential privacy", J. R. Stat.
Soc. B 84 (2022); "DRS"): each step releases the sum of per-example
gradients clipped to L2 norm C plus N(0, (sigma C)^2 I), a Gaussian
mechanism of sensitivity C_sens (C when a record is added or removed, 2C
when one is replaced), which is (C_sens / (sigma C))-GDP (DRS Thm 2.7); the
T steps compose adaptively to mu-GDP with mu = sqrt(T) C_sens / (sigma C)
(DRS Corollary 3.3), and the final parameters are post-processing of the
noisy sums.  mu-GDP is (epsilon, delta_mu(epsilon))-DP for every epsilon
(DRS Corollary 2.13, :func:`audit.theory.tradeoff.gdp_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from audit.inputs.dataset_distance import RecordNeighbours
from audit.mechanisms.base import BaseMechanism
from audit.theory.table import SubsampledGaussianSteps
from audit.theory.tradeoff import gdp_epsilon
from audit.config.validation import check_positive, is_number, positive_int

Pair = tuple[np.ndarray, np.ndarray]

NEIGHBOURS = ("add_remove", "replace_one")
"""The neighbour relations a DP-GD run can be calibrated for."""
DELTA = 1e-5
"""The delta at which ``true_privacy`` states the (epsilon, delta) of mu-GDP."""


def _optional_positive(value: Any, name: str) -> float | None:
    return None if value is None else check_positive(value, name)


class DPGradientDescent(RecordNeighbours, BaseMechanism):
    """DP-GD (full batch) or DP-SGD (Poisson batches) for L2-regularised logistic regression; releases theta_T.

    From theta_0 = 0, T steps of

        theta <- theta - eta (sum_i clip_C(g_i) + N(0, (sigma C)^2 I) + lambda theta),

    with g_i = (sigmoid(theta . x_i) - y_i) x_i the gradient of record i's
    logistic loss, clip_C(g) = g min(1, C / ||g||_2), and a record whose
    gradient is not finite (a NaN or infinite feature or label) contributing
    0 (still within the clipping ball).  The step is the gradient of the
    sum of losses, not the mean, so the dataset size is never used.

    Calibrated from ``mu`` (default 1 when ``sigma`` is not given):
    sigma = sqrt(T) C_sens / (mu C), C_sens = C for ``add_remove`` and 2C
    for ``replace_one`` neighbours; or from ``sigma`` directly.  The
    mechanism is then **mu-GDP with mu = sqrt(T) C_sens / (sigma C)**
    (DRS Thm 2.7 and Corollary 3.3), tight for T = 1 and the default pair
    (the canary's first gradient is clipped to norm exactly C); for T > 1
    the canary's gradient shrinks once the model fits it, so the last
    iterate leaks less than the composition.

    ``sampling_rate`` q < 1 makes it DP-SGD: at each step each record joins
    the batch independently with probability q (Poisson sampling) and only
    the batch's clipped gradients are summed; it then needs ``sigma``.  The
    full-batch mu above remains an upper bound (each step is the full-batch
    step applied to a random subset: joint convexity), no longer tight; the
    amplified (epsilon, delta) is the accountant's (``training_parameters``,
    :mod:`audit.config.accounting`).

    Switches that plant known bugs (all off by default):

    * ``clipping = false``: no clipping; not DP (the sensitivity is the
      largest gradient norm, unbounded).
    * ``clip_norm_applied``: gradients clipped to this norm while the noise
      stays calibrated to ``clip_norm``: true mu scales by
      ``clip_norm_applied / clip_norm``.
    * ``noise_over_dataset_size``: the noise divided by the batch (here the
      dataset) size, as in Opacus #571: true mu m times the claim under
      ``replace_one``; under ``add_remove`` the noise scale itself differs
      between neighbours.
    * ``replace_one_as_add_remove``: ``replace_one`` accounted with the
      add/remove sensitivity C instead of 2C (dp_accounting #378-like):
      true mu is twice the claim.
    * ``pass_nan_gradients``: a non-finite gradient is summed (NaN turns
      every parameter NaN): not DP, a record of NaN is seen in every output.
    * ``release_dataset_size``: the number of records is released as a last
      output coordinate: not DP under ``add_remove`` (harmless under
      ``replace_one``).

    Parameters
    ----------
    mu : float, optional
        The Gaussian-DP parameter the noise is calibrated to.
    sigma : float, optional
        The noise multiplier (noise standard deviation over C); not with ``mu``.
    steps : int
        T, the number of full-batch steps.
    learning_rate : float
        eta.
    clip_norm : float
        C, the clipping norm the noise is calibrated to.
    l2 : float
        lambda >= 0, the L2 penalty's weight.
    sampling_rate : float
        q in (0, 1], the Poisson sampling rate of each step's batch (1: full batch); below 1 give ``sigma``.
    neighbours : {"add_remove", "replace_one"}
        The neighbour relation of the calibration and of the default pairs.
    clipping, clip_norm_applied, noise_over_dataset_size, replace_one_as_add_remove, pass_nan_gradients,
    release_dataset_size
        The bug switches above.
    """

    name = "dp_gd_logistic"
    description = ("DP-GD / DP-SGD logistic regression (clip C, noise N(0, (sigma C)^2), T steps, Poisson rate q), "
                   "releases the parameters; switches plant known bugs")
    privacy_claim = "mu-GDP, mu = sqrt(T) C_sens / (sigma C) (Dong, Roth and Su 2022, Cor. 3.3)"
    canary_norm = 100.0
    """The canary's feature norm, in units of C: its gradient at theta = 0 has norm canary_norm C / 2 >> C."""
    one_run_release = "coefficients"
    """The release starts with the linear model's k coefficients (:mod:`audit.engine.one_run`)."""

    def __init__(
        self, mu: float | None = None, sigma: float | None = None, steps: int = 10, learning_rate: float = 0.1,
        clip_norm: float = 1.0, l2: float = 0.0, sampling_rate: float = 1.0, neighbours: str = "add_remove",
        clipping: bool = True,
        clip_norm_applied: float | None = None, noise_over_dataset_size: bool = False,
        replace_one_as_add_remove: bool = False, pass_nan_gradients: bool = False,
        release_dataset_size: bool = False,
    ) -> None:
        super().__init__(
            mu=mu, sigma=sigma, steps=steps, learning_rate=learning_rate, clip_norm=clip_norm, l2=l2,
            sampling_rate=sampling_rate, neighbours=neighbours, clipping=clipping, clip_norm_applied=clip_norm_applied,
            noise_over_dataset_size=noise_over_dataset_size, replace_one_as_add_remove=replace_one_as_add_remove,
            pass_nan_gradients=pass_nan_gradients, release_dataset_size=release_dataset_size,
        )
        if mu is not None and sigma is not None:
            raise ValueError(f"give mu or sigma, not both. Found mu={mu!r}, sigma={sigma!r}.")
        if not is_number(sampling_rate) or not 0.0 < float(sampling_rate) <= 1.0:
            raise ValueError(f"sampling_rate must be in (0, 1]. Found {sampling_rate!r}.")
        if float(sampling_rate) < 1.0 and sigma is None:
            raise ValueError("a sampling_rate below 1 (DP-SGD) is calibrated by the noise multiplier: give sigma "
                             f"(e.g. sigma = 0.7) instead of mu. Found mu={mu!r}.")
        self.sampling_rate = float(sampling_rate)
        if neighbours not in NEIGHBOURS:
            raise ValueError(f"neighbours must be one of {', '.join(map(repr, NEIGHBOURS))}. Found {neighbours!r}.")
        switches = dict(clipping=clipping, noise_over_dataset_size=noise_over_dataset_size,
                        replace_one_as_add_remove=replace_one_as_add_remove, pass_nan_gradients=pass_nan_gradients,
                        release_dataset_size=release_dataset_size)
        for key, value in switches.items():
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{key} must be true or false. Found {value!r}.")
        if replace_one_as_add_remove and neighbours != "replace_one":
            raise ValueError("replace_one_as_add_remove plants a bug of replace_one accounting; "
                             f"set neighbours = 'replace_one'. Found neighbours={neighbours!r}.")
        if not is_number(l2) or not 0.0 <= float(l2) < math.inf:
            raise ValueError(f"l2 must be a finite number >= 0. Found {l2!r}.")
        self.steps = positive_int("steps", steps)
        self.learning_rate = check_positive(learning_rate, "learning_rate")
        self.clip_norm = check_positive(clip_norm, "clip_norm")
        self.applied_clip_norm = _optional_positive(clip_norm_applied, "clip_norm_applied") or self.clip_norm
        self.l2 = float(l2)
        self.neighbours = neighbours
        self.clipping, self.noise_over_dataset_size = bool(clipping), bool(noise_over_dataset_size)
        self.pass_nan_gradients, self.release_dataset_size = bool(pass_nan_gradients), bool(release_dataset_size)
        accounted = 1.0 if neighbours == "add_remove" or replace_one_as_add_remove else 2.0
        self.accounted_sensitivity = accounted
        if sigma is None:
            self.mu = check_positive(1.0 if mu is None else mu, "mu")
            self.sigma = math.sqrt(self.steps) * accounted / self.mu
        else:
            self.sigma = check_positive(sigma, "sigma")
            self.mu = math.sqrt(self.steps) * accounted / self.sigma
        self.true_mu = self._true_mu()
        self.true_epsilon = math.inf if self.true_mu is None else None

    def training_parameters(self) -> dict[str, float]:
        """What an accountant reads of this run (:mod:`audit.config.accounting`): T steps at sampling rate q of
        noise multiplier sigma C / C_sens, C_sens as accounted (C, or 2C for ``replace_one``, C again under
        ``replace_one_as_add_remove``: the accountant then inherits that bug)."""
        return {"noise_multiplier": self.sigma / self.accounted_sensitivity, "sampling_rate": self.sampling_rate,
                "steps": self.steps}

    def library_claim(self, d_in: int, epsilons: Sequence[float] | None = None, delta: float | None = None) -> Any:
        """``[[claims]] from = "library"``: dp_accounting's PLD privacy profile of :meth:`training_parameters`
        (:func:`audit.config.accounting.pld_profile_claim`); the profile states every delta, so ``delta`` is not read."""
        from audit.config.accounting import pld_profile_claim

        return pld_profile_claim(self.training_parameters(), d_in, epsilons)

    def _true_mu(self) -> float | None:
        """The mu-GDP the sampler has over ``self.neighbours`` (None: not DP for any epsilon over all datasets)."""
        if not self.clipping or self.pass_nan_gradients or self.noise_over_dataset_size:
            return None  # unbounded gradients; a NaN record turns the release NaN; noise sigma C / m, m unbounded
        if self.release_dataset_size and self.neighbours == "add_remove":
            return None  # the released size differs between neighbours
        sensitivity = (2.0 if self.neighbours == "replace_one" else 1.0) * self.applied_clip_norm
        return math.sqrt(self.steps) * sensitivity / (self.sigma * self.clip_norm)

    @property
    def true_privacy(self) -> str:
        if self.true_mu is None:
            return f"claims {self.mu:.4g}-GDP; not DP for any epsilon"
        claim = "" if math.isclose(self.true_mu, self.mu) else f"claims {self.mu:.4g}-GDP; true: "
        bound = f"at most (Poisson sampling at q = {self.sampling_rate:g} amplifies it) " * (self.sampling_rate < 1)
        return (f"{claim}{bound}{self.true_mu:.4g}-GDP over {self.neighbours} neighbours: "
                f"({gdp_epsilon(self.true_mu, DELTA):.4g}, {DELTA:g})-DP")

    @property
    def theory_law(self) -> SubsampledGaussianSteps | Any:
        """Under ``add_remove`` neighbours and when DP: the T steps at rate q of noise multiplier sqrt(T) / true_mu
        (the linear class's last-iterate heuristic, every class's composition; :mod:`audit.theory.table`), read
        at delta :data:`DELTA` unless an audit gives its own.  Otherwise the base class's (a pure-DP epsilon
        when known)."""
        if self.true_mu is None or self.neighbours != "add_remove":
            return super().theory_law
        return SubsampledGaussianSteps(self.steps, self.sampling_rate, math.sqrt(self.steps) / self.true_mu, DELTA)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        features, labels = self._records(dataset)
        if not self.pass_nan_gradients:  # a record that is not finite has a non-finite gradient: it adds 0
            finite = np.isfinite(features).all(axis=1) & np.isfinite(labels)
            features, labels = np.where(finite[:, None], features, 0.0), np.where(finite, labels, 0.0)
        m, k = features.shape
        row_norms = np.linalg.norm(features, axis=1)
        noise_scale = self.sigma * self.clip_norm / (max(m, 1) if self.noise_over_dataset_size else 1)
        theta = np.zeros((n, k))
        for _ in range(self.steps):  # sequential over steps, vectorised over the n runs
            residuals = special.expit(theta @ features.T) - labels  # (n, m): g_i = residual_i x_i
            if self.sampling_rate < 1.0:  # Poisson sampling: record i in run j's batch with probability q
                residuals = residuals * (rng.random(residuals.shape) < self.sampling_rate)
            if self.clipping:
                with np.errstate(divide="ignore", invalid="ignore"):  # a zero gradient: C / 0 = inf, kept as is
                    residuals = residuals * np.minimum(1.0, self.applied_clip_norm / (np.abs(residuals) * row_norms))
            if not self.pass_nan_gradients:
                residuals = np.where(np.isfinite(residuals), residuals, 0.0)
            gradient = residuals @ features + rng.normal(0.0, noise_scale, size=(n, k)) + self.l2 * theta
            theta = theta - self.learning_rate * gradient
        if self.release_dataset_size:
            return np.hstack([theta, np.full((n, 1), float(m))])
        return theta

    @staticmethod
    def _records(dataset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(features (m, k), labels (m,)) of a dataset of rows (features..., label); labels checked in {0, 1}."""
        records = np.asarray(dataset, dtype=float)
        if records.ndim != 2 or records.shape[1] < 2:
            raise ValueError(f"dp_gd_logistic takes a dataset of records (features..., label) with at least one "
                             f"feature: shape (m, k + 1), k >= 1. Found shape {records.shape}.")
        labels = records[:, -1]
        bad = np.isfinite(labels) & (labels != 0.0) & (labels != 1.0)
        if np.any(bad):
            raise ValueError(f"dp_gd_logistic labels (the last column) must be 0 or 1. Found {labels[bad][0]!r}.")
        return records[:, :-1], labels

    @property
    def canary_direction(self) -> list[float]:
        """The direction of the ``canary`` class (:mod:`attacks.declared`), declared before any run: the canary
        of the first default pair lies on the third feature, unused by the data, with label 1, so its clipped
        gradient step raises theta_3 (the released parameter on that feature): large on M(d'), the dataset
        with the canary.  A released dataset size (``release_dataset_size``) is a last coordinate, weighted 0."""
        return [0.0, 0.0, 1.0] + [0.0] * self.release_dataset_size

    def default_pairs(self) -> list[Pair]:
        """A fixed dataset of 20 records (two informative features, a third always 0, labels 0/1), and:

        p0, the canary: a record of feature norm ``canary_norm`` C on the unused third feature, label 1,
        added (``add_remove``), or replacing a record of the opposite feature (``replace_one``: the
        two clipped gradients point in opposite directions, 2C apart); p1, a record of NaN features
        in the canary's place (a special value: its gradient is not finite); p2, a mislabelled point:
        feature norm ``canary_norm`` C along the data's own direction (1, 1, 0) / sqrt(2), label 0 where
        the data say 1, added (``add_remove``) or replacing the same point correctly labelled
        (``replace_one``).  The model never fits it (the data pull theta the other way), so its gradient
        stays clipped at C at every step: for T > 1 it is the stronger canary (p0's gradient vanishes
        once theta fits it after a step or two).
        """
        generator = np.random.default_rng(20261127)
        features = np.hstack([generator.normal(size=(20, 2)), np.zeros((20, 1))])
        labels = (features[:, 0] + features[:, 1] + generator.normal(size=20) > 0).astype(float)
        base = np.column_stack([features, labels])
        norm = self.canary_norm * self.clip_norm
        canary = np.array([[0.0, 0.0, norm, 1.0]])
        nan_record = np.array([[np.nan, np.nan, np.nan, 1.0]])
        mislabelled = np.array([[norm / math.sqrt(2.0), norm / math.sqrt(2.0), 0.0, 0.0]])
        if self.neighbours == "add_remove":
            return [(base, np.vstack([base, record])) for record in (canary, nan_record, mislabelled)]
        opposite = canary * np.array([1.0, 1.0, -1.0, 1.0])
        d = np.vstack([base, opposite])
        labelled = mislabelled + np.array([0.0, 0.0, 0.0, 1.0])
        return [(d, np.vstack([base, canary])), (d, np.vstack([base, nan_record])),
                (np.vstack([base, labelled]), np.vstack([base, mislabelled]))]


MECHANISMS = (DPGradientDescent,)
