"""``[attacks]``: the adversaries' classes and budget, the audit's confidence, its policy and stages.

The fields are declared once (:data:`ATTACKS`); :func:`attack_spec` reads a
table into a frozen :class:`AttackSpec` and applies the rules that tie fields
together: the held-out split every estimate is confirmed on
(:func:`attacks.budget.min_held_out`), the representation layer's classes,
the policy (:func:`default_policy`) and its stages, and the sequential design
that an unset ``n_samples`` selects (:mod:`attacks.sequential`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attacks.budget import DEFAULT_SHARES, MIN_HELD_OUT, RESOLVED_MASS, held_out, min_held_out
from audit.config.fields import ConfigError, Field, Section, check_fields, class_name, value

if TYPE_CHECKING:
    from attacks.budget import StageSizes

MIN_SAMPLES = 100
"""Smallest n_samples: the held-out split must hold enough points for a confidence interval."""
MAX_SAMPLES = 100_000_000
"""Largest n_samples: outputs are held in memory (8 bytes a coordinate, both datasets of every pair)."""
FIXED_SAMPLES = 10_000
"""n_samples of a fixed design that names none (policy ``every``)."""
DEFAULT_CLASSES = ("linear", "poly2", "poly3", "tree3", "atoms", "floatbits")
POLICIES = ("best", "every")
MIN_STAGED_BUDGET = 200
"""The smallest ``n_samples`` the default stage shares split into stages of at least 20 outputs."""
_CLASS_PATTERN = "^(linear|poly[1-9][0-9]*|kernel|mlp|tree[1-9][0-9]*|threshold|canary|atoms|floatbits)$"
_SHARE = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}

ATTACKS = Section("attacks", (
    Field("classes", "other", DEFAULT_CLASSES, type_doc="array of class names",
          schema_extra={"type": "array", "minItems": 1, "items": {"type": "string", "pattern": _CLASS_PATTERN}},
          meaning="non-empty; not `all`; names `linear`, `poly1`…`poly10`, `kernel`, `mlp`, `tree1`…`tree20`, "
                  "`threshold`, `canary`, `atoms`, `floatbits` (ASCII digits, no leading zero) (no attack fits every "
                  "function). Each class is attacked on the divergences it can estimate. `canary` is the white-box "
                  "canary statistic, the output's inner product with a direction declared before the data "
                  "(`class_params.canary.direction`, else the mechanism's `canary_direction`: `dp_gd_logistic`'s is "
                  "the released parameter on its canary's feature); one member of `linear`, so its bound holds for "
                  "`linear` and every class containing it. With policy `best` a `dp` claim's `canary` rows need no "
                  "training: every pair gets a row scored on all `n_samples` outputs per dataset, the set's count "
                  "chosen from the claim (docs/theory.md section 7)."),
    Field("n_samples", "integer", None, low=MIN_SAMPLES, high=MAX_SAMPLES,
          limits=f"must be at least {MIN_SAMPLES} per dataset (the held-out split needs enough points for a confidence "
                 f"interval) and at most {MAX_SAMPLES:,} (outputs are held in memory)",
          default_doc=f"unset: the audit stops by itself (below); {FIXED_SAMPLES} for policy `every`",
          meaning="100 to 10⁸: outputs per dataset of each pair (a fixed design: with policy `best` the budget of one "
                  "pair over its four stages)"),
    Field("confidence", "number", 0.95, low=0.5, high=1.0, open_high=True, limits="must be in [0.5, 1), e.g. 0.95",
          meaning="in [0.5, 1): for the whole audit; Holm's step-down keeps the probability of any false violation "
                  "below 1 − confidence"),
    Field("train_fraction", "number", 0.5, low=0.0, high=1.0, open_low=True, open_high=True,
          limits="must be in (0, 1), e.g. 0.5",
          meaning="policy `every` only (setting it selects `every` when `policy` is unset; with `policy = \"best\"` it "
                  "is an error: its held-out sample is its confirm stage). In (0, 1): the share of samples that trains "
                  "each adversary (`n_train`); the rest, a fresh sample, confirms it (`n_confirm`) and must hold at "
                  "least max(30, ⌈ln(1 − confidence)/ln 0.9⌉) outputs per dataset (30 at 0.95, 44 at 0.99): below "
                  "that a set with no held-out output cannot be bounded below mass 0.1 at the audit's confidence"),
    Field("class_params", "table", {}, type_doc="table of tables",
          schema_extra={"additionalProperties": {"type": "object"}},
          meaning="class name (one of `classes`) → keyword parameters of `attacks.Adversary` for that class, e.g. "
                  "`{ kernel = { n_components = 200 }, mlp = { width = 64 } }`. `Adversary`'s parameters: "
                  "`n_components` (kernel: random Fourier features, default 100), `bandwidth` (kernel: RBF bandwidth, "
                  "default the median pairwise distance of up to 1000 training rows), `width` (mlp: hidden ReLU "
                  "units, default 32; the network is trained on the KL / Rényi objective itself, stopped early on 20% "
                  "of the training rows), `ridge` (KL and Rényi fits: ridge penalty, default 1e-3; mlp: also on the "
                  "network's output weights), `dp_eval_size` (dp: held-out size the attack set is chosen for), "
                  "`direction` (canary: one number per output coordinate, not all 0; large on M(d'), the pair's "
                  "second dataset)"),
    Field("coupled", "boolean", False,
          meaning="draw each pair's outputs on d and d' from the same random numbers and use the paired intervals; a "
                  "mechanism that spends different randomness on the two datasets is sampled independently instead "
                  "and its rows say so"),
    Field("policy", "other", "best", choices=POLICIES,
          default_doc='`"best"`; `"every"` for configs with an on-average claim, a `train_fraction`, or `n_samples` '
                      f"< {MIN_STAGED_BUDGET}",
          meaning="which candidates (pair × direction × attack class) get a confirmed row; both run the staged search "
                  "of `attacks/staged.py` through one orchestrator (`audit/engine/run.py`, [architecture.md]"
                  "(architecture.md)). `best`: one statistic per claim (and Rényi order): every candidate contained in "
                  "the claim's class screened on small samples (a cheap fit ranks them), the best few trained on "
                  "more, one statistic chosen on check samples, and confirmed on a large fresh sample no choice saw; "
                  "Holm over the claims only. `n_samples` is then the budget of one pair over all four stages "
                  "(outputs per dataset), split by `stages`; every pair gets the screen share, only the finalists' "
                  "pairs (at most 4) the later ones. `every`: every candidate is a finalist: trained on "
                  "`train_fraction` of `n_samples` and its own set or witness confirmed on the rest, a fresh sample "
                  "(no screen, no check, no pooled sets); one row per pair, direction, class and claim, Holm over "
                  "every row: a table of every class's estimate on every pair, and the per-pair estimates of "
                  "on-average claims. Work runs in units (`best`: a claim and order; `every`: a pair); each finished "
                  "unit is appended to `tasks.jsonl`, so Ctrl-C (or a killed process) keeps the finished units and "
                  "`--resume` runs only the others, with the numbers of an uninterrupted run. Samples are drawn in "
                  "forked children within `sample_timeout` seconds a chunk; the progress bar counts outputs per "
                  "dataset drawn over all stages. The former field `engine` is refused with a message naming "
                  "`policy` (`engine = \"staged\"` is `policy = \"best\"`, `engine = \"rows\"` is `policy = "
                  "\"every\"`)"),
    Field("engine", "other", documented=False),
    Field("stages", "other", DEFAULT_SHARES, type_doc="table of numbers",
          schema_extra={"type": "object", "additionalProperties": False, "required": list(DEFAULT_SHARES),
                        "properties": {stage: _SHARE for stage in DEFAULT_SHARES}},
          meaning="`policy = \"best\"` only: the shares of `n_samples` spent by each stage, all four, each in (0, 1), "
                  "summing to 1, each at least 20 outputs, the confirm stage at least max(30, ⌈ln(1 − confidence)/ln "
                  "0.9⌉) outputs per dataset"),
    Field("max_outputs", "integer", 4_000_000, low=100, high=10**12,
          limits="must be from 100 to 10^12 outputs, e.g. 4000000",
          meaning="unset `n_samples` only; 100 to 10¹²: the most outputs the audit draws (both datasets, every pair, "
                  "stage and round). Each search (a claim at one Rényi order in one layer) runs in turn on its share of "
                  "what the searches before it left: a value search weighs 32, a representation search (`floatbits`) 1, "
                  "so one claim's value search may draw 32/33 of it and its representation search what the value "
                  "search left, at least 1/33 (only 1/33 once the value search refuted the claim); a claim's declared "
                  "statistics (`canary`, a fixed design) weigh 32 and take their share of the whole (docs/theory.md "
                  "section 7, \"Sequential audits\"). "
                  "Without `n_samples` the staged search runs in rounds of budgets 250, 1 000, 4 000, 16 000, 64 000, "
                  "... outputs per dataset of a pair (each round a whole search: its screen and train stages grow too; they "
                  "take the earlier rounds' outputs of their pair before fresh ones, so that a search stopped after a "
                  "round of budget B has drawn about the outputs of a fixed design of `n_samples` B; the check and "
                  "confirm samples are always fresh) and looks after each: it stops at a violation, at a decided pass, or when the next "
                  "round would pass `max_outputs` or `[run] max_seconds` when set. The first round always runs: where "
                  "its 250 outputs per dataset would pass a search's share of `max_outputs` it shrinks to fit, down to "
                  "200 (400 outputs for one pair, the least a search draws). In the rounds of 250, 1 000 and 4 000 a `dp` or "
                  "`ipm` set is confirmed by betting confidence sequences read after every batch of its confirm sample "
                  "(50 outputs per dataset, then half as many more as drawn so far), so a gross violation stops within "
                  "a few hundred outputs, and so is a `kl` or `renyi` witness with a clipped bound (its betting half, "
                  "valid at every look); the larger rounds confirm at their end. The pilot rounds spend 5 % of the error "
                  "each, the last round of the schedule half the rest and the others share the other half, so the verdict holds at the audit's confidence whatever round and look it stopped "
                  "at (docs/theory.md section 7, \"Sequential audits\")"),
    Field("tolerance", "number", 0.1, low=0.0, open_low=True,
          limits="must be a positive number (in the claim's units), e.g. 0.1",
          meaning="unset `n_samples` only; > 0, in the claim's units: a search is *decided* (a pass) when its "
                  "estimate is at or below the claim (one above it by less looks again while a round fits) and it would "
                  "have detected an excess of `tolerance` over the claim with 80 % probability (the detectable excess "
                  "at its spent level), from a round of at least 256 000 outputs per dataset (a smaller one may miss a "
                  "rare event), on a claim below the look's ceiling (no excess over a claim at or above it is "
                  "detectable: such a search ends undecided, inconclusive); the report states it"),
    Field("representation", "boolean", True,
          meaning="audit the *representation layer* too: the classes that read how outputs are stored (`floatbits`, "
                  "IEEE-754 features) rather than the values (every other class). Each claim gets a verdict per layer "
                  "(report.md's Claims table, results.json `value_verdict` / `representation_verdict`); a claim "
                  "refuted in either layer is refuted. `false` is for a claim about the released values only: the "
                  "representation classes are left out of `classes` (listing one beside `false` is an error) and the "
                  "report's header says the layer is off. A float-unsafe sampler (numpy's or an inverse-CDF Laplace "
                  "or Gaussian added to a data-dependent value) is refuted in this layer whatever its values (Mironov "
                  "2012); the fix is a float-safe sampler (OpenDP, snapping, discrete noise)"),
))
"""``[attacks]``'s fields (docs/config.md)."""


