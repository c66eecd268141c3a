"""Betting confidence sequences for the mean of values in [0, 1], valid at every sample size and stopping time.

Waudby-Smith and Ramdas (2024), sections 4 and 5.  For a candidate mean m,
the *capital* of a bettor who stakes a fraction lambda_i of it on each value
x_i exceeding m,

    K_t(m) = prod_{i <= t} (1 + lambda_i(m) (x_i - m)),

is a nonnegative martingale when the values are independent with mean m and
lambda_i(m) is chosen from x_1 .. x_{i-1} only (*predictable*) with
0 <= lambda_i(m) <= c / m, c < 1 (each factor is then at least 1 - c > 0).
Ville's inequality gives P(K_t(m) >= 1 / a for some t) <= a, so

    C_t = {m : max_{s <= t} K_s(m) < 1 / a}

holds the true mean at every t at once with probability >= 1 - a: its bound
at a stopping time, or at the time an audit looked last, is valid however
the time was chosen.  The bets are the *predictable plug-in* of their
Eq. (26), lambda_i = min(sqrt(2 log(1 / a_0) / (sigma_{i-1}^2 i log(1 + i))),
c / m), with the running estimates mu_i = (1/2 + sum_{j <= i} x_j) / (i + 1)
and sigma_i^2 = (1/4 + sum_{j <= i} (x_j - mu_j)^2) / (i + 1) (Eq. 25) and
c = 1/2; a_0 is a design level fixed before the data: the capital is one
process, and C_t at any level a is valid.  These are one-sided sequences (the
lower bound bets on values above m, the upper one is the lower bound of
1 - x); a two-sided interval splits its error between them.

The capital is kept on a fixed grid of candidate means, evenly spaced in
log-odds (:data:`GRID`, dense near 0 and 1, where set probabilities lie).
Each factor decreases in m (for lambda = lambda~ < c / m the factor is
1 + lambda~ (x - m); for lambda = c / m it is 1 + c (x / m - 1)), so
max_s K_s(m) does too and the excluded means form an interval [0, L): the
reported lower bound is the largest *grid* mean excluded (0 when none is),
at most L and hence conservative by at most one grid step.  Memory is the
grid's, whatever the sample size; the values must be fed in their order of
drawing (the bets depend on the past), in batches of any size.

Reference
---------
I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting", J. R. Stat. Soc. B
86(1):1-27, 2024.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

GRID = expit(np.linspace(-12.0, 12.0, 481))
"""Candidate means: 481 points evenly spaced in log-odds from -12 to 12 (a step of 5 % in m / (1 - m))."""
TRUNCATION = 0.5
"""c: the bets are at most c / m, so the capital loses at most half of itself on one value."""
ROWS = 2_048
"""Values per block: the log capital after a value is the block's start plus the sum of the block's log factors up to
it (the blocks fix the order of the additions, hence the numbers to the last bit)."""
TILE = 64
"""Values whose log factors are computed at once inside a block (memory TILE x the candidate means: the processor's
cache), whatever the block's size."""
KELLY_FRACTIONS = np.r_[0.99, 0.9, 0.5 ** np.arange(1, 13)]
"""kappa_d of the diversified Kelly bets lambda = kappa_d / m on a stream of indicators (:class:`BernoulliBetting`):
the Kelly fraction (p - m) / (1 - m) of a set whose probability p exceeds m by 0.0002 (2^-12) to 0.5, and 0.9 and
0.99 for a stream of ones only (the upper bound of a set of Q that no output fell in: at 32 000 outputs and error
0.001, 0.00032 with them, 0.00048 without, Clopper-Pearson's 0.00022).  Each factor is at least 1 - kappa_d > 0."""


