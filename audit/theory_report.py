"""``capaudit theory``: exact restricted divergences beside the paper's closed forms.

For the Laplace mechanism (epsilon = 1 / scale) or the Gaussian mechanism
(noise sigma), sensitivity 1, with P the output law at 0 and Q the output law
at 1, this module tabulates over a grid of Renyi orders alpha

* the exact (H, Renyi) values of each polynomial class H (``audit.theory.exact``),
* CBDP Table 1's closed-form *upper bound* on (lin, Renyi) (CBDP Cor. 2 /
  Thm 5, ``audit.theory.bounds``),
* Renyi DP, the unrestricted value (CBDP appendix Thms 11, 12),

then the KL rows (exact (H, KL), the closed form of (lin, KL) of CBDP appendix
Thms 9, 10, and KL itself) and the IPM row (threshold witnesses: 2 TV).

Published closed forms are claims (docs/theory.md introduction). Every published
value is compared with the exact value of every class it covers (a value for
class C bounds every class contained in C); where it is below, the row is
flagged and the report says so in a section of its own. Nothing is "fixed".

The figures reproduce CBDP Figure 1 (Laplace, epsilon = 1) and Figure 2
(Gaussian, sigma = 1, in the appendix) for the chosen parameters. Table 1's
(lin, Renyi) bounds are stated for alpha > 2 only (Corollary 2): below, they
are shown but never checked. For Laplace, Table 1's lower bound on Renyi DP,
epsilon - log 2 / (alpha - 1), is drawn and checked against the closed form.

In d dimensions (``--sensitivity v``, or ``--mechanism matrix``),
:func:`dimensional_table` sets (lin, Renyi) of the built-in's default pair
beside the d-dim Table 1 / Corollary 2 bound or the matrix mechanism's
Theorem 5: exact where the problem separates (:func:`linear_reduction`),
otherwise the estimate and lower confidence bound of linear attacks at a
stated n.
"""

from __future__ import annotations

import argparse
import math
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from attacks.classes import LINEAR, Polynomials, parse_function_class
from attacks.divergences import check_alpha
from attacks.vocabulary import divergence_kind
from audit.html_report import write_html_report
from audit.svg import TAB10, Axes, Figure, Style
from audit.tables import markdown_table
from audit.theory import bounds
from audit.theory import table as bound_table
from audit.theory.check import BOUND_RTOL  # audit.theory.exact's accuracy: below it, no violation
from audit.theory.exact import restricted_divergence
from audit.validation import check_positive

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
_SCALE_NAMES = {"laplace": "epsilon", "gaussian": "sigma"}
_FIGURE_NUMBERS = {"laplace": 1, "gaussian": 2}
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
    mechanism, scale = _check_mechanism(mechanism, scale)
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
    mechanism, scale = _check_mechanism(mechanism, scale)
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
    lines = np.where(_has_order(table), lines + " alpha=" + table["alpha"].map("{:g}".format), lines)
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


def write_theory_report(
    table: pd.DataFrame, out_dir: str | pathlib.Path, mechanism: str, scale: float
) -> pathlib.Path:
    """Write ``out_dir/report.md``, report.html and ``out_dir/figures/*.svg``; return the report's path.

    Parameters
    ----------
    table : pandas.DataFrame
        A :func:`theory_table` result for ``mechanism`` and ``scale``.
    out_dir : str or Path
        Created if needed.
    mechanism : {"laplace", "gaussian"}
    scale : float
        epsilon for Laplace, sigma for Gaussian.
    """
    mechanism, scale = _check_mechanism(mechanism, scale)
    out_dir = pathlib.Path(out_dir)
    figure_dir = out_dir / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    figures = [
        _plot_linear_renyi(table, mechanism, scale, figure_dir / f"{mechanism}_linear_renyi.svg"),
        _plot_poly_renyi(table, mechanism, scale, figure_dir / f"{mechanism}_poly_renyi.svg"),
    ]
    report = out_dir / "report.md"
    report.write_text(_markdown(table, mechanism, scale, [path.relative_to(out_dir) for path in figures]))
    write_html_report(report)
    return report