@dataclass(frozen=True)
class AttackSpec:
    """``[attacks]``: the adversaries' classes, sample size, audit confidence and class parameters.

    ``coupled``: draw each pair's outputs on d and d' from the same random
    numbers (common random numbers) and use the paired intervals
    (:mod:`audit.sampling.sampler`, :mod:`attacks.paired_ratio`).

    ``policy``: which candidates (pair x direction x class) get a confirmed
    row (:mod:`audit.engine.run`): ``"best"`` (one statistic per claim from the
    staged search of :mod:`attacks.staged`, whose ``stages`` shares split
    ``n_samples``) or ``"every"`` (every candidate, ``train_fraction`` of
    ``n_samples`` training it, the rest confirming it); unset,
    :func:`default_policy`.

    ``representation``: audit the representation layer too (the classes that
    read how outputs are stored, ``floatbits``; :attr:`attacks.classes.FunctionClass.layer`);
    false for a claim about the released values only, which drops those
    classes from ``classes``.

    ``sequential``: the ``best`` policy without ``n_samples`` in the config
    (:mod:`attacks.sequential`): rounds of growing budgets until each claim
    is decided (a violation, or an excess of ``tolerance`` over the claim
    detectable with probability 0.8) or ``max_outputs`` outputs (all of a
    claim's searches, every pair, dataset and stage) or ``[run]
    max_seconds`` (unset by default: the budget is counted in outputs, so the
    numbers depend on the config and seed only) are reached.  False for a
    fixed design (``n_samples``).
    """

    classes: tuple[str, ...] = DEFAULT_CLASSES
    n_samples: int = FIXED_SAMPLES
    confidence: float = ATTACKS["confidence"].default
    train_fraction: float = ATTACKS["train_fraction"].default
    class_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    coupled: bool = ATTACKS["coupled"].default
    policy: str = ATTACKS["policy"].default
    stages: Mapping[str, float] | None = None
    sequential: bool = False
    max_outputs: int = ATTACKS["max_outputs"].default
    tolerance: float = ATTACKS["tolerance"].default
    representation: bool = ATTACKS["representation"].default

    @property
    def stage_sizes(self) -> StageSizes:
        """Outputs per dataset of each stage: ``stages`` of ``n_samples`` (best), or its train / held-out split
        (every: no screen, no check)."""
        from attacks.budget import StageSizes

        if self.stages is None:
            return StageSizes.from_split(self.n_samples, self.train_fraction)
        return StageSizes.from_budget(self.n_samples, self.stages)

    @property
    def held_out(self) -> int:
        """Outputs per dataset that score the final statistic: the confirm stage's."""
        return self.stage_sizes.confirm