@dataclass(frozen=True)
class BettingSequence:
    """The lower-bound capital of a stream of values in [0, 1] on candidate means, after ``n`` values.

    Build with :meth:`start`, feed with :meth:`update` (a new object; the
    values in drawing order); read with :meth:`lower_bound` and
    :meth:`upper_bound` at any error rate.  ``design_level``: a_0 of the bets;
    ``means``: the candidate means, increasing in (0, 1) (:data:`GRID` unless
    :meth:`start` was given more, fixed before the data) of x (``log_capital``,
    ``log_peak``) and of 1 - x (``mirror_capital``, ``mirror_peak``).
    """

    design_level: float
    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    log_capital: np.ndarray = field(default_factory=lambda: np.zeros(GRID.size))
    log_peak: np.ndarray = field(default_factory=lambda: np.zeros(GRID.size))
    mirror_capital: np.ndarray = field(default_factory=lambda: np.zeros(GRID.size))
    mirror_peak: np.ndarray = field(default_factory=lambda: np.zeros(GRID.size))
    mirror_squares: float = 0.0
    means: np.ndarray = field(default_factory=lambda: GRID)

    @classmethod
    def start(cls, design_level: float, extra_means=()) -> BettingSequence:
        """No value yet; bets tuned for one-sided bounds at error ``design_level``, candidate means :data:`GRID`,
        ``extra_means`` in (0, 1) and their reflections 1 - m (a finer grid where the lower and upper bounds are
        expected; all fixed before the data).

        Every candidate mean is tested by the same capital, so the bound read
        off more means is as valid and at least as high (module docstring)."""
        if not 0.0 < design_level < 1.0:
            raise ValueError(f"design_level must be in (0, 1). Found {design_level!r}.")
        extra = np.asarray(extra_means, dtype=float).ravel()
        if not np.all((extra > 0.0) & (extra < 1.0)):
            raise ValueError("extra_means must lie in (0, 1).")
        means = np.unique(np.r_[GRID, extra, 1.0 - extra])
        zeros = np.zeros(means.size)
        return cls(float(design_level), log_capital=zeros, log_peak=zeros, mirror_capital=zeros, mirror_peak=zeros,
                   means=means)

    def update(self, values, threads: int = 1) -> BettingSequence:
        """The sequence after ``values`` (1-d, in [0, 1], in drawing order) more; with ``threads`` > 1 the
        capitals of x and of 1 - x are fed at once on two threads (the same numbers)."""
        x = np.asarray(values, dtype=float).ravel()
        if x.size and not (np.all(x >= 0.0) and np.all(x <= 1.0)):
            raise ValueError("values must lie in [0, 1]; rescale them by a range fixed before the data.")
        state = self
        for begin in range(0, x.size, ROWS):
            state = state._update_block(x[begin:begin + ROWS], threads)
        return state

    def _update_block(self, x: np.ndarray, threads: int) -> BettingSequence:
        (capital, peak, squares), (mirror, mirror_peak, mirror_squares) = in_threads([
            lambda: _capital(x, self.n, self.total, self.squares, self.log_capital, self.log_peak,
                             self.design_level, self.means),
            lambda: _capital(1.0 - x, self.n, self.n - self.total, self.mirror_squares, self.mirror_capital,
                             self.mirror_peak, self.design_level, self.means)], threads)
        return BettingSequence(self.design_level, self.n + x.size, self.total + float(x.sum()), squares, capital,
                               peak, mirror, mirror_peak, mirror_squares, self.means)

    def lower_bound(self, error: float) -> float:
        """A lower bound on the mean, valid with probability ``1 - error`` at every n at once."""
        return _excluded_below(self.log_peak, error, self.means)

    def upper_bound(self, error: float) -> float:
        """An upper bound on the mean (one minus the lower bound of 1 - x), valid as :meth:`lower_bound`."""
        return 1.0 - _excluded_below(self.mirror_peak, error, self.means)

    def to_record(self) -> dict:
        """Plain JSON: the counts and running sums, and the candidate means and four capital arrays as lists."""
        return dict(design_level=self.design_level, n=self.n, total=self.total, squares=self.squares,
                    mirror_squares=self.mirror_squares,
                    **{name: getattr(self, name).tolist()
                       for name in ("log_capital", "log_peak", "mirror_capital", "mirror_peak", "means")})

    @classmethod
    def from_record(cls, record: Mapping) -> BettingSequence:
        """The sequence of :meth:`to_record`'s record (bounds equal the original's; a record without ``means``
        is on :data:`GRID`)."""
        arrays = {name: np.asarray(record[name], dtype=float)
                  for name in ("log_capital", "log_peak", "mirror_capital", "mirror_peak")}
        return cls(float(record["design_level"]), int(record["n"]), float(record["total"]), float(record["squares"]),
                   mirror_squares=float(record["mirror_squares"]),
                   means=np.asarray(record.get("means", GRID), dtype=float), **arrays)


