"""Curve claims (gdp, zcdp, profile) as families of dp and renyi claims, and their one-line summaries.

A curve claim bounds a whole curve, not one number (docs/theory.md section 9):

* ``gdp`` (``epsilon`` is mu): T(M(D), M(D')) >= G_mu over the class.  By
  Dong, Roth and Su (2022), Corollary 2.13, mu-GDP holds exactly when
  (epsilon, delta_mu(epsilon))-DP holds for every epsilon >= 0, so the claim
  is audited as the dp claims (epsilon_i, delta_mu(epsilon_i)) at a grid of
  epsilons (:func:`audit.theory.tradeoff.gaussian_profile`).
* ``zcdp`` (``epsilon`` is rho): D_alpha <= rho alpha for every alpha > 1
  (Bun and Steinke 2016, Definition 1.1): the renyi claims rho alpha_i at a
  grid of orders.
* ``profile``: (epsilon_i, delta_i)-DP at given points, from a table
  (``epsilons``, ``deltas``) or the profile of a named law (``profile =
  "gaussian"`` with ``epsilon`` = mu, ``"laplace"`` with ``epsilon`` its
  pure-DP epsilon).

Each member is an ordinary claim (:class:`audit.config.claims.Claim`) over the same
function class: the engine audits it like any other, and Holm's step-down
procedure over every refuting row of the audit (:mod:`audit.results.verdicts`) keeps
the probability of any false violation, members included, at most
``1 - confidence``.  A member refuted refutes the curve claim (each member is
implied by it), so the family's verdict is a violation when any member is
one, with that member named.  A grid checks the curve at its points only: a
curve claim that passes passes at those points.

:func:`claim_summaries` is :func:`audit.results.verdicts.summarize_claims` with the
members' summaries replaced by one line per curve claim (results.json
``claims``, report.md's Claims table).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attacks.classes import LAYERS
from attacks.vocabulary import DP, FAMILIES, GDP, ZCDP, Curve, Profile, Renyi, divergence_kind, parse_curve
from audit.results.schema import Row
from audit.theory.tradeoff import (
    gaussian_profile, gaussian_tradeoff, laplace_profile, laplace_tradeoff, profile_tradeoff, zcdp_renyi_bound, zcdp_tradeoff,
)
from audit.results.verdicts import combined_verdict, summarize_claims

PROFILES = {"gaussian": gaussian_profile, "laplace": laplace_profile}
"""Named privacy profiles: name -> delta(epsilon, parameter)."""
GRID = (0.0, 0.5, 1.0, 1.5, 2.0)
"""Default epsilons of a gdp or Gaussian-profile claim, in units of mu: from the total variation (epsilon = 0,
delta = 2 Phi(mu / 2) - 1) to epsilon = 2 mu, where delta_1(2) = 0.021 is still resolved by 10^4 outputs."""
LAPLACE_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Default epsilons of a Laplace-profile claim, in units of its epsilon (delta = 0 from there on)."""
ORDERS = (1.5, 2.0, 4.0)
"""Default Renyi orders of a zcdp claim: large orders weigh a few outputs heavily (their intervals widen)."""


SHOWN_POINTS = 4
"""A profile table's label lists its points up to this many, else the first ones and the last."""


@dataclass(frozen=True)
class Member:
    """One claim of a family: ``divergence`` ``"dp"`` (``epsilon``, ``delta``) or ``"renyi"`` (``alpha``, bound)."""

    divergence: str
    epsilon: float
    alpha: float | None = None
    delta: float = 0.0

    @property
    def label(self) -> str:
        if divergence_kind(self.divergence).has_order:
            return f"Renyi alpha={self.alpha:g} <= {self.epsilon:.4g}"
        return f"DP epsilon={self.epsilon:.4g}, delta={self.delta:.4g}"


