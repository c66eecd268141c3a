"""The tables of ``capaudit theory``: exact restricted divergences beside the paper's closed forms.

:func:`theory_table` computes, for the Laplace mechanism (epsilon = 1 / scale)
or the Gaussian mechanism (noise sigma), sensitivity 1, with P the output law
at 0 and Q the output law at 1, over a grid of Renyi orders alpha: the exact
(H, Renyi) values of each polynomial class H (:mod:`audit.theory.exact`),
CBDP Table 1's closed-form upper bound on (lin, Renyi) (CBDP Cor. 2 / Thm 5,
:mod:`audit.theory.bounds`) and Renyi DP, then the KL rows and the IPM row;
every published value is compared with the exact value of every class it
covers and flagged where it is below (:func:`bound_violations`).
:func:`dimensional_table` sets (lin, Renyi) of a d-dimensional built-in beside
the d-dim Table 1 / Corollary 2 bound or the matrix mechanism's Theorem 5:
exact where the problem separates (:func:`linear_reduction`), otherwise the
estimate and lower confidence bound of linear attacks at a stated n.

The report (:mod:`audit.commands.theory_report`) renders these tables; it computes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from attacks.classes import Polynomials, parse_function_class
from attacks.divergences import check_alpha
from attacks.vocabulary import divergence_kind
from audit.theory import bounds
from audit.theory import table as bound_table
from audit.theory.check import BOUND_RTOL  # audit.theory.exact's accuracy: below it, no violation
from audit.theory.exact import restricted_divergence
from audit.config.validation import check_positive

MECHANISMS = ("laplace", "gaussian")
# Twelve orders keep the command to a few seconds (each exact value is a convex program).
DEFAULT_ALPHAS = (1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0)
DEFAULT_CLASSES = ("linear", "poly2", "poly3")
TABLE_COLUMNS = (
    "divergence",
    "alpha",
    "function_class",
    "kind",
    "source",
    "value",
    "bound_violated",
    "violated_by",
)
SCALE_NAMES = {"laplace": "epsilon", "gaussian": "sigma"}
TABLE1_NOT_STATED = "CBDP Table 1, not stated (alpha <= 2)"
"""Source of a Table 1 (lin, Renyi) value at alpha <= 2: shown as published, never applied (Corollary 2: alpha > 2)."""


def output_laws(mechanism: str, scale: float) -> tuple[stats.rv_continuous, stats.rv_continuous]:
    """P = law of M(0), Q = law of M(1) for sensitivity 1 (docs/theory.md section 6).

    Parameters
    ----------
    mechanism : {"laplace", "gaussian"}
    scale : float
        epsilon for Laplace (noise scale 1 / epsilon), sigma for Gaussian.

    Returns
    -------
    p, q : frozen scipy.stats laws
    """
    mechanism, scale = check_mechanism(mechanism, scale)
    if mechanism == "laplace":
        return stats.laplace(loc=0.0, scale=1.0 / scale), stats.laplace(loc=1.0, scale=1.0 / scale)
    return stats.norm(loc=0.0, scale=scale), stats.norm(loc=1.0, scale=scale)


def closed_form_law(mechanism: str, scale: float) -> bound_table.LaplaceShift | bound_table.GaussianShift:
    """The same pair as :func:`output_laws`, as the law record of the bound table (:mod:`audit.theory.table`)."""
    if mechanism == "laplace":
        return bound_table.LaplaceShift(1.0 / scale, (1.0,))
    return bound_table.GaussianShift(scale, (1.0,))


def renyi_dp(mechanism: str, scale: float, alpha: float) -> float:
    """Renyi DP of the mechanism (CBDP appendix Thm 11 Laplace, Thm 12 Gaussian)."""
    return bound_table.theory_bound(closed_form_law(mechanism, scale), "all", "renyi", alpha)


def linear_renyi_bound(mechanism: str, scale: float, alpha: float) -> float:
    """CBDP Table 1's upper bound on (lin, Renyi) as published, stated or not (Cor. 2 Laplace, Thm 5 Gaussian)."""
    return published_linear_renyi(closed_form_law(mechanism, scale), alpha)


