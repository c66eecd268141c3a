"""Write an audit's results: results.json, results.csv, report.md, report.html and figures.

The writer's input is the results rows, typed (:class:`audit.schema.Row`,
one per results.json row, each carrying its evidence as the engine built it),
and the audit's metadata; it computes nothing about privacy itself, it only
lays the evidence out so that the verdict comes first and every refuting row
can be traced to its numbers.  The rows become a table only at the files'
boundary (:func:`audit.results_file.results_table`); the claims, the figures
(a row's held-out scores come from its evidence) and report.md read the rows,
and the Method notes take the policy and the outputs per dataset off the rows
rather than off the config as written (where a default leaves them out).

results.json and results.csv are written by :func:`audit.results_file.write_results`,
which converts the numbers JSON cannot hold (NaN -> null, +-inf -> "inf" / "-inf")
and which :func:`audit.results_file.load_results` reads back.

results.json carries a ``schema_version`` (:data:`audit.results_file.SCHEMA_VERSION`; fields in
docs/results.md, JSON Schema in docs/schema/results.schema.json). report.md is
GitHub-flavoured markdown: every ``|`` inside a table cell is escaped, so the
direction ``P|Q`` stays one cell.

results.json also has a top-level ``claims`` list, one summary per claim
(:func:`audit.verdicts.summarize_claims`: its verdict, including
``"untested"``, the strongest row's task and Holm-adjusted p-value, and the
excess over the claim the audit would have detected with probability 0.8),
and report.md shows it right after the verdict.
"""

from __future__ import annotations

import collections
import math
import pathlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attacks.classes import LAYERS, LINEAR, REPRESENTATION, All, Thresholds, parse_function_class
from attacks.vocabulary import DP, divergence_kind
from audit.figures import mechanism_label, row_label, write_evidence_figures, write_figures, write_tradeoff_figure
from audit.events import EVENTS, SIDES, WORDS as EVENT_WORDS
from audit.html_report import write_html_report
from audit.provenance import NOT_REPRODUCIBLE, not_neighbours
from audit.tables import LINE_LIMIT, bounded, format_number, markdown_table, plain_text
from audit.results_file import SCHEMA_VERSION, json_value, results_table, write_results
from audit.theory.check import failures

from audit.schema import STAGE_SIZE_COLUMNS, Row  # noqa: E402
from attacks.sequential import POWER, TIME_LIMIT  # noqa: E402
from audit.families import claim_summaries  # noqa: E402
from audit.verdicts import NOT_AUDITED, combined_verdict  # noqa: E402
from audit.engine import BIT_EVENT  # noqa: E402
from audit.tradeoff_report import LEVELS as TRADEOFF_LEVELS, Panel, tradeoff_panels  # noqa: E402
from audit.config import AttackSpec  # noqa: E402

VERDICTS = ("pass", "violation", "inconclusive", "error")
ROW_VERDICTS = ("violation", "unbounded", "inconclusive", "pass", "info")
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
    checks: Sequence[Mapping[str, Any]] = (),
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
        The results rows (:class:`audit.schema.Row`); a row's evidence gives
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
        (:func:`audit.provenance.pair_records`), saved so a pair can be re-run.
    audited : mapping, optional
        What was audited (:func:`audit.provenance.describe_audit`): the
        report's opening block after the verdict.
    theory : sequence of mapping, optional
        Published bounds against the rows (:func:`audit.theory.check.check_bounds`):
        results.json ``theory`` and report.md's Theory section.
    checks : sequence of mapping, optional
        The ``[[checks]]`` rows (:func:`audit.checks.run_checks`): results.json's
        ``checks`` and report.md's "Property checks".
    search : sequence of mapping, optional
        The dataset search's screening log (:func:`audit.provenance.screening_records`):
        results.json's ``search`` and report.md's "Dataset search".
    events : sequence of mapping, optional
        What the mechanism did besides regular outputs, per pair (:func:`audit.events.event_summary`):
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
    strongest = [_strongest_row(rows, claim) for claim in claims]
    confidence = float((config.get("attacks") or {}).get("confidence", 0.95))
    for claim, row in zip(claims, strongest):
        claim["strongest_row"] = None if row is None else row_label(row.pair, row.direction, row.function_class)
        tight = _tight_note(claim, row, confidence)
        claim["note"] = "; ".join(part for part in (claim["note"], tight) if part)
    versions = dict(versions)
    if ((audited or {}).get("mechanism") or {}).get("reproducible") is False:  # the probe overrules the declaration
        versions["mechanism_seedable"] = False
    meta = {
        "schema_version": SCHEMA_VERSION, "verdict": verdict, "seed": seed, "seconds": seconds,
        "versions": versions, "config": dict(config), "audited": dict(audited or {}), "pairs": list(pairs),
        "claims": claims, "outputs_drawn": _outputs_drawn(rows), "machine_dependent": _time_limited(rows) > 0,
        "theory": [dict(entry) for entry in theory],
        **({"checks": [dict(check) for check in checks]} if checks else {}),  # only configs with [[checks]]
        **({"search": [dict(entry) for entry in search]} if search else {}),  # only strategy = "search"
        **({"events": [dict(entry) for entry in events]} if events else {}),  # only when the mechanism showed some
    }
    write_results(out_dir, meta, results_table(rows))
    figures = write_figures(rows, out_dir / "figures", mechanism=mechanism_label(config))
    shown = [(row, row.held_out_scores) for row in strongest if row is not None]  # the rows the Claims table names
    figures += write_evidence_figures(shown, out_dir / "figures", mechanism=mechanism_label(config))
    panels = tradeoff_panels(rows, config, pairs, meta["claims"])  # gdp / zcdp / profile claims only
    figures += write_tradeoff_figure(panels, out_dir / "figures", mechanism=mechanism_label(config))
    report = out_dir / "report.md"
    report.write_text(_markdown(_by_importance(rows), meta, [path.relative_to(out_dir) for path in figures],
                                tradeoff=_tradeoff_section(panels, confidence, rows)))
    write_html_report(report)
    return report