def theory_command(args: argparse.Namespace) -> int:
    """Run ``capaudit theory``: print the table; with ``--out``, write the report.

    ``--sensitivity`` (a vector v) or ``--mechanism matrix`` selects the d-dim
    table (:func:`dimensional_command`). Returns the exit code 0; bad arguments
    raise ``ValueError``, which the CLI turns into exit code 2.
    """
    if args.mechanism == "matrix" or getattr(args, "sensitivity", None) is not None:
        return dimensional_command(args)
    name, other = ("epsilon", "sigma") if args.mechanism == "laplace" else ("sigma", "epsilon")
    scale = getattr(args, name)
    if scale is None:
        raise ValueError(
            f"--mechanism {args.mechanism} takes --{name}, not --{other}. Found --{other} {getattr(args, other)!r}."
        )
    table = theory_table(args.mechanism, scale, args.alpha, args.classes)
    print(markdown_table(display_table(table), index=True, missing=""))
    violations = bound_violations(table)
    for line in _violation_lines(violations):
        print(line)
    if args.out:
        print(f"report: {write_theory_report(table, args.out, args.mechanism, scale)}")
    return 0


def dimensional_command(args: argparse.Namespace) -> int:
    """``capaudit theory`` in d dimensions: Laplace / Gaussian with ``--sensitivity``, or ``--mechanism matrix``."""
    from audit.mechanisms import make_mechanism

    if args.mechanism == "matrix":
        if args.epsilon is None or args.A is None:
            raise ValueError(
                f"--mechanism matrix takes --epsilon and --A (rows separated by ';'). Found --A {args.A!r}."
            )
        params = {"A": _matrix_argument(args.A), "epsilon": args.epsilon}
    else:
        name = "epsilon" if args.mechanism == "laplace" else "sigma"
        if getattr(args, name) is None:
            raise ValueError(f"--mechanism {args.mechanism} takes --{name}. Found none.")
        params = {name: getattr(args, name), "sensitivity": list(args.sensitivity)}
    mechanism = make_mechanism(args.mechanism, params)
    table, source = dimensional_table(mechanism, args.alpha, n=args.n, seed=args.seed)
    print(markdown_table(table, missing=""))
    print(f"linear values: {source}")
    for row in table[table["status"].str.startswith("BOUND FAILS")].itertuples():
        print(f"PUBLISHED BOUND VIOLATED: renyi alpha={row.alpha:g}: {row.status}")
    if args.out:
        command = "capaudit theory " + " ".join(_command_arguments(args))
        print(f"report: {write_dimensional_report(table, source, args.out, mechanism, command)}")
    return 0


def _matrix_argument(text: str) -> list[list[float]]:
    """"1 0; 0 1" -> [[1.0, 0.0], [0.0, 1.0]]."""
    try:
        return [[float(x) for x in row.replace(",", " ").split()] for row in text.split(";")]
    except ValueError:
        raise ValueError(f"--A must be rows of numbers separated by ';', e.g. '1 0; 0 1'. Found {text!r}.") from None


def _command_arguments(args: argparse.Namespace) -> list[str]:
    """The arguments that shaped a d-dim report, for its "Generated by" line (--out last)."""
    parts = [f"--mechanism {args.mechanism}"]
    for name in ("epsilon", "sigma"):
        if getattr(args, name) is not None:
            parts.append(f"--{name} {getattr(args, name):g}")
    if getattr(args, "sensitivity", None) is not None:
        parts.append("--sensitivity " + " ".join(f"{v:g}" for v in args.sensitivity))
    if getattr(args, "A", None) is not None:
        parts.append(f"--A '{args.A}'")
    if args.alpha:
        parts.append("--alpha " + " ".join(f"{a:g}" for a in args.alpha))
    parts += [f"--n {args.n}", f"--seed {args.seed}", f"--out {args.out}"]
    return parts


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


