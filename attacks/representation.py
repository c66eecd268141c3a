"""Attacks on the representation of outputs: exact-value atoms and IEEE-754 float features.

Every other attack class looks at an output only as a real number.  Real
mechanisms fail in how numbers are represented: the textbook Laplace
computed in floating point has a porous support (Mironov, "On significance
of the least significant bits for differential privacy", CCS 2012),
``x + noise`` carries the precision of x (Haney et al., "Precision-based
attacks and interval refining", 2022), and a buggy release that sometimes
returns the exact answer puts a point mass in a continuous law.  Two feature
maps expose these to the set attacks of :class:`attacks.adversary.Adversary`
(``ipm`` and ``dp`` directly, ``kl`` and ``renyi`` through the binary
divergence of the set's counts, :mod:`attacks.event_divergence`):

``atoms`` (:class:`AtomTable`)
    g(x) = log((c_P(x) + 1/2) / (n_P + 1)) - log((c_Q(x) + 1/2) / (n_Q + 1)),
    where c_P(x), c_Q(x) count the TRAINING outputs of P and Q bitwise equal
    to x (every coordinate, ``-0.0`` distinct from ``0.0``) and n_P, n_Q are
    the training sizes: a smoothed log ratio of exact-value frequencies
    (Krichevsky-Trofimov half counts).  A value seen fewer than
    ``ATOM_MIN_COUNT`` times in training (P and Q together) scores as a value
    never seen, with zero counts: log((n_Q + 1) / (n_P + 1)), 0 when
    n_P = n_Q.  Rare values are pooled with the unseen ones because their
    ratios rest on a handful of counts: a set of them would be scored on a
    few held-out outputs, where a zero count of one input says next to
    nothing (a discrete law's tail atoms), while a real point mass repeats.
    The attack sets S = {s (g - t) > 0} are the sets of values that repeat
    under one input more than under the other: point masses.  A continuous
    law has no repeats, so its held-out outputs are unseen values and fall
    outside every S that excludes the unseen score: nothing is flagged.
    On its own training rows the table scores each row *leave-one-out*
    (:meth:`AtomTable.fit_transform`: the row's own count removed), i.e. as
    the table scores a fresh draw, so that the attack set is chosen for the
    held-out outputs rather than for the memorised training ones.

``floatbits`` (:class:`FloatFeatures` then a depth-``FLOATBITS_DEPTH`` tree)
    phi(x) = :func:`float_features` of every output coordinate (sign,
    unbiased exponent, trailing zero bits of the mantissa, granularity = the
    exponent of the lowest set bit, the 8 lowest mantissa bits, and the
    distances to the grids 2^k Z, k in ``GRID_EXPONENTS``), followed by the
    one-hot leaf of a depth-3 decision tree fitted to tell P from Q on
    phi; the score g is the leaf's smoothed log ratio, as for ``treeK``.
    The real value enters only through the sign and the exponent.

What the classes contain, and what they refute.  Both are set classes:
their witnesses are indicators of sets (+-1 for the IPM), and their ``kl``
and ``renyi`` values are those of the sets' indicators (the binary
divergence of P(S) and Q(S), a lower bound on the divergence by the data
processing inequality, finite at any sample size).  An atoms set is a finite union
of points and a floatbits set a union of cells of a partition of the float64
values; both are measurable sets of outputs, so the classes are contained
in ``all`` and in no other class: an attack of either refutes claims about
``all`` (ordinary epsilon-DP, KL and Renyi DP, zCDP) only.  A feature map is post-processing
of the released output (the adversary reads the bits the mechanism
released), so a violation measured on the features is a violation of the
mechanism itself.
"""

from __future__ import annotations

import numpy as np

from attacks.estimator import Transformer, check_fitted, checked_input

ATOM_MIN_COUNT = 10
"""Training occurrences (P and Q together) below which a value scores as unseen (the ``atoms`` class)."""

GRID_EXPONENTS = (-32, -16, 0)
"""k of the grids 2^k Z whose (relative) distance from each coordinate is a feature."""

FLOATBITS_DEPTH = 3
"""Depth of the tree fitted on the float features (the ``floatbits`` class)."""

