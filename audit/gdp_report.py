"""The Gaussian-DP route in results.json (``gdp_route``) and report.md: a labelled estimate beside the verdict.

For an audit with a ``gdp`` claim, or an (epsilon, delta) claim (delta > 0)
of a mechanism whose trade-off curve is Gaussian by construction
(:data:`GAUSSIAN_MECHANISMS`), every row's held-out threshold tests
(:func:`attacks.gdp_route.threshold_tests`, independent samples only) give
one lower confidence bound mu_low at the audit's confidence, the error split
over every test of every row (:func:`attacks.gdp_route.mu_lower_bound`), and
its (epsilon, delta) reading at each claim's delta
(:func:`audit.theory.tradeoff.gdp_epsilon`: the smallest epsilon with
delta_mu(epsilon) <= delta, Dong, Roth and Su 2022, Cor. 2.13).

The reading assumes a Gaussian trade-off curve, so it never sets a verdict:
each claim keeps the verdict of its nonparametric rows, reported beside it
with the count bound's ceiling at the strongest row's sample size (the
Clopper-Pearson bound at complete separation, n of n against 0 of n,
:func:`attacks.binomial_ratio.clopper_pearson_log_ratio_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from attacks.binomial_ratio import clopper_pearson_log_ratio_bound
from attacks.gdp_route import ASSUMPTION, mu_lower_bound
from audit.schema import Row
from audit.theory.tradeoff import gdp_epsilon

GAUSSIAN_MECHANISMS = ("gaussian", "dp_gd_logistic")
"""Built-ins whose trade-off curves are Gaussian-like (a Gaussian shift; DP-GD: exactly at one step, post-processing
of Gaussian sums at more), so that an (epsilon, delta) claim of theirs gets the route too, labelled as assuming it."""


def route_applies(config: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the audit reports the route: a gdp claim, or a dp claim with delta > 0 of a Gaussian mechanism."""
    name = (config.get("mechanism") or {}).get("name")
    return any(c["divergence"] == "gdp" or (c["divergence"] == "dp" and c["delta"] > 0 and name in GAUSSIAN_MECHANISMS)
               for c in claims)


def gdp_route(rows: Sequence[Row], config: Mapping[str, Any], claims: Sequence[Mapping[str, Any]],
              strongest: Sequence[Row | None], confidence: float) -> dict[str, Any] | None:
    """results.json's ``gdp_route``: mu_low over every row's tests and one entry per gdp or (epsilon, delta) claim.

    ``strongest``: each claim's strongest row (None when untested), in the order of ``claims``.  None when the
    route does not apply (:func:`route_applies`) or no row kept threshold tests.
    """
    tests = [row.held_out_scores["gdp_tests"] for row in rows
             if row.held_out_scores and "gdp_tests" in row.held_out_scores]
    if not tests or not route_applies(config, claims):
        return None
    bound = mu_lower_bound(tests, confidence)
    entries = []
    for claim, row in zip(claims, strongest):
        if claim["divergence"] == "gdp":
            entries.append({"label": claim.get("label", f"{claim['claim']:g}-GDP"), "claim": claim["claim"],
                            "delta": None, "verdict": claim["verdict"], "gdp_mu_low": bound.mu_low,
                            "gdp_epsilon_low": None, "gdp_exceeds_claim": bound.mu_low > claim["claim"],
                            **_nonparametric(row, confidence)})
        elif claim["divergence"] == "dp" and claim["delta"] > 0:
            epsilon_low = gdp_epsilon(bound.mu_low, claim["delta"]) if bound.mu_low > 0 else 0.0
            entries.append({"label": f"({claim['claim']:g}, {claim['delta']:g})-DP", "claim": claim["claim"],
                            "delta": claim["delta"], "verdict": claim["verdict"], "gdp_mu_low": bound.mu_low,
                            "gdp_epsilon_low": epsilon_low, "gdp_exceeds_claim": epsilon_low > claim["claim"],
                            **_nonparametric(row, confidence)})
    return {"assumption": ASSUMPTION, "confidence": confidence, "mu_low": bound.mu_low,
            "type_one_upper": bound.type_one_upper, "type_two_upper": bound.type_two_upper,
            "n_p": bound.n_p, "n_q": bound.n_q, "tests": bound.tests, "claims": entries}


def _nonparametric(row: Row | None, confidence: float) -> dict[str, Any]:
    """The strongest row's lower bound and, for a dp row, the count bound's ceiling at its confirm size."""
    if row is None:
        return {"nonparametric_low": math.nan, "ceiling": math.nan}
    n = row.n_confirm or (int(row.n_samples) if math.isfinite(row.n_samples) else 0)
    ceiling = (clopper_pearson_log_ratio_bound(n, n, 0, n, row.delta, confidence, lower=True)
               if row.divergence == "dp" and n > 0 else math.nan)
    return {"nonparametric_low": row.ci_low, "ceiling": float(ceiling)}


def gdp_route_lines(route: Mapping[str, Any] | None) -> list[str]:
    """report.md's "Gaussian-DP route" section ([] when there is no route)."""
    if not route:
        return []
    lines = [
        "## Gaussian-DP route (assumes a Gaussian trade-off curve)", "",
        f"Threshold tests on the held-out scores of every row give mu_low = {route['mu_low']:.4g} at confidence "
        f"{route['confidence']:g} (Clopper-Pearson bounds a <= {route['type_one_upper']:.4g}, "
        f"b <= {route['type_two_upper']:.4g} from {route['n_p']} and {route['n_q']} outputs, the error split "
        f"over {route['tests']} tests; mu_low = Phi^-1(1 - a) - Phi^-1(b), docs/theory.md \"The Gaussian-DP "
        "route\"). It " + ASSUMPTION + " and never sets a verdict: each claim keeps its nonparametric one, "
        "shown beside it with the count bound's ceiling at the strongest row's size.", "",
        "| claim | verdict | nonparametric lower bound | ceiling | GDP route: mu_low | GDP route: epsilon_low |",
        "|---|---|---|---|---|---|",
    ]
    for entry in route["claims"]:
        epsilon = "-" if entry["gdp_epsilon_low"] is None else f"{entry['gdp_epsilon_low']:.4g}"
        lines.append(f"| {entry['label']} | {entry['verdict']} | {_text(entry['nonparametric_low'])} | "
                     f"{_text(entry['ceiling'])} | {entry['gdp_mu_low']:.4g} | {epsilon} |")
    return lines + [""]


def _text(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"
