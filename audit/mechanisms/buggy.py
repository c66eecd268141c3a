"""The known-buggy suite: DP-Sniper's benchmark mechanisms with their true privacy.

Sources: Ding, Wang, Wang, Zhang, Kifer, "Detecting violations of
differential privacy", CCS 2018 (StatDP; noisy histograms Algs. 9-10, report
noisy max Algs. 5-8); Lyu, Su, Li, "Understanding the sparse vector technique
for differential privacy", PVLDB 2017 (SVT Algs. 1-6 and their true privacy,
their Fig. 1 table); Bichsel, Steffen, Bogunovic, Vechev, "DP-Sniper",
IEEE S&P 2021, which benchmarks all of them with epsilon = 0.1, SVTs with
c = 1 and 10 queries, report noisy max with 5 queries (the defaults here;
DP-Sniper's ``dpsniper/mechanisms`` and ``experiments/exp_default.py``).

Each mechanism *claims* ``epsilon``; ``true_epsilon`` is an epsilon it
actually satisfies over its ``default_pairs`` (StatDP's patterns), tight
where the docstring says so, and None where only "more than the claim" is
known.  A correct
audit passes the claim for the correct ones and finds a violation for the
others.  Inputs are vectors of query answers / counts (sensitivity 1 each).
"""

from __future__ import annotations

import numpy as np

from audit.mechanisms.additive_noise import LaplaceMechanism
from audit.mechanisms.base import BaseMechanism, Pair
from audit.mechanisms.query_answers import ReportNoisyMax, SparseVector, answer_vector, sparse_vector, statdp_pairs
from audit.theory.table import FloatLaplace, LeakedValue
from audit.config.validation import check_positive


class NoisyHist1(BaseMechanism):
    """Noisy histogram, correct: x + Lap(0, 1/epsilon) per count (Ding et al. 2018, Alg. 9).

    Neighbouring histograms differ by 1 in one count: **epsilon-DP**, tight.
    """

    name = "noisy_hist_1"
    description = "histogram + Lap(1/epsilon) per count (correct; StatDP Alg. 9)"
    privacy_claim = "epsilon-DP (pure), tight"
    input_relation = "counts"
    num_counts = 5
    noise_scale_is_epsilon = False

    def __init__(self, epsilon: float = 0.1) -> None:
        super().__init__(epsilon=epsilon)
        self.epsilon = check_positive(epsilon, "epsilon")
        self.scale = self.epsilon if self.noise_scale_is_epsilon else 1.0 / self.epsilon
        self.true_epsilon = 1.0 / self.scale

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        counts = answer_vector(dataset)
        return counts + rng.laplace(0.0, self.scale, size=(n, counts.size))

    def default_pairs(self) -> list[Pair]:
        return statdp_pairs(self.num_counts, componentwise=False)


class NoisyHist2(NoisyHist1):
    """Noisy histogram, BUG: noise scale epsilon instead of 1/epsilon (Ding et al. 2018, Alg. 10).

    A count changing by 1 moves a Laplace of scale epsilon: the privacy
    loss is 1/epsilon, so **true epsilon = 1/epsilon** (10 at the default
    0.1) against the claimed epsilon.
    """

    name = "noisy_hist_2"
    description = "histogram + Lap(epsilon) per count (BUG: scale epsilon; StatDP Alg. 10)"
    privacy_claim = "claims epsilon-DP; true epsilon = 1/epsilon"
    noise_scale_is_epsilon = True


class ReportNoisyMax1(ReportNoisyMax):
    """Report noisy max with Laplace noise of scale 2/epsilon, releasing the index
    (Ding et al. 2018, Alg. 5): correct, **epsilon-DP**."""

    name = "report_noisy_max_1"
    description = "argmax of answers + Lap(2/epsilon) (correct; StatDP Alg. 5)"
    privacy_claim = "epsilon-DP (pure)"
    fixed_noise = "laplace"

    def __init__(self, epsilon: float = 0.1) -> None:
        super().__init__(epsilon=epsilon, noise=self.fixed_noise)
        self.params = {"epsilon": epsilon}


