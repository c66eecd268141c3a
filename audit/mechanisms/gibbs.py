"""Posterior-sampling (Gibbs) mechanisms with closed-form output laws (docs/theory.md section 8).

Each mechanism releases one draw h from a distribution that depends on a
dataset of ``records`` records, and carries the data distribution D of
on-average KL privacy (OAKL, Wang, Lei and Fienberg 2016, Def. 2):
``sample_data(m, rng)`` draws m records from D, and Gibbs mechanisms (a
density proportional to exp(-gamma sum_i l(z_i, h) - r(h))) their per-record
loss ``loss(h, records)``, with which :mod:`audit.engine.generalization` measures
the on-average generalization gap of OAKL Thm 4.  ``pair_kl(d, d_prime)`` is
the exact KL between the outputs on two datasets.

Records are clipped to the data domain before use, so the worst-case
statements (``true_epsilon``, ``theory_law``) hold for any input.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from audit.mechanisms.base import BaseMechanism
from audit.theory import bounds
from audit.theory import gibbs as gibbs_theory
from audit.theory.laws import Laplace, LocationScaleLaw, Normal
from audit.theory.table import GaussianShift, LaplaceShift
from audit.config.validation import check_positive, is_number, positive_int

Pair = tuple[np.ndarray, np.ndarray]


class TruncatedNormalData(BaseMechanism):
    """Base of the mean mechanisms: ``records`` scalar records from N(0, 1) truncated to [-c, c].

    Subclasses define ``_location_scale(dataset)`` and ``_law(location, scale)``.
    """

    truncation: float
    records: int

    def sample_data(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """m records from D = N(0, 1) truncated to [-c, c] (OAKL section 6), shape (m, 1), by the inverse CDF."""
        low, high = special.ndtr(-self.truncation), special.ndtr(self.truncation)
        return special.ndtri(rng.uniform(low, high, size=(m, 1)))

    def data_variance(self) -> float:
        """Var of one record under D (:func:`audit.theory.gibbs.truncated_normal_variance`)."""
        return gibbs_theory.truncated_normal_variance(self.truncation)

    def clipped(self, dataset: np.ndarray) -> np.ndarray:
        """The dataset as ``records`` values in [-c, c]; a ValueError names a wrong shape."""
        values = np.asarray(dataset, dtype=float)
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.shape != (self.records,):
            raise ValueError(
                f"{self.name} takes a dataset of records = {self.records} scalar records (shape ({self.records},) "
                f"or ({self.records}, 1)); set records to the dataset size. Found shape {np.shape(dataset)}."
            )
        return np.clip(values, -self.truncation, self.truncation)

    def _location_scale(self, dataset: np.ndarray) -> tuple[float, float]:
        raise NotImplementedError

    def _law(self, location: float, scale: float) -> LocationScaleLaw:
        raise NotImplementedError

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[LocationScaleLaw, LocationScaleLaw]:
        return self._law(*self._location_scale(d)), self._law(*self._location_scale(d_prime))

    def default_pairs(self) -> list[Pair]:
        """Zeros with the first record at -c vs at +c: the largest move of the mean (worst case)."""
        low, high = np.zeros(self.records), np.zeros(self.records)
        low[0], high[0] = -self.truncation, self.truncation
        return [(low, high)]


class GaussianPosteriorMean(TruncatedNormalData):
    """Posterior sampling of a Gaussian mean with known noise variance, at temperature gamma.

    Model z | h ~ N(h, s^2), prior h ~ N(mu0, tau^2); the release is one draw
    from the posterior with the likelihood raised to gamma,
    N(posterior mean, 1/lambda) with lambda = 1/tau^2 + gamma n / s^2
    (:func:`audit.theory.gibbs.gaussian_mean_posterior`).  A Gibbs mechanism
    with l(z, h) = (z - h)^2 / (2 s^2) and r(h) = -log N(h; mu0, tau^2): OAKL
    Thm 4 equates its on-average KL privacy with gamma times its on-average
    generalization gap.  Records are clipped to [-c, c]; D is N(0, 1)
    truncated there.  Not epsilon-DP (Gaussian outputs); worst-case KL
    gamma^2 (2c)^2 / (2 s^4 lambda), Renyi alpha times that.

    Parameters
    ----------
    temperature : float
        gamma > 0.
    records : int
        n, the number of records of every dataset.
    noise_scale : float
        s, the model's known noise standard deviation.
    prior_mean, prior_scale : float
        mu0 and tau > 0.
    truncation : float
        c: records are clipped to [-c, c].
    """

    name = "gaussian_posterior_mean"
    description = "one draw from the tempered posterior of a Gaussian mean (known variance, normal prior)"
    privacy_claim = "worst-case KL gamma^2 (2c)^2 / (2 s^4 lambda); on-average KL gamma^2 Var_D / (s^4 lambda)"
    true_epsilon = float("inf")

    def __init__(
        self, temperature: float = 1.0, records: int = 10, noise_scale: float = 1.0,
        prior_mean: float = 0.0, prior_scale: float = 1.0, truncation: float = 2.0,
    ) -> None:
        super().__init__(temperature=temperature, records=records, noise_scale=noise_scale,
                         prior_mean=prior_mean, prior_scale=prior_scale, truncation=truncation)
        self.temperature = check_positive(temperature, "temperature")
        self.records = positive_int("records", records)
        self.noise_scale = check_positive(noise_scale, "noise_scale")
        if not is_number(prior_mean) or not np.isfinite(prior_mean):
            raise ValueError(f"prior_mean must be a finite number. Found {prior_mean!r}.")
        self.prior_mean = float(prior_mean)
        self.prior_scale = check_positive(prior_scale, "prior_scale")
        self.truncation = check_positive(truncation, "truncation")

    @property
    def true_privacy(self) -> str:
        return f"not epsilon-DP; worst-case KL {self.worst_case_kl():g}; on-average KL {self.on_average_kl():g}"

    def _theory_args(self) -> dict:
        return {"noise_scale": self.noise_scale, "prior_scale": self.prior_scale, "temperature": self.temperature}

    def _location_scale(self, dataset: np.ndarray) -> tuple[float, float]:
        mean, variance = gibbs_theory.gaussian_mean_posterior(
            np.sum(self.clipped(dataset)), self.records, prior_mean=self.prior_mean, **self._theory_args()
        )
        return float(mean), float(np.sqrt(variance))

    def _law(self, location: float, scale: float) -> Normal:
        return Normal(location, scale)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        location, scale = self._location_scale(dataset)
        return (location + scale * rng.standard_normal(n))[:, None]

    def loss(self, h: np.ndarray, records: np.ndarray) -> np.ndarray:
        """l(z, h) = (z - h)^2 / (2 s^2) for every output (rows) and record (columns)."""
        return (np.asarray(records, dtype=float).reshape(1, -1) - np.asarray(h).reshape(-1, 1)) ** 2 / (
            2 * self.noise_scale**2
        )

    def pair_kl(self, d: np.ndarray, d_prime: np.ndarray) -> float:
        """Exact KL(M(d) || M(d')) of two Gaussians of one variance."""
        (m_p, s_p), (m_q, s_q) = self._location_scale(d), self._location_scale(d_prime)
        return float(gibbs_theory.normal_kl(m_p, s_p**2, m_q, s_q**2))

    def on_average_kl(self, replaced: int = 1) -> float:
        """Closed form :func:`audit.theory.gibbs.gaussian_mean_on_average_kl` under D."""
        return gibbs_theory.gaussian_mean_on_average_kl(
            self.records, self.data_variance(), replaced=replaced, **self._theory_args()
        )

    def worst_case_kl(self) -> float:
        """Closed form :func:`audit.theory.gibbs.gaussian_mean_worst_case_kl` over [-c, c]."""
        return gibbs_theory.gaussian_mean_worst_case_kl(self.records, 2 * self.truncation, **self._theory_args())

    @property
    def theory_law(self) -> GaussianShift:
        """The posteriors of two datasets whose sums differ by 2c: one variance, the largest mean shift.

        Its KL is :meth:`worst_case_kl` (exact for every class from linear up:
        a Gaussian mean shift, CBDP appendix Thm 10).
        """
        means, variance = gibbs_theory.gaussian_mean_posterior(
            np.array([0.0, 2 * self.truncation]), self.records, prior_mean=self.prior_mean, **self._theory_args()
        )
        return GaussianShift(float(np.sqrt(variance)), (float(means[1] - means[0]),))


class LaplaceTruncatedMean(TruncatedNormalData):
    """OAKL's first experiment: the mean of n records in [-c, c] plus Laplace noise of scale 1/gamma.

    h ~ exp(-gamma |mean(Z) - h|) (OAKL section 6, with records from N(0, 1)
    truncated to [-2, 2]): **(2 c gamma / n)-DP**, tight for the default pair
    (:func:`audit.theory.gibbs.laplace_mean_worst_case_epsilon`).  Its loss
    |mean(Z) - h| is not a sum over records, so OAKL Thm 4 does not apply;
    its on-average KL is :func:`audit.theory.gibbs.laplace_mean_on_average_kl`.

    Parameters
    ----------
    temperature : float
        gamma > 0: the inverse of the noise scale.
    records : int
        n, the number of records of every dataset.
    truncation : float
        c: records are clipped to [-c, c].
    """

    name = "laplace_truncated_mean"
    description = "mean of n records clipped to [-c, c] + Laplace noise of scale 1/gamma (OAKL section 6)"
    privacy_claim = "(2 c gamma / n)-DP (pure), tight"

    def __init__(self, temperature: float = 1.0, records: int = 100, truncation: float = 2.0) -> None:
        super().__init__(temperature=temperature, records=records, truncation=truncation)
        self.temperature = check_positive(temperature, "temperature")
        self.records = positive_int("records", records)
        self.truncation = check_positive(truncation, "truncation")
        self.true_epsilon = gibbs_theory.laplace_mean_worst_case_epsilon(self.records, self.truncation, self.temperature)

    def _location_scale(self, dataset: np.ndarray) -> tuple[float, float]:
        return float(np.mean(self.clipped(dataset))), 1.0 / self.temperature

    def _law(self, location: float, scale: float) -> Laplace:
        return Laplace(location, scale)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        location, scale = self._location_scale(dataset)
        return (location + rng.laplace(0.0, scale, size=n))[:, None]

    def pair_kl(self, d: np.ndarray, d_prime: np.ndarray) -> float:
        """Exact KL of two Laplace laws of one scale: t + exp(-t) - 1, t = gamma |shift|."""
        shift = abs(self._location_scale(d)[0] - self._location_scale(d_prime)[0])
        return bounds.laplace_kl(self.temperature * shift) if shift > 0 else 0.0

    def on_average_kl(self, replaced: int = 1, function_class: str = "all") -> float:
        """Closed form (by quadrature) :func:`audit.theory.gibbs.laplace_mean_on_average_kl`; one record only."""
        if replaced != 1:
            raise ValueError(f"the Laplace mean's closed form covers replaced = 1 record. Found {replaced!r}.")
        return gibbs_theory.laplace_mean_on_average_kl(self.records, self.truncation, self.temperature, function_class)

    def worst_case_kl(self) -> float:
        """KL of the default pair: t + exp(-t) - 1 at t = epsilon."""
        return bounds.laplace_kl(self.true_epsilon)

    @property
    def theory_law(self) -> LaplaceShift:
        """Lap(0, 1/gamma) against Lap(2c/n, 1/gamma): the means of two neighbours differ by at most 2c/n."""
        return LaplaceShift(1.0 / self.temperature, (2 * self.truncation / self.records,))


class LinearRegressionPosterior(BaseMechanism):
    """OAKL's second experiment: 1-D linear regression posterior sampling at temperature gamma.

    Records z = (x, y), x clipped to [-1, 1] and y to [-2, 2]; the release is
    h ~ exp(-gamma sum_i (y_i - x_i h)^2) N(h; 0, tau^2), a Gaussian
    (:func:`audit.theory.gibbs.regression_posterior`).  D: x ~ U[-1, 1],
    y = x + e with e ~ U[-1, 1] (OAKL section 6, true slope 1).  A Gibbs
    mechanism with l(z, h) = (y - x h)^2: OAKL Thm 4 applies.  OAKL's
    64 gamma-DP needs h restricted to [-2, 2]; this unrestricted Gaussian
    posterior is not epsilon-DP.

    Parameters
    ----------
    temperature : float
        gamma > 0.
    records : int
        n, the number of records of every dataset.
    prior_scale : float
        tau > 0.
    """

    name = "linear_regression_posterior"
    description = "one draw from the tempered Gaussian posterior of a 1-D regression slope (OAKL section 6)"
    privacy_claim = "not epsilon-DP; on-average KL = gamma x on-average generalization gap (OAKL Thm 4)"
    true_epsilon = float("inf")

    def __init__(self, temperature: float = 1.0, records: int = 10, prior_scale: float = 1.0) -> None:
        super().__init__(temperature=temperature, records=records, prior_scale=prior_scale)
        self.temperature = check_positive(temperature, "temperature")
        self.records = positive_int("records", records)
        self.prior_scale = check_positive(prior_scale, "prior_scale")

    def sample_data(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """m records (x, y) from D: x, e ~ U[-1, 1], y = x + e; shape (m, 2)."""
        x = rng.uniform(-1.0, 1.0, m)
        return np.column_stack([x, x + rng.uniform(-1.0, 1.0, m)])

    def clipped(self, dataset: np.ndarray) -> np.ndarray:
        """The dataset as ``records`` rows (x, y) clipped to [-1, 1] x [-2, 2]."""
        values = np.asarray(dataset, dtype=float)
        if values.shape != (self.records, 2):
            raise ValueError(
                f"{self.name} takes a dataset of records = {self.records} rows (x, y), shape ({self.records}, 2); "
                f"set records to the dataset size. Found shape {values.shape}."
            )
        return np.column_stack([np.clip(values[:, 0], -1.0, 1.0), np.clip(values[:, 1], -2.0, 2.0)])

    def _location_scale(self, dataset: np.ndarray) -> tuple[float, float]:
        records = self.clipped(dataset)
        mean, variance = gibbs_theory.regression_posterior(
            records[:, 0], records[:, 1], temperature=self.temperature, prior_scale=self.prior_scale
        )
        return float(mean), float(np.sqrt(variance))

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        location, scale = self._location_scale(dataset)
        return (location + scale * rng.standard_normal(n))[:, None]

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[Normal, Normal]:
        return tuple(Normal(*self._location_scale(x)) for x in (d, d_prime))

    def loss(self, h: np.ndarray, records: np.ndarray) -> np.ndarray:
        """l(z, h) = (y - x h)^2 for every output (rows) and record (columns)."""
        records = np.asarray(records, dtype=float)
        return (records[:, 1].reshape(1, -1) - records[:, 0].reshape(1, -1) * np.asarray(h).reshape(-1, 1)) ** 2

    def pair_kl(self, d: np.ndarray, d_prime: np.ndarray) -> float:
        """Exact KL(M(d) || M(d')) of two Gaussians (the variances differ with sum x_i^2)."""
        (m_p, s_p), (m_q, s_q) = self._location_scale(d), self._location_scale(d_prime)
        return float(gibbs_theory.normal_kl(m_p, s_p**2, m_q, s_q**2))

    def default_pairs(self) -> list[Pair]:
        """Records (1, 1) with the first at (1, 2) vs (1, -2): the largest move of sum x_i y_i."""
        low, high = np.ones((self.records, 2)), np.ones((self.records, 2))
        low[0, 1], high[0, 1] = -2.0, 2.0
        return [(low, high)]


MECHANISMS = (GaussianPosteriorMean, LaplaceTruncatedMean, LinearRegressionPosterior)