def _check_mechanism(mechanism: str, scale: float) -> tuple[str, float]:
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}. Found {mechanism!r}.")
    return mechanism, check_positive(scale, _SCALE_NAMES[mechanism])


def _has_order(table: pd.DataFrame) -> pd.Series:
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


# --- report.md -------------------------------------------------------------


def _markdown(table: pd.DataFrame, mechanism: str, scale: float, figures: list[pathlib.Path]) -> str:
    name = _SCALE_NAMES[mechanism]
    title = f"{mechanism.capitalize()} mechanism, {name} = {scale:g}"
    renyi = table[_has_order(table)]
    alphas = sorted(renyi["alpha"].unique())
    classes = list(dict.fromkeys(renyi.loc[renyi["kind"] == "exact", "function_class"]))
    law = f"Laplace(loc, scale {1 / scale:g})" if mechanism == "laplace" else f"Normal(loc, sd {scale:g})"
    violations = bound_violations(table)
    lines = [
        f"# capaudit theory: {title}",
        "",
        "Generated by `capaudit theory "
        + f"--mechanism {mechanism} --{name} {scale:g}"
        + "`.",
        "",
        "## Parameters",
        "",
        f"- P = law of M(0) = {law.replace('loc', '0')}, Q = law of M(1) = {law.replace('loc', '1')} "
        "(sensitivity 1).",
        f"- Renyi orders alpha: {', '.join(f'{a:g}' for a in alphas)}.",
        f"- Function classes: {', '.join(classes)}.",
        "",
    ]
    if len(violations):
        lines += [
            f"## Published bound violated ({len(violations)})",
            "",
            "**WARNING: a published closed-form value is BELOW the exact value of a class it covers. "
            "The published value is wrong here; it is reported as published, not corrected.**",
            "",
            markdown_table(violations.assign(alpha=violations["alpha"].map(_alpha_text)), missing=""),
            "",
        ]
    else:
        lines += [
            "## Published bound check",
            "",
            f"No published bound violated on this grid: every published value is at least the exact value "
            f"of every class it covers (relative tolerance {BOUND_RTOL:g}).",
            "",
        ]
    lines += ["## Table 1 bound against Renyi DP", "", _crossing_text(mechanism, scale, alphas), ""]
    if mechanism == "laplace":
        lines += [_lower_bound_text(scale, alphas), ""]
    lines += [
        "## Values",
        "",
        markdown_table(display_table(table), index=True, missing=""),
        "",
        "Columns: `<class> exact` = computed by `audit.theory.exact`; `linear upper bound` = CBDP Table 1's "
        "closed-form upper bound on (lin, Renyi), stated for alpha > 2 only (Corollary 2; shown but not "
        "checked at alpha <= 2); `linear closed form` = (lin, KL) of CBDP appendix "
        f"{'Thm 9' if mechanism == 'laplace' else 'Thm 10'}; `all closed form` = the unrestricted value "
        f"(Renyi DP of CBDP appendix {'Thm 11' if mechanism == 'laplace' else 'Thm 12'}, or KL); "
        "`threshold exact` on the IPM line = IPM over threshold witnesses = 2 TV.",
        "",
        "## Figures",
        "",
    ]
    lines += [f"![{path.stem}]({path.as_posix()})\n" for path in figures]
    lines += [
        "## How the values were computed",
        "",
        "- Exact restricted values: `audit.theory.exact.restricted_divergence(P, Q, class, divergence, alpha)`, "
        "a convex optimisation over the class's coefficients with the expectations under P and Q computed "
        "by numerical quadrature (docs/theory.md section 4): for Renyi, "
        "-log min over {g in H, E_P g = 1} of E_Q |g|^beta; for KL, Donsker-Varadhan over the class.",
        "- Renyi and alpha-divergences use CBDP's |t| convention, f(t) = (|t|^alpha - 1)/(alpha^2 - alpha) "
        "on all of R (docs/theory.md section 2); with f = +inf on t < 0 restricted values would come out larger.",
        "- Published closed forms (`audit.theory.bounds`) are taken as published and treated as claims: a value for "
        "class C is compared with the exact value of every class contained in C, and flagged where it is "
        f"lower by more than a relative {BOUND_RTOL:g} (the numerical accuracy of the exact values).",
        "- (poly3, KL) equals (poly2, KL) under Laplace and Gaussian tails: exp of a cubic has no finite "
        "expectation (docs/theory.md section 4).",
        "",
    ]
    return "\n".join(lines)