@dataclass(frozen=True)
class Family:
    """A curve claim as written (``[[claims]]`` with divergence gdp, zcdp or profile) and its members.

    ``parameter``: mu (gdp, Gaussian profile), rho (zcdp), the Laplace
    profile's epsilon; NaN for a profile table.  ``points``: the grid,
    epsilons (gdp, profile) or Renyi orders (zcdp); ``deltas`` a profile
    table's deltas, else empty.
    """

    divergence: str
    function_class: str
    parameter: float
    points: tuple[float, ...]
    profile: str | None = None
    deltas: tuple[float, ...] = ()

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Family:
        """The family of a validated ``[[claims]]`` table (:mod:`audit.config.claims` checks the fields first)."""
        divergence, profile = table["divergence"], table.get("profile")
        parameter = float(table.get("epsilon", math.nan))
        if isinstance(parse_curve(divergence), ZCDP):
            orders = table.get("alpha", ORDERS)
            points = tuple(float(a) for a in (orders if isinstance(orders, list | tuple) else [orders]))
        elif "epsilons" in table:
            points = tuple(float(e) for e in table["epsilons"])
        else:
            points = tuple(parameter * g for g in (LAPLACE_GRID if profile == "laplace" else GRID))
        deltas = tuple(float(d) for d in table.get("deltas", ()))
        return cls(divergence, table["function_class"], parameter, points, profile, deltas)

    @property
    def curve(self) -> Curve:
        """The curve claim's type (:mod:`attacks.vocabulary`)."""
        return parse_curve(self.divergence)

    def members(self) -> list[Member]:
        """The dp or renyi claims the family is audited as, in grid order."""
        if self.curve.member is Renyi:
            return [Member(Renyi.name, zcdp_renyi_bound(self.parameter, a), alpha=a) for a in self.points]
        return [Member(DP.name, e, delta=float(d)) for e, d in zip(self.points, self.member_deltas())]

    def member_deltas(self) -> np.ndarray:
        """delta(epsilon) at the grid's epsilons (gdp, profile)."""
        if self.deltas:
            return np.asarray(self.deltas)
        law = "gaussian" if isinstance(self.curve, GDP) else self.profile
        return PROFILES[law](np.asarray(self.points), self.parameter)

    @property
    def label(self) -> str:
        """The claim in words, e.g. ``(all, 1-GDP)``."""
        match self.curve:
            case GDP():
                text = f"mu={self.parameter:.4g} GDP"
            case ZCDP():
                text = f"rho={self.parameter:.4g} zCDP"
            case Profile() if self.profile:
                text = f"{self.profile} privacy profile ({self.parameter:.4g})"
            case _:
                points = [f"({e:.3g}, {d:.3g})" for e, d in zip(self.points, self.member_deltas())]
                shown = points if len(points) <= SHOWN_POINTS else [*points[: SHOWN_POINTS - 1], "...", points[-1]]
                text = f"privacy profile at {len(points)} points (epsilon, delta) = {', '.join(shown)}"
        return f"({self.function_class}, {text})"

    def tradeoff(self, a: np.ndarray) -> np.ndarray:
        """The trade-off function the claim implies: G_mu (gdp), the named law's curve or the sup of the table's
        f_{eps, delta} (profile, Dong, Roth and Su 2022, Prop. 2.12), the Renyi bounds' by data processing (zcdp,
        :func:`audit.theory.tradeoff.zcdp_tradeoff`)."""
        match self.curve:
            case GDP():
                return gaussian_tradeoff(a, self.parameter)
            case ZCDP():
                return zcdp_tradeoff(a, self.parameter)
        if self.profile == "gaussian":
            return gaussian_tradeoff(a, self.parameter)
        if self.profile == "laplace":
            return laplace_tradeoff(a, self.parameter)
        return profile_tradeoff(a, self.points, self.member_deltas())

    def member_keys(self) -> list[tuple]:
        """The members' keys in :func:`audit.results.verdicts.summarize_claims` (:func:`audit.results.verdicts.claim_key`)."""
        return [(m.divergence, m.alpha, self.function_class, m.epsilon, m.delta, False) for m in self.members()]


def families(config: Mapping[str, Any]) -> list[Family]:
    """The curve claims of a config as written (results.json ``config``, or ``AuditConfig.raw``)."""
    return [Family.from_table(entry) for entry in _entries(config) if entry.get("divergence") in FAMILIES]


