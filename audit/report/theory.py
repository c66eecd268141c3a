"""report.md's theory sections: published closed-form bounds against the rows (:mod:`audit.theory.check`)
and CBDP's theorems checked by the ``[[checks]]`` (:mod:`audit.engine.checks`, results.json's ``checks`` entries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from audit.report.words import divergence_label
from audit.report.tables import format_number, markdown_table
from audit.theory.check import failures


def theory_headline(theory: Sequence[Mapping[str, Any]]) -> list[str]:
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


def theory_section(theory: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's published bound (``theory_bound``) beside its exact value, lower confidence bound and status."""
    if not theory:
        return []
    shown = pd.DataFrame(
        {
            "pair": [e["pair"] for e in theory],
            "direction": [e["direction"] for e in theory],
            "function class": [e["function_class"] for e in theory],
            "divergence": [divergence_label(e["divergence"], e["alpha"]) for e in theory],
            "published bound": [format_number(e["bound"]) for e in theory],
            "exact": [format_number(e["exact"]) for e in theory],
            "lower bound": [format_number(e["lower_bound"]) for e in theory],
            "level": [format_number(e["level"]) for e in theory],
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
        markdown_table(shown),
        "",
    ]


def checks_summary(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line after the verdict counting the property checks' verdicts (none without checks)."""
    if not checks:
        return []
    counts = pd.Series([check["verdict"] for check in checks]).value_counts()
    return [f"{len(checks)} property checks: " + ", ".join(f"{n} {v}" for v, n in counts.items())
            + " (a contradicted check counts as a violation; see Property checks).", ""]


def checks_block(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """report.md's "Property checks": each CBDP theorem checked, its bound, the measurements and the verdict."""
    if not checks:
        return []
    shown = pd.DataFrame(
        {
            "check": [c["check"] for c in checks],
            "theorem": [c["theorem"] for c in checks],
            "mechanisms": [" + ".join(c["mechanisms"]) for c in checks],
            "class, divergence": [f"{c['function_class']}, {divergence_label(c['divergence'], c['alpha'])}"
                                  for c in checks],
            "bound": [format_number(c["bound"]) for c in checks],
            "measured [lower bound]": [f"{format_number(c['measured'])} [{format_number(c['measured_low'])}]"
                                       for c in checks],
            "measurements: estimate [lower, upper] (exact)": ["; ".join(map(_measurement_text, c["measurements"]))
                                                              for c in checks],
            "verdict": [f"**{c['verdict']}**" if c["verdict"] != "holds" else "holds" for c in checks],
            "note": [c["error"] or c["note"] for c in checks],
        }
    )
    return [
        "## Property checks", "",
        "Each row measures both sides of one of CBDP's theorems with the audit's attacks on held-out samples "
        "(docs/theory.md section 5), or of OAKL's Lemma 5 or 7 with every side a mean over iid pairs from the data "
        "distribution (section 8). The bound is the theorem's right-hand side from the parts' epsilon (their "
        "exact value when the output laws are known or, on average, the closed-form on-average KL, else their "
        "upper confidence bound); **contradicted**: the "
        "composed release's lower confidence bound exceeds it; **hypothesis broken**: a constructed case outside "
        "the theorem's hypotheses, flagged, not a contradiction. Bounds are one-sided at the level in results.json "
        "(the audit's error rate split over the checks' bounds).", "",
        markdown_table(shown), "",
    ]


def _measurement_text(measurement: Mapping[str, Any]) -> str:
    exact = measurement.get("exact")
    tail = f" (exact {format_number(exact)})" if exact is not None else ""
    return (f"{measurement['role']}: {format_number(measurement['estimate'])} "
            f"[{format_number(measurement['low'])}, {format_number(measurement['high'])}]{tail}")