def _crossing_text(mechanism: str, scale: float, alphas: list[float]) -> str:
    low, high = alphas[0], alphas[-1]
    crossings = bound_crossings(mechanism, scale, low, high)
    above = linear_renyi_bound(mechanism, scale, low) > renyi_dp(mechanism, scale, low)
    start = (
        f"At alpha = {low:g} CBDP Table 1's (lin, Renyi) upper bound is "
        + ("above Renyi DP (so weaker than the unrestricted guarantee)" if above else "below Renyi DP")
    )
    if not crossings:
        return start + f" and stays so up to alpha = {high:g}."
    where = ", ".join(f"{alpha:.3f}" for alpha in crossings)
    text = start + f"; the two curves cross at alpha = {where} on [{low:g}, {high:g}]"
    if scale == 1.0:
        paper = {"laplace": "alpha ~ 3.3 (Figure 1a)", "gaussian": "alpha ~ 2.3 (Figure 2a)"}
        text += f" (CBDP reports {paper[mechanism]})"
    return text + "."


def _lower_bound_text(scale: float, alphas: list[float]) -> str:
    """CBDP Table 1's lower bound on Laplace Renyi DP, epsilon - log 2 / (alpha - 1), checked on the grid."""
    below = [a for a in alphas if renyi_dp("laplace", scale, a) < bounds.laplace_renyi_lower_bound(scale, a, 1.0)]
    check = (
        "the closed-form Renyi DP is above it at every order on the grid (check passed)"
        if not below
        else "CHECK FAILED: Renyi DP is below it at alpha = " + ", ".join(f"{a:g}" for a in below)
    )
    return (
        "CBDP Table 1 also gives a *lower* bound on Renyi DP, epsilon - log 2 / (alpha - 1) (the dotted line "
        f"of the first figure): a bound on the unrestricted value, not on any restricted one; {check}."
    )


def _violation_lines(violations: pd.DataFrame) -> list[str]:
    return [
        f"PUBLISHED BOUND VIOLATED: {row.divergence} alpha={_alpha_text(row.alpha)}: {row.source} "
        f"({row.bound_class}) {row.bound:.4g} < exact ({row.exact_class}) {row.exact:.4g}"
        for row in violations.itertuples()
    ]


def _alpha_text(alpha: float) -> str:
    return "-" if math.isnan(alpha) else f"{alpha:g}"


# --- figures (CBDP Figures 1 and 2) ----------------------------------------


def _plot_linear_renyi(table: pd.DataFrame, mechanism: str, scale: float, path: pathlib.Path) -> pathlib.Path:
    """CBDP Figure 1a / 2a: Table 1 bound, exact (lin, Renyi) and Renyi DP against alpha."""
    renyi = table[_has_order(table)]
    fig, ax = _renyi_axes(renyi, mechanism, scale, "a")
    grid = _dense_grid(renyi)
    bound_curve = np.array([linear_renyi_bound(mechanism, scale, a) for a in grid])
    stated = grid > bounds.COROLLARY2_MIN_ALPHA
    ax.plot(grid[stated], bound_curve[stated], Style(colour=TAB10["blue"]),
            label="(lin, Rényi) upper bound, CBDP Table 1 (α > 2)")
    ax.plot(grid[~stated], bound_curve[~stated], Style(colour=TAB10["blue"], width=1.0, line="dotted"),
            label="the same formula where not stated (α ≤ 2)")
    if mechanism == "laplace":
        ax.plot(grid, [bounds.laplace_renyi_lower_bound(scale, a) for a in grid],
                Style(colour=TAB10["gray"], line="dotted"), label="Rényi DP lower bound, CBDP Table 1")
    linear = renyi[(renyi["function_class"] == LINEAR.name) & (renyi["kind"] == "exact")]
    if len(linear):
        ax.plot(linear["alpha"], linear["value"], Style(colour=TAB10["orange"], marker="o", size=5),
                label="(lin, Rényi) exact")
    top = _top(renyi)
    for crossing in bound_crossings(mechanism, scale, grid[0], grid[-1]):
        ax.vline(crossing, Style(colour=TAB10["gray"], width=1.0, line="dotted"))
        ax.text(crossing, 0.97 * top, f"bound = Rényi DP\nat α = {crossing:.2f}", offset=(4.0, 10.0))
    bound = renyi[renyi["kind"] == "upper bound"]
    violated = bound[bound["bound_violated"]]
    if len(violated):
        ax.plot(violated["alpha"], violated["value"], Style(colour=TAB10["red"], width=2.0, line=None, marker="x",
                                                            size=10), label="bound below exact: VIOLATED")
    return _save(fig, ax, path, top)