@dataclass(frozen=True)
class BernoulliBetting:
    """A confidence sequence for the mean of a stream of indicators (values 0 or 1), read at its updates (looks).

    The plug-in bets of :class:`BettingSequence` are tuned to the variance
    and bet little on a mean near 0: a rare set's lower bound lags far behind
    Clopper-Pearson's.  This capital is the mixture, with weights 1/2 and
    1 / (2 D), of the plug-in capital and of the D *diversified Kelly* bettors
    of Waudby-Smith and Ramdas (2024, section 5.6) with constant bets
    lambda_d = kappa_d / m (:data:`KELLY_FRACTIONS`, kappa_d < 1), whose
    capital on indicators has the closed form
    (1 - kappa_d + kappa_d / m)^k (1 - kappa_d)^(n - k) in the count k of ones.
    A mixture of nonnegative martingales with weights summing to 1 is one,
    each term decreases in m, and so does the mixture: the bounds are read off
    the grid as :class:`BettingSequence`'s, from the mixture's running maximum
    over the looks (a subset of the times, so Ville's inequality still
    bounds the error at every look and stopping time).
    """

    sequence: BettingSequence
    ones: int = 0
    log_peak: np.ndarray = field(default_factory=lambda: np.full(GRID.size, -np.inf))
    mirror_peak: np.ndarray = field(default_factory=lambda: np.full(GRID.size, -np.inf))

    @classmethod
    def start(cls, design_level: float) -> BernoulliBetting:
        """No value yet; the plug-in bets tuned for one-sided bounds at ``design_level`` (fixed before the data)."""
        return cls(BettingSequence.start(design_level))

    @property
    def n(self) -> int:
        return self.sequence.n

    def update(self, indicators) -> BernoulliBetting:
        """The sequence after ``indicators`` (0 / 1 or booleans, in drawing order) more, and a look at them."""
        x = np.asarray(indicators, dtype=float).ravel()
        if not np.all((x == 0.0) | (x == 1.0)):
            raise ValueError("indicators must be 0 or 1 (or booleans).")
        sequence, ones = self.sequence.update(x), self.ones + int(x.sum())
        lower = _mixture(sequence.log_capital, ones, sequence.n - ones)
        mirror = _mixture(sequence.mirror_capital, sequence.n - ones, ones)
        return BernoulliBetting(sequence, ones, np.maximum(self.log_peak, lower), np.maximum(self.mirror_peak, mirror))

    def lower_bound(self, error: float) -> float:
        """A lower bound on the mean, valid with probability ``1 - error`` at every look at once."""
        return _excluded_below(self.log_peak, error)

    def upper_bound(self, error: float) -> float:
        """An upper bound on the mean, valid as :meth:`lower_bound`."""
        return 1.0 - _excluded_below(self.mirror_peak, error)

    def to_record(self) -> dict:
        """Plain JSON: the plug-in sequence's record, the count of ones and the mixture's peaks."""
        return dict(sequence=self.sequence.to_record(), ones=self.ones, log_peak=self.log_peak.tolist(),
                    mirror_peak=self.mirror_peak.tolist())

    @classmethod
    def from_record(cls, record: Mapping) -> BernoulliBetting:
        """The sequence of :meth:`to_record`'s record (bounds equal the original's)."""
        return cls(BettingSequence.from_record(record["sequence"]), int(record["ones"]),
                   np.asarray(record["log_peak"], dtype=float), np.asarray(record["mirror_peak"], dtype=float))


def in_threads(tasks: list[Callable], threads: int) -> list:
    """The results of ``tasks`` (functions of no argument), in their order, on up to ``threads`` threads: the
    capitals' work is numpy's, which runs outside the interpreter's lock, so independent capitals are fed at once
    (each one's numbers are those of one thread)."""
    if threads <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(min(threads, len(tasks))) as pool:
        return list(pool.map(lambda task: task(), tasks))


def mean_lower_bound(values, error: float, refinements: int = 64) -> float:
    """The lower bound of :class:`BettingSequence` (design level ``error``) on the mean of ``values`` (in [0, 1],
    in drawing order), read after the last one and refined between grid means.

    The grid bound L_k = GRID[k] leaves the means in (L_k, GRID[k + 1]) untested;
    their capital is the same process (same bets, each factor decreasing in
    m), evaluated on ``refinements`` means evenly spaced in that gap, and the
    largest excluded one is returned.  Every candidate mean is tested by the
    one confidence sequence, so the refined bound is as valid as the grid's
    (at every n, hence at the last); it removes the grid's conservatism of up
    to 5 % in m / (1 - m), which matters for a logarithm of the bound (the
    ``kl`` and ``renyi`` objectives of :mod:`attacks.bounded_witness`).
    """
    x = np.asarray(values, dtype=float).ravel()
    if x.size and not (np.all(x >= 0.0) and np.all(x <= 1.0)):
        raise ValueError("values must lie in [0, 1]; rescale them by a range fixed before the data.")
    low = _excluded_below(_peak(x, error, GRID), error)
    above = GRID[GRID > low]
    if not above.size or not x.size:
        return low
    means = np.linspace(low, above[0], refinements + 2)[1:-1]
    excluded = np.flatnonzero(_peak(x, error, means) >= np.log(1.0 / error))
    return float(means[excluded[-1]]) if excluded.size else low


