"""report.md's account of how the audit searched: the staged search's sizes, why each search stopped, the
outputs drawn, and the Method notes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from attacks.sequential import POWER, TIME_LIMIT
from audit.report.figures import row_label
from audit.report.words import row_claim
from audit.results.files import json_value
from audit.results.schema import STAGE_SIZE_COLUMNS, Row
from audit.report.tables import markdown_table


def staged_section(rows: Sequence[Row]) -> list[str]:
    """"Staged search": per claim, the outputs per dataset each stage used and the candidate that won."""
    searched = [row for row in rows if row.n_screen and not row.error]  # policy best's rows: a screen chose them
    if not searched:
        return []
    frame = pd.DataFrame({
        "claim": [row_claim(r) for r in searched],
        "layer": [r.layer for r in searched],
        "winner": [row_label(r.pair, r.direction, r.function_class) for r in searched],
        **{name: [str(getattr(r, name)) for r in searched] for name in STAGE_SIZE_COLUMNS},
    })
    budget = ("`n_samples` is unset: each search ran in rounds of growing budgets (Sequential audits), each "
              "round's budget one pair's over four stages; the sizes below are the last round's"
              if in_rounds(searched) else "`n_samples` is one pair's budget over four stages")
    return [
        "## Staged search", "",
        f"`attacks.policy = \"best\"`: {budget}. Outputs per dataset: "
        "`n_screen` on every pair (all candidates: pairs x directions x classes), `n_train` and `n_check` on the "
        "finalists' pairs, `n_confirm` on the winner's pair only, a fresh sample that no choice saw; the claim's "
        "one statistic (pooled over `sets_pooled` nested sets when more than 1) is its confirm bound. Each claim "
        "has a search per layer (values; representation: how outputs are stored) and Holm corrects over these "
        "searches only.", "",
        markdown_table(frame), "",
    ]


_STOP_WORDS = {
    "violation": "violation",
    "decided": "decided, a pass (an excess of {tolerance} over the claim would have been detected with {power:.0%} "
    "probability)",
    "output limit": "output limit reached, undecided",
    "time limit": "time limit reached, undecided",
    "fixed": "the fixed n_samples budget",
}


def stop_lines(rows: Sequence[Row], tolerance: float) -> list[str]:
    """Why each claim's search stopped, in words ("stopped after 3 400 outputs: violation"), and its interval."""
    stopped = [row for row in rows if row.stop is not None and not row.error]
    if not stopped:
        return []
    lines = [f"- {row_claim(r)}, {r.layer}: stopped after "
             f"{_thousands(r.outputs_drawn)} outputs ({r.rounds} round{'s' if r.rounds != 1 else ''}): "
             + _stop_words(r, tolerance) + (f"; bounds: {r.interval}" if r.interval else "") for r in stopped]
    return ["Outputs drawn (both datasets, every pair, stage and round), why each search stopped "
            f"(tolerance {tolerance}) and which interval its lower bound is (results.json `interval`: `betting CS`, "
            "confidence sequences valid at every look, of a set or of a kl / renyi witness clipped before the "
            "confirm sample; a clipped witness's row takes the larger of that bound and the delta method's, each "
            "at half the error):", "", *lines, ""]


def time_limited_searches(rows: Sequence[Row]) -> int:
    """How many searches the wall-clock limit stopped (their rows' ``stop``; one per search and claim)."""
    return len({(row.task, row.claim, row.delta) for row in rows if row.stop == TIME_LIMIT})


def in_rounds(rows: Sequence[Row]) -> bool:
    """Whether the rows' searches ran in rounds (``n_samples`` unset): a stop other than the fixed design."""
    return any(row.stop not in (None, "fixed") for row in rows)


def _stop_words(row: Row, tolerance: float) -> str:
    """Why a row's search stopped, never contradicting its verdict: a search that stopped ``decided`` but whose
    row is not a pass (its estimate above the claim by less than the tolerance: results written before
    :func:`attacks.sequential.decide` required the estimate at or below the claim, read back by ``capaudit
    report``) is said to have stopped at the tolerance, with the verdict."""
    if row.stop == "decided" and row.verdict != "pass":
        return (f"stopped at the tolerance (an excess of {tolerance} over the claim would have been detected with "
                f"{POWER:.0%} probability), but the row reads {row.verdict}, not pass")
    return _STOP_WORDS[row.stop].format(tolerance=tolerance, power=POWER)


def _thousands(value: int) -> str:
    return f"{int(value):,}".replace(",", " ")


def outputs_drawn(rows: Sequence[Row]) -> int:
    """All outputs the audit drew: each unit's (a search of policy best, ``staged|claim<k>|...`` at one order; a
    pair of policy every), counted once over its rows."""
    units = {(row.task.split("|")[1], json_value(row.alpha), row.layer) if row.task.startswith("staged|") else row.pair:
             row.outputs_drawn for row in rows if row.outputs_drawn is not None}
    return int(sum(units.values()))


def method_notes(confidence: float | None, n_samples: int | None, coupled: bool = False,
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
        "failed, or the row's held-out outputs are separated (its set holds every output of P and none of Q, "
        "or its scores put every output of P above every one of Q): such data show the largest value their "
        "sizes allow, refute a claim below it and support none, so a row that does not reject reads "
        "inconclusive, never pass (its note gives that largest value). No row is unbounded: a finite sample "
        "never proves an infinite divergence, even when each dataset's outputs repeat one value (a deterministic "
        "release, or a randomized response at high epsilon); an infinite estimate is an error of its row.",
        "- Claims: `untested` when no row that could refute the claim ran (all failed, or no attack class is "
        "contained in the claim's); the audit is then not a pass and exits 2. `adjusted p` is the smallest "
        "Holm-adjusted p-value of the claim's rows (a violation exactly when it is at most 1 - confidence). "
        f"`detectable excess`: the smallest excess of a row's estimand over the claim that this audit would "
        f"report as a violation with probability {POWER:g}, (estimate - lower bound) x (1 + z({POWER:g}) / "
        "z(1 - a)) with the lower bound at the level a = (1 - confidence) / m at which Holm tests a lone false "
        "claim among m rows; it assumes the standard error under the alternative is the one observed (for dp "
        "rows the width of the bound on the count ratio stands for it), and the best row alone; inf when no "
        "row can reject (a claim at or above the largest bound the rows' sample sizes allow is one).",
        "- Renyi and alpha-divergences use CBDP's convention f(t) = (|t|^alpha - 1)/(alpha^2 - alpha) on all "
        "of R (the |t| convention); with f = +inf on t < 0 restricted values would come out larger.",
        "- `theory bound` is the paper's closed-form upper bound when one applies (a claim itself, not a "
        "fact); `exact` is the exact restricted divergence when the output law is known (audit.theory.exact).",
    ]