class ReportNoisyMax2(ReportNoisyMax1):
    """Report noisy max with exponential noise of scale 2/epsilon, releasing the
    index (Ding et al. 2018, Alg. 6): correct, **epsilon-DP**."""

    name = "report_noisy_max_2"
    description = "argmax of answers + Exp(2/epsilon) (correct; StatDP Alg. 6)"
    fixed_noise = "exponential"


class ReportNoisyMax3(ReportNoisyMax1):
    """Report noisy max with Laplace noise, BUG: releases the noisy maximum VALUE
    (Ding et al. 2018, Alg. 7).

    The density of the maximum of k shifted Laplaces of scale b = 2/epsilon
    is a sum of terms f_i prod_{j != i} F_j, each of whose factors changes by
    at most e^{1/b} when its answer moves by 1, with equality in the left
    tail.  Over the default pairs (k = 5 answers, all shifted by 1 in "all
    above"/"all below"): **true epsilon = k epsilon / 2 = 2.5 epsilon**.
    """

    name = "report_noisy_max_3"
    description = "max VALUE of answers + Lap(2/epsilon) (BUG; StatDP Alg. 7)"
    privacy_claim = "claims epsilon-DP; true epsilon = k epsilon / 2 for k answers"
    release = "max"

    def __init__(self, epsilon: float = 0.1) -> None:
        super().__init__(epsilon=epsilon)
        self.true_epsilon = self.num_queries * self.epsilon / 2.0


class ReportNoisyMax4(ReportNoisyMax1):
    """Report noisy max with exponential noise, BUG: releases the noisy maximum
    VALUE (Ding et al. 2018, Alg. 8).

    Exponential noise is non-negative, so the value is at least max_i q_i:
    when the largest answer drops by 1 ("all below"), outputs in [max q - 1,
    max q) have positive probability only on one side: **true epsilon = inf**.
    """

    name = "report_noisy_max_4"
    description = "max VALUE of answers + Exp(2/epsilon) (BUG; StatDP Alg. 8)"
    privacy_claim = "claims epsilon-DP; not epsilon-DP for any finite epsilon"
    fixed_noise = "exponential"
    release = "max"

    def __init__(self, epsilon: float = 0.1) -> None:
        super().__init__(epsilon=epsilon)
        self.true_epsilon = float("inf")


class SVT1(SparseVector):
    """Lyu et al. 2017, Alg. 1 with DP-Sniper's benchmark defaults: correct, **epsilon-DP**."""

    name = "svt_1"
    description = "sparse vector, Lyu et al. Alg. 1 (correct)"

    def __init__(self, epsilon: float = 0.1, threshold: float = 0.5, cutoff: int = 1) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold, cutoff=cutoff)


class SVT2(SVT1):
    """Lyu et al. 2017, Alg. 2 (Dwork and Roth 2014): threshold noise Lap(c/eps1) redrawn
    after every "above", query noise Lap(2c/eps2), eps1 = eps2 = epsilon/2: correct,
    **epsilon-DP**."""

    name = "svt_2"
    description = "sparse vector, Lyu et al. Alg. 2 (correct; threshold noise redrawn after each above)"

    def __init__(self, epsilon: float = 0.1, threshold: float = 1.0, cutoff: int = 1) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold, cutoff=cutoff)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        half, c = self.epsilon / 2.0, self.cutoff
        return sparse_vector(
            answer_vector(dataset), n, rng, threshold=self.threshold, threshold_scale=c / half,
            query_scale=2.0 * c / half, cutoff=c, resample_threshold=True,
        )