def attack_spec(table: dict, on_average: bool = False) -> AttackSpec:
    """An ``[attacks]`` table validated; ``on_average``: the config has an on-average claim (policy ``every``)."""
    from attacks.classes import All, parse_function_class

    check_fields(table, ATTACKS.names, "attacks")
    classes = table.get("classes", list(DEFAULT_CLASSES))
    if not isinstance(classes, list) or not classes:
        raise ConfigError(
            f'attacks.classes: must be a non-empty list of class names, e.g. ["linear", "poly2"]. Found {classes!r}.'
        )
    classes = tuple(class_name(name, f"attacks.classes[{i}]") for i, name in enumerate(classes))
    if any(isinstance(parse_function_class(name), All) for name in classes):
        raise ConfigError("attacks.classes: \"all\" is for claims only (no attack fits every function); remove it.")
    classes = _layers(table, classes)
    n_samples = value(table, ATTACKS["n_samples"], "attacks.n_samples", default=FIXED_SAMPLES)
    confidence = value(table, ATTACKS["confidence"], "attacks.confidence")
    train_fraction = value(table, ATTACKS["train_fraction"], "attacks.train_fraction")
    check_held_out(n_samples, train_fraction, confidence)
    class_params = table.get("class_params", {})
    if not isinstance(class_params, Mapping) or not all(isinstance(v, Mapping) for v in class_params.values()):
        raise ConfigError(
            "attacks.class_params: must map class names to tables, e.g. { mlp = { width = 16 } }. "
            f"Found {class_params!r}."
        )
    for name, params in class_params.items():
        if name not in classes:
            raise ConfigError(f"attacks.class_params: {name!r} is not in attacks.classes ({', '.join(classes)}).")
        check_class_params(name, params)
    coupled = value(table, ATTACKS["coupled"], "attacks.coupled")
    policy, stages = _policy(table, n_samples, on_average, confidence)
    sequential, max_outputs, tolerance = _sequential(table, policy, stages)
    return AttackSpec(
        classes=classes, n_samples=n_samples, confidence=confidence, train_fraction=train_fraction,
        class_params={name: dict(params) for name, params in class_params.items()}, coupled=coupled, policy=policy,
        stages=stages, sequential=sequential, max_outputs=max_outputs, tolerance=tolerance,
        representation=table.get("representation", ATTACKS["representation"].default),
    )