def theory_table(
    mechanism: str,
    scale: float,
    alphas: Sequence[float] | None = None,
    classes: Sequence[str] = DEFAULT_CLASSES,
) -> pd.DataFrame:
    """Exact restricted divergences and published closed forms, with violation flags.

    Parameters
    ----------
    mechanism : {"laplace", "gaussian"}
    scale : float
        epsilon > 0 for Laplace, sigma > 0 for Gaussian; sensitivity 1.
    alphas : sequence of float, optional
        Renyi orders > 1; default :data:`DEFAULT_ALPHAS` (1.25 to 10).
    classes : sequence of str
        Polynomial classes (``linear``, ``polyK``); default linear, poly2, poly3.

    Returns
    -------
    pandas.DataFrame
        Long format, one row per value, columns :data:`TABLE_COLUMNS`:
        ``divergence`` ("renyi", "kl", "ipm"), ``alpha`` (NaN unless Renyi),
        ``function_class`` (the class the value is about; "all" = unrestricted),
        ``kind`` ("exact": computed by ``audit.theory.exact``; "closed form": a
        published exact value; "upper bound": a published upper bound),
        ``source``, ``value``, ``bound_violated`` (a published value below the
        exact value of a class it covers, beyond :data:`BOUND_RTOL`) and
        ``violated_by`` (which exact values, with the numbers).

    Raises
    ------
    ValueError
        On an unknown mechanism or class, a non-positive scale, or alpha <= 1.
    """
    mechanism, scale = check_mechanism(mechanism, scale)
    alphas = _check_alphas(alphas)
    classes = _check_classes(classes)
    p, q = output_laws(mechanism, scale)
    law = closed_form_law(mechanism, scale)
    rows = []
    for alpha in alphas:
        for name in classes:
            rows.append(_exact_row(p, q, name, "renyi", alpha))
        rows.append(_published_row(law, "linear", "renyi", alpha))
        rows.append(_published_row(law, "all", "renyi", alpha))
    for name in classes:
        rows.append(_exact_row(p, q, name, "kl", None))
    rows.append(_published_row(law, "linear", "kl", None))
    rows.append(_published_row(law, "all", "kl", None))
    rows.append(_exact_row(p, q, "all", "kl", None))
    rows.append(_exact_row(p, q, "threshold", "ipm", None))
    rows.append(_exact_row(p, q, "all", "ipm", None))
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS[:6])
    return _flag_violations(table)


def bound_violations(table: pd.DataFrame) -> pd.DataFrame:
    """Every (published value, exact value) pair where the published one is below.

    Parameters
    ----------
    table : pandas.DataFrame
        A :func:`theory_table` result.

    Returns
    -------
    pandas.DataFrame
        Columns divergence, alpha, bound_class, source, bound, exact_class,
        exact, excess (= exact - bound); empty when no published value is
        violated.
    """
    return _violations(table).drop(columns="bound_row")


def bound_crossings(mechanism: str, scale: float, low: float, high: float) -> list[float]:
    """Orders alpha in [low, high] where CBDP Table 1's (lin, Renyi) bound equals Renyi DP.

    Below a crossing where the bound exceeds Renyi DP the bound says nothing
    that Renyi DP does not (CBDP Figure 1a: near alpha = 3.3 for Laplace
    epsilon = 1; Figure 2a: near 2.3 for Gaussian sigma = 1). Found by sign
    changes on a fine grid refined with Brent's method.
    """

    def gap(alpha: float) -> float:
        return linear_renyi_bound(mechanism, scale, alpha) - renyi_dp(mechanism, scale, alpha)

    grid = np.linspace(low, high, 401)
    values = np.array([gap(alpha) for alpha in grid])
    changes = np.flatnonzero(np.sign(values[:-1]) * np.sign(values[1:]) < 0)
    return [float(optimize.brentq(gap, grid[i], grid[i + 1], xtol=1e-10)) for i in changes]


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The long table pivoted for reading: one line per divergence (and alpha).

    Columns are ``<class> exact`` for values of ``audit.theory.exact`` and
    ``<class> <kind>`` for published values; ``published bound violated``
    lists the violations of that line.
    """
    labels = np.where(
        table["kind"] == "exact", table["function_class"] + " exact", table["function_class"] + " " + table["kind"]
    )
    lines = table["divergence"].map(lambda name: divergence_kind(name).label)
    lines = np.where(has_order(table), lines + " alpha=" + table["alpha"].map("{:g}".format), lines)
    frame = table.assign(line=lines, column=labels)
    order = list(dict.fromkeys(frame["line"]))
    wide = frame.pivot(index="line", columns="column", values="value").reindex(order)
    columns = frame.drop_duplicates("column").sort_values(
        ["function_class", "kind"], key=lambda values: values.map(_column_rank), kind="stable"
    )
    wide = wide[list(columns["column"])]
    flags = frame.groupby("line", sort=False)["violated_by"].agg(lambda notes: "; ".join(n for n in notes if n))
    wide["published bound violated"] = flags.reindex(order).replace("", "no")
    wide.index.name = None
    wide.columns.name = None
    return wide


def _column_rank(value: str) -> tuple:
    """Linear's values together, then the richer classes, thresholds, and the unrestricted class last."""
    if value in ("exact", "closed form", "upper bound"):
        return (("exact", "closed form", "upper bound").index(value),)
    function_class = parse_function_class(value)
    return (function_class.rank, function_class.degree or 0)


