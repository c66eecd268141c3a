"""A pytest helper: audit a privacy claim inside a user's own test suite.

>>> from audit.testing import assert_claim_holds
>>> def test_my_histogram_is_dp():  # doctest: +SKIP
...     assert_claim_holds("noisy_hist_1", {"divergence": "dp", "function_class": "all", "epsilon": 0.5},
...                        params={"epsilon": 0.5})

The helper runs :func:`audit.run_audit` on a config built from its arguments,
with ``capaudit run``'s defaults (the default attack classes of both layers,
values and representation, and the sequential budget counted in outputs)
unless ``classes`` or ``n_samples`` are given, and turns the verdict into
what a test framework understands: a violation raises
:class:`AssertionError` whose message is the evidence in a few lines (per
refuted claim: its verdict per layer, i.e. whether what the mechanism
computes or how it stores its outputs refutes it; the claim, its strongest
row's estimate and lower confidence bound, the verdict; and where the report
is); a pass returns the :class:`~audit.commands.api.AuditResult`.  Its own frame is
hidden from pytest's traceback (``__tracebackhide__``), so a failure shows
the message, not this function's source.

An *inconclusive* audit (an estimate above the claim that its confidence
bound does not confirm) is not a violation: a correct mechanism audited
against its tight, true claim reads inconclusive in a good share of runs,
so failing on it would make a correct suite flaky.  The ``inconclusive``
parameter decides: ``"warn"`` (default) passes with a :class:`UserWarning`,
``"pass"`` passes silently, ``"fail"`` raises like a violation (for claims
with a margin, where an inconclusive result already means trouble).

Failed tasks (the mechanism raised, or returned NaN or a changed shape) are
not evidence about privacy: they raise :class:`RuntimeError` with the
messages, never a pass.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from audit.commands.api import AuditResult, run_audit
from audit.report.summary import CLAIM_KEYS, claim_verdicts, evidence_lines, failure_lines, layer_text

INCONCLUSIVE_ACTIONS = ("warn", "pass", "fail")


def assert_claim_holds(
    mechanism: str | Any,
    claim: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    params: Mapping[str, Any] | None = None,
    d: Any = None,
    d_prime: Any = None,
    pairs: Sequence[tuple[Any, Any]] | None = None,
    n_samples: int | None = None,
    classes: Sequence[str] | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    inconclusive: str = "warn",
    out_dir: str | os.PathLike | None = None,
) -> AuditResult:
    """Audit ``mechanism`` against ``claim``; raise AssertionError with the evidence on a violation.

    Parameters
    ----------
    mechanism : str or callable
        A registry name (``capaudit mechanisms``), ``"package.module:function"``,
        or a function ``f(dataset, n, rng) -> (n, d) array`` (where
        :func:`audit.run_audit` accepts function objects).
    claim : mapping or sequence of mappings
        One or more ``[[claims]]`` entries, e.g.
        ``{"divergence": "dp", "function_class": "all", "epsilon": 1.0}``.
    params : mapping, optional
        The mechanism's parameters (``[mechanism] params``).
    d, d_prime : array-like, optional
        One neighbouring pair of datasets; both or neither.  Neither (and no
        ``pairs``): the mechanism's own worst-case pairs (registry mechanisms only).
    pairs : sequence of (d, d_prime), optional
        Several neighbouring pairs (``[[pairs]]``), instead of ``d`` and ``d_prime``.
    n_samples : int, optional
        Outputs per dataset (``[attacks] n_samples``, a fixed design); unset, the
        audit stops by itself as ``capaudit run`` does (``[attacks] max_outputs``).
    classes : sequence of str, optional
        The attack classes; unset, ``capaudit run``'s default classes
        (:data:`audit.config.attacks.DEFAULT_CLASSES`: both layers).
    confidence : float, default=0.95
        Family-wise confidence of the audit: a correct claim fails with
        probability at most ``1 - confidence``.
    seed : int, default=0
        The audit's seed; the same seed gives the same numbers.
    inconclusive : {"warn", "pass", "fail"}, default="warn"
        What an inconclusive verdict does (module docstring).
    out_dir : path, optional
        Also write the report there (report.md, report.html, results.json).

    Returns
    -------
    AuditResult
        When no claim is violated (and, with ``inconclusive="fail"``, none is undecided).

    Raises
    ------
    AssertionError
        On a violation (or an inconclusive verdict with ``inconclusive="fail"``):
        the message gives, per claim decided against, the claim, its strongest
        row's estimate and lower bound, and where the report is.
    RuntimeError
        When a task failed (the mechanism raised or returned bad output).
    ValueError
        On an invalid argument or config (``audit.config.load.ConfigError``).
    """
    __tracebackhide__ = True  # pytest shows the message, not this function's source
    if inconclusive not in INCONCLUSIVE_ACTIONS:
        raise ValueError(f"inconclusive must be one of {INCONCLUSIVE_ACTIONS}. Found {inconclusive!r}.")
    if (d is None) != (d_prime is None):
        raise ValueError("give both d and d_prime (one neighbouring pair) or neither (the mechanism's own pairs).")
    if d is not None and pairs is not None:
        raise ValueError("give either d and d_prime (one pair) or pairs (several), not both.")
    key = "callable" if callable(mechanism) or ":" in str(mechanism) else "name"
    attacks = {"confidence": confidence, **({} if classes is None else {"classes": list(classes)}),
               **({} if n_samples is None else {"n_samples": n_samples})}
    config = {
        "mechanism": {key: mechanism, "params": dict(params or {})},
        "claims": [dict(claim)] if isinstance(claim, Mapping) else [dict(entry) for entry in claim],
        "attacks": attacks,
        "run": {"seed": seed, "n_jobs": 1},
    }
    if d is not None:
        pairs = [(d, d_prime)]
    if pairs is not None:
        config["pairs"] = [{"d": np.asarray(one).tolist(), "d_prime": np.asarray(other).tolist()}
                           for one, other in pairs]
    result = run_audit(config, out_dir=out_dir, progress=False)
    errors = result.table["error"].dropna().unique()
    if len(errors):
        raise RuntimeError(f"the audit of {mechanism!r} could not finish: " + "; ".join(failure_lines(errors)))
    deciding = {"violation": ("violation",), "inconclusive": ("inconclusive",)}.get(result.verdict)
    if deciding is None:
        return result
    message = _evidence(result, deciding, mechanism, out_dir)
    if result.verdict == "violation" or inconclusive == "fail":
        raise AssertionError(message)
    if inconclusive == "warn":
        warnings.warn(message, UserWarning, stacklevel=2)
    return result


def _evidence(result: AuditResult, verdicts: Sequence[str], mechanism: Any, out_dir: Any) -> str:
    """The failure message, a few lines: verdict, each undecided or refuted claim's verdict per layer and strongest
    evidence (per layer that decided it), the report."""
    table = result.table
    rows = table[table["verdict"].isin(verdicts)]
    keys = [*CLAIM_KEYS, "delta", "layer"]
    deciding = rows[keys].drop_duplicates()  # the claims (and layers) those rows test
    claims = table.merge(deciding, on=keys) if len(deciding) else table
    where = (f"report: {os.fspath(out_dir)}/report.md" if out_dir is not None
             else "pass out_dir=... to write the report with every row")
    decided = [(line, claim) for line, claim in zip(claim_verdicts(result.claims), result.claims)
               if claim["verdict"] in verdicts and layer_text(claim)]
    return "\n".join([
        f"capaudit: {result.verdict.upper()} for mechanism {mechanism!r} ({len(rows)} of {len(table)} rows {verdicts[0]})",
        *(f"  {line['claim']}: {line['verdict']} by layer: {layer_text(claim)}{_why(claim)}" for line, claim in decided),
        *(f"  {line}" for line in evidence_lines(claims)),
        f"  {where}",
    ])


def _why(claim: Mapping[str, Any]) -> str:
    """What a claim refuted in the representation layer only means, in a few words."""
    if claim["representation_verdict"] != "violation" or claim["value_verdict"] == "violation":
        return ""
    return (" (the outputs' IEEE-754 bits, not their values: a float-unsafe sampler, Mironov 2012; use a float-safe "
            "one, or classes without floatbits for a claim about values only)")
