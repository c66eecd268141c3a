"""Write an audit's results: results.json, results.csv, report.md and figures.

The writer's input is the results table (one row per results.json row,
DESIGN.md "Contract: results.json") and the audit's metadata; it computes
nothing about privacy itself, it only lays the evidence out so that the
verdict comes first and every refuting row can be traced to its numbers.

JSON has no infinity and no NaN. In results.json a missing number (NaN) is
written as ``null`` and an infinite one as the string ``"inf"`` (or
``"-inf"``), so that the estimate of an "unbounded" row still reads as
infinite instead of vanishing into ``null``; :func:`load_results` turns those
strings back into floats.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROW_COLUMNS = (
    "pair",
    "direction",
    "function_class",
    "divergence",
    "alpha",
    "estimate",
    "ci_low",
    "ci_high",
    "n_samples",
    "claim",
    "claim_class",
    "refutes_claim",
    "theory_bound",
    "exact",
    "verdict",
    "note",
)
NUMERIC_COLUMNS = ("alpha", "estimate", "ci_low", "ci_high", "n_samples", "claim", "theory_bound", "exact")
VERDICTS = ("pass", "violation", "inconclusive")
ROW_VERDICTS = ("violation", "unbounded", "inconclusive", "pass", "info")
_VERDICT_COLOURS = {
    "violation": "tab:red",
    "unbounded": "tab:purple",
    "inconclusive": "tab:orange",
    "pass": "tab:green",
    "info": "tab:gray",
}
_HEADLINES = {
    "violation": "at least one claim is refuted by held-out evidence at the audit's confidence.",
    "inconclusive": "no claim is refuted, but some rows could not decide (see below).",
    "pass": "no claim is refuted by any attack.",
}


def write_audit_report(
    out_dir: str | pathlib.Path,
    *,
    table: pd.DataFrame,
    verdict: str,
    seed: int | None,
    seconds: float,
    versions: Mapping[str, Any],
    config: Mapping[str, Any],
) -> pathlib.Path:
    """Write results.json, results.csv, report.md and figures/*.png for an audit.

    Parameters
    ----------
    out_dir : str or Path
        Output directory, created if needed; existing files of the same names
        are overwritten.
    table : pandas.DataFrame
        One row per results row with the columns of DESIGN.md's schema
        (:data:`ROW_COLUMNS`); extra columns (``task``, ``error``, ...) are
        kept in results.json and results.csv.
    verdict : {"pass", "violation", "inconclusive"}
        The overall verdict.
    seed : int or None
        The audit's seed.
    seconds : float
        Wall time of the audit.
    versions : mapping
        Versions of capaudit, Python and the audited libraries.
    config : mapping
        The audit configuration as a JSON-serialisable dict (TOML layout of
        DESIGN.md "Contract: config").

    Returns
    -------
    pathlib.Path
        The path of report.md.

    Raises
    ------
    ValueError
        If ``verdict`` is unknown or ``table`` lacks a column of the schema.
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}. Found {verdict!r}.")
    missing = [column for column in ROW_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"table lacks the results columns {missing}. Found columns {list(table.columns)!r}.")
    out_dir = pathlib.Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    table = table[_column_order(table.columns)].reset_index(drop=True)
    meta = {"verdict": verdict, "seed": seed, "seconds": seconds, "versions": dict(versions), "config": dict(config)}
    document = {**meta, "rows": [_json_row(row) for row in table.to_dict(orient="records")]}
    # default=str: TOML dates and the like in the config are written as text.
    text = json.dumps(_json_value(document), indent=2, allow_nan=False, default=str)
    (out_dir / "results.json").write_text(text + "\n")
    table.to_csv(out_dir / "results.csv", index=False)
    figures = _write_figures(table, out_dir / "figures")
    report = out_dir / "report.md"
    report.write_text(_markdown(_by_importance(table), meta, [path.relative_to(out_dir) for path in figures]))
    return report


def load_results(path: str | pathlib.Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a results.json back into ``(table, meta)``.

    Parameters
    ----------
    path : str or Path
        A results.json file, or the directory holding one.

    Returns
    -------
    table : pandas.DataFrame
        One row per results row, schema columns first; ``null`` numbers are
        NaN and ``"inf"`` strings are infinite floats again.
    meta : dict
        ``verdict``, ``seed``, ``seconds``, ``versions`` and ``config``.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "results.json"
    document = json.loads(path.read_text())
    rows = document.pop("rows")
    table = pd.DataFrame(rows, columns=_column_order(pd.Index(rows[0].keys() if rows else ROW_COLUMNS)))
    for column in NUMERIC_COLUMNS:
        table[column] = pd.to_numeric(table[column].replace({"inf": math.inf, "-inf": -math.inf}), errors="raise")
    return table, document


def _by_importance(table: pd.DataFrame) -> pd.DataFrame:
    """Rows in the order of :data:`ROW_VERDICTS` (violations first), stable within a verdict."""
    rank = table["verdict"].map({verdict: i for i, verdict in enumerate(ROW_VERDICTS)}).fillna(len(ROW_VERDICTS))
    return table.iloc[np.argsort(rank.to_numpy(), kind="stable")]


def _column_order(columns: pd.Index) -> list[str]:
    return list(ROW_COLUMNS) + [column for column in columns if column not in ROW_COLUMNS]


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: _json_value(value) for key, value in row.items()}


def _json_value(value: Any) -> Any:
    """NaN and None -> null, +-inf -> "inf"/"-inf", numpy scalars -> Python scalars."""
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    if value is pd.NA or value is pd.NaT:
        return None
    return value


# --- report.md -------------------------------------------------------------


def _markdown(table: pd.DataFrame, meta: dict[str, Any], figures: list[pathlib.Path]) -> str:
    verdict = meta["verdict"]
    attacks = meta["config"].get("attacks", {})
    confidence = attacks.get("confidence")
    lines = [
        "# capaudit audit report",
        "",
        f"## Verdict: **{verdict.upper()}**",
        "",
        f"**{verdict.upper()}**: {_HEADLINES[verdict]}",
        "",
        _counts(table),
        "",
        f"Seed {meta['seed']}, {meta['seconds']:.1f} s. Versions: "
        + ", ".join(f"{name} {version}" for name, version in meta["versions"].items())
        + ".",
        "",
    ]
    if meta["versions"].get("mechanism_seedable") is False:
        lines += [
            "**Not reproducible bit for bit:** the mechanism's library draws its own randomness and "
            "cannot be seeded, so another run with the same seed gives other numbers (the verdict "
            "should not change).",
            "",
        ]
    for row_verdict, title in (
        ("violation", "Violations"),
        ("unbounded", "Unbounded rows"),
        ("inconclusive", "Inconclusive rows"),
    ):
        rows = table[table["verdict"] == row_verdict]
        if len(rows):
            lines += [f"## {title} ({len(rows)})", "", _summary_table(rows), ""]
    if "error" in table.columns:
        errors = table[table["error"].notna() & (table["error"].astype(str) != "")]
        if len(errors):
            columns = ["pair", "direction", "function_class", "divergence", "alpha", "error"]
            lines += [f"## Failed tasks ({len(errors)})", "", _to_markdown(errors[columns]), ""]
    lines += ["## Results per claim", ""]
    for (divergence, claim_class, claim), rows in table.groupby(
        ["divergence", "claim_class", "claim"], dropna=False, sort=False
    ):
        lines += [f"### {_claim_title(divergence, claim_class, claim)}", "", _claim_table(rows), ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{path.stem}]({path.as_posix()})\n" for path in figures]
    lines += ["## Method", "", *_method_notes(confidence, attacks.get("n_samples"), attacks.get("coupled", False)), ""]
    return "\n".join(lines)


def _counts(table: pd.DataFrame) -> str:
    counts = table["verdict"].value_counts()
    parts = [f"{counts[verdict]} {verdict}" for verdict in ROW_VERDICTS if verdict in counts]
    return f"{len(table)} rows: " + ", ".join(parts) + "."


def _summary_table(rows: pd.DataFrame) -> str:
    shown = pd.DataFrame(
        {
            "pair": rows["pair"],
            "direction": rows["direction"],
            "attack class": rows["function_class"],
            "divergence": [_divergence_label(d, a) for d, a in zip(rows["divergence"], rows["alpha"])],
            "estimate [CI]": [_with_interval(r) for r in rows.itertuples()],
            "claim": [f"{_number(c)} ({k})" for c, k in zip(rows["claim"], rows["claim_class"])],
            "note": rows["note"].fillna(""),
        }
    )
    return _to_markdown(shown)


def _claim_table(rows: pd.DataFrame) -> str:
    shown = pd.DataFrame(
        {
            "pair": rows["pair"],
            "direction": rows["direction"],
            "attack class": rows["function_class"],
            "alpha": [_number(a) for a in rows["alpha"]],
            "estimate [CI]": [_with_interval(r) for r in rows.itertuples()],
            "theory bound": [_number(v) for v in rows["theory_bound"]],
            "exact": [_number(v) for v in rows["exact"]],
            "n": [f"{int(v)}" if np.isfinite(v) else "-" for v in rows["n_samples"].astype(float)],
            "verdict": [f"**{v}**" if v in ("violation", "unbounded") else v for v in rows["verdict"]],
        }
    )
    return _to_markdown(shown)


def _claim_title(divergence: str, claim_class: Any, claim: Any) -> str:
    label = {"kl": "KL", "renyi": "Renyi", "ipm": "IPM", "dp": "DP epsilon"}.get(divergence, str(divergence))
    return f"Claim: ({claim_class}, {label}) <= {_number(claim)}"


def _divergence_label(divergence: str, alpha: Any) -> str:
    return f"renyi, alpha={_number(alpha)}" if divergence == "renyi" else str(divergence)


def _with_interval(row: Any) -> str:
    return f"{_number(row.estimate)} [{_number(row.ci_low)}, {_number(row.ci_high)}]"


def _number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (int, float, np.number)):
        return "inf" if np.isposinf(value) else "-inf" if np.isneginf(value) else f"{value:.4g}"
    return str(value)


def _to_markdown(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False, disable_numparse=True)


def _method_notes(confidence: float | None, n_samples: int | None, coupled: bool = False) -> list[str]:
    level = f"{confidence:g}" if confidence is not None else "the configured confidence"
    per_dataset = f"{n_samples} outputs" if n_samples is not None else "the configured number of outputs"
    coupling = [
        "- Coupled sampling (`attacks.coupled = true`): the outputs on the two datasets of a pair were drawn "
        "row by row from the same random numbers, and the intervals are the paired ones (dp: the score bound "
        "on the cells both / only P / only Q / neither; kl, renyi, ipm: the variance of the paired "
        "difference). A pair whose mechanism spent different randomness on its two datasets was sampled "
        "independently instead; its rows say so."
    ] if coupled else []
    return [
        f"- Samples: {per_dataset} of the mechanism on each dataset of each neighbouring pair; "
        "both directions (P, Q) and (Q, P) are attacked.",
        *coupling,
        "- Held-out scores: each adversary is fitted on a train split and its variational objective is "
        "evaluated on the held-out rest, so an estimate is an unbiased estimate of a lower bound on the "
        "restricted divergence of its class (THEORY.md section 2); the interval is a confidence interval "
        "for that lower bound.",
        "- A row can refute a claim only when its attack class is contained in the claim's class; other "
        "rows are `info`.",
        "- `atoms` and `floatbits` attack the representation of the outputs (exact values, IEEE-754 bits; "
        "attacks.representation) and refute claims about `all` only. A feature of the released output is "
        "post-processing, so a violation measured on the features is a violation of the mechanism.",
        f"- Family-wise error: Holm's step-down procedure over the refuting rows keeps the probability of "
        f"any false violation below 1 - {level} for the whole audit, not per row.",
        "- `inconclusive`: the estimate exceeds the claim but its lower confidence bound does not; the note "
        "says how many samples would decide. `unbounded`: the samples were separable, so the divergence of "
        "the class is infinite (e.g. a non-private release, CBDP Lemma 2).",
        "- Renyi and alpha-divergences use CBDP's convention f(t) = (|t|^alpha - 1)/(alpha^2 - alpha) on all "
        "of R (the |t| convention); with f = +inf on t < 0 restricted values would come out larger.",
        "- `theory bound` is the paper's closed-form upper bound when one applies (a claim itself, not a "
        "fact); `exact` is the exact restricted divergence when the output law is known (audit.exact).",
    ]


# --- figures ---------------------------------------------------------------


def _write_figures(table: pd.DataFrame, figure_dir: pathlib.Path) -> list[pathlib.Path]:
    """One figure per (divergence, alpha): estimates with intervals per attack class."""
    paths = []
    for (divergence, alpha), rows in table.groupby(["divergence", "alpha"], dropna=False, sort=True):
        name = f"{divergence}_alpha{_number(alpha)}" if divergence == "renyi" else str(divergence)
        path = figure_dir / f"{name}.png"
        _plot_group(rows, f"{_divergence_label(divergence, alpha)}", path)
        paths.append(path)
    return paths


def _plot_group(rows: pd.DataFrame, title: str, path: pathlib.Path) -> None:
    classes = sorted(set(rows["function_class"]), key=lambda name: (name != "linear", name))
    bounded = rows[np.isfinite(rows["estimate"].astype(float))]
    finite = pd.concat(
        [bounded[c] for c in ("estimate", "ci_low", "ci_high")] + [rows[c] for c in ("claim", "theory_bound", "exact")]
    )
    finite = finite[np.isfinite(finite.astype(float))]
    top = float(finite.max()) if len(finite) else 1.0
    bottom = min(0.0, float(finite.min())) if len(finite) else 0.0
    ceiling = top + 0.1 * (top - bottom or 1.0)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(classes) + 2.0), 3.8))
    for i, function_class in enumerate(classes):
        members = rows[rows["function_class"] == function_class]
        offsets = np.linspace(-0.25, 0.25, len(members)) if len(members) > 1 else [0.0]
        for offset, row in zip(offsets, members.itertuples()):
            x = i + offset
            colour = _VERDICT_COLOURS.get(row.verdict, "black")
            if np.isposinf(row.estimate):
                ax.plot(x, ceiling, marker="^", color=colour, markersize=9)
                ax.annotate("unbounded", (x, ceiling), textcoords="offset points", xytext=(8, -4), fontsize=8)
                continue
            low = row.estimate - row.ci_low if np.isfinite(row.ci_low) else 0.0
            high = min(row.ci_high, ceiling) - row.estimate if np.isfinite(row.ci_high) else ceiling - row.estimate
            ax.errorbar(x, row.estimate, yerr=[[max(low, 0.0)], [max(high, 0.0)]], fmt="o", color=colour, capsize=3)
            if np.isfinite(row.exact):
                ax.plot(x, row.exact, marker="x", color="black", markersize=7)
            if np.isfinite(row.theory_bound):
                ax.plot(x, row.theory_bound, marker="_", color="tab:blue", markersize=14, markeredgewidth=2)
    claims = rows[["claim", "claim_class"]].dropna().drop_duplicates()
    styles = ["--", ":", "-.", (0, (5, 1))]
    handles = []
    for claim, style in zip(claims.itertuples(), styles * len(claims)):
        handles.append(
            ax.axhline(
                claim.claim, color="tab:red", linestyle=style, linewidth=1,
                label=f"claim ({claim.claim_class}) {claim.claim:.3g}",
            )
        )
    handles += [
        plt.Line2D([], [], marker="o", linestyle="", color=colour, label=verdict)
        for verdict, colour in _VERDICT_COLOURS.items()
        if verdict in set(rows["verdict"])
    ]
    handles += [
        plt.Line2D([], [], marker="x", linestyle="", color="black", label="exact"),
        plt.Line2D([], [], marker="_", linestyle="", color="tab:blue", markersize=14, label="theory bound"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xticks(range(len(classes)), classes)
    ax.set_xlim(-0.6, len(classes) - 0.4)
    ax.set_ylim(bottom, ceiling + 0.05 * (ceiling - bottom))
    ax.set_xlabel("attack class")
    ax.set_ylabel("held-out estimate (CI)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