# --- table construction ----------------------------------------------------


def _row(divergence, alpha, function_class, kind, source, value) -> dict:
    alpha = math.nan if alpha is None else float(alpha)
    return dict(
        divergence=divergence, alpha=alpha, function_class=function_class, kind=kind, source=source, value=float(value)
    )


def _exact_row(p, q, function_class: str, divergence: str, alpha: float | None) -> dict:
    value = restricted_divergence(p, q, function_class=function_class, divergence=divergence, alpha=alpha)
    return _row(divergence, alpha, function_class, "exact", "audit.theory.exact", value)


def _published_row(law, function_class: str, divergence: str, alpha: float | None) -> dict:
    """The bound table's value of (class, divergence) for ``law`` as published; "all" is the :data:`ANY` key."""
    entry = bound_table.published(law, function_class, divergence)
    source = entry.source if entry.stated(law, alpha) else TABLE1_NOT_STATED
    return _row(divergence, alpha, function_class, entry.kind, source, entry.value(law, alpha))


def _violations(table: pd.DataFrame) -> pd.DataFrame:
    """Pairs (published row, exact row of a covered class) with the published value below."""
    pairs = []
    exact_rows = table[table["kind"] == "exact"]
    published_rows = table[(table["kind"] != "exact") & (table["source"] != TABLE1_NOT_STATED)]
    for label, published in published_rows.iterrows():
        same = exact_rows["divergence"] == published["divergence"]
        if divergence_kind(published["divergence"]).has_order:
            same &= exact_rows["alpha"] == published["alpha"]
        cover = parse_function_class(published["function_class"])
        for exact in exact_rows[same].itertuples():
            covered = parse_function_class(exact.function_class).is_contained_in(cover)
            if covered and published["value"] < exact.value - BOUND_RTOL * abs(exact.value):
                pairs.append(
                    {
                        "bound_row": label,
                        "divergence": published["divergence"],
                        "alpha": published["alpha"],
                        "bound_class": published["function_class"],
                        "source": published["source"],
                        "bound": published["value"],
                        "exact_class": exact.function_class,
                        "exact": exact.value,
                        "excess": exact.value - published["value"],
                    }
                )
    columns = ["bound_row", "divergence", "alpha", "bound_class", "source", "bound", "exact_class", "exact", "excess"]
    return pd.DataFrame(pairs, columns=columns)


def _flag_violations(table: pd.DataFrame) -> pd.DataFrame:
    notes = {
        label: "; ".join(
            f"{v.source} ({v.bound_class}) {v.bound:.4g} < exact ({v.exact_class}) {v.exact:.4g}"
            for v in group.itertuples()
        )
        for label, group in _violations(table).groupby("bound_row")
    }
    violated_by = pd.Series(notes, dtype=object).reindex(table.index).fillna("")
    return table.assign(bound_violated=violated_by != "", violated_by=violated_by)


# --- validation ------------------------------------------------------------


def check_mechanism(mechanism: str, scale: float) -> tuple[str, float]:
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}. Found {mechanism!r}.")
    return mechanism, check_positive(scale, SCALE_NAMES[mechanism])


def has_order(table: pd.DataFrame) -> pd.Series:
    """Which rows of a theory table are of a divergence with an order (Renyi)."""
    return table["divergence"].map(lambda name: divergence_kind(name).has_order).astype(bool)


def _check_alphas(alphas: Sequence[float] | None) -> list[float]:
    if alphas is None:
        return list(DEFAULT_ALPHAS)
    if len(alphas) == 0:
        raise ValueError(f"alpha needs at least one Renyi order greater than 1. Found {list(alphas)!r}.")
    return sorted({check_alpha(alpha) for alpha in alphas})


