"""Mechanisms on query answers or counts: the matrix mechanism, randomized response, report noisy max, sparse vector.

The input is a 1-D vector of query answers or counts, as in StatDP (Ding et
al. 2018, "Detecting violations of differential privacy") and DP-Sniper
(Bichsel et al. 2021).  Every answer has sensitivity 1; the neighbouring
inputs of ``default_pairs`` are StatDP's test patterns (:func:`statdp_pairs`).
True privacy is stated in each class docstring and as ``true_epsilon``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.mechanisms.base import BaseMechanism, Pair
from audit.theory.table import MatrixLaplace
from audit.config.validation import as_numbers, check_positive, is_number, positive_int


def answer_vector(dataset: np.ndarray) -> np.ndarray:
    """The input of a query-answer mechanism as a 1-D vector (a single row or column is accepted)."""
    vector = np.asarray(dataset, dtype=float)
    if vector.ndim == 2 and 1 in vector.shape:
        vector = vector.ravel()
    if vector.ndim != 1 or vector.size == 0:
        raise ValueError(
            f"dataset must be a non-empty 1-D vector of query answers or counts. Found shape {vector.shape}."
        )
    return vector


def statdp_pairs(num_queries: int, componentwise: bool) -> list[Pair]:
    """StatDP's neighbouring query-answer vectors (Ding et al. 2018, section 5.1).

    "One above" and "one below" change one answer by 1 (histogram
    neighbours); with ``componentwise`` every answer may change by 1 (queries
    of sensitivity 1 each), adding: one above rest below, one below rest
    above, half-half, all above, all below, and the "X shape".  The same
    patterns drive DP-Sniper (``dpsniper/input/pattern_generator.py``).
    """
    k, half = num_queries, num_queries // 2
    ones = np.ones(k)

    def vector(head: list[float], rest: float, head_len: int = 1) -> np.ndarray:
        return np.array(head * head_len + [rest] * (k - head_len), dtype=float)

    pairs = [(ones, vector([0.0], 1.0)), (ones, vector([2.0], 1.0))]
    if componentwise:
        pairs += [
            (ones, vector([2.0], 0.0)),
            (ones, vector([0.0], 2.0)),
            (ones, vector([2.0], 0.0, half)),
            (ones, np.full(k, 2.0)),
            (ones, np.zeros(k)),
            (vector([1.0], 0.0, half), vector([0.0], 1.0, half)),
        ]
    return pairs


class MatrixMechanism(BaseMechanism):
    """Matrix mechanism W A^+ (A x + ||A||_1 Lap_s(0, 1/epsilon)) on a count vector x.

    A (s x m strategy) is answered with the Laplace mechanism calibrated to
    its L1 sensitivity ||A||_1 (largest column L1 norm: one count changes by
    1); W (workload, default the identity: x is reconstructed) is linear
    post-processing of that release.  **epsilon-DP**, tight when W A^+ is
    injective on the range of A.  CBDP Thm 5 / Corollary 2 bound its
    (lin, Renyi) divergence by (1/(alpha-1)) log(1 + 2^{s(alpha-1)} eps^alpha).

    Parameters
    ----------
    A : list of lists
        Strategy matrix, s x m.
    W : list of lists, optional
        Workload matrix, w x m; default the m x m identity.
    epsilon : float
    """

    name = "matrix"
    description = "W A^+ (A x + ||A||_1 Lap(0, 1/epsilon)) on a count vector x"
    privacy_claim = "epsilon-DP (pure)"
    float_safe = False
    input_relation = "counts"

    def __init__(self, A: Any, W: Any = None, epsilon: float = 1.0) -> None:
        super().__init__(A=A, W=W, epsilon=epsilon)
        self.epsilon = self.true_epsilon = check_positive(epsilon, "epsilon")
        self.A = np.atleast_2d(as_numbers(A, "A"))
        if self.A.ndim != 2 or not np.all(np.isfinite(self.A)) or not np.any(self.A):
            raise ValueError(f"A must be a finite, non-zero s x m matrix. Found {A!r}.")
        m = self.A.shape[1]
        self.W = np.eye(m) if W is None else np.atleast_2d(as_numbers(W, "W"))
        if self.W.ndim != 2 or self.W.shape[1] != m or not np.all(np.isfinite(self.W)):
            raise ValueError(f"W must be a finite matrix with {m} columns (as many as A). Found {W!r}.")
        self.column_norms = np.abs(self.A).sum(axis=0)
        self.l1_sensitivity = float(self.column_norms.max())
        self.reconstruction = self.W @ np.linalg.pinv(self.A)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        x = answer_vector(dataset)
        if x.size != self.A.shape[1]:
            raise ValueError(f"dataset must be a count vector of length {self.A.shape[1]}. Found {x.size}.")
        noisy = self.A @ x + rng.laplace(0.0, self.l1_sensitivity / self.epsilon, size=(n, self.A.shape[0]))
        return noisy @ self.reconstruction.T

    def default_pairs(self) -> list[Pair]:
        x = np.zeros(self.A.shape[1])
        x_prime = x.copy()
        x_prime[int(np.argmax(self.column_norms))] = 1.0
        return [(x, x_prime)]

    @property
    def theory_law(self) -> MatrixLaplace:
        """CBDP Thm 5's matrix mechanism at this A and epsilon (W is post-processing)."""
        return MatrixLaplace(self.epsilon, tuple(map(tuple, self.A.tolist())))