def check_held_out(n_samples: int, train_fraction: float, confidence: float) -> None:
    """Refuse a train / held-out split whose held-out part is below :func:`attacks.budget.min_held_out`."""
    held, needed = held_out(n_samples, train_fraction), min_held_out(confidence)
    if held < needed:
        raise ConfigError(
            f"attacks.train_fraction: {train_fraction!r} of n_samples = {n_samples} leaves {held} held-out outputs "
            f"per dataset; an audit at confidence {confidence!r} needs at least {needed} (so that a set none of "
            f"them falls in is bounded below mass {RESOLVED_MASS} at that confidence, and at least {MIN_HELD_OUT} "
            f"for the normal approximation). Lower train_fraction to at most "
            f"{math.floor(100 * (1 - needed / n_samples)) / 100} or raise n_samples to at least "
            f"{math.ceil(needed / (1 - train_fraction))}."
        )


def check_class_params(name: str, params: Mapping[str, Any]) -> None:
    """Each entry through its class's own rule (:meth:`attacks.classes.FunctionClass.check_parameters`)."""
    from attacks.classes import parse_function_class

    function_class = parse_function_class(name)
    for key, parameter in params.items():
        try:
            function_class.check_parameters({key: parameter})
        except ValueError as error:
            raise ConfigError(f"attacks.class_params.{name}.{key}: {error}") from None