def _strongest_row(rows: Sequence[Row], claim: Mapping[str, Any]) -> Row | None:
    """The row a claim summary names (its ``strongest_task`` under the claim's keys), None when untested."""
    keys = ("divergence", "claim_class", "claim", "on_average")
    tasks = [row for row in rows if row.task == claim["strongest_task"]]
    for row in tasks:
        if (_same_number(row.alpha, claim["alpha"]) and _same_number(row.delta, claim["delta"])
                and all(getattr(row, k) == claim[k] for k in keys)):
            return row
    return tasks[0] if tasks else None  # a curve claim's line names its strongest member's row


def _tight_note(claim: Mapping[str, Any], row: Row | None, confidence: float | None) -> str:
    """What a reader of a claim its strongest row cannot separate from equality should know, or "".

    The row's interval holds the claimed value: a mechanism exactly at its
    claim reads pass or inconclusive by the draw of its estimate.  A claim
    ``detectable_excess`` above the value expected reads pass at least as
    often as the audit's confidence: its estimate falls below the claim
    unless it errs by z(1 - a) + z(0.8) standard errors (the standard error
    as observed; :func:`attacks.sequential.detectable_excess`).
    """
    if row is None or claim["verdict"] not in ("pass", "inconclusive"):
        return ""
    if not (math.isfinite(row.ci_low) and math.isfinite(row.ci_high) and row.ci_low <= row.claim <= row.ci_high):
        return ""
    text = (f"consistent with equality: the strongest row's interval [{_number(row.ci_low)}, {_number(row.ci_high)}] "
            f"holds the claimed {_number(row.claim)}, so a mechanism exactly at its claim reads inconclusive in a "
            "good share of audits")
    excess = claim["detectable_excess"]
    if isinstance(excess, float) and math.isfinite(excess):
        often = f"{confidence:g}" if confidence is not None else "the audit's confidence"
        text += (f"; a claim at least {_number(excess)} (the detectable excess) above the value you expect reads "
                 f"pass in {often} or more of audits of this size")
    return text


def _reasons(config: Mapping[str, Any]) -> list[str]:
    """Why each claimed value (``[[claims]] reason``), one line per claim that gives one."""
    claims = config.get("claims") or []
    claims = [claims] if isinstance(claims, Mapping) else claims
    lines = [f"- {_claim_label(c.get('divergence'), c.get('function_class'), c.get('epsilon'), _orders(c), c.get('delta'))}"
             f": {plain_text(bounded(c['reason']))}" for c in claims if isinstance(c, Mapping) and c.get("reason")]
    return ["Why these values:", "", *lines, ""] if lines else []


def _orders(claim: Mapping[str, Any]) -> Any:
    """A raw claim's Renyi order(s) as :func:`_claim_label` shows them: one number, or the list as text."""
    alpha = claim.get("alpha")
    if isinstance(alpha, (list, tuple)):
        return alpha[0] if len(alpha) == 1 else ", ".join(_number(value) for value in alpha)
    return alpha


def _same_number(a: Any, b: Any) -> bool:
    """Equal, or both missing (NaN / None)."""
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) for x in (a, b)]
    return all(missing) or (not any(missing) and a == b)


def _by_importance(rows: Sequence[Row]) -> list[Row]:
    """Rows in the order of :data:`ROW_VERDICTS` (violations first), stable within a verdict."""
    rank = {verdict: i for i, verdict in enumerate(ROW_VERDICTS)}
    return sorted(rows, key=lambda row: rank.get(row.verdict, len(ROW_VERDICTS)))


# --- report.md -------------------------------------------------------------


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
        *_layers_line(meta["claims"]),
        _counts(rows) if rows else "No claims: the verdict is about the property checks.",
        "",
        *_theory_headline(meta.get("theory", [])),
        *_events_block(meta.get("events", [])),
        *_pairs_warning(meta["pairs"]),
        *_checks_summary(meta.get("checks", [])),
        f"Seed {meta['seed']}, {meta['seconds']:.1f} s. Versions: "
        + ", ".join(f"{name} {version}" for name, version in meta["versions"].items()
                    if version is not None and name != "mechanism_seedable")  # seedability: What was audited
        + ".",
        "",
    ]
    if _time_limited(rows):
        lines += [f"**Numbers depend on the machine:** the wall-clock limit `[run] max_seconds` stopped "
                  f"{_time_limited(rows)} search(es), so another machine, or this one under another load, draws "
                  "other outputs and gives other numbers; leave `max_seconds` out (the default: a budget counted in "
                  "outputs, `[attacks] max_outputs`) for numbers that depend on the config and seed only.", ""]
    lines += _layer_switch(attacks, rows)
    lines += _audited_block(meta["audited"], meta["pairs"], meta["config"])
    lines += _search_section(meta.get("search", []))
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
        lines += ["## Claims", "", _claims_table(meta["claims"]), "", *_reasons(meta["config"])]
        lines += _representation_section(meta["claims"], rows)
    lines += list(tradeoff)
    lines += _on_average_section(rows, confidence)
    lines += _checks_block(meta.get("checks", []))
    lines += _staged_section(rows) + _stop_lines(rows, attacks.get("tolerance", AttackSpec.tolerance))
    for row_verdict, title in (
        ("violation", "Violations"),
        ("unbounded", "Unbounded rows"),
        ("inconclusive", "Inconclusive rows"),
    ):
        judged = [row for row in rows if row.verdict == row_verdict and not row.error]  # failed: their own table
        if judged:
            lines += [f"## {title} ({len(judged)})", "", _summary_table(judged), ""]
    failed = [row for row in rows if row.error]
    if failed:
        lines += [f"## Failed tasks ({len(failed)})", "", _failed_table(failed), ""]
    lines += _theory_section(meta.get("theory", []))
    lines += ["## Results per claim", ""] if rows else []
    claims: dict[tuple, list[Row]] = {}
    for row in rows:
        claims.setdefault((row.divergence, row.claim_class, row.claim, row.delta, row.on_average), []).append(row)
    for (divergence, claim_class, claim, delta, on_average), claim_rows in claims.items():
        lines += [f"### {_claim_title(divergence, claim_class, claim, on_average, delta)}", "",
                  _claim_table(claim_rows), ""]
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{path.stem}]({path.as_posix()})\n" for path in figures]
    # what the rows carry (a screen stage, outputs per dataset) is read off them, not off the config as written
    screened = any(row.n_screen for row in rows)
    n_samples = next((row.n_samples for row in rows if not math.isnan(row.n_samples)), attacks.get("n_samples"))
    lines += ["## Method", "", *_method_notes(confidence, n_samples, attacks.get("coupled", False), screened,
                                              _sequential(rows)), ""]
    return "\n".join(lines)