class RandomizedResponse(BaseMechanism):
    """k-ary randomized response on one value x in {0, ..., k-1}.

    Reports x with probability e^eps / (e^eps + k - 1), else one of the other
    k - 1 values uniformly: **epsilon-DP**, tight for any x != x'.

    Parameters
    ----------
    epsilon : float
    k : int
        Number of categories, >= 2 (2 is binary randomized response).
    """

    name = "randomized_response"
    description = "k-ary randomized response on one categorical value"
    privacy_claim = "epsilon-DP (pure), tight"
    float_safe = True  # categories: outputs on a grid

    def __init__(self, epsilon: float = 1.0, k: int = 2) -> None:
        super().__init__(epsilon=epsilon, k=k)
        self.epsilon = self.true_epsilon = check_positive(epsilon, "epsilon")
        self.k = positive_int("k", k)
        if self.k < 2:
            raise ValueError(f"k must be at least 2 categories. Found {k!r}.")
        self.p_truth = 1.0 / (1.0 + (self.k - 1) * np.exp(-self.epsilon))

    def _value(self, dataset: np.ndarray) -> int:
        """The one categorical value the dataset holds."""
        x = answer_vector(dataset)
        if x.size != 1 or x[0] not in range(self.k):
            raise ValueError(f"dataset must be one value in 0..{self.k - 1}. Found {np.asarray(dataset).tolist()!r}.")
        return int(x[0])

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        x = self._value(dataset)
        other = rng.integers(0, self.k - 1, size=n)
        other = other + (other >= x)  # uniform over the k - 1 values other than x
        return np.where(rng.random(n) < self.p_truth, x, other)

    def output_laws(self, d: np.ndarray, d_prime: np.ndarray) -> tuple[Any, Any]:
        """The exact laws on {0, ..., k-1}, as ``scipy.stats.rv_discrete(values=...)``.

        The input value has probability e^eps / (e^eps + k - 1), each other
        value 1 / (e^eps + k - 1); ``audit.theory.exact`` sums over these atoms.
        """
        return self._law(d), self._law(d_prime)

    def _law(self, dataset: np.ndarray) -> Any:
        from scipy import stats  # the exact laws only: not on a mechanism's import

        probabilities = np.full(self.k, (1.0 - self.p_truth) / (self.k - 1))
        probabilities[self._value(np.asarray(dataset, dtype=float))] = self.p_truth
        return stats.rv_discrete(values=(np.arange(self.k), probabilities))()

    def default_pairs(self) -> list[Pair]:
        return [(np.array([0.0]), np.array([1.0]))]


def noisy_max(
    answers: np.ndarray, n: int, rng: np.random.Generator, scale: float, noise: str, release: str
) -> np.ndarray:
    """Add i.i.d. Laplace or exponential noise of ``scale`` to every answer, n times;
    release the index of the maximum (``"argmax"``) or its value (``"max"``)."""
    shape = (n, answers.size)
    draws = rng.laplace(0.0, scale, shape) if noise == "laplace" else rng.exponential(scale, shape)
    noisy = answers + draws
    return noisy.argmax(axis=1) if release == "argmax" else noisy.max(axis=1)


class ReportNoisyMax(BaseMechanism):
    """Report noisy max: the index of the largest answer after noise of scale 2/epsilon.

    Answers have sensitivity 1 each and may all change (StatDP's
    component-wise neighbours); Laplace or exponential noise of scale
    2/epsilon makes the released index **epsilon-DP** (Ding et al. 2018,
    Algs. 5-6; with exponential noise it is permute-and-flip, McKenna and
    Sheldon 2020).

    Parameters
    ----------
    epsilon : float
    noise : {"laplace", "exponential"}
    """

    name = "report_noisy_max"
    description = "index of the largest query answer after Laplace or exponential noise of scale 2/epsilon"
    privacy_claim = "epsilon-DP (pure)"
    float_safe = True  # an index: outputs on a grid
    input_relation = "query-answers"
    release = "argmax"
    num_queries = 5  # length of the default pairs, as in DP-Sniper's benchmark

    def __init__(self, epsilon: float = 1.0, noise: str = "laplace") -> None:
        super().__init__(epsilon=epsilon, noise=noise)
        self.epsilon = self.true_epsilon = check_positive(epsilon, "epsilon")
        if noise not in ("laplace", "exponential"):
            raise ValueError(f"noise must be 'laplace' or 'exponential'. Found {noise!r}.")
        self.noise = noise

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        return noisy_max(answer_vector(dataset), n, rng, 2.0 / self.epsilon, self.noise, self.release)

    def default_pairs(self) -> list[Pair]:
        return statdp_pairs(self.num_queries, componentwise=True)


