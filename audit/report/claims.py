"""report.md's claims: the Claims table with each claim's strongest row and its notes, the verdict per layer
(values, representation), the on-average and trade-off-curve sections.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attacks.classes import LAYERS, LINEAR, REPRESENTATION, All, Thresholds, parse_function_class
from attacks.sequential import POWER
from attacks.vocabulary import KL, divergence_kind
from audit.sampling.events import BIT_EVENT
from audit.report.figures import row_label
from audit.report.words import bold_unless_pass, claim_label, summary_label, with_interval
from audit.results.schema import Row
from audit.report.tables import bounded, format_number, markdown_table, plain_text
from audit.report.tradeoff import LEVELS as TRADEOFF_LEVELS, Panel
from audit.results.verdicts import NOT_AUDITED, combined_verdict
from audit.theory.oakl_information import mutual_information_bound


def strongest_row(rows: Sequence[Row], claim: Mapping[str, Any]) -> Row | None:
    """The row a claim summary names (its ``strongest_task`` under the claim's keys), None when untested."""
    keys = ("divergence", "claim_class", "claim", "on_average")
    tasks = [row for row in rows if row.task == claim["strongest_task"]]
    for row in tasks:
        if (_same_number(row.alpha, claim["alpha"]) and _same_number(row.delta, claim["delta"])
                and all(getattr(row, k) == claim[k] for k in keys)):
            return row
    return tasks[0] if tasks else None  # a curve claim's line names its strongest member's row


def tight_note(claim: Mapping[str, Any], row: Row | None, confidence: float | None) -> str:
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
    interval = f"[{format_number(row.ci_low)}, {format_number(row.ci_high)}]"
    text = (f"consistent with equality: the strongest row's interval {interval} "
            f"holds the claimed {format_number(row.claim)}, so a mechanism exactly at its claim reads inconclusive in a "
            "good share of audits")
    excess = claim["detectable_excess"]
    if isinstance(excess, float) and math.isfinite(excess):
        often = f"{confidence:g}" if confidence is not None else "the audit's confidence"
        text += (f"; a claim at least {format_number(excess)} (the detectable excess) above the value you expect reads "
                 f"pass in {often} or more of audits of this size")
    return text


def claim_reasons(config: Mapping[str, Any]) -> list[str]:
    """Why each claimed value (``[[claims]] reason``), one line per claim that gives one."""
    claims = config.get("claims") or []
    claims = [claims] if isinstance(claims, Mapping) else claims
    lines = [f"- {_reason_label(c)}: {plain_text(bounded(c['reason']))}"
             for c in claims if isinstance(c, Mapping) and c.get("reason")]
    return ["Why these values:", "", *lines, ""] if lines else []


def _reason_label(claim: Mapping[str, Any]) -> str:
    """The claim a reason explains: :func:`claim_label` of the entry, or, for a library's map read at several
    ``d_in`` (no one value in the config), where it comes from."""
    if claim.get("divergence") is None:
        return "the library's privacy map at each pair's d_in"
    return claim_label(claim["divergence"], claim.get("function_class"), claim.get("epsilon"), _orders(claim),
                       claim.get("delta"))


def _orders(claim: Mapping[str, Any]) -> Any:
    """A raw claim's Renyi order(s) as :func:`claim_label` shows them: one number, or the list as text."""
    alpha = claim.get("alpha")
    if isinstance(alpha, (list, tuple)):
        return alpha[0] if len(alpha) == 1 else ", ".join(format_number(value) for value in alpha)
    return alpha


def _same_number(a: Any, b: Any) -> bool:
    """Equal, or both missing (NaN / None)."""
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) for x in (a, b)]
    return all(missing) or (not any(missing) and a == b)