class SVT3(SVT2):
    """Lyu et al. 2017, Alg. 3 (Roth's lecture notes), BUG: releases the noisy answer
    q_i + nu_i of every "above", with query noise only Lap(c/eps2).

    Output: k flags (1 / 0 / -1 as for Alg. 1) then k values (the noisy
    answer where above, 0 elsewhere).  Not epsilon-DP: Lyu et al. 2017
    (Fig. 1) show its privacy loss is unbounded in the number of queries.
    Over k queries it is at most k eps2 / c = k epsilon / (2c) (the output is
    a function of rho and the answers plus Lap(2c/epsilon) noise), 0.5 at the
    defaults; ``true_epsilon`` is None.
    """

    name = "svt_3"
    description = "sparse vector, Lyu et al. Alg. 3 (BUG: releases noisy answers above the threshold)"
    privacy_claim = "claims epsilon-DP; privacy loss unbounded in the number of queries"

    def __init__(self, epsilon: float = 0.1, threshold: float = 1.0, cutoff: int = 1) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold, cutoff=cutoff)
        self.true_epsilon = None

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        half, c = self.epsilon / 2.0, self.cutoff
        return sparse_vector(
            answer_vector(dataset), n, rng, threshold=self.threshold, threshold_scale=1.0 / half,
            query_scale=c / half, cutoff=c, release_values=True,
        )


class SVT4(SVT2):
    """Lyu et al. 2017, Alg. 4, BUG: eps1 = epsilon/4, query noise Lap(1/eps2) with
    eps2 = 3 epsilon/4, not scaled by the cutoff c.

    It satisfies (1 + 6c) epsilon / 4-DP, and not epsilon-DP (Lyu et al.
    2017, Fig. 1 and section 4): ``true_epsilon`` = 1.75 epsilon at c = 1.
    """

    name = "svt_4"
    description = "sparse vector, Lyu et al. Alg. 4 (BUG: query noise not scaled by c)"
    privacy_claim = "claims epsilon-DP; true epsilon = (1 + 6c) epsilon / 4"

    def __init__(self, epsilon: float = 0.1, threshold: float = 1.0, cutoff: int = 1) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold, cutoff=cutoff)
        self.true_epsilon = (1.0 + 6.0 * self.cutoff) * self.epsilon / 4.0

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        quarter = self.epsilon / 4.0
        return sparse_vector(
            answer_vector(dataset), n, rng, threshold=self.threshold, threshold_scale=1.0 / quarter,
            query_scale=1.0 / (self.epsilon - quarter), cutoff=self.cutoff,
        )


class SVT5(SparseVector):
    """Lyu et al. 2017, Alg. 5, BUG: no noise on the queries and no cutoff; answers
    every query against T + Lap(2/epsilon).

    With answers q_1 > q_2 on D and q_1 < q_2 on D' (StatDP's "X shape"),
    "q_1 above, q_2 below" is possible only on D: **true epsilon = inf**
    (Lyu et al. 2017, Fig. 1).
    """

    name = "svt_5"
    description = "sparse vector, Lyu et al. Alg. 5 (BUG: no query noise, no cutoff)"
    privacy_claim = "claims epsilon-DP; not epsilon-DP for any finite epsilon"

    def __init__(self, epsilon: float = 0.1, threshold: float = 1.0) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold)
        self.params = {"epsilon": epsilon, "threshold": threshold}
        self.cutoff = None  # answers every query
        self.true_epsilon = float("inf")

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return sparse_vector(
            answer_vector(dataset), n, rng, threshold=self.threshold,
            threshold_scale=2.0 / self.epsilon, query_scale=None, cutoff=None,
        )


class SVT6(SVT5):
    """Lyu et al. 2017, Alg. 6, BUG: query noise Lap(2/epsilon) but no cutoff; answers
    every query.

    Not epsilon-DP: every further query costs privacy, so the loss is
    unbounded in the number of queries (Lyu et al. 2017, Fig. 1).  Over k
    queries it is at most k epsilon / 2 (the output is a function of rho and
    the answers plus Lap(2/epsilon) noise), 0.5 at the defaults;
    ``true_epsilon`` is None.
    """

    name = "svt_6"
    description = "sparse vector, Lyu et al. Alg. 6 (BUG: no cutoff)"
    privacy_claim = "claims epsilon-DP; privacy loss unbounded in the number of queries"

    def __init__(self, epsilon: float = 0.1, threshold: float = 1.0) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold)
        self.true_epsilon = None

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        half = self.epsilon / 2.0
        return sparse_vector(
            answer_vector(dataset), n, rng, threshold=self.threshold,
            threshold_scale=1.0 / half, query_scale=1.0 / half, cutoff=None,
        )