def sparse_vector(
    answers: np.ndarray,
    n: int,
    rng: np.random.Generator,
    *,
    threshold: float,
    threshold_scale: float,
    query_scale: float | None,
    cutoff: int | None,
    resample_threshold: bool = False,
    release_values: bool = False,
) -> np.ndarray:
    """The sparse vector family of Lyu, Su and Li 2017 (Algs. 1-6), n runs at once.

    Query i is "above" when q_i + nu_i >= T + rho, with rho ~ Lap(threshold_scale)
    and nu_i ~ Lap(query_scale) (no query noise when None).  After ``cutoff``
    answers above, the remaining queries are not answered (None: never stop).
    ``resample_threshold`` draws a fresh rho after every "above" (Alg. 2).

    Returns
    -------
    numpy.ndarray, shape (n, k), or (n, 2k) with ``release_values``
        Per query 1 (above), 0 (below), -1 (not answered: the cutoff was
        reached); with ``release_values`` (Alg. 3) k more columns hold the
        noisy answer q_i + nu_i where above and 0 elsewhere.
    """
    k = answers.size
    noisy = answers + (rng.laplace(0.0, query_scale, (n, k)) if query_scale is not None else 0.0)
    if resample_threshold:
        # rho is redrawn after each "above": the j-th threshold noise serves until the j-th "above".
        rhos = rng.laplace(0.0, threshold_scale, (n, cutoff))
        above = np.zeros((n, k), dtype=bool)
        count = np.zeros(n, dtype=int)
        rows = np.arange(n)
        for i in range(k):  # sequential over the (few) queries, vectorised over the n runs
            active = count < cutoff
            above[:, i] = active & (noisy[:, i] >= threshold + rhos[rows, np.minimum(count, cutoff - 1)])
            count += above[:, i]
    else:
        above = noisy >= threshold + rng.laplace(0.0, threshold_scale, (n, 1))
    flags = above.astype(float)
    if cutoff is not None:
        above_before = np.cumsum(above, axis=1) - above
        flags[above_before >= cutoff] = -1.0
    if not release_values:
        return flags
    values = np.where(flags == 1.0, noisy, 0.0)
    return np.hstack([flags, values])


class SparseVector(BaseMechanism):
    """Sparse vector technique, Lyu, Su and Li 2017, Alg. 1 (the correct one).

    With eps1 = eps2 = epsilon / 2, threshold noise rho ~ Lap(1/eps1) and
    query noise nu_i ~ Lap(2c/eps2), it answers "above" / "below" for each
    query (sensitivity 1 each) until c answers above: **epsilon-DP**
    (Lyu et al. 2017, Thm 2).  Output per query: 1 above, 0 below, -1 not
    reached.

    Parameters
    ----------
    epsilon : float
    threshold : float
        T.
    cutoff : int
        c, the number of "above" answers after which it stops.
    """

    name = "sparse_vector"
    description = "sparse vector technique (Lyu et al. 2017 Alg. 1): 1 above, 0 below, -1 not reached"
    privacy_claim = "epsilon-DP (pure)"
    float_safe = True  # -1, 0 or 1: outputs on a grid
    input_relation = "query-answers"
    num_queries = 10  # length of the default pairs, as in DP-Sniper's benchmark

    def __init__(self, epsilon: float = 1.0, threshold: float = 1.0, cutoff: int = 1) -> None:
        super().__init__(epsilon=epsilon, threshold=threshold, cutoff=cutoff)
        self.epsilon = self.true_epsilon = check_positive(epsilon, "epsilon")
        if not is_number(threshold):
            raise ValueError(f"threshold must be a number. Found {threshold!r}.")
        self.threshold = float(threshold)
        self.cutoff = positive_int("cutoff", cutoff)

    def _sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        half = self.epsilon / 2.0
        return sparse_vector(
            answer_vector(dataset), n, rng, threshold=self.threshold,
            threshold_scale=1.0 / half, query_scale=2.0 * self.cutoff / half, cutoff=self.cutoff,
        )

    def default_pairs(self) -> list[Pair]:
        """StatDP's pairs, plus "one above, rest below" and "one below, rest above" with the odd
        answer LAST: SVT's answers depend on the order of the queries, and its privacy loss
        peaks when every query is answered below the threshold before one above (Lyu et al.
        2017, proof of Thm 2); on StatDP's pairs, whose odd answer comes first, the events
        that reach it are rarer (e.g. Alg. 1 at epsilon = 0.1: log-ratio 0.098 at mass 0.006
        against 0.089 at mass 0.022 with the best StatDP pair)."""
        k = self.num_queries
        odd_last = [(np.ones(k), np.r_[np.full(k - 1, low), high]) for low, high in ((0.0, 2.0), (2.0, 0.0))]
        return statdp_pairs(k, componentwise=True) + odd_last
