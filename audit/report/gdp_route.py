"""The Gaussian-DP route in results.json (``gdp_route``) and report.md: a labelled estimate beside the verdict.

For an audit with a ``gdp`` claim, or an (epsilon, delta) claim (delta > 0)
of a mechanism whose trade-off curve is Gaussian-like (:data:`GAUSSIAN_MECHANISMS`),
each claim gets a lower confidence bound mu_low at the audit's confidence
from the held-out threshold tests of every task (:func:`attacks.gdp_route.threshold_tests`,
independent samples only): per task, the one stored test nearest the
symmetric point b = Phi(-mu_c / 2) of the claim's mu_c (a gdp claim's mu; for
(epsilon, delta), :func:`audit.theory.tradeoff.gdp_mu`, the mu whose profile
passes through it), chosen from the claim alone, the error split over the
tasks (:func:`attacks.gdp_route.mu_lower_bound`): the exact test of mu at
its task's share for a row of a declared class (a score fixed before the
data, :mod:`attacks.declared`), Clopper-Pearson bounds on a and b at half
of it each for another; and for an (epsilon, delta)
claim, mu_low's epsilon at its delta (:func:`audit.theory.tradeoff.gdp_epsilon`:
the smallest epsilon with delta_mu(epsilon) <= delta, Dong, Roth and Su 2022,
Cor. 2.13).  Each claim's reading holds at the audit's confidence on its own.

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

from scipy.special import ndtr

from attacks.binomial_ratio import clopper_pearson_log_ratio_bound
from attacks.classes import parse_function_class
from attacks.gdp_route import ASSUMPTION, mu_lower_bound
from attacks.vocabulary import DP, GDP, divergence_kind
from audit.results.schema import Row
from audit.theory.tradeoff import gdp_epsilon, gdp_mu

GAUSSIAN_MECHANISMS = ("gaussian", "dp_gd_logistic")
"""Built-ins whose trade-off curves are Gaussian-like (a Gaussian shift; DP-GD: exactly at one full-batch step,
post-processing of Gaussian sums at more; with Poisson sampling a mixture of Gaussian shifts, the route DP-SGD
audits read, Nasr et al. 2023), so that an (epsilon, delta) claim of theirs gets the route too, labelled as
assuming it."""


def _gaussian(config: Mapping[str, Any]) -> bool:
    """Whether the audited mechanism is one of :data:`GAUSSIAN_MECHANISMS`."""
    return (config.get("mechanism") or {}).get("name") in GAUSSIAN_MECHANISMS


def route_applies(config: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the audit reports the route: a gdp claim, or a dp claim with delta > 0 of a Gaussian mechanism."""
    gaussian = _gaussian(config)
    return any(divergence_kind(c["divergence"]) is GDP or (divergence_kind(c["divergence"]) is DP and c["delta"] > 0 and gaussian)
               for c in claims)


def gdp_route(rows: Sequence[Row], config: Mapping[str, Any], claims: Sequence[Mapping[str, Any]],
              strongest: Sequence[Row | None], confidence: float) -> dict[str, Any] | None:
    """results.json's ``gdp_route``: one reading per gdp or (epsilon, delta) claim (module docstring).

    ``strongest``: each claim's strongest row (None when untested), in the order of ``claims``.  None when the
    route does not apply (:func:`route_applies`) or no row kept threshold tests.
    """
    tests = list({row.task or str(i): {**row.held_out_scores["gdp_tests"],
                                       "exact": parse_function_class(row.function_class).declared}
                  for i, row in enumerate(rows)
                  if row.held_out_scores and "gdp_tests" in row.held_out_scores}.values())  # one per task
    if not tests or not route_applies(config, claims):
        return None
    gaussian = _gaussian(config)
    entries = []
    for claim, row in zip(claims, strongest):
        kind = divergence_kind(claim["divergence"])
        if kind is GDP:
            label, delta, mu = claim.get("label", f"{claim['claim']:g}-GDP"), None, claim["claim"]
        elif kind is DP and claim["delta"] > 0 and gaussian:
            label, delta = f"({claim['claim']:g}, {claim['delta']:g})-DP", claim["delta"]
            mu = gdp_mu(claim["claim"], delta)
        else:
            continue
        bound = mu_lower_bound([targeted_test(test, mu) for test in tests], confidence)
        epsilon_low = None if delta is None else (gdp_epsilon(bound.mu_low, delta) if bound.mu_low > 0 else 0.0)
        entries.append({
            "label": label, "claim": claim["claim"], "delta": delta, "verdict": claim["verdict"],
            "claimed_mu": mu, "gdp_mu_low": bound.mu_low, "gdp_epsilon_low": epsilon_low,
            "gdp_exceeds_claim": bound.mu_low > mu, "type_one_upper": bound.type_one_upper,
            "type_two_upper": bound.type_two_upper, "exact": bound.exact, "n_p": bound.n_p, "n_q": bound.n_q,
            "tests": bound.tests,
            **_nonparametric(row, confidence),
        })
    return {"assumption": ASSUMPTION, "confidence": confidence, "claims": entries}