def _plot_poly_renyi(table: pd.DataFrame, mechanism: str, scale: float, path: pathlib.Path) -> pathlib.Path:
    """CBDP Figure 1b / 2b: exact (poly_k, Renyi) and Renyi DP against alpha."""
    renyi = table[_has_order(table)]
    fig, ax = _renyi_axes(renyi, mechanism, scale, "b")
    exact = renyi[renyi["kind"] == "exact"]
    for colour, (function_class, rows) in zip(_CYCLE, exact.groupby("function_class", sort=False)):
        ax.plot(rows["alpha"], rows["value"], Style(colour=colour, marker="o", size=5),
                label=f"({function_class}, Rényi) exact")
    return _save(fig, ax, path, _top(renyi))


_CYCLE = [TAB10[name] for name in ("blue", "orange", "green", "purple", "brown", "pink", "olive", "cyan")]
"""Line colours in order (the ``tab10`` cycle)."""


def _renyi_axes(renyi: pd.DataFrame, mechanism: str, scale: float, panel: str) -> tuple[Figure, Axes]:
    name = "ε" if mechanism == "laplace" else "σ"
    fig = Figure(1, 1, panel=(420.0, 300.0),
                 title=f"{mechanism.capitalize()}, {name} = {scale:g} (cf. CBDP Figure {_FIGURE_NUMBERS[mechanism]}{panel})")
    ax = fig.axes[0][0]
    grid = _dense_grid(renyi)
    ax.plot(grid, [renyi_dp(mechanism, scale, a) for a in grid], Style(line="dashed"), label="Rényi DP")
    ax.xlabel, ax.ylabel = "α", "Rényi divergence"
    return fig, ax


def _dense_grid(renyi: pd.DataFrame) -> np.ndarray:
    return np.linspace(renyi["alpha"].min(), renyi["alpha"].max(), 300)


def _top(renyi: pd.DataFrame) -> float:
    """The y axis's top: 1.3 x the largest exact value or Renyi DP (the Table 1 bound blows up as alpha -> 1)."""
    return 1.3 * float(renyi.loc[renyi["kind"] != "upper bound", "value"].max())


def _save(fig: Figure, ax: Axes, path: pathlib.Path, top: float) -> pathlib.Path:
    """Scale the y axis to [0, ``top``], add the legend (right of the panel) and write the SVG."""
    ax.ylim = (0.0, top)
    ax.legend("right", size=9.0)
    return fig.save(path)


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


