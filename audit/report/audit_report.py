"""Write an audit's results: results.json, results.csv, report.md, report.html and figures.

The writer's input is the results rows, typed (:class:`audit.results.schema.Row`,
one per results.json row, each carrying its evidence as the engine built it),
and the audit's metadata; it computes nothing about privacy itself, it only
lays the evidence out so that the verdict comes first and every refuting row
can be traced to its numbers.  The rows become a table only at the files'
boundary (:func:`audit.results.files.results_table`); the claims, the figures
(a row's held-out scores come from its evidence) and report.md read the rows,
and the Method notes take the policy and the outputs per dataset off the rows
rather than off the config as written (where a default leaves them out).

results.json and results.csv are written by :func:`audit.results.files.write_results`,
which converts the numbers JSON cannot hold (NaN -> null, +-inf -> "inf" / "-inf")
and which :func:`audit.results.files.load_results` reads back.

results.json carries a ``schema_version`` (:data:`audit.results.files.SCHEMA_VERSION`; fields in
docs/results.md, JSON Schema in docs/schema/results.schema.json). report.md is
GitHub-flavoured markdown: every ``|`` inside a table cell is escaped, so the
direction ``P|Q`` stays one cell.

results.json also has a top-level ``claims`` list, one summary per claim
(:func:`audit.results.verdicts.summarize_claims`: its verdict, including
``"untested"``, the strongest row's task and Holm-adjusted p-value, and the
excess over the claim the audit would have detected with probability 0.8),
and report.md shows it right after the verdict.

This module writes the files and lays report.md out in its order; the sections
are rendered by modules of one job each: :mod:`audit.report.claims` (the
claims, their layers, on-average and trade-off sections),
:mod:`audit.report.rows` (the tables of rows), :mod:`audit.report.audited`
(what was audited, the first screen's warnings), :mod:`audit.report.theory`
(published bounds and property checks), :mod:`audit.report.method` (the
search and the Method notes), with the words they share in
:mod:`audit.report.words` and every table written by
:func:`audit.report.tables.markdown_table`.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from audit.config.accounting import source_note
from audit.config.attacks import AttackSpec
from audit.config.families import claim_summaries
from audit.report.figures import mechanism_label, row_label, write_evidence_figures, write_figures, write_tradeoff_figure
from audit.report.gdp_route import gdp_route, gdp_route_lines
from audit.report.html_report import write_html_report
from audit.results.provenance import NOT_REPRODUCIBLE
from audit.report.audited import audited_block, events_block, pairs_warning, search_section
from audit.report.claims import (
    claim_reasons,
    claims_table,
    layer_switch,
    layers_line,
    information_bound,
    on_average_section,
    representation_section,
    strongest_row,
    tight_note,
    tradeoff_section,
)
from audit.report.method import (
    in_rounds,
    method_notes,
    outputs_drawn,
    staged_section,
    stop_lines,
    time_limited_searches,
)
from audit.report.rows import by_importance, claim_table, failed_table, row_counts, summary_table
from audit.report.theory import checks_block, checks_summary, theory_headline, theory_section
from audit.report.words import claim_title
from audit.results.files import SCHEMA_VERSION, results_table, write_results
from audit.results.schema import Row
from audit.report.tradeoff import tradeoff_panels


VERDICTS = ("pass", "violation", "inconclusive", "error")


_HEADLINES = {
    "violation": "at least one claim is refuted by held-out evidence at the audit's confidence.",
    "inconclusive": "no claim is refuted, but some rows could not decide (see below).",
    "pass": "no claim is refuted by any attack.",
    "error": "the audit could not test every claim (a task failed, a claim went untested or a check could not "
    "run: see Failed tasks and Claims), so it draws no overall verdict; a violation among the rows that ran "
    "is still evidence against its claim.",
}


def write_audit_report(
    out_dir: str | pathlib.Path,
    *,
    rows: Sequence[Row],
    verdict: str,
    seed: int | None,
    seconds: float,
    versions: Mapping[str, Any],
    config: Mapping[str, Any],
    pairs: Sequence[Mapping[str, Any]] = (),
    audited: Mapping[str, Any] | None = None,
    theory: Sequence[Mapping[str, Any]] = (),
    checks: Sequence[Row] = (),
    search: Sequence[Mapping[str, Any]] = (),
    events: Sequence[Mapping[str, Any]] = (),
) -> pathlib.Path:
    """Write results.json, results.csv, report.md, report.html and figures/*.svg for an audit.

    Parameters
    ----------
    out_dir : str or Path
        Output directory, created if needed; existing files of the same names
        are overwritten.
    rows : sequence of Row
        The results rows (:class:`audit.results.schema.Row`); a row's evidence gives
        its held-out scores (:attr:`Row.held_out_scores`) to the figures and to
        results.json.
    verdict : {"pass", "violation", "inconclusive", "error"}
        The overall verdict (``"error"``: the exit code is 2).
    seed : int or None
        The audit's seed.
    seconds : float
        Wall time of the audit.
    versions : mapping
        Versions of capaudit, Python and the audited libraries.
    config : mapping
        The audit configuration as a JSON-serialisable dict (TOML layout of
        docs/design.md "Contract: config").
    pairs : sequence of mapping, optional
        The audited pairs, ``{"name", "d", "d_prime", "relation"}`` each
        (:func:`audit.results.provenance.pair_records`), saved so a pair can be re-run.
    audited : mapping, optional
        What was audited (:func:`audit.results.provenance.describe_audit`): the
        report's opening block after the verdict.
    theory : sequence of mapping, optional
        Published bounds against the rows (:func:`audit.theory.check.check_bounds`):
        results.json ``theory`` and report.md's Theory section.
    checks : sequence of Row, optional
        The ``[[checks]]`` rows (:func:`audit.engine.checks.run_check`): results.json's ``checks``
        (:meth:`audit.results.schema.Row.to_check_record`) and report.md's "Property checks".
    search : sequence of mapping, optional
        The dataset search's screening log (:func:`audit.results.provenance.screening_records`):
        results.json's ``search`` and report.md's "Dataset search".
    events : sequence of mapping, optional
        What the mechanism did besides regular outputs, per pair (:func:`audit.sampling.events.event_summary`):
        results.json's ``events`` and a paragraph on report.md's first screen.

    Returns
    -------
    pathlib.Path
        The path of report.md.

    Raises
    ------
    ValueError
        If ``verdict`` is unknown.
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}. Found {verdict!r}.")
    out_dir = pathlib.Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    claims = claim_summaries(rows, config)
    strongest = [strongest_row(rows, claim) for claim in claims]
    confidence = float((config.get("attacks") or {}).get("confidence", 0.95))
    records = (config.get("neighbours") or {}).get("size")  # n of an on-average claim's datasets
    for claim, row in zip(claims, strongest):
        claim["strongest_row"] = None if row is None else row_label(row.pair, row.direction, row.function_class)
        information = information_bound(claim["divergence"], claim["claim"], claim.get("on_average", False), records)
        claim.update({"mutual_information_bound": information} if information is not None else {})
        tight = tight_note(claim, row, confidence)
        claim["note"] = "; ".join(part for part in (claim["note"], tight, source_note(claim, config)) if part)
    versions = dict(versions)
    if ((audited or {}).get("mechanism") or {}).get("reproducible") is False:  # the probe overrules the declaration
        versions["mechanism_seedable"] = False
    meta = {
        "schema_version": SCHEMA_VERSION, "verdict": verdict, "seed": seed, "seconds": seconds,
        "versions": versions, "config": dict(config), "audited": dict(audited or {}), "pairs": list(pairs),
        "claims": claims, "outputs_drawn": outputs_drawn(rows), "machine_dependent": time_limited_searches(rows) > 0,
        "theory": [dict(entry) for entry in theory],
        **({"checks": [row.to_check_record() for row in checks]} if checks else {}),  # only configs with [[checks]]
        **({"search": [dict(entry) for entry in search]} if search else {}),  # only strategy = "search"
        **({"events": [dict(entry) for entry in events]} if events else {}),  # only when the mechanism showed some
    }
    route = gdp_route(rows, config, claims, strongest, confidence)  # gdp claims, (epsilon, delta) of Gaussians
    meta.update({"gdp_route": route} if route else {})
    write_results(out_dir, meta, results_table(rows))
    figures = write_figures(rows, out_dir / "figures", mechanism=mechanism_label(config))
    shown = [(row, row.held_out_scores) for row in strongest if row is not None]  # the rows the Claims table names
    figures += write_evidence_figures(shown, out_dir / "figures", mechanism=mechanism_label(config))
    panels = tradeoff_panels(rows, config, pairs, meta["claims"])  # gdp / zcdp / profile claims only
    figures += write_tradeoff_figure(panels, out_dir / "figures", mechanism=mechanism_label(config))
    report = out_dir / "report.md"
    report.write_text(_markdown(by_importance(rows), meta, [path.relative_to(out_dir) for path in figures],
                                tradeoff=tradeoff_section(panels, confidence, rows)))
    write_html_report(report)
    return report


def _markdown(rows: Sequence[Row], meta: dict[str, Any], figures: list[pathlib.Path],
              tradeoff: Sequence[str] = ()) -> str:
    """report.md of the typed ``rows`` (in the order shown), the audit's metadata and the trade-off section's lines."""
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
        *layers_line(meta["claims"]),
        row_counts(rows) if rows else "No claims: the verdict is about the property checks.",
        "",
        *theory_headline(meta.get("theory", [])),
        *events_block(meta.get("events", [])),
        *pairs_warning(meta["pairs"], meta["config"]),
        *checks_summary(meta.get("checks", [])),
        f"Seed {meta['seed']}, {meta['seconds']:.1f} s. Versions: "
        + ", ".join(f"{name} {version}" for name, version in meta["versions"].items()
                    if version is not None and name != "mechanism_seedable")  # seedability: What was audited
        + ".",
        "",
    ]
    if time_limited_searches(rows):
        lines += [f"**Numbers depend on the machine:** the wall-clock limit `[run] max_seconds` stopped "
                  f"{time_limited_searches(rows)} search(es), so another machine, or this one under another load, draws "
                  "other outputs and gives other numbers; leave `max_seconds` out (the default: a budget counted in "
                  "outputs, `[attacks] max_outputs`) for numbers that depend on the config and seed only.", ""]
    lines += layer_switch(attacks, rows)
    lines += audited_block(meta["audited"], meta["pairs"], meta["config"])
    lines += search_section(meta.get("search", []))
    if (meta["audited"].get("mechanism") or {}).get("reproducible") is False:
        lines += [f"**Not reproducible:** {NOT_REPRODUCIBLE}; the verdict's error rate still holds, but "
                  "a violation cannot be replayed from the seed.", ""]
    elif meta["versions"].get("mechanism_seedable") is False:
        lines += [
            "**Not reproducible bit for bit:** the mechanism's library draws its own randomness and "
            "cannot be seeded, so another run with the same seed gives other numbers (the verdict "
            "should not change).",
            "",
        ]
    if meta["claims"]:
        lines += ["## Claims", "", claims_table(meta["claims"]), "", *claim_reasons(meta["config"])]
        lines += representation_section(meta["claims"], rows)
    lines += list(tradeoff)
    lines += gdp_route_lines(meta.get("gdp_route"))
    lines += on_average_section(rows, confidence, (meta["config"].get("neighbours") or {}).get("size"))
    lines += checks_block(meta.get("checks", []))
    lines += staged_section(rows) + stop_lines(rows, attacks.get("tolerance", AttackSpec.tolerance))
    for row_verdict, title in (
        ("violation", "Violations"),
        ("inconclusive", "Inconclusive rows"),
    ):
        judged = [row for row in rows if row.verdict == row_verdict and not row.error]  # failed: their own table
        if judged:
            lines += [f"## {title} ({len(judged)})", "", summary_table(judged), ""]
    failed = [row for row in rows if row.error]
    if failed:
        lines += [f"## Failed tasks ({len(failed)})", "", failed_table(failed), ""]
    lines += theory_section(meta.get("theory", []))
    lines += ["## Results per claim", ""] if rows else []
    claims: dict[tuple, list[Row]] = {}
    for row in rows:
        claims.setdefault((row.divergence, row.claim_class, row.claim, row.delta, row.on_average, row.d_in),
                          []).append(row)
    for (divergence, claim_class, claim, delta, on_average, d_in), claim_rows in claims.items():
        lines += [f"### {claim_title(divergence, claim_class, claim, on_average, delta, d_in)}", "",
                  claim_table(claim_rows), ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{path.stem}]({path.as_posix()})\n" for path in figures]
    # what the rows carry (a screen stage, outputs per dataset) is read off them, not off the config as written
    screened = any(row.n_screen for row in rows)
    n_samples = next((row.n_samples for row in rows if not math.isnan(row.n_samples)), attacks.get("n_samples"))
    lines += ["## Method", "", *method_notes(confidence, n_samples, attacks.get("coupled", False), screened,
                                              in_rounds(rows)), ""]
    return "\n".join(lines)