class LeakyLaplace(LaplaceMechanism):
    """Laplace mechanism that, with probability p, releases the true sum instead.

    The true answer is an atom on D that D' hits with probability 0 (or
    vice versa): **not epsilon-DP** for any epsilon, and (epsilon, delta)-DP
    only for delta >= p (it is (epsilon, p)-DP).

    Parameters
    ----------
    epsilon : float
    sensitivity : float or list of float
    p : float
        Leak probability, in (0, 1).
    """

    name = "leaky_laplace"
    description = "Laplace mechanism that releases the exact sum with probability p (BUG)"
    privacy_claim = "claims epsilon-DP; true: (epsilon, p)-DP, not (epsilon, delta)-DP for delta < p"
    float_safe = False

    def __init__(self, epsilon: float = 1.0, sensitivity: float | list[float] = 1.0, p: float = 0.01) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity)
        self.params["p"] = p
        self.p = check_positive(p, "p")
        if self.p >= 1.0:
            raise ValueError(f"p must be a probability in (0, 1). Found {p!r}.")
        self.true_epsilon = float("inf")

    def _noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        noise = super()._noise(rng, n)
        noise[rng.random(n) < self.p] = 0.0
        return noise

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> None:
        return None  # a mixture with an atom: no scipy.stats law

    @property
    def theory_law(self) -> LeakedValue:
        """The exact sum, with probability p, is an atom on D that D' lacks."""
        return LeakedValue(self.p)


class TextbookLaplace(LaplaceMechanism):
    """The textbook Laplace mechanism in float64: f(D) + numpy's ``rng.laplace(0, ||v||_1 / epsilon)``.

    The same sampler as the built-in ``laplace``, named for what it is under
    the representation attacks (:mod:`attacks.representation`).  Over the
    reals it is epsilon-DP; in floating point it is **not epsilon-DP for any
    epsilon** (Mironov, CCS 2012): numpy draws U on the grid 2^-53 Z and
    returns b log(2U) (or -b log(2 - 2U)), so the noise takes a sparse
    ("porous") set of float values, and f(D) + noise inherits the
    precision of f(D) (Haney et al. 2022).  On f(D) = 0 the outputs below
    1/2 in magnitude keep their full mantissa (about 2.9% have their lowest
    set bit below 2^-53 at b = 10); on f(D') = 1 the sum is rounded to the
    precision of numbers near 1 and none do.  Such an event has positive
    probability under D and zero under D'.  With epsilon = 0.1, sensitivity
    1 and the default pair (sums 0 and 1) this is DP-Sniper's
    ``floating_point`` experiment (Bichsel et al. 2021, numpy Laplace at
    loc 0 and 1): numpy computes loc + noise in the same float operation.

    Parameters
    ----------
    epsilon : float
    sensitivity : float or list of float
    """

    name = "textbook_laplace"
    description = "sum + numpy rng.laplace(0, ||v||_1/epsilon) in float64 (BUG: porous float support, Mironov 2012)"
    privacy_claim = "claims epsilon-DP; epsilon-DP over the reals, in float64 not epsilon-DP for any epsilon"
    float_safe = False

    def __init__(self, epsilon: float = 1.0, sensitivity: float | list[float] = 1.0) -> None:
        super().__init__(epsilon=epsilon, sensitivity=sensitivity)
        self.true_epsilon = float("inf")

    @property
    def theory_law(self) -> FloatLaplace:
        """The real-valued Laplace's closed forms for the value-based classes; for ``atoms`` and
        ``floatbits`` the restricted ``dp`` divergence is infinite (a single float with its lowest set
        bit below 2^-53 has positive mass under D = 0 and none under D' = 1)."""
        return FloatLaplace(self.scale, tuple(self.v.tolist()))


MECHANISMS = (
    NoisyHist1,
    NoisyHist2,
    ReportNoisyMax1,
    ReportNoisyMax2,
    ReportNoisyMax3,
    ReportNoisyMax4,
    SVT1,
    SVT2,
    SVT3,
    SVT4,
    SVT5,
    SVT6,
    LeakyLaplace,
    TextbookLaplace,
)