def _theory_headline(theory: Sequence[Mapping[str, Any]]) -> list[str]:
    """The line beside the verdict when a published bound fails (the verdict is about the claims only)."""
    failing = failures(theory)
    if not failing:
        return []
    return [
        f"**PUBLISHED BOUND FAILS:** {len(failing)} of {len(theory)} published closed-form bounds compared are "
        "exceeded by an exact value or a lower confidence bound (see Theory). The verdict above is about the "
        "config's claims only.",
        "",
    ]


def _pairs_warning(pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The first screen's warning on audited pairs that are not neighbours (:func:`audit.provenance.not_neighbours`)."""
    found = not_neighbours(pairs)
    if not found:
        return []
    refuse = (" Give `relation` in a `[[pairs]]` entry to have such a pair refused."
              if not any(pair.get("neighbours") for pair in pairs) else "")  # records only: a [[pairs]] relation
    return ["**WARNING, pairs that are not neighbours:** the claims bound neighbouring datasets. "
            + "; ".join(found) + "." + refuse, ""]


def _events_block(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The first screen's paragraph on what the mechanism did besides regular outputs (:mod:`audit.events`),
    per pair; none without events.  The error text is the mechanism's: bounded, never raw HTML."""
    if not events:
        return []
    items = []
    for entry in events:
        if entry["redrawn_draws"]:
            items.append(f"- pair {_code(entry['pair'])}: {entry['redrawn_draws']} call(s) for many outputs raised "
                         "and were absorbed by drawing those outputs again one per call; the first error: "
                         f"{plain_text(bounded(entry['redraw_error']))}")
        for kind in EVENTS:
            counts = [entry[side][kind] for side in SIDES]
            if any(counts):
                items.append(f"- pair {_code(entry['pair'])}: {EVENT_WORDS[kind]} outputs: {counts[0]} of "
                             f"{entry['d']['outputs']} on d, {counts[1]} of {entry['d_prime']['outputs']} on d'")
    return ["**Mechanism events (absorbed, not errors):** the audit went on through what follows. Structural "
            "outputs are compared like any output (audit.structure); a draw redone one output per call audits "
            "single calls, not the calls for many outputs that raised. Counts are per dataset over every stage "
            "(results.json `events`).", "", *items, ""]


def _theory_section(theory: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's published bound (``theory_bound``) beside its exact value, lower confidence bound and status."""
    if not theory:
        return []
    shown = pd.DataFrame(
        {
            "pair": [e["pair"] for e in theory],
            "direction": [e["direction"] for e in theory],
            "function class": [e["function_class"] for e in theory],
            "divergence": [_divergence_label(e["divergence"], e["alpha"]) for e in theory],
            "published bound": [_number(e["bound"]) for e in theory],
            "exact": [_number(e["exact"]) for e in theory],
            "lower bound": [_number(e["lower_bound"]) for e in theory],
            "level": [_number(e["level"]) for e in theory],
            "status": [f"**{e['status']}**" if e["fails"] else e["status"] for e in theory],
        }
    )
    return [
        f"## Theory ({len(failures(theory))} of {len(theory)} published bounds fail)",
        "",
        "The mechanism's closed-form bound for each row's (class, divergence, alpha) (`theory_bound`: the "
        "paper's Table 1 / Corollary 2 / Theorem 5 bound, or an exact unrestricted value; docs/theory.md "
        "section 6; for (linear, Renyi) at alpha <= 2, where Corollary 2 states no bound, the unrestricted "
        "value) against the row's exact value and its lower confidence bound. A lower bound fails a "
        "published bound at the Bonferroni level shown (1 - (1 - confidence) / m over the m rows compared), "
        "an exact value beyond a relative tolerance of 1e-4. Published bounds are claims; they are reported "
        "as published, not corrected.",
        "",
        _to_markdown(shown),
        "",
    ]


def _staged_section(rows: Sequence[Row]) -> list[str]:
    """"Staged search": per claim, the outputs per dataset each stage used and the candidate that won."""
    searched = [row for row in rows if row.n_screen and not row.error]  # policy best's rows: a screen chose them
    if not searched:
        return []
    frame = pd.DataFrame({
        "claim": [_row_claim(r) for r in searched],
        "layer": [r.layer for r in searched],
        "winner": [row_label(r.pair, r.direction, r.function_class) for r in searched],
        **{name: [str(getattr(r, name)) for r in searched] for name in STAGE_SIZE_COLUMNS},
    })
    budget = ("`n_samples` is unset: each search ran in rounds of growing budgets (Sequential audits), each "
              "round's budget one pair's over four stages; the sizes below are the last round's"
              if _sequential(searched) else "`n_samples` is one pair's budget over four stages")
    return [
        "## Staged search", "",
        f"`attacks.policy = \"best\"`: {budget}. Outputs per dataset: "
        "`n_screen` on every pair (all candidates: pairs x directions x classes), `n_train` and `n_check` on the "
        "finalists' pairs, `n_confirm` on the winner's pair only, a fresh sample that no choice saw; the claim's "
        "one statistic (pooled over `sets_pooled` nested sets when more than 1) is its confirm bound. Each claim "
        "has a search per layer (values; representation: how outputs are stored) and Holm corrects over these "
        "searches only.", "",
        _to_markdown(frame), "",
    ]


_STOP_WORDS = {
    "violation": "violation",
    "decided": "decided, a pass (an excess of {tolerance} over the claim would have been detected with {power:.0%} "
    "probability)",
    "output limit": "output limit reached, undecided",
    "time limit": "time limit reached, undecided",
    "fixed": "the fixed n_samples budget",
}


def _row_claim(row: Row) -> str:
    """The claim a row answers, in words (:func:`_claim_label`, a dp claim's delta included)."""
    return _claim_label(row.divergence, row.claim_class, row.claim, row.alpha, row.delta)


def _stop_lines(rows: Sequence[Row], tolerance: float) -> list[str]:
    """Why each claim's search stopped, in words ("stopped after 3 400 outputs: violation")."""
    stopped = [row for row in rows if row.stop is not None and not row.error]
    if not stopped:
        return []
    lines = [f"- {_row_claim(r)}, {r.layer}: stopped after "
             f"{_thousands(r.outputs_drawn)} outputs ({r.rounds} round{'s' if r.rounds != 1 else ''}): "
             + _stop_words(r, tolerance) for r in stopped]
    return ["Outputs drawn (both datasets, every pair, stage and round) and why each search stopped "
            f"(tolerance {tolerance}):", "", *lines, ""]


def _layers_line(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The verdict block's line per layer: over the claims, what the mechanism computes (values) and how it stores
    them (representation), each judged apart (:func:`audit.verdicts.combined_verdict`)."""
    if not claims or not all("value_verdict" in claim for claim in claims):
        return []
    value, stored = (combined_verdict(claim[f"{layer}_verdict"] for claim in claims) for layer in LAYERS)
    return [f"By layer: **values** (what the mechanism computes) {_bold_unless_pass(value)}; **representation** "
            f"(how it stores them, IEEE-754 bits) {_bold_unless_pass(stored)}.", ""]


def _representation_section(claims: Sequence[Mapping[str, Any]], rows: Sequence[Row]) -> list[str]:
    """In plain words, when the representation layer refutes a claim: the event that distinguishes the datasets
    (a representation row's note, :data:`audit.engine.BIT_EVENT`), that it is the floating-point sampler's
    (Mironov 2012; Haney et al. 2022), that the value verdict is separate, and the fixes."""
    refuted = [claim for claim in claims if claim.get("representation_verdict") == "violation"]
    if not refuted:
        return []
    found = [row for row in rows if row.layer == REPRESENTATION and row.verdict in ("violation", "unbounded")]
    events = list(dict.fromkeys(f"pair {row.pair}: {part.split(': ', 1)[1]}" for row in found
                                for part in row.note.split("; ") if part.startswith(BIT_EVENT)))
    lines = ["### How the outputs are stored (representation layer)", "",
             f"The `floatbits` attack reads the outputs' IEEE-754 bits, not their values, and refutes "
             f"{len(refuted)} claim(s) with them. This is a property of the floating-point sampler: noise drawn "
             "in floating point (numpy's or an inverse-CDF Laplace or Gaussian) and added to a value that depends "
             "on the data leaves gaps and a precision in the outputs that depend on the input (Mironov, CCS 2012; "
             "Haney et al., 2022), which an adversary reads off the released bits.", ""]
    if events:
        lines += ["Event that distinguishes the datasets (shares of all outputs drawn):", "",
                  *[f"- {event}" for event in events], ""]
    lines += [f"- {_summary_label(claim)}: values **{claim['value_verdict']}**, representation **violation**"
              for claim in refuted]
    lines += ["", "The values' verdict is separate: it is what the mechanism computes, judged by the other classes "
              "on their own search. To make the outputs safe, draw the noise with a float-safe sampler (OpenDP's "
              "samplers, Mironov's snapping mechanism `snapping_laplace`, discrete Laplace or Gaussian noise on a "
              "grid); a claim about the values only says so with `[attacks] representation = false`.", ""]
    return lines


def _layer_switch(attacks: Mapping[str, Any], rows: Sequence[Row]) -> list[str]:
    """The header's line when the representation layer went unaudited on a claim about every function: switched
    off (``[attacks] representation = false``), or no class of it in ``[attacks] classes``."""
    if attacks.get("representation") is False:
        return ["**Representation layer off** (`[attacks] representation = false`): the claims are judged on the "
                "released values only; how the outputs are stored (their IEEE-754 bits) was not audited, so a "
                "floating-point sampler's leak (Mironov 2012) would go unseen.", ""]
    about_all = any(isinstance(parse_function_class(row.claim_class), All) for row in rows)
    if about_all and not any(row.layer == REPRESENTATION for row in rows):
        return ["**Representation layer not audited**: no class of `[attacks] classes` reads how the outputs are "
                "stored (`floatbits`), so the claims about `all` were judged on the released values only; add "
                "`floatbits` to audit the floating-point outputs too, or set `representation = false` to say the "
                "claims are about values.", ""]
    return []


def _time_limited(rows: Sequence[Row]) -> int:
    """How many searches the wall-clock limit stopped (their rows' ``stop``; one per search and claim)."""
    return len({(row.task, row.claim, row.delta) for row in rows if row.stop == TIME_LIMIT})


def _sequential(rows: Sequence[Row]) -> bool:
    """Whether the rows' searches ran in rounds (``n_samples`` unset): a stop other than the fixed design."""
    return any(row.stop not in (None, "fixed") for row in rows)


def _stop_words(row: Row, tolerance: float) -> str:
    """Why a row's search stopped, never contradicting its verdict: a search that stopped ``decided`` but whose
    row is not a pass (its estimate above the claim by less than the tolerance) is said to have stopped at the
    tolerance, with the verdict."""
    if row.stop == "decided" and row.verdict != "pass":
        return (f"stopped at the tolerance (an excess of {tolerance} over the claim would have been detected with "
                f"{POWER:.0%} probability), but the row reads {row.verdict}, not pass")
    return _STOP_WORDS[row.stop].format(tolerance=tolerance, power=POWER)


def _thousands(value: int) -> str:
    return f"{int(value):,}".replace(",", " ")


def _outputs_drawn(rows: Sequence[Row]) -> int:
    """All outputs the audit drew: each unit's (a search of policy best, ``staged|claim<k>|...`` at one order; a
    pair of policy every), counted once over its rows."""
    units = {(row.task.split("|")[1], json_value(row.alpha), row.layer) if row.task.startswith("staged|") else row.pair:
             row.outputs_drawn for row in rows if row.outputs_drawn is not None}
    return int(sum(units.values()))


def _tradeoff_section(panels: Sequence[Panel], confidence: float, rows: Sequence[Row] = ()) -> list[str]:
    """report.md lines: per curve claim, its members and each class's band against the claimed curve; rows are
    named in words (:func:`audit.figures.row_label`), never by task id."""
    if not panels:
        return []
    words = {row.task: row_label(row.pair, row.direction, row.function_class) for row in rows if row.task}
    lines = [
        "## Trade-off curves", "",
        "A gdp, zcdp or profile claim is audited as its members, ordinary dp and Renyi claims at a grid "
        "(docs/theory.md section 9); a refuted member refutes it. Per attack class, the held-out scores of "
        "its strongest member row give an empirical trade-off curve (type-II error b at type-I error a of the "
        f"tests {{score <= t}}) and an upper confidence band on the class's trade-off curve (DKW, simultaneous "
        f"over all a at confidence {confidence:g}), drawn in figures/tradeoff.svg beside the claimed curve. A band "
        "below the claimed curve shows the class's tests beating it; the band is evidence beside the verdict "
        "(the row was chosen by its p-value), the verdict is the members'.", "",
    ]
    for panel in panels:
        lines += [f"### {panel.label or panel.family.label}", "", _to_markdown(pd.DataFrame({
            "member": [m["member"] for m in panel.members],
            "verdict": [f"**{m['verdict']}**" if m["verdict"] == "violation" else m["verdict"] for m in panel.members],
            "strongest row": [words.get(m["strongest_task"], "-") for m in panel.members],
            "adjusted p": [m["p_adjusted"] for m in panel.members],
        })), ""]
        if panel.classes:
            lines += [_to_markdown(pd.DataFrame({
                "attack class": [c.function_class for c in panel.classes],
                "row": [row_label(c.pair, c.direction, c.function_class) for c in panel.classes],
                "held-out n (P, Q)": [f"{c.curve.n_p}, {c.curve.n_q}" for c in panel.classes],
                "band margins (a, b)": [f"{c.curve.margin_p:.3g}, {c.curve.margin_q:.3g}" for c in panel.classes],
                "band below the claimed curve": [_crossing_text(c.crossing) for c in panel.classes],
            })), ""]
        lines += _exact_text(panel)
    return lines


def _exact_text(panel: Panel) -> list[str]:
    """What the exact curves say of the claim at the drawn pair: T(P, Q) decides a claim over "all", the linear
    class's restricted curve one over "linear" or "threshold" (1-D thresholds); T(P, Q) >= f proves any class's
    claim (T_H >= T)."""
    if panel.exact is None:
        return []
    claimed = panel.family.tradeoff(TRADEOFF_LEVELS)
    claimed_class = parse_function_class(panel.family.function_class)
    thresholds = claimed_class in (LINEAR, Thresholds())  # on a 1-D output: the same tests
    reference = panel.linear if thresholds else panel.exact
    name = "restricted curve of the linear class" if thresholds else "curve T(P, Q)"
    gap = float(np.max(claimed - reference))
    if gap > 1e-9 and (thresholds or isinstance(claimed_class, All)):
        text = f"below the claimed curve by up to {gap:.3g}: the claim is false at this pair."
    elif float(np.max(claimed - panel.exact)) <= 1e-9:
        text = "at or above the claimed curve everywhere: the claim holds at this pair for the values (the output " \
               "laws in exact arithmetic)."
        if any(member.get("representation_verdict") == "violation" for member in panel.members):
            text += (" Its floating-point outputs do not: the representation layer refutes the claim (Claims, "
                     "\"How the outputs are stored\"); both statements hold, one of the values, one of their bits.")
    else:
        name, text = "curve T(P, Q)", f"below the claimed curve by up to {gap:.3g}; the class's own curve is not known."
    return [f"Exact {name} of the mechanism's output laws (pair {panel.classes[0].pair}): {text}", ""]


def _crossing_text(crossing: tuple[float, float] | None) -> str:
    if crossing is None:
        return "no"
    return f"**yes**, from a = {crossing[0]:.3g}, by up to {crossing[1]:.3g}"


def _audited_block(audited: Mapping[str, Any], pairs: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[str]:
    """The "What was audited" section: mechanism, pairs, config, command, date, machine (what is known)."""
    items = []
    mechanism = audited.get("mechanism")
    if mechanism:
        items.append(f"- **Mechanism:** {_mechanism_line(mechanism)}")
    if pairs:
        items.append(f"- **Neighbouring pairs** ({_pair_source(config)}; saved with every digit in results.json `pairs`):")
        items += [f"  - {_pair_line(pair, i)}" for i, pair in enumerate(pairs)]
    if audited.get("config_sha256"):
        where = _code(audited["config_path"]) if audited.get("config_path") else "a Python mapping"
        items.append(f"- **Config:** {where}, sha256 `{audited['config_sha256']}`")
    if audited.get("command"):
        items.append(f"- **Command:** {_code(bounded(audited['command']))}")
    if audited.get("date"):
        items.append(f"- **Date:** {audited['date']}")
    machine = audited.get("machine")
    if machine:
        items.append(
            f"- **Machine:** {machine.get('platform')}, {machine.get('cpu_count')} CPUs, Python {machine.get('python')}"
        )
    return ["## What was audited", "", *items, ""] if items else []


def _mechanism_line(mechanism: Mapping[str, Any]) -> str:
    params = ", ".join(_code(bounded(f"{key}={value!r}")) for key, value in mechanism.get("params", {}).items())
    name = str(mechanism.get("name"))
    if mechanism.get("library"):
        library = plain_text(f"{mechanism['library']} {mechanism.get('library_version') or '(version unknown)'}")
    else:
        library = "user code" if ":" in name else "capaudit built-in"
    reproducible = mechanism.get("reproducible")
    if reproducible is False:
        seedable = "**not reproducible** (the mechanism ignores rng)"
    elif not mechanism.get("seedable", True):
        seedable = "not seedable"
    elif reproducible:
        seedable = "seedable (two draws with the same seed agreed bit for bit)"
    else:
        seedable = "seedable as declared (not probed)"
    true_privacy = f"; true privacy: {plain_text(bounded(mechanism['true_privacy']))}" if mechanism.get("true_privacy") else ""
    return f"{_code(bounded(name))} ({params or 'no parameters'}); library: {library}, {seedable}{true_privacy}"


def _pair_source(config: Mapping[str, Any]) -> str:
    neighbours = config.get("neighbours")
    if isinstance(neighbours, Mapping):
        relation = neighbours.get("relation", "replace-one")
        return f"generated by `[neighbours]` strategy {neighbours.get('strategy')!r}, relation {relation}"
    if config.get("pairs"):
        return "explicit `[[pairs]]` from the config"
    return "the mechanism's worst-case default pairs"


_INLINE_VALUES = 24
"""Pairs with at most this many numbers in d and d' together are shown in report.md; all are in results.json."""


def _pair_line(pair: Mapping[str, Any], index: int) -> str:
    d, d_prime = np.asarray(pair["d"], dtype=float), np.asarray(pair["d_prime"], dtype=float)
    relation = pair.get("relation") or _difference(d, d_prime)
    if d.size + d_prime.size <= _INLINE_VALUES:
        data = f"d = {_code(_compact(pair['d']))}, d' = {_code(_compact(pair['d_prime']))}"
    else:
        data = f"d: {_shape(d)}, d': {_shape(d_prime)}, in results.json `pairs[{index}]`"
    origin = f"; {pair['origin']}" if pair.get("origin") else ""
    return f"{_code(pair['name'])}: {data} ({relation}{origin})"


def _search_section(search: Sequence[Mapping[str, Any]]) -> list[str]:
    """"Dataset search": the probes and corner pairs screened, the pairs kept, and what the mechanism refused."""
    if not search:
        return []
    shown = [entry for entry in search if entry["label"] != "random" or entry["pair"] or entry["note"]]
    random = [entry for entry in search if entry["label"] == "random"]
    table = pd.DataFrame({
        "candidate": [entry["label"] for entry in shown],
        "screening score": [_number(entry["score"]) for entry in shown],
        "audited as": [entry["pair"] or "-" for entry in shown],
        "note": [entry["note"] or "-" for entry in shown],
    })
    best_random = max((entry["score"] for entry in random if entry["score"] is not None), default=math.nan)
    return [
        "## Dataset search",
        "",
        f"`strategy = \"search\"` screened {len(search)} candidate pairs: the domain's corner pairs, the edge-case "
        f"probes (`[neighbours] probes`) and {len(random)} random pairs (best screening score "
        f"{_number(best_random)}; those not kept are not listed). The highest screening scores are the audited "
        "pairs, `p0` first; the claims table names the pair of the strongest evidence. A probe the mechanism "
        "refuses (it raises) is dropped, never an error or a violation; a mechanism that fails on one dataset "
        "of an in-domain pair only is a finding: the failure itself distinguishes the datasets.",
        "",
        _to_markdown(table),
        "",
    ]


def _difference(d: np.ndarray, d_prime: np.ndarray) -> str:
    """How two datasets that are neither replace-one nor add-remove neighbours differ."""
    if d.shape == d_prime.shape and d.ndim:
        differing = int(np.count_nonzero(np.any((d != d_prime).reshape(len(d), -1), axis=1)))
        return f"{differing} of {len(d)} records differ"
    return f"{_shape(d)} against {_shape(d_prime)}"


def _compact(values: Any) -> str:
    """Nested lists of numbers, each to 6 significant digits (results.json keeps every digit)."""
    if isinstance(values, (list, tuple)):
        return "[" + ", ".join(_compact(value) for value in values) + "]"
    return "nan" if values is None else str(values) if isinstance(values, str) else f"{values:.6g}"


def _shape(records: np.ndarray) -> str:
    records = np.atleast_1d(records)
    rows, width = len(records), records.shape[1] if records.ndim > 1 else 1
    return f"{rows} records of {width} value{'s' if width != 1 else ''}"


def _on_average_section(rows: Sequence[Row], confidence: float | None) -> list[str]:
    """"On-average privacy": one line per aggregate row (audit.on_average) and what the claim promises."""
    averaged = [row for row in rows if row.pairs_averaged is not None]
    if not averaged:
        return []
    level = f"{confidence:g}" if confidence is not None else "the audit's confidence"
    shown = pd.DataFrame(
        {
            "claim": [f"on average: {_claim_label(r.divergence, r.claim_class, r.claim, r.alpha)}" for r in averaged],
            "direction": [r.direction for r in averaged],
            "function class": [r.function_class for r in averaged],
            "mean over pairs [CI]": [_with_interval(r) for r in averaged],
            "pairs": [f"{r.pairs_averaged}" for r in averaged],
            "worst case: max estimate": [_number(r.worst_case) for r in averaged],
            "worst case: lower bound": [_number(r.worst_case_low) for r in averaged],
            "verdict": [f"**{r.verdict}**" if r.verdict == "violation" else r.verdict for r in averaged],
        }
    )
    return [
        "## On-average privacy",
        "",
        "An on-average claim promises that the restricted divergence between M(Z) and M(Z'), Z drawn "
        "from the data distribution and Z' = Z with its first record replaced by a fresh draw, is at most "
        "epsilon on average over the data (OAKL); it promises nothing for an unlucky dataset or record, "
        "which a worst-case claim covers. `P|Q` is the divergence of M(Z) from M(Z').",
        "",
        _to_markdown(shown),
        "",
        "The mean is over iid pairs of the held-out estimates; its interval is Student's t over pairs at "
        "Holm's level, whose variance over pairs holds both the draw of the pairs and each pair's sampling "
        "noise (law of total variance); it assumes iid pairs and a finite variance, and is approximate with "
        "few pairs (10 or more recommended). A failed or untrusted pair makes its mean inconclusive. The worst "
        "case is over the same pairs: the largest estimate and the largest per-pair lower bound at level "
        f"1 - (1 - {level}) / pairs (Bonferroni), a lower bound on the largest divergence among these pairs: "
        "a worst-case claim below it does not hold.",
        "",
    ]


def _counts(rows: Sequence[Row]) -> str:
    counts = collections.Counter("failed" if row.error else row.verdict for row in rows)
    parts = [f"{counts[verdict]} {verdict}" for verdict in (*ROW_VERDICTS, "failed") if verdict in counts]
    return f"{len(rows)} row{'s' if len(rows) != 1 else ''}: " + ", ".join(parts) + "."


def _claims_table(claims: list[dict[str, Any]]) -> str:
    shown = pd.DataFrame(
        {
            "claim": [_summary_label(c) for c in claims],
            "verdict": [_bold_unless_pass(c["verdict"]) for c in claims],
            "values": [_bold_unless_pass(c.get("value_verdict", c["verdict"])) for c in claims],
            "representation": [_bold_unless_pass(c.get("representation_verdict", NOT_AUDITED)) for c in claims],
            "strongest row": [c.get("strongest_row") or "-" for c in claims],
            "adjusted p": [_number(c["p_adjusted"]) for c in claims],
            f"detectable excess ({POWER:.0%} power)": [_number(c["detectable_excess"]) for c in claims],
            "note": [c["note"] for c in claims],
        },
        columns=["claim", "verdict", "values", "representation", "strongest row", "adjusted p",
                 f"detectable excess ({POWER:.0%} power)", "note"],
    )
    return _to_markdown(shown)


def _summary_label(claim: Mapping[str, Any]) -> str:
    """A claim summary in words: a curve claim's label, else :func:`_claim_label` (on average: said first)."""
    return claim.get("label") or ("on average: " if claim.get("on_average") else "") + _claim_label(
        claim["divergence"], claim["claim_class"], claim["claim"], claim["alpha"], claim.get("delta", 0.0))


def _bold_unless_pass(verdict: str) -> str:
    return verdict if verdict in ("pass", NOT_AUDITED) else f"**{verdict}**"


def _summary_table(rows: Sequence[Row]) -> str:
    shown = pd.DataFrame(
        {
            "pair": [r.pair for r in rows],
            "direction": [r.direction for r in rows],
            "function class": [r.function_class for r in rows],
            "divergence": [_divergence_label(r.divergence, r.alpha) for r in rows],
            "estimate [CI]": [_with_interval(r) for r in rows],
            "claim": [f"{_number(r.claim)} ({r.claim_class})" for r in rows],
            "note": [r.note for r in rows],
        }
    )
    return _to_markdown(shown)


def _failed_table(rows: Sequence[Row]) -> str:
    shown = pd.DataFrame(
        {
            "pair": [r.pair for r in rows],
            "direction": [r.direction for r in rows],
            "function class": [r.function_class for r in rows],
            "divergence": [_divergence_label(r.divergence, r.alpha) for r in rows],
            "error": [bounded(r.error) for r in rows],
        }
    )
    return _to_markdown(shown)


def _claim_table(rows: Sequence[Row]) -> str:
    shown = pd.DataFrame(
        {
            "pair": [r.pair for r in rows],
            "direction": [r.direction for r in rows],
            "function class": [r.function_class for r in rows],
            "alpha": [_number(r.alpha) for r in rows],
            "estimate [CI]": [_with_interval(r) for r in rows],
            "theory bound": [_number(r.theory_bound) for r in rows],
            "exact": [_number(r.exact) for r in rows],
            "n": [f"{int(r.n_samples)}" if math.isfinite(r.n_samples) else "-" for r in rows],
            "adjusted p": [_number(r.p_adjusted) for r in rows],
            "verdict": ["failed" if r.error else f"**{r.verdict}**" if r.verdict in ("violation", "unbounded")
                        else r.verdict for r in rows],
        }
    )
    return _to_markdown(shown)


def _claim_title(divergence: str, claim_class: Any, claim: Any, on_average: bool = False, delta: Any = None) -> str:
    return f"Claim{' (on average)' if on_average else ''}: {_claim_label(divergence, claim_class, claim, delta=delta)}"


def _claim_label(divergence: str, claim_class: Any, claim: Any, alpha: Any = None, delta: Any = None) -> str:
    """A claim in words, e.g. ``(all, DP epsilon) <= 1 at delta=1e-06`` (delta shown when a dp claim has one)."""
    kind = divergence_kind(divergence)
    order = f" alpha={_number(alpha)}" if kind.has_order and alpha is not None and not pd.isna(alpha) else ""
    shown = kind is DP and isinstance(delta, (int, float)) and delta and not math.isnan(delta)
    slack = f" at delta={_number(delta)}" if shown else ""
    return f"({claim_class}, {kind.label}{order}) <= {_number(claim)}{slack}"


def _divergence_label(divergence: str, alpha: Any) -> str:
    return f"{divergence}, alpha={_number(alpha)}" if divergence_kind(divergence).has_order else str(divergence)


# The report's short names for the shared writers (audit.tables).
_number = format_number
_to_markdown = markdown_table


def _with_interval(row: Row) -> str:
    return f"{_number(row.estimate)} [{_number(row.ci_low)}, {_number(row.ci_high)}]"


def _code(text: Any) -> str:
    """``text`` as one GitHub-flavoured inline code span on one line (a fence longer than any run of backticks in it)."""
    text = " ".join(str(text).split())
    longest = max([0, *(len(part) for part in re.findall("`+", text))])
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _method_notes(confidence: float | None, n_samples: int | None, coupled: bool = False,
                  screened: bool = False, sequential: bool = False) -> list[str]:
    level = f"{confidence:g}" if confidence is not None else "the configured confidence"
    per_dataset = f"{n_samples} outputs" if n_samples is not None else "the configured number of outputs"
    budget = (f"(policy best, `n_samples` unset): each search ran in rounds of growing budgets (Sequential "
              f"audits); the last round's {per_dataset} per dataset were one pair's budget over four stages (Staged "
              "search)" if sequential else
              f"(policy best): {per_dataset} per dataset are one pair's budget over four stages (Staged search)")
    sampling = [
        f"- Samples {budget}. Every candidate (pair, direction, class) is screened on a small sample, the "
        "finalists are trained and checked on fresh samples, and the one statistic chosen per claim is evaluated on a confirm "
        "sample that no choice saw; its interval is the held-out interval below, on the confirm sample.",
    ] if screened else [
        f"- Samples (policy every): {per_dataset} of the mechanism on each dataset of each neighbouring pair; "
        "both directions (P, Q) and (Q, P) are attacked. Every candidate (pair, direction, class) is trained on "
        "its train share and its own statistic is evaluated on a fresh held-out share.",
    ]
    coupling = [
        "- Coupled sampling (`attacks.coupled = true`): the outputs on the two datasets of a pair were drawn "
        "row by row from the same random numbers, and the intervals are the paired ones (dp, ipm: the bounds "
        "on the cells both / only P / only Q / neither; kl, renyi: the variance of the paired "
        "difference). A pair whose mechanism spent different randomness on its two datasets was sampled "
        "independently instead; its rows say so."
    ] if coupled else []
    return [
        *sampling,
        *coupling,
        "- Held-out scores: each adversary is fitted on a train split and its variational objective is "
        "evaluated on the held-out rest. The estimand, the fitted witness's objective under the output laws, is "
        "a lower bound on the restricted divergence of its class (docs/theory.md section 2); the interval is a "
        "confidence interval for that estimand. The estimate is a plug-in: unbiased for ipm (a difference of "
        "means), but for kl, renyi and dp a log of means, biased upward at small counts (Jensen's inequality); "
        "the lower bounds allow for that (the kl and renyi bounds for the unseen mass of a log of a mean, the "
        "dp count bounds exactly), the estimate alone does not.",
        "- dp and ipm rows: bounds on log((P(S) - delta) / Q(S)) and on 2 (P(S) - Q(S)) from the held-out "
        "counts of the attack set S: score bounds where the counts reach 10 (30 discordant pairs when "
        "coupled), else Clopper-Pearson bounds on P(S) and Q(S) at Bonferroni-split levels, exact at any "
        "count. They assume only independent held-out outputs (independent pairs when coupled); a zero "
        "count gives a finite bound.",
        "- A row can refute a claim only when its attack class is contained in the claim's class; other "
        "rows are `info`.",
        "- `atoms` and `floatbits` attack the representation of the outputs (exact values, IEEE-754 bits; "
        "attacks.representation) and refute claims about `all` only. A feature of the released output is "
        "post-processing, so a violation measured on the features is a violation of the mechanism.",
        f"- Family-wise error: Holm's step-down procedure over the refuting rows keeps the probability of "
        f"any false violation below 1 - {level} for the whole audit, not per row.",
        "- `inconclusive`: the estimate exceeds the claim but Holm does not reject (the note gives the "
        "Holm-adjusted p-value; a claim equal to the attack's estimand reads so about half the time at any "
        "sample size), or the row's interval cannot be trusted (its note says why; such a row enters Holm's "
        "family with p = 1, so the other rows' levels do not depend on it), or the estimate is NaN, or the task "
        "failed. No row is unbounded: a finite sample never proves an infinite divergence, even when each "
        "dataset's outputs repeat one value (a deterministic release, or a randomized response at high epsilon); "
        "an infinite estimate is an error of its row.",
        "- Claims: `untested` when no row that could refute the claim ran (all failed, or no attack class is "
        "contained in the claim's); the audit is then not a pass and exits 2. `adjusted p` is the smallest "
        "Holm-adjusted p-value of the claim's rows (a violation exactly when it is at most 1 - confidence). "
        f"`detectable excess`: the smallest excess of a row's estimand over the claim that this audit would "
        f"report as a violation with probability {POWER:g}, (estimate - lower bound) x (1 + z({POWER:g}) / "
        "z(1 - a)) with the lower bound at the level a = (1 - confidence) / m at which Holm tests a lone false "
        "claim among m rows; it assumes the standard error under the alternative is the one observed (for dp "
        "rows the width of the bound on the count ratio stands for it), and the best row alone.",
        "- Renyi and alpha-divergences use CBDP's convention f(t) = (|t|^alpha - 1)/(alpha^2 - alpha) on all "
        "of R (the |t| convention); with f = +inf on t < 0 restricted values would come out larger.",
        "- `theory bound` is the paper's closed-form upper bound when one applies (a claim itself, not a "
        "fact); `exact` is the exact restricted divergence when the output law is known (audit.theory.exact).",
    ]


def _checks_summary(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line after the verdict counting the property checks' verdicts (none without checks)."""
    if not checks:
        return []
    counts = pd.Series([check["verdict"] for check in checks]).value_counts()
    return [f"{len(checks)} property checks: " + ", ".join(f"{n} {v}" for v, n in counts.items())
            + " (a contradicted check counts as a violation; see Property checks).", ""]


def _checks_block(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """report.md's "Property checks": each CBDP theorem checked, its bound, the measurements and the verdict."""
    if not checks:
        return []
    shown = pd.DataFrame(
        {
            "check": [c["check"] for c in checks],
            "theorem": [c["theorem"] for c in checks],
            "mechanisms": [" + ".join(c["mechanisms"]) for c in checks],
            "class, divergence": [f"{c['function_class']}, {_divergence_label(c['divergence'], c['alpha'])}"
                                  for c in checks],
            "bound": [_number(c["bound"]) for c in checks],
            "measured [lower bound]": [f"{_number(c['measured'])} [{_number(c['measured_low'])}]" for c in checks],
            "measurements: estimate [lower, upper] (exact)": ["; ".join(map(_measurement_text, c["measurements"]))
                                                              for c in checks],
            "verdict": [f"**{c['verdict']}**" if c["verdict"] != "holds" else "holds" for c in checks],
            "note": [c["error"] or c["note"] for c in checks],
        }
    )
    return [
        "## Property checks", "",
        "Each row measures both sides of one of CBDP's theorems with the audit's attacks on held-out samples "
        "(docs/theory.md section 5). The bound is the theorem's right-hand side from the parts' epsilon (their "
        "exact value when the output laws are known, else their upper confidence bound); **contradicted**: the "
        "composed release's lower confidence bound exceeds it; **hypothesis broken**: a constructed case outside "
        "the theorem's hypotheses, flagged, not a contradiction. Bounds are one-sided at the level in results.json "
        "(the audit's error rate split over the checks' bounds).", "",
        _to_markdown(shown), "",
    ]


def _measurement_text(measurement: Mapping[str, Any]) -> str:
    exact = measurement.get("exact")
    tail = f" (exact {_number(exact)})" if exact is not None else ""
    return (f"{measurement['role']}: {_number(measurement['estimate'])} "
            f"[{_number(measurement['low'])}, {_number(measurement['high'])}]{tail}")