def write_dimensional_report(
    table: pd.DataFrame, source: str, out_dir: str | pathlib.Path, mechanism, command: str
) -> pathlib.Path:
    """Write ``out_dir/report.md``, report.html and a figure for a :func:`dimensional_table`; return report.md's path."""
    out_dir = pathlib.Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    figure = _plot_dimensional(table, mechanism, out_dir / "figures" / f"{mechanism.name}_linear_renyi_d.svg")
    failing = table[table["status"].str.startswith("BOUND FAILS")]
    params = ", ".join(f"{key}={value!r}" for key, value in mechanism.params.items())
    release = noisy_release(mechanism)
    shift, scale = np.asarray(release.shift, dtype=float), release.noise_scale
    law = "Normal" if isinstance(release, bound_table.GaussianShift) else "Laplace"
    lines = [
        f"# capaudit theory: {mechanism.name} ({params})",
        "",
        f"Generated by `{command}`.",
        "",
        "## Parameters",
        "",
        f"- Release (before post-processing) on the default pair: {shift.size} coordinates of i.i.d. {law} noise "
        f"of scale {scale:.4g}, shifted by {_compact_vector(shift)} between d and d'.",
        f"- Linear values: {source}.",
        "",
    ]
    if len(failing):
        lines += [
            f"## Published bound violated ({len(failing)})",
            "",
            "**WARNING: a published (lin, Renyi) upper bound is below the exact value or a lower confidence bound "
            "of the linear class. It is reported as published, not corrected.**",
            "",
        ]
    else:
        lines += ["## Published bound check", "", "No stated published bound fails on this grid.", ""]
    lines += [
        "## Values",
        "",
        markdown_table(table, missing=""),
        "",
        "Columns: `published bound` = CBDP Table 1 d-dim / Corollary 2 (Laplace, Gaussian) or Theorem 5 (matrix) "
        "as published, stated for alpha > 2 only; `linear value` = exact (lin, Renyi) or the attack's estimate "
        "(see Parameters); `lower bound`, `level` = the attack's lower confidence bound (blank when exact); "
        "`Renyi DP` = the unrestricted value of the release (CBDP appendix Thms 11, 12); `Table 1 Renyi lower "
        "bound` = epsilon ||v||_1 - d log 2 / (alpha - 1), a lower bound on Renyi DP for Laplace noise (CBDP Table 1), "
        "checked against it.",
        "",
        "## Figures",
        "",
        f"![{figure.stem}]({figure.relative_to(out_dir).as_posix()})",
        "",
    ]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines))
    write_html_report(report)
    return report


def _compact_vector(values: np.ndarray) -> str:
    return "(" + ", ".join(f"{value:g}" for value in values) + ")"


def _plot_dimensional(table: pd.DataFrame, mechanism, path: pathlib.Path) -> pathlib.Path:
    """Published bound, linear value (with lower bounds), Renyi DP and Table 1's lower bound against alpha."""
    fig = Figure(1, 1, panel=(420.0, 300.0), title=f"{mechanism.name}: (lin, Rényi) against CBDP's d-dim bounds")
    ax = fig.axes[0][0]
    stated = table["alpha"] > bounds.COROLLARY2_MIN_ALPHA
    ax.plot(table["alpha"], table["Renyi DP"], Style(line="dashed"), label="Rényi DP")
    if table["Table 1 Renyi lower bound"].notna().any():
        ax.plot(table["alpha"], table["Table 1 Renyi lower bound"], Style(colour=TAB10["gray"], line="dotted"),
                label="Rényi DP lower bound, CBDP Table 1")
    ax.plot(table.loc[stated, "alpha"], table.loc[stated, "published bound"],
            Style(colour=TAB10["blue"], marker="s", size=6), label="(lin, Rényi) upper bound as published (α > 2)")
    ax.plot(table["alpha"], table["linear value"], Style(colour=TAB10["orange"], marker="o", size=6),
            label="(lin, Rényi) value")
    if table["lower bound"].notna().any():
        ax.plot(table["alpha"], table["lower bound"], Style(colour=TAB10["green"], line=None, marker="^", size=7),
                label="its lower confidence bound")
    failing = table[table["status"].str.startswith("BOUND FAILS")]
    if len(failing):
        ax.plot(failing["alpha"], failing["published bound"], Style(colour=TAB10["red"], width=2.0, line=None,
                                                                    marker="x", size=10), label="bound FAILS")
    ax.xlabel, ax.ylabel = "α", "Rényi divergence"
    return _save(fig, ax, path, 1.3 * float(table["Renyi DP"].max()))