def _peak(x: np.ndarray, design_level: float, means: np.ndarray) -> np.ndarray:
    """The running maximum of the log capital on ``means`` after all of ``x`` (blocks of :data:`ROWS`)."""
    log_capital, log_peak, squares, total = np.zeros(means.size), np.zeros(means.size), 0.0, 0.0
    for begin in range(0, x.size, ROWS):
        block = x[begin:begin + ROWS]
        log_capital, log_peak, squares = _capital(block, begin, total, squares, log_capital, log_peak, design_level,
                                                  means)
        total += float(block.sum())
    return log_peak


def _mixture(log_plug_in: np.ndarray, ones: int, zeros: int) -> np.ndarray:
    """log of the mixture capital on the grid: 1/2 the plug-in capital, 1/(2 D) each Kelly bettor's closed form."""
    kappa = KELLY_FRACTIONS[:, None]
    kelly = ones * np.log1p(kappa * (1.0 / GRID[None, :] - 1.0)) + zeros * np.log1p(-kappa)
    terms = np.vstack([log_plug_in[None, :] + np.log(0.5), kelly + np.log(0.5 / KELLY_FRACTIONS.size)])
    return np.logaddexp.reduce(terms, axis=0)


def _capital(x: np.ndarray, n: int, total: float, squares: float, log_capital: np.ndarray, log_peak: np.ndarray,
             design_level: float, means: np.ndarray = GRID) -> tuple[np.ndarray, np.ndarray, float]:
    """(log capital, running maximum of the log capital, sum of squared deviations) after the block ``x`` (Eq. 25
    and 26 of Waudby-Smith and Ramdas; the bet on value i uses the values before it only), on the candidate
    ``means`` (:data:`GRID` unless refined).

    The log capital after value i of the block is its start plus the cumulative sum of the log factors
    (:func:`_summed_log_factors`); its running maximum is the start plus the cumulative sums' maximum (rounding
    is monotone, so the two agree to the last bit)."""
    if not x.size:
        return log_capital, log_peak, squares
    i = n + np.arange(1, x.size + 1)  # the values' positions, 1-based
    running = total + np.cumsum(x)
    mean_after = (0.5 + running) / (i + 1)  # mu_i
    deviations = squares + np.cumsum((x - mean_after) ** 2)
    variance_before = (0.25 + np.r_[squares, deviations[:-1]]) / i  # sigma_{i-1}^2 = (1/4 + sum_{j<i}) / i
    bets = np.sqrt(2.0 * np.log(1.0 / design_level) / (variance_before * i * np.log1p(i)))
    last, highest = _summed_log_factors(x, bets, means)
    return log_capital + last, np.maximum(log_peak, log_capital + highest), float(deviations[-1])


def _summed_log_factors(x: np.ndarray, bets: np.ndarray, means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(last, largest) of the cumulative sums over the values of log(1 + lambda_i(m) (x_i - m)), lambda_i(m) =
    min(bet_i, c / m), on every candidate mean at once.

    The values go by :data:`TILE` (an array of a tile's factors, values by row and means by column, stays in the
    processor's cache); each row of cumulative sums is the row before it plus the value's factors, added in the
    values' order, as a cumulative sum over the whole block would (the same numbers to the last bit).  Where no
    bet of a tile reaches c / m of the largest mean, lambda_i(m) = bet_i on every mean (the minimum is not
    taken)."""
    inverse = TRUNCATION / means
    smallest = inverse.min()
    steps, gaps = np.empty((min(TILE, x.size), means.size)), np.empty((min(TILE, x.size), means.size))
    carry, highest = None, np.full(means.size, -np.inf)
    for begin in range(0, x.size, TILE):
        values = x[begin:begin + TILE]
        tile, gap = steps[:values.size], gaps[:values.size]
        np.subtract(values[:, None], means[None, :], out=gap)
        stakes = bets[begin:begin + TILE, None]  # lambda_i(m) where no bet is truncated
        if stakes.max() > smallest:
            stakes = np.minimum(stakes, inverse[None, :], out=tile)  # lambda_i(m)
        np.multiply(stakes, gap, out=tile)
        np.log1p(tile, out=tile)
        if carry is not None:
            tile[0] += carry
        rows = list(tile)
        for before, row in zip(rows, rows[1:]):
            np.add(before, row, out=row)
        carry = tile[-1].copy()
        np.maximum(highest, tile.max(axis=0), out=highest)
    return carry, highest


def _excluded_below(log_peak: np.ndarray, error: float, means: np.ndarray = GRID) -> float:
    """The largest candidate mean (of the increasing ``means``) whose capital has reached 1 / error (0 when none
    has): the means up to it are excluded, the capital's maximum decreasing in the mean (module docstring)."""
    if not 0.0 < error < 1.0:
        raise ValueError(f"error must be in (0, 1). Found {error!r}.")
    excluded = np.flatnonzero(log_peak >= np.log(1.0 / error))
    return float(means[excluded[-1]]) if excluded.size else 0.0
