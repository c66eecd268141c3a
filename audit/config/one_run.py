"""``[one_run]``: audit a learner from ONE training run with m canaries (Steinke, Nasr and Jagielski 2023).

Its fields are declared here (:data:`ONE_RUN`) and read by
:func:`one_run_spec`; the audit itself is :mod:`audit.engine.one_run`.  A
config with ``[one_run]`` audits its ``[[claims]]`` (``dp`` with epsilon
and delta, ``gdp`` with mu, function class ``"all"``) from the guesses an
adversary makes about the held-out canaries of one run, instead of from
many runs on neighbouring pairs; it takes no ``[[pairs]]``,
``[neighbours]`` or ``[[checks]]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attacks.classes import All, parse_function_class
from attacks.vocabulary import DP, GDP, divergence_kind
from audit.config.fields import ConfigError, Field, Section, check_fields, value

SCORES = ("linear", "loss")
"""The adversary's per-canary score: the canary statistic (linear class) or the canary's loss (black box)."""
ONE_RUN = Section("one_run", (
    Field("canaries", "integer", 1000, low=4, limits="must be a whole number of canaries >= 4, e.g. 1000",
          meaning="m ≥ 4: canaries, each included in the one training run independently with probability 1/2 "
                  "(each on its own feature, the data's largest record norm); the bound's ceiling grows with it "
                  "(5.81 at 1000 guesses, confidence 0.95, δ = 0)"),
    Field("score", "string", "linear", choices=SCORES,
          meaning="the adversary's score of a canary from the released parameters: `linear`, the inner product "
                  "of the released coefficients with the canary (the canary statistic, a member of the linear "
                  "class); `loss`, the canary's logistic loss under the released model (black-box membership "
                  "inference). Its orientation is learned on the training canaries"),
    Field("train_fraction", "number", 0.5, low=0.0, high=1.0, open_high=True, limits="must be in [0, 1), e.g. 0.5",
          meaning="[0, 1): share of the canaries whose inclusion the adversary is shown, to learn the score's "
                  "orientation and how many guesses to make; it guesses only about the rest (the bound holds "
                  "given the shown ones). 0: a larger score means included, the centre between guesses is the scores' "
                  "midrange, and `guess_fraction` is needed"),
    Field("guess_fraction", "number", None, low=0.0, high=1.0, open_low=True,
          limits="must be in (0, 1], e.g. 0.2, or left out (chosen on the training canaries)",
          default_doc="chosen on the training canaries",
          meaning="(0, 1]: share of the held-out canaries guessed, half as included (the largest scores) and half "
                  "as excluded (the smallest), abstaining on the rest; left out, the share whose bound is largest "
                  "on the training canaries"),
))
"""``[one_run]``'s fields (docs/config.md)."""


@dataclass(frozen=True)
class OneRunSpec:
    """``[one_run]``: m canaries, the adversary's score, its training share and its guessed share (None: chosen)."""

    canaries: int = ONE_RUN["canaries"].default
    score: str = ONE_RUN["score"].default
    train_fraction: float = ONE_RUN["train_fraction"].default
    guess_fraction: float | None = ONE_RUN["guess_fraction"].default


def one_run_spec(table: Mapping[str, Any], raw: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> OneRunSpec:
    """``[one_run]`` validated with what it excludes (pairs, neighbours, checks) and the claims it audits."""
    check_fields(table, ONE_RUN.names, "one_run")
    spec = OneRunSpec(**{entry.name: value(table, entry, f"one_run.{entry.name}") for entry in ONE_RUN.fields})
    for other in ("pairs", "neighbours", "checks"):
        if other in raw:
            raise ConfigError(f"one_run: a one-run audit plants its own canaries in one run; remove [{other}] "
                              f"(or [one_run] to audit neighbouring pairs).")
    if spec.train_fraction == 0.0 and spec.guess_fraction is None:
        raise ConfigError("one_run.guess_fraction: with train_fraction = 0 nothing chooses it; give it, e.g. 0.2.")
    held_out = spec.canaries - round(spec.train_fraction * spec.canaries)
    if held_out < 2:
        raise ConfigError(f"one_run.train_fraction: leaves {held_out} of {spec.canaries} canaries to guess; lower "
                          "it or raise canaries.")
    for i, claim in enumerate(claims):
        where = f"claims[{i}]"
        if _kind(claim.get("divergence"), divergence_kind) not in (DP, GDP):
            raise ConfigError(f"{where}.divergence: a one-run audit bounds epsilon (dp) or mu (gdp). Found "
                              f"{claim.get('divergence')!r}; use \"dp\" or \"gdp\".")
        if not isinstance(_kind(claim.get("function_class"), parse_function_class), All):
            raise ConfigError(f"{where}.function_class: a one-run claim is about the mechanism: \"all\". Found "
                              f"{claim.get('function_class')!r}.")
        if claim.get("on_average"):
            raise ConfigError(f"{where}.on_average: a one-run audit checks worst-case claims; remove it.")
    return spec


def _kind(name: Any, parse: Callable[[Any], Any]) -> Any:
    """``parse(name)``, or None for a name it does not know (the claims' own check words that error)."""
    try:
        return parse(name)
    except (TypeError, ValueError):
        return None
