"""The audit's units of a declared statistic (``canary``): every output of each pair scores it, none trains it.

Policy ``best`` gives the declared classes of a ``dp`` claim
(:attr:`attacks.classes.FunctionClass.declared`) a unit of their own
(:func:`split_declared`) beside the staged search of the fitted classes:
per pair, the declared statistic is counted on all ``n_samples`` outputs per
dataset (:func:`attacks.declared.declared_estimate`), its set's count chosen
from the claim before any output (:func:`claim_curve`).  Each pair's row is a
held-out estimate of one fixed statistic; the rows join Holm's family with
every other refuting row (:mod:`audit.results.verdicts`), and the Gaussian-DP
route splits its error over their tasks (:mod:`audit.report.gdp_route`), so
the audit-wide error is spent as for any other row.

The direction is fixed before the data: ``[attacks.class_params.canary]
direction`` from the config, else the mechanism's ``canary_direction``
(:func:`with_directions`), never read from outputs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from attacks.candidates import Candidate, Target
from attacks.classes import parse_function_class
from attacks.declared import declared_estimate
from attacks.estimate import DivergenceEstimate
from attacks.vocabulary import DP, divergence_of
from audit.config.load import AuditConfig
from audit.inputs.neighbours import NeighbourPair
from audit.sampling.errors import one_line
from audit.theory.tradeoff import gdp_mu


def split_declared(target: Target) -> tuple[Target, Target]:
    """(the target's fitted classes, its declared ones): a ``dp`` target's declared classes are scored on every
    output in a unit of their own; other divergences keep them in the staged search (a fitted threshold or scale)."""
    if not isinstance(divergence_of(target), DP):
        return target, dataclasses.replace(target, classes=())
    declared = tuple(name for name in target.classes if parse_function_class(name).declared)
    fitted = tuple(name for name in target.classes if name not in declared)
    return dataclasses.replace(target, classes=fitted), dataclasses.replace(target, classes=declared)


def claim_curve(epsilon: float, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    """Q(S) -> P(S) of the best test of a mechanism exactly at the claim: for delta > 0, the Gaussian trade-off
    through (epsilon, delta), P(S) = Phi(Phi^-1(Q(S)) + mu) with mu = :func:`audit.theory.tradeoff.gdp_mu`
    (Dong, Roth and Su 2022, Def. 2.6); for delta = 0, P(S) = min(1, e^epsilon Q(S)).  It only chooses the set's
    count (:func:`attacks.declared.claim_count`); the bound's validity does not rest on it."""
    if delta > 0 and math.isfinite(epsilon):
        mu = gdp_mu(epsilon, delta)
        return lambda q: ndtr(ndtri(q) + mu)
    return lambda q: np.minimum(1.0, np.exp(min(epsilon, 700.0)) * q)


def with_directions(config: AuditConfig, mechanism: Any) -> AuditConfig:
    """The config with each declared class's ``direction`` filled from the mechanism's ``canary_direction`` where
    the config gives none (unchanged when it gives one, or the mechanism declares none: the class's fit then
    says how to give one)."""
    params = {name: dict(values) for name, values in config.attacks.class_params.items()}
    declared = getattr(mechanism, "canary_direction", None)
    for name in config.attacks.classes:
        if parse_function_class(name).declared and params.get(name, {}).get("direction") is None \
                and declared is not None:
            params[name] = {**params.get(name, {}), "direction": list(declared)}
    return dataclasses.replace(config, attacks=dataclasses.replace(config.attacks, class_params=params))


def run_declared(target: Target, epsilon: float, config: AuditConfig, pairs: Sequence[NeighbourPair],
                 sample: Callable, n: int) -> list[tuple[Candidate, DivergenceEstimate | None, str | None]]:
    """Each (pair, declared class) of ``target`` scored on ``n`` outputs per dataset: (candidate, estimate, None),
    or (candidate, None, why) where the pair's sampling or the statistic failed (its row's error)."""
    curve = claim_curve(epsilon, target.delta)
    found = []
    for pair in range(len(pairs)):
        for name in target.classes:
            direction = target.class_params.get(name, {}).get("direction")
            try:
                found.append((*declared_estimate(sample, pair, name, direction, target, n, curve,
                                                 config.attacks.confidence), None))
            except Exception as error:  # the audited code or the declaration failed: this pair's row
                found.append((Candidate(pair, True, name), None, one_line(error)))
    return found