def _layers(table: dict, classes: tuple[str, ...]) -> tuple[str, ...]:
    """``classes`` less the representation layer's when ``[attacks] representation = false`` (a claim about the
    released values only); a class list that names one beside the switch is refused."""
    from attacks.classes import REPRESENTATION, parse_function_class

    if value(table, ATTACKS["representation"], "attacks.representation"):
        return classes
    stored = [name for name in classes if parse_function_class(name).layer == REPRESENTATION]
    if stored and "classes" in table:
        raise ConfigError(f"attacks.representation: false leaves out the classes that read how outputs are stored, "
                          f"but attacks.classes lists {', '.join(stored)}; remove them or the switch. "
                          f"Found representation = false.")
    return tuple(name for name in classes if name not in stored)


def _sequential(table: dict, policy: str, stages: Mapping[str, float] | None) -> tuple[bool, int, float]:
    """Whether the audit is sequential (policy ``best``, no ``n_samples``), its ``max_outputs`` and ``tolerance``."""
    from attacks.sequential import PILOT_BELOW
    from attacks.budget import StageSizes

    sequential = policy == "best" and "n_samples" not in table
    for name in ("max_outputs", "tolerance"):
        if name in table and not sequential:
            raise ConfigError(
                f"attacks.{name}: only an audit that stops by itself has one (policy 'best' without n_samples); "
                f"remove {name} or n_samples. Found {table[name]!r}."
            )
    max_outputs = value(table, ATTACKS["max_outputs"], "attacks.max_outputs")
    tolerance = value(table, ATTACKS["tolerance"], "attacks.tolerance")
    if sequential:
        try:
            StageSizes.from_budget(PILOT_BELOW, stages)
        except ValueError as error:
            raise ConfigError(f"attacks.stages: a round of {PILOT_BELOW} outputs: {error}") from None
    return sequential, max_outputs, tolerance