def claim_summaries(rows: Sequence[Row], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`audit.results.verdicts.summarize_claims`, each curve claim's members replaced by one line for the claim.

    The line has the summaries' fields (``divergence`` gdp / zcdp / profile,
    ``claim`` its parameter) plus ``members``: each member's label, verdict,
    strongest row and adjusted p-value.  Its verdict: ``"violation"`` when a
    member is one (the note names it), else ``"untested"`` when every member
    is, else ``"inconclusive"`` when a member is, else ``"pass"``; its
    strongest row is the member's with the smallest adjusted p-value.  A
    member key that a plain claim of the config shares stays listed too.
    """
    summaries = summarize_claims(rows)
    by_key = {_key(summary): summary for summary in summaries}
    plain = {_rounded((e["divergence"], alpha, e["function_class"], float(e["epsilon"]), float(e.get("delta", 0.0)),
                       bool(e.get("on_average"))))
             for e in _entries(config) if e.get("divergence") not in (*FAMILIES, None)  # None: a map at several d_in
             for alpha in _orders(e)}
    used, lines = set(), []
    for family in families(config):
        keys = [_rounded(key) for key in family.member_keys()]
        used.update(keys)
        lines.append(_family_line(family, [by_key.get(key) for key in keys]))
    numbers = [i + 1 for i, entry in enumerate(_entries(config)) if entry.get("divergence") in FAMILIES]
    labels = collections.Counter(line["label"] for line in lines)
    for line, number in zip(lines, numbers):  # two claims that read alike are told apart by their place
        if labels[line["label"]] > 1:
            line["label"] += f" [claim {number} of the config]"
    kept = [s for s in summaries if _key(s) not in used or _key(s) in plain]
    return kept + lines


def _family_line(family: Family, summaries: list[dict[str, Any] | None]) -> dict[str, Any]:
    members = []
    untested = {"verdict": "untested", "strongest_task": None, "p_adjusted": math.nan,
                **{f"{layer}_verdict": "untested" for layer in LAYERS}}
    for member, summary in zip(family.members(), summaries):
        summary = summary or untested
        members.append({"member": member.label, "verdict": summary["verdict"],
                        **{f"{layer}_verdict": summary[f"{layer}_verdict"] for layer in LAYERS},
                        "strongest_task": summary["strongest_task"], "p_adjusted": summary["p_adjusted"]})
    refuted = [m for m in members if m["verdict"] == "violation"]
    ran = [m for m in members if not math.isnan(m["p_adjusted"])]
    strongest = min(ran, key=lambda m: m["p_adjusted"]) if ran else None
    verdict = combined_verdict(m["verdict"] for m in members)
    if refuted:
        note = f"refuted by {len(refuted)} of its {len(members)} members, most strongly {strongest['member']}"
    elif verdict == "untested":
        note = "no member was tested"
    else:
        note = f"{len(members)} members, none refuted"
    return {
        "divergence": family.divergence,
        "alpha": math.nan,
        "claim_class": family.function_class,
        "claim": family.parameter,
        "delta": math.nan,  # each member has its own
        "on_average": False,
        "verdict": verdict,
        **{f"{layer}_verdict": combined_verdict(m[f"{layer}_verdict"] for m in members) for layer in LAYERS},
        "strongest_task": None if strongest is None else strongest["strongest_task"],
        "p_adjusted": math.nan if strongest is None else strongest["p_adjusted"],
        "detectable_excess": math.nan,  # members' excesses are in different units (epsilon, Renyi)
        "refuting_rows": sum(s["refuting_rows"] for s in summaries if s),
        "note": note,
        "label": family.label,
        "members": members,
    }


def _entries(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = config.get("claims", [])
    return [entries] if isinstance(entries, Mapping) else list(entries)


def _orders(entry: Mapping[str, Any]) -> list[float | None]:
    alpha = entry.get("alpha")
    return [None] if alpha is None else [float(a) for a in (alpha if isinstance(alpha, list) else [alpha])]


def _key(summary: Mapping[str, Any]) -> tuple:
    alpha = summary["alpha"]
    alpha = None if alpha is None or (isinstance(alpha, float) and math.isnan(alpha)) else alpha
    return _rounded((summary["divergence"], alpha, summary["claim_class"], summary["claim"], summary["delta"],
                     summary["on_average"]))


def _rounded(key: tuple) -> tuple:
    """A claim key with its numbers rounded to 12 digits (a grid point computed twice may differ in the last bit)."""
    return tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in key)