def targeted_test(test: Mapping[str, Any], mu: float) -> dict[str, Any]:
    """The one stored test whose rank is nearest the symmetric point b = Phi(-mu / 2) of G_mu (the test that
    bounds mu best at the claim): chosen from the claim and n_Q alone, so no error is spent on the others."""
    goal = (1.0 - float(ndtr(-mu / 2.0))) * test["n_q"]
    i = min(range(len(test["ranks"])), key=lambda k: abs(test["ranks"][k] - goal))
    return {**test, "ranks": [test["ranks"][i]], "p_counts": [test["p_counts"][i]]}


def _nonparametric(row: Row | None, confidence: float) -> dict[str, Any]:
    """The strongest row's lower bound and, for a dp row, the count bound's ceiling at its confirm size."""
    if row is None:
        return {"nonparametric_low": math.nan, "ceiling": math.nan}
    n = row.n_confirm or (int(row.n_samples) if math.isfinite(row.n_samples) else 0)
    ceiling = (clopper_pearson_log_ratio_bound(n, n, 0, n, row.delta, confidence, lower=True)
               if divergence_kind(row.divergence) is DP and n > 0 else math.nan)
    return {"nonparametric_low": row.ci_low, "ceiling": float(ceiling)}


def gdp_route_lines(route: Mapping[str, Any] | None) -> list[str]:
    """report.md's "Gaussian-DP route" section ([] when there is no route)."""
    if not route or not route["claims"]:
        return []
    lines = [
        "## Gaussian-DP route (assumes a Gaussian trade-off curve)", "",
        "Per claim, one threshold test per task on its held-out scores, chosen from the claim (nearest the "
        "symmetric point of the claim's mu), gives mu_low: for a declared class's row (a score fixed before the data) "
        "the exact test of mu under G_mu from the law of Q's order statistic, else mu_low = Phi^-1(1 - a) - "
        "Phi^-1(b) from Clopper-Pearson bounds on its errors a and b; the error split over the tasks, at confidence "
        f"{route['confidence']:g} (docs/theory.md \"The Gaussian-DP route\"). It " + ASSUMPTION + " and never sets a "
        "verdict: each claim keeps its nonparametric one, shown beside it with the count bound's ceiling at the "
        "strongest row's size.",
        "",
        "| claim | verdict | nonparametric lower bound | ceiling | GDP route: mu_low (claimed mu) | "
        "GDP route: epsilon_low | best test: a <=, b <= (outputs, tests) |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in route["claims"]:
        epsilon = "-" if entry["gdp_epsilon_low"] is None else f"{entry['gdp_epsilon_low']:.4g}"
        lines.append(f"| {entry['label']} | {entry['verdict']} | {_text(entry['nonparametric_low'])} | "
                     f"{_text(entry['ceiling'])} | {entry['gdp_mu_low']:.4g} ({entry['claimed_mu']:.4g}) | {epsilon} | "
                     f"{_errors(entry)} ({entry['n_p']}, {entry['n_q']}; {entry['tests']}) |")
    return lines + [""]


def _errors(entry: Mapping[str, Any]) -> str:
    """The best test's a+, b+, or "exact test" for the exact one (it bounds no error on its own)."""
    return "exact test" if entry.get("exact") else f"{entry['type_one_upper']:.3g}, {entry['type_two_upper']:.3g}"


def _text(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"