def _check_classes(classes: Sequence[str]) -> list[str]:
    names = []
    for name in classes:
        function_class = parse_function_class(name)
        if not isinstance(function_class, Polynomials):
            raise ValueError(
                f"classes for capaudit theory must be 'linear' or 'polyK' (K >= 1): exact values are "
                f"computed for polynomial classes only. Found {name!r}."
            )
        names.append(function_class.name)
    if not names:
        raise ValueError(f"classes needs at least one class ('linear', 'polyK'). Found {list(classes)!r}.")
    return sorted(set(names), key=lambda n: parse_function_class(n).degree)


# --- d dimensions and the matrix mechanism (CBDP Table 1 d-dim, Corollary 2, Theorem 5) -------------

DEFAULT_DIMENSIONAL_ALPHAS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
DEFAULT_ATTACK_SAMPLES = 200_000
NOT_STATED = "not stated (CBDP Corollary 2 needs alpha > 2)"
DIMENSIONAL_COLUMNS = (
    "alpha",
    "published bound",
    "linear value",
    "lower bound",
    "level",
    "Renyi DP",
    "Table 1 Renyi lower bound",
    "status",
)


def noisy_release(mechanism) -> bound_table.LaplaceShift | bound_table.GaussianShift:
    """The default pair's release before any post-processing, as a law of the bound table: its ``theory_law``'s
    ``release`` (:mod:`audit.theory.table`).

    Laplace and Gaussian built-ins: the sum query plus i.i.d. noise, shift v.
    Matrix mechanism: A x + Lap(||A||_1 / epsilon) per row of A, shift A (x' - x);
    its output W A^+ (.) is linear post-processing of this release.

    Raises
    ------
    ValueError
        For a mechanism whose release is not a shift of i.i.d. Laplace or Gaussian noise (no such law).
    """
    release = getattr(getattr(mechanism, "theory_law", None), "release", None)
    if not isinstance(release, (bound_table.LaplaceShift, bound_table.GaussianShift)):
        raise ValueError(f"mechanism must release a shift of i.i.d. Laplace or Gaussian noise (the laplace, gaussian "
                         f"and matrix built-ins). Found {mechanism.name!r}.")
    return release


def linear_reduction(mechanism) -> tuple[Any, Any, str] | None:
    """1-D laws whose exact (lin, Renyi) equals the d-dim release's, with the reason; None when it does not separate.

    A linear witness g(x) = a^T x + b of the d-dim problem is a linear witness
    of the 1-D projection u^T x (u = a / |a|), so (lin, Renyi) is the largest
    1-D value over directions. Coordinates whose law is the same under P and
    Q, independent of the others and centred, only add noise to a witness:
    by Jensen, E_Q |g|^beta can only grow and E_P g is unchanged, so their
    coefficients are 0 at the optimum. Hence the problem separates when

    * the noise is Gaussian N(0, sigma^2 I): both laws and the class are
      rotation invariant; rotated onto ||shift||_2 e_1 the value is the 1-D
      one at shift ||shift||_2;
    * the noise is Laplace and exactly one coordinate shifts: the 1-D value
      of Lap(0, b) against Lap(|shift_j|, b).

    The matrix mechanism's output W A^+ (A x + noise) is linear post-processing
    of A x + noise: its linear class is contained in that of the release, with
    equality when W A^+ is injective (rank s); only then is the value exact.
    Laplace with two or more shifted coordinates does not separate (the law
    of a^T x is a sum of Laplaces): None, and the table attacks instead.
    """
    release = noisy_release(mechanism)
    post_processing = getattr(mechanism, "reconstruction", None)  # the matrix mechanism's W A^+
    if post_processing is not None and np.linalg.matrix_rank(post_processing) < np.shape(post_processing)[1]:
        return None
    shift, scale = np.asarray(release.shift, dtype=float), release.noise_scale
    moved = np.abs(shift[shift != 0])
    if isinstance(release, bound_table.GaussianShift):
        size = float(np.sqrt(np.sum(moved**2)))
        return stats.norm(0.0, scale), stats.norm(size, scale), (
            f"exact: Gaussian noise is rotation invariant, so the value is the 1-D one at shift ||v||_2 = {size:.4g}"
        )
    if moved.size == 1:
        return stats.laplace(0.0, scale), stats.laplace(moved[0], scale), (
            f"exact: one coordinate shifts (by {moved[0]:g}); the others, independent noise, only add noise to "
            "a linear witness, so the value is the 1-D one"
        )
    return None