def default_policy(n_samples: int, on_average: bool, train_fraction: bool) -> str:
    """The policy of a config that names none (docs/config.md, ``[attacks] policy``).

    ``"best"``, unless the config asks for what only ``"every"`` does: an
    on-average claim (every pair's estimate), a ``train_fraction`` (one
    train / held-out split per row), or a budget below
    :data:`MIN_STAGED_BUDGET` (too small for four stages).
    """
    return "every" if on_average or train_fraction or n_samples < MIN_STAGED_BUDGET else "best"


def _policy(table: dict, n_samples: int, on_average: bool, confidence: float) -> tuple[str, dict[str, float] | None]:
    """``attacks.policy`` (unset: :func:`default_policy`) and, for ``"best"``, ``attacks.stages`` (shares of
    n_samples per stage, the confirm stage at least :func:`min_held_out` outputs)."""
    from attacks.budget import StageSizes

    if "engine" in table:
        raise ConfigError(
            'attacks.engine: replaced by attacks.policy ("best" for engine = "staged", "every" for engine = "rows"); '
            f"rename the field. Found engine = {table['engine']!r}."
        )
    policy = table.get("policy", default_policy(n_samples, on_average, "train_fraction" in table))
    if policy not in POLICIES:
        raise ConfigError(f"attacks.policy: must be one of {', '.join(map(repr, POLICIES))}. Found {policy!r}.")
    if "stages" in table and policy != "best":
        raise ConfigError('attacks.stages: only policy = "best" has a screen and a check; set attacks.policy = '
                          '"best" or remove it.')
    if policy == "every":
        return policy, None
    if on_average:
        raise ConfigError(
            'attacks.policy: "best" confirms one statistic of the most distinguishable pair, a worst-case '
            'statistic; an on-average claim needs every pair\'s estimate. Use policy = "every" for on-average claims. '
            'Found "best".'
        )
    if "train_fraction" in table:
        raise ConfigError(
            'attacks.train_fraction: policy = "best" has no train / held-out split per row (attacks.stages splits '
            'n_samples, its confirm stage is the held-out sample); remove train_fraction or set policy = "every". '
            f"Found {table['train_fraction']!r}."
        )
    stages = table.get("stages", DEFAULT_SHARES)
    if not isinstance(stages, Mapping) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                              for v in stages.values()):
        raise ConfigError(
            "attacks.stages: must map screen, train, check and confirm to numbers, e.g. "
            f"{{ screen = 0.05, train = 0.15, check = 0.1, confirm = 0.7 }}. Found {stages!r}."
        )
    shares = {key: float(share) for key, share in stages.items()}
    try:
        confirm = StageSizes.from_budget(n_samples, shares).confirm
    except ValueError as error:
        raise ConfigError(f"attacks.stages: {error}") from None
    if confirm < min_held_out(confidence):
        raise ConfigError(
            f"attacks.stages: confirm = {shares['confirm']!r} of n_samples = {n_samples} leaves {confirm} confirm "
            f"outputs per dataset; an audit at confidence {confidence!r} needs at least {min_held_out(confidence)}. "
            "Raise the confirm share or n_samples."
        )
    return policy, shares
