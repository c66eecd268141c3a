"""``capaudit theory``'s command and report: the tables of :mod:`audit.commands.theory_tables` as report.md, report.html and figures.

The tables (exact restricted divergences beside the paper's closed forms, 1-D
and d-dimensional) are computed by :mod:`audit.commands.theory_tables`; this module
parses the command, renders them in markdown (:func:`audit.report.tables.markdown_table`)
and draws them (:mod:`audit.report.svg`).  Published closed forms are claims
(docs/theory.md introduction): a published value below the exact value of a
class it covers is flagged, and the report says so in a section of its own.
Nothing is "fixed".

The figures reproduce CBDP Figure 1 (Laplace, epsilon = 1) and Figure 2
(Gaussian, sigma = 1, in the appendix) for the chosen parameters. Table 1's
(lin, Renyi) bounds are stated for alpha > 2 only (Corollary 2): below, they
are shown but never checked. For Laplace, Table 1's lower bound on Renyi DP,
epsilon - log 2 / (alpha - 1), is drawn and checked against the closed form.
"""

from __future__ import annotations

import argparse
import math
import pathlib

import numpy as np
import pandas as pd

from attacks.classes import LINEAR
from audit.report.html_report import write_html_report
from audit.report.svg import TAB10, Axes, Figure, Style
from audit.report.tables import markdown_table
from audit.theory import bounds
from audit.theory import table as bound_table
from audit.theory.check import BOUND_RTOL
from audit.commands.theory_tables import (
    SCALE_NAMES, bound_crossings, bound_violations, check_mechanism, dimensional_table, display_table, has_order,
    linear_renyi_bound, noisy_release, renyi_dp, theory_table,
)

_FIGURE_NUMBERS = {"laplace": 1, "gaussian": 2}


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
    mechanism, scale = check_mechanism(mechanism, scale)
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
    table (:func:`dimensional_command`), ``--mechanism dp_sgd`` the DP-SGD law's rows
    (:func:`audit.commands.theory_dp_sgd.dp_sgd_command`). Returns the exit code 0; bad arguments
    raise ``ValueError``, which the CLI turns into exit code 2.
    """
    if args.mechanism == "dp_sgd":
        from audit.commands.theory_dp_sgd import dp_sgd_command

        return dp_sgd_command(args)
    given = [flag for flag, name in (("--steps", "steps"), ("--sampling-rate", "sampling_rate"))
             if getattr(args, name, None) is not None]
    if given:
        raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} read by --mechanism dp_sgd only. Found --mechanism {args.mechanism}.")
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


# --- report.md -------------------------------------------------------------


def _markdown(table: pd.DataFrame, mechanism: str, scale: float, figures: list[pathlib.Path]) -> str:
    name = SCALE_NAMES[mechanism]
    title = f"{mechanism.capitalize()} mechanism, {name} = {scale:g}"
    renyi = table[has_order(table)]
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
    renyi = table[has_order(table)]
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
    renyi = table[has_order(table)]
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