def published_linear_renyi(law, alpha: float) -> float:
    """The (lin, Renyi) upper bound of a law of the bound table as published (Table 1 d-dim / Corollary 2 /
    Theorem 5), stated or not."""
    return float(bound_table.published(law, "linear", "renyi").value(law, alpha))


def dimensional_table(
    mechanism,
    alphas: Sequence[float] | None = None,
    n: int = DEFAULT_ATTACK_SAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[pd.DataFrame, str]:
    """(lin, Renyi) of a d-dim Laplace, Gaussian or matrix mechanism beside its published bounds.

    Parameters
    ----------
    mechanism : a ``laplace``, ``gaussian`` or ``matrix`` built-in (``make_mechanism``)
        Compared on its default pair (shift v, or one count).
    alphas : sequence of float, optional
        Renyi orders > 1; default :data:`DEFAULT_DIMENSIONAL_ALPHAS`.
    n, seed : int
        Outputs per dataset and seed of the linear attacks, used where the
        problem does not separate (:func:`linear_reduction`).
    confidence : float
        Family-wise level of the attacks' lower bounds (Bonferroni over the
        orders, ``audit.theory.check.bonferroni_level``).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`DIMENSIONAL_COLUMNS`: the published bound, the exact
        linear value or the attack's estimate, its lower confidence bound and
        level (NaN when exact), Renyi DP of the release (appendix Thms 11, 12),
        Table 1's lower bound on it (Laplace noise), and the status: "not
        stated" (alpha <= 2), "bound holds" or "BOUND FAILS: ...".
    source : str
        How the linear values were obtained (exact reduction, or attacks at n).
    """
    from attacks.estimate import estimate_divergence
    from audit.theory.check import FAILS_EXACT, HOLDS, bonferroni_level, exact_exceeds

    release = noisy_release(mechanism)
    alphas = sorted({check_alpha(a) for a in (DEFAULT_DIMENSIONAL_ALPHAS if alphas is None else alphas)})
    shift, scale = np.asarray(release.shift, dtype=float), release.noise_scale
    gaussian = isinstance(release, bound_table.GaussianShift)
    moved = np.abs(shift[shift != 0])
    reduction = linear_reduction(mechanism)
    level = bonferroni_level(confidence, len(alphas))
    if reduction is None:
        d, d_prime = mechanism.default_pairs()[0]
        rng = np.random.default_rng(seed)
        samples = mechanism.sample(d, n, rng), mechanism.sample(d_prime, n, rng)
        source = (
            f"attack: the problem does not separate ({moved.size} shifted Laplace coordinates), so each value is the "
            f"held-out estimate of a linear adversary (attacks.estimate.estimate_divergence) on n = {n} outputs per "
            f"dataset, seed {seed}, with its lower confidence bound at level {level:.4g} (Bonferroni over "
            f"{len(alphas)} orders, family-wise {confidence:g})"
        )
    else:
        source = reduction[2]
    rows = []
    for alpha in alphas:
        bound = published_linear_renyi(mechanism.theory_law, alpha)
        if reduction is None:
            estimate = estimate_divergence(*samples, "linear", "renyi", alpha=alpha, random_state=seed)
            value, low, exact = float(estimate.estimate), float(estimate.lower_bound(level)), None
        else:
            value = exact = float(restricted_divergence(reduction[0], reduction[1], "linear", "renyi", alpha))
            low = math.nan
        real = (bound_table.GaussianShift if gaussian else bound_table.LaplaceShift)(scale, tuple(moved.tolist()))
        renyi = bound_table.theory_bound(real, "all", "renyi", alpha)
        lower = math.nan if gaussian else bounds.laplace_renyi_lower_bound(1.0 / scale, alpha, moved)
        if not bounds.linear_renyi_bound_stated(alpha):
            status = NOT_STATED
        elif exact_exceeds(exact, bound):
            status = FAILS_EXACT
        elif low > bound:
            status = f"BOUND FAILS: lower confidence bound {low:.4g} > bound {bound:.4g} at level {level:.4g}"
        else:
            status = HOLDS
        if renyi < lower - BOUND_RTOL * abs(renyi):  # Table 1's lower bound (Laplace; NaN otherwise) as a check
            status += "; CHECK FAILS: Renyi DP below Table 1's lower bound"
        rows.append(dict(zip(DIMENSIONAL_COLUMNS, (alpha, bound, value, low, level if reduction is None else math.nan,
                                                   renyi, lower, status))))
    return pd.DataFrame(rows, columns=DIMENSIONAL_COLUMNS), source