def layers_line(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The verdict block's line per layer: over the claims, what the mechanism computes (values) and how it stores
    them (representation), each judged apart (:func:`audit.results.verdicts.combined_verdict`)."""
    if not claims or not all("value_verdict" in claim for claim in claims):
        return []
    value, stored = (combined_verdict(claim[f"{layer}_verdict"] for claim in claims) for layer in LAYERS)
    return [f"By layer: **values** (what the mechanism computes) {bold_unless_pass(value)}; **representation** "
            f"(how it stores them, IEEE-754 bits) {bold_unless_pass(stored)}.", ""]


def representation_section(claims: Sequence[Mapping[str, Any]], rows: Sequence[Row]) -> list[str]:
    """In plain words, when the representation layer refutes a claim: the event that distinguishes the datasets
    (a representation row's note, :data:`audit.sampling.events.BIT_EVENT`), that it is the floating-point sampler's
    (Mironov 2012; Haney et al. 2022), that the value verdict is separate, and the fixes."""
    refuted = [claim for claim in claims if claim.get("representation_verdict") == "violation"]
    if not refuted:
        return []
    found = [row for row in rows if row.layer == REPRESENTATION and row.verdict == "violation"]
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
    lines += [f"- {summary_label(claim)}: values **{claim['value_verdict']}**, representation **violation**"
              for claim in refuted]
    lines += ["", "The values' verdict is separate: it is what the mechanism computes, judged by the other classes "
              "on their own search. To make the outputs safe, draw the noise with a float-safe sampler (OpenDP's "
              "samplers, Mironov's snapping mechanism `snapping_laplace`, discrete Laplace or Gaussian noise on a "
              "grid); a claim about the values only says so with `[attacks] representation = false`.", ""]
    return lines


def layer_switch(attacks: Mapping[str, Any], rows: Sequence[Row]) -> list[str]:
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


def claims_table(claims: list[dict[str, Any]]) -> str:
    shown = pd.DataFrame(
        {
            "claim": [summary_label(c) for c in claims],
            "verdict": [bold_unless_pass(c["verdict"]) for c in claims],
            "values": [bold_unless_pass(c.get("value_verdict", c["verdict"])) for c in claims],
            "representation": [bold_unless_pass(c.get("representation_verdict", NOT_AUDITED)) for c in claims],
            "strongest row": [c.get("strongest_row") or "-" for c in claims],
            "adjusted p": [format_number(c["p_adjusted"]) for c in claims],
            f"detectable excess ({POWER:.0%} power)": [format_number(c["detectable_excess"]) for c in claims],
            "note": [c["note"] for c in claims],
        },
        columns=["claim", "verdict", "values", "representation", "strongest row", "adjusted p",
                 f"detectable excess ({POWER:.0%} power)", "note"],
    )
    return markdown_table(shown)


def information_bound(divergence: str, epsilon: Any, on_average: bool, records: int | None) -> float | None:
    """The mutual information (nats) between a dataset of ``records`` records and the output that an on-average KL
    claim of ``epsilon`` implies: n epsilon (OAKL Lemma 14 with Lemma 6,
    :func:`audit.theory.oakl_information.mutual_information_bound`); None for other claims or without n.  It holds
    when epsilon bounds the unrestricted on-average KL (a restricted claim implies it where its class attains KL)."""
    if not (on_average and records and divergence_kind(divergence) is KL and math.isfinite(float(epsilon))):
        return None
    return mutual_information_bound(float(epsilon), records)


def on_average_section(rows: Sequence[Row], confidence: float | None, records: int | None = None) -> list[str]:
    """"On-average privacy": one line per aggregate row (audit.results.on_average) and what the claim promises.

    ``records``: n, the size of the pairs' datasets (``[neighbours] size``); with it, KL claims get the
    mutual information n epsilon that the claim implies (OAKL Lemma 14 with Lemma 6,
    :func:`audit.theory.oakl_information.mutual_information_bound`).
    """
    averaged = [row for row in rows if row.pairs_averaged is not None]
    if not averaged:
        return []
    level = f"{confidence:g}" if confidence is not None else "the audit's confidence"
    information = {}
    if records:
        bounds = [information_bound(r.divergence, r.claim, True, records) for r in averaged]
        information["I(M(Z); Z) if the claim holds"] = ["-" if b is None else format_number(b) for b in bounds]
    shown = pd.DataFrame(
        {
            "claim": [f"on average: {claim_label(r.divergence, r.claim_class, r.claim, r.alpha)}" for r in averaged],
            "direction": [r.direction for r in averaged],
            "function class": [r.function_class for r in averaged],
            "mean over pairs [CI]": [with_interval(r) for r in averaged],
            "pairs": [f"{r.pairs_averaged}" for r in averaged],
            "worst case: max estimate": [format_number(r.worst_case) for r in averaged],
            "worst case: lower bound": [format_number(r.worst_case_low) for r in averaged],
            **information,
            "verdict": [f"**{r.verdict}**" if r.verdict == "violation" else r.verdict for r in averaged],
        }
    )
    information_note = [
        f"`I(M(Z); Z) if the claim holds`: n epsilon with n = {records} records, a bound in nats on the mutual "
        "information between the dataset and the output (OAKL Lemma 14 with Lemma 6, or the chain rule for a "
        "mechanism that ignores the order of its records) that holds when epsilon bounds the unrestricted "
        "on-average KL: a restricted claim implies it only where its class attains the KL (linear for a Gaussian "
        "shift). The measured mean is a lower bound on the on-average KL, so it bounds no information from above.",
        "",
    ] if information else []
    return [
        "## On-average privacy",
        "",
        "An on-average claim promises that the restricted divergence between M(Z) and M(Z'), Z drawn "
        "from the data distribution and Z' = Z with its first record replaced by a fresh draw, is at most "
        "epsilon on average over the data (OAKL); it promises nothing for an unlucky dataset or record, "
        "which a worst-case claim covers. `P|Q` is the divergence of M(Z) from M(Z').",
        "",
        markdown_table(shown),
        "",
        "The mean is over iid pairs of the held-out estimates; its interval is Student's t over pairs at "
        "Holm's level, whose variance over pairs holds both the draw of the pairs and each pair's sampling "
        "noise (law of total variance); it assumes iid pairs and a finite variance, and is approximate with "
        "few pairs (10 or more recommended). A failed or untrusted pair makes its mean inconclusive. The worst "
        "case is over the same pairs: the largest estimate and the largest per-pair lower bound at level "
        f"1 - (1 - {level}) / pairs (Bonferroni), a lower bound on the largest divergence among these pairs: "
        "a worst-case claim below it does not hold.",
        "",
        *information_note,
    ]


def tradeoff_section(panels: Sequence[Panel], confidence: float, rows: Sequence[Row] = ()) -> list[str]:
    """report.md lines: per curve claim, its members and each class's band against the claimed curve; rows are
    named in words (:func:`audit.report.figures.row_label`), never by task id."""
    if not panels:
        return []
    words = {row.task: row_label(row.pair, row.direction, row.function_class) for row in rows if row.task}
    lines = [
        "## Trade-off curves", "",
        "A gdp, zcdp or profile claim is audited as its members, ordinary dp and Renyi claims at a grid "
        "(docs/theory.md section 9); a refuted member refutes it. The members are audited on one sample of "
        "outputs per stage (the audit's seed draws the same outputs for every claim), so their rows are "
        "dependent: each member's adjusted p-value holds on its own (Holm's procedure needs no independence), "
        "and a chance excursion of that sample moves every member the same way. Per attack class, the held-out scores of "
        "its strongest member row give an empirical trade-off curve (type-II error b at type-I error a of the "
        f"tests {{score <= t}}) and an upper confidence band on the class's trade-off curve (DKW, simultaneous "
        f"over all a at confidence {confidence:g}), drawn in figures/tradeoff.svg beside the claimed curve. A band "
        "below the claimed curve shows the class's tests beating it; the band is evidence beside the verdict "
        "(the row was chosen by its p-value), the verdict is the members'.", "",
    ]
    for panel in panels:
        lines += [f"### {panel.label or panel.family.label}", "", markdown_table(pd.DataFrame({
            "member": [m["member"] for m in panel.members],
            "verdict": [f"**{m['verdict']}**" if m["verdict"] == "violation" else m["verdict"] for m in panel.members],
            "strongest row": [words.get(m["strongest_task"], "-") for m in panel.members],
            "adjusted p": [m["p_adjusted"] for m in panel.members],
        })), ""]
        if panel.classes:
            lines += [markdown_table(pd.DataFrame({
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