FEATURE_NAMES = (
    "sign",
    "exponent",
    "trailing_zeros",
    "granularity",
    "low_bits",
    *(f"grid_distance_2^{k}" for k in GRID_EXPONENTS),
)
"""Names of the float features of one coordinate, in the order of :func:`float_features`."""

ZERO_GRANULARITY = 1024
"""Granularity of +-0.0, a multiple of every power of two: above that of any finite non-zero float (<= 1023)."""

_MANTISSA_BITS = 52
_MANTISSA_MASK = np.uint64((1 << _MANTISSA_BITS) - 1)
_LOW_BITS_MASK = np.uint64(0xFF)
_EXPONENT_BIAS = 1023
_SUBNORMAL_GRANULARITY_BASE = -1074  # the weight 2^-1074 of a subnormal's lowest mantissa bit


def float_features(X) -> np.ndarray:
    """The IEEE-754 features of every float64 coordinate of X (IEEE 754-2008, section 3.4).

    For a coordinate x with sign bit s, biased exponent field E and 52-bit
    mantissa field m (x = (-1)^s 1.m 2^(E - 1023) when E > 0,
    (-1)^s 0.m 2^-1022 when E = 0):

    * ``sign``: s (1 for -0.0);
    * ``exponent``: E - 1023 (-1023 for zeros and subnormals);
    * ``trailing_zeros``: trailing zero bits of m (52 when m = 0);
    * ``granularity``: the exponent j of the largest power of two 2^j that
      divides x, i.e. of its lowest set bit: E - 1023 - 52 + tz for normal
      x, -1074 + tz for subnormals, :data:`ZERO_GRANULARITY` for +-0.0.
      x lies on the grid 2^j Z exactly when granularity >= j (Mironov's
      porous supports: a textbook Laplace on input 0 has outputs with
      granularity < -53, on input 1 none);
    * ``low_bits``: the 8 lowest bits of m as an integer in [0, 255];
    * ``grid_distance_2^k`` for k in :data:`GRID_EXPONENTS`: the distance
      from x / 2^k to the nearest integer, in [0, 1/2] (0 for |x| >= 2^(k+52),
      which is a multiple of 2^k).

    Parameters
    ----------
    X : array-like of shape (n, d)
        Finite float64 outputs (a 1-D array is read as d = 1).

    Returns
    -------
    ndarray of shape (n, d * len(FEATURE_NAMES))
        The features of coordinate j in columns j * 8 to j * 8 + 7, in the
        order of :data:`FEATURE_NAMES`.

    Raises
    ------
    ValueError
        If X holds NaN or infinite values: they have no granularity or grid
        distance, and mechanism outputs are checked to be finite.

    Examples
    --------
    >>> float_features([[1.0], [3 * 2.0**-55]])[:, :4].tolist()
    [[0.0, 0.0, 52.0, 0.0], [0.0, -54.0, 51.0, -55.0]]
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"X must be an array of shape (n, d). Found shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError(
            f"float features need finite outputs; X holds {int(np.sum(~np.isfinite(X)))} NaN or inf values. "
            "Remove them (a mechanism's outputs must be finite)."
        )
    bits = np.ascontiguousarray(X).view(np.uint64)
    sign = bits >> np.uint64(63)
    biased = ((bits >> np.uint64(_MANTISSA_BITS)) & np.uint64(0x7FF)).astype(np.int64)
    mantissa = bits & _MANTISSA_MASK
    trailing = _trailing_zeros(mantissa)
    exponent = biased - _EXPONENT_BIAS
    columns = [sign, exponent, trailing, _granularity(X, biased, trailing), mantissa & _LOW_BITS_MASK]
    columns += [_grid_distance(X, k) for k in GRID_EXPONENTS]
    features = np.stack([np.asarray(column, dtype=np.float64) for column in columns], axis=-1)
    return features.reshape(X.shape[0], X.shape[1] * len(FEATURE_NAMES))


def _granularity(X: np.ndarray, biased: np.ndarray, trailing: np.ndarray) -> np.ndarray:
    """The exponent of the lowest set bit of each float64 of X (its biased exponent field and the trailing zeros of
    its mantissa given), :data:`ZERO_GRANULARITY` for +-0.0 (:func:`float_features`' ``granularity``)."""
    granularity = np.where(biased > 0, biased - _EXPONENT_BIAS - _MANTISSA_BITS + trailing,
                           _SUBNORMAL_GRANULARITY_BASE + trailing)
    return np.where(X == 0, ZERO_GRANULARITY, granularity)


def finest_bits(X) -> np.ndarray:
    """Per output (row of X, finite float64 coordinates), the exponent of the finest bit any coordinate sets: the
    smallest :func:`float_features` ``granularity`` over its coordinates, shifted by 1074 into [0, 2098].

    A textbook Laplace on input 0 sets bits below 2^-53 that the same sampler on input 1 never sets (Mironov
    2012): the shares of outputs finer than 2^t on two inputs tell them apart (:func:`separating_bit`).

    Examples
    --------
    >>> (finest_bits([[1.0], [2.0**-60]]) - 1074).tolist()
    [0, -60]
    """
    X = np.asarray(X, dtype=np.float64)
    X = X[:, None] if X.ndim == 1 else X.reshape(len(X), -1)
    bits = np.ascontiguousarray(X).view(np.uint64)
    biased = ((bits >> np.uint64(_MANTISSA_BITS)) & np.uint64(0x7FF)).astype(np.int64)
    granularity = _granularity(X, biased, _trailing_zeros(bits & _MANTISSA_MASK))
    return granularity.min(axis=1) - _SUBNORMAL_GRANULARITY_BASE


FINEST_BITS = ZERO_GRANULARITY - _SUBNORMAL_GRANULARITY_BASE + 1
"""The number of values :func:`finest_bits` takes (the length of its histograms)."""


def separating_bit(counts_d: np.ndarray, counts_d_prime: np.ndarray) -> tuple[int, float, float] | None:
    """The event "some coordinate sets a bit below 2^t" whose shares of outputs on d and d' differ most.

    Parameters
    ----------
    counts_d, counts_d_prime : ndarray of shape (FINEST_BITS,)
        Histograms of :func:`finest_bits` of the outputs on each dataset.

    Returns
    -------
    (t, share on d, share on d') or None
        None when a dataset has no output or no threshold separates them.
    """
    n_d, n_d_prime = counts_d.sum(), counts_d_prime.sum()
    if not (n_d and n_d_prime):
        return None
    below_d, below_d_prime = np.cumsum(counts_d) / n_d, np.cumsum(counts_d_prime) / n_d_prime  # share finer than t+1
    gap = np.abs(below_d - below_d_prime)
    index = int(np.argmax(gap))
    if gap[index] == 0.0:
        return None
    return index + 1 + _SUBNORMAL_GRANULARITY_BASE, float(below_d[index]), float(below_d_prime[index])


def _trailing_zeros(mantissa: np.ndarray) -> np.ndarray:
    """Trailing zero bits of 52-bit integers (52 for 0), by isolating the lowest set bit."""
    lowest = mantissa & (~mantissa + np.uint64(1))  # two's complement: the lowest set bit alone
    with np.errstate(divide="ignore"):
        position = np.log2(lowest.astype(np.float64))  # exact: a power of two below 2^52
    return np.where(mantissa == 0, _MANTISSA_BITS, position).astype(np.int64)


def _grid_distance(X: np.ndarray, k: int) -> np.ndarray:
    """Distance from x / 2^k to the nearest integer (the scaling by 2^-k is exact unless it overflows)."""
    on_grid = np.abs(X) >= 2.0 ** (k + _MANTISSA_BITS)
    scaled = np.ldexp(np.where(on_grid, 0.0, X), -k)
    return np.abs(scaled - np.rint(scaled))


class FloatFeatures(Transformer):
    """The feature map of the ``floatbits`` class: :func:`float_features` as a scikit-learn transformer.

    Stateless: ``fit`` only records the number of input coordinates.

    Examples
    --------
    >>> FloatFeatures().fit_transform([[2.0**-60]])[0, 3]
    np.float64(-60.0)
    """

    def fit(self, X, y=None) -> FloatFeatures:
        checked_input(self, X, dtype=np.float64)
        return self

    def transform(self, X) -> np.ndarray:
        check_fitted(self, "n_features_in_")
        return float_features(checked_input(self, X, dtype=np.float64, reset=False))

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        check_fitted(self, "n_features_in_")
        return np.array([f"x{j}_{name}" for j in range(self.n_features_in_) for name in FEATURE_NAMES], dtype=object)


class AtomTable(Transformer):
    """The feature map of the ``atoms`` class: the smoothed log ratio of exact-value frequencies.

    ``fit(X, y)`` (y = 0 for outputs of P, 1 for Q) counts how often each
    exact row of X (bitwise, every coordinate) occurs under P and under Q;
    ``transform(X)`` returns the module docstring's
    g(x) = log((c_P(x) + 1/2) / (n_P + 1)) - log((c_Q(x) + 1/2) / (n_Q + 1))
    as one column, with c_P = c_Q = 0 for values seen fewer than
    ``min_count`` times; ``fit_transform(X, y)`` returns the leave-one-out score of
    each training row (its own count removed), the score a fresh draw of
    that value gets, as :class:`sklearn.preprocessing.TargetEncoder` cross-fits
    its training rows.

    Parameters
    ----------
    min_count : int, default=ATOM_MIN_COUNT
        Values with fewer occurrences among the (other) training rows score
        as unseen ones.

    Attributes
    ----------
    values_ : ndarray of void
        The distinct training rows as raw bytes, sorted.
    counts_ : ndarray of shape (n_values, 2)
        Their counts among P's and Q's training rows.
    n_ : ndarray of shape (2,)
        n_P and n_Q.

    Examples
    --------
    >>> X = [[0.5], [0.5], [0.5], [1.5], [2.5]]
    >>> table = AtomTable(min_count=2).fit(X, [0, 0, 0, 1, 1])
    >>> bool(table.transform([[0.5]])[0, 0] > 1.0), bool(table.transform([[7.0]])[0, 0] < 0.3)
    (True, True)
    """

    def __init__(self, min_count: int = ATOM_MIN_COUNT):
        self.min_count = min_count

    def fit(self, X, y) -> AtomTable:
        self._count(X, y)
        return self

    def fit_transform(self, X, y=None, **fit_params) -> np.ndarray:
        """Fit, then score each training row leave-one-out (its own occurrence removed)."""
        if y is None:
            raise ValueError("AtomTable needs labels y (0 for P, 1 for Q) to count values per input. Found y=None.")
        keys, labels = self._count(X, y)
        index = np.searchsorted(self.values_, keys)
        counts = self.counts_[index].astype(np.float64)
        counts[np.arange(labels.size), labels] -= 1.0
        return self._log_ratio(counts)

    def transform(self, X) -> np.ndarray:
        check_fitted(self, "values_")
        keys = _row_keys(checked_input(self, X, dtype=np.float64, reset=False))
        index = np.minimum(np.searchsorted(self.values_, keys), self.values_.size - 1)
        counts = np.where((self.values_[index] == keys)[:, None], self.counts_[index], 0).astype(np.float64)
        return self._log_ratio(counts)

    def _count(self, X, y) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(self.min_count, bool) or not isinstance(self.min_count, (int, np.integer)) or self.min_count < 1:
            raise ValueError(f"min_count must be a positive integer. Found {self.min_count!r}.")
        X, y = checked_input(self, X, y, dtype=np.float64, y_numeric=True)
        labels = np.asarray(y).astype(np.int64)
        if not np.all(np.isin(labels, (0, 1))):
            raise ValueError(
                f"y must hold 0 (outputs of P) and 1 (outputs of Q). Found labels {np.unique(y).tolist()}."
            )
        keys = _row_keys(X)
        self.values_, inverse = np.unique(keys, return_inverse=True)
        self.counts_ = np.zeros((self.values_.size, 2), dtype=np.int64)
        np.add.at(self.counts_, (inverse.ravel(), labels), 1)
        self.n_ = np.bincount(labels, minlength=2)
        return keys, labels

    def _log_ratio(self, counts: np.ndarray) -> np.ndarray:
        counts = np.where(counts.sum(axis=1, keepdims=True) < self.min_count, 0.0, counts)
        frequencies = (counts + 0.5) / (self.n_ + 1.0)
        return (np.log(frequencies[:, 0]) - np.log(frequencies[:, 1]))[:, None]


def _row_keys(X: np.ndarray) -> np.ndarray:
    """Each row of a float64 array as one raw-bytes value: equal keys exactly when the rows are bitwise equal."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    return X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
