"""``[[claims]]``: what the audit tests, read into :class:`Claim` s (a curve claim into its members).

The fields are declared once (:data:`CLAIMS`, and :data:`CURVE_FIELDS` for
the curve claims of :mod:`audit.config.families`).  A claim is accepted only when
the audit can refute it (:func:`check_refutable`, docs/theory.md section 3):
some attack class contained in the claim's class estimates its divergence,
and a dp claim's delta is below what the held-out sample can resolve.
Divergences are read as :mod:`attacks.vocabulary`'s types, never compared
as names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attacks.vocabulary import (
    DIVERGENCES, DP, FAMILIES, GDP, IPM, KL, ZCDP, Curve, Profile, Renyi, divergence_kind, parse_curve,
)
from audit.config.accounting import ACCOUNTANTS, TRAINING_FIELDS
from audit.config.library_claims import SOURCES
from audit.config.families import PROFILES, Family
from audit.config.fields import (
    REQUIRED, ConfigError, Field, Section, check_fields, choice, class_name, number, required, value,
)
from audit.inputs.group_pairs import MAX_DISTANCE
from audit.inputs.neighbours import DEFAULT_COUNT
from audit.results.on_average import DIVERGENCES as ON_AVERAGE_DIVERGENCES
from audit.results.on_average import MIN_PAIRS

if TYPE_CHECKING:
    from attacks.classes import FunctionClass
    from audit.config.attacks import AttackSpec

MIN_ALPHA = 1.1
"""Smallest Renyi order: the Renyi objective is a moment of order beta = alpha / (alpha - 1) of
the witness on Q (11 at alpha = 1.1, 101 at 1.01); beyond ~10 a handful of held-out points
carries the whole moment and the estimates are far below any divergence (docs/benchmarks.md,
"Measurements behind constants")."""
MAX_ALPHA = 1000.0
"""Largest Renyi order: beyond it the order is the max-divergence in all but name (use dp)."""
MAX_REASON = 2000
"""Longest ``[[claims]] reason`` (text shown in report.md)."""
ALPHA = {"type": "number", "minimum": MIN_ALPHA, "maximum": MAX_ALPHA}
"""The JSON Schema of one Renyi order (``$defs/alpha``)."""
_CLAIM_CLASS = "^(linear|poly[1-9][0-9]*|kernel|mlp|tree[1-9][0-9]*|threshold|atoms|floatbits|all)$"
_NAMES = DIVERGENCES + FAMILIES
_ORDERED = {"divergence": {"const": Renyi.name}}
_LAW = "profile"
"""The field naming a profile claim's law (``profile = "gaussian"``), not the divergence of that name."""


def _has(*names: str) -> dict:
    return {"anyOf": [{"required": [name]} for name in names]} if len(names) > 1 else {"required": list(names)}


CLAIMS = Section("claims", (
    Field("divergence", "string", REQUIRED, choices=_NAMES,
          meaning="restricted KL, restricted Rényi (CBDP eq. 3), IPM over functions with range [-1, 1], or the (ε, "
                  "δ)-DP log-ratio; or a curve claim (below)"),
    Field("alpha", "other", type_doc="number or array of numbers",
          default_doc="required for `renyi`, optional for `zcdp` (its orders), refused otherwise",
          schema_extra={"oneOf": [{"$ref": "#/$defs/alpha"},
                                  {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/alpha"}}]},
          meaning=f"Rényi orders, each in [{MIN_ALPHA}, {MAX_ALPHA:g}] (the estimate is a moment of order α/(α−1), "
                  "unstable as α → 1; α = 1 is KL); non-empty"),
    Field("function_class", "string", REQUIRED, type_doc="class name, or `\"all\"`",
          schema_extra={"pattern": _CLAIM_CLASS}, meaning="the class H the claim is about"),
    Field("epsilon", "number", REQUIRED, low=0.0, limits="a divergence bound must be >= 0",
          default_doc="required (not for a `profile` table or an `accountant` claim)",
          meaning="≥ 0: the claimed bound; μ of `gdp`, ρ of `zcdp`, a named profile's parameter (> 0)"),
    Field("delta", "number", 0.0, low=0.0, high=1.0, open_high=True, limits="must be in [0, 1)",
          meaning="`dp` only; in [0, 1)"),
    Field("on_average", "boolean", False, limits="must be true or false",
          meaning="an on-average claim (below); `kl` and `renyi` only; policy `every` only (`[attacks] policy = "
                  "\"best\"` is refused: it confirms the most distinguishable pair, a worst-case statistic)"),
    Field("distance", "integer", low=1, high=MAX_DISTANCE, limits=f"must be a whole number from 1 to {MAX_DISTANCE}",
          default_doc="`[neighbours] distance` when one integer, else 1",
          meaning=f"1 to {MAX_DISTANCE}: the claim bounds every pair at most this far apart (1: neighbours; a "
                  "user-level claim: the records one user owns); a pair farther apart is judged against the claim "
                  "carried to it by group privacy, refused where no rule carries it (\"Pairs at several distances\"). "
                  "Not for claims from the library (the map is read at each pair's `d_in`)"),
    Field("epsilons", "numbers", low=0.0, limits="must be in [0, inf)", type_doc="array of numbers ≥ 0",
          default_doc="see below", meaning="`gdp` and `profile` only: the ε grid of the members"),
    Field("deltas", "numbers", low=0.0, high=1.0, open_high=True, limits="must be in [0, 1)",
          type_doc="array of numbers in [0, 1)", default_doc="-", meaning="`profile` tables only: δ at each of `epsilons`"),
    Field("profile", "string", choices=tuple(PROFILES), default_doc="-",
          meaning="`profile` only: a named law's privacy profile, parameter `epsilon`"),
    Field("reason", "string", schema_extra={"maxLength": MAX_REASON},
          meaning="why the claimed value, in one sentence (e.g. the closed form it comes from); shown under "
                  f"report.md's Claims table; at most {MAX_REASON} characters"),
    Field("accountant", "string", choices=ACCOUNTANTS, default_doc="none",
          meaning="`dp` only, with `delta` > 0 and no `epsilon`: ε is what dp_accounting's RDP or PLD accountant "
                  "computes at `delta` for the training parameters below (accountant claims, below)"),
    Field("noise_multiplier", "number", low=0.0, open_low=True, limits="must be > 0",
          default_doc="from the mechanism",
          meaning="`accountant` claims only: noise standard deviation over the sensitivity"),
    Field("sampling_rate", "number", low=0.0, high=1.0, open_low=True, limits="must be in (0, 1]",
          default_doc="from the mechanism",
          meaning="`accountant` claims only: Poisson sampling rate q (1: full batch)"),
    Field("steps", "integer", low=1, limits="must be a whole number >= 1", default_doc="from the mechanism",
          meaning="`accountant` claims only: the number of steps T"),
    Field("accounted", "other", type_doc="table", default_doc="written by capaudit",
          schema_extra={"type": "object"},
          meaning="the training parameters an accountant claim used, written into results.json's `config`"),
    Field("from", "string", choices=SOURCES, default_doc="none",
          meaning="the claim is the mechanism's own privacy map at each pair's `d_in` (\"Claims from the library\" "
                  "below): no `epsilon` or `delta` (capaudit writes the map's values into results.json's `config`, "
                  "when the pairs are at one `d_in`, and reads them back only when they agree); takes `function_class` (default `\"all\"`), `alpha` "
                  "(zCDP maps), `epsilons` (smoothed maps and PLD profiles), `delta` (Opacus's accountant: ε at "
                  "that δ) and `reason`"),
), array=True, schema_extra={"required": [], "if": {"required": ["from"]}, "then": {"not": _has("on_average", "profile", "accountant", "distance")},
                             "else": {"required": ["divergence", "function_class"], "allOf": [
    {"if": {"properties": _ORDERED}, "then": {"required": ["alpha"]},
     "else": {"if": {"properties": {"divergence": {"const": ZCDP.name}}}, "else": {"not": {"required": ["alpha"]}}}},
    {"if": {"properties": {"divergence": {"const": DP.name}}}, "else": {"not": {"required": ["delta"]}}},
    {"if": {"properties": {"divergence": {"const": Profile.name}}},
     "then": {"oneOf": [{"required": [_LAW, "epsilon"], "not": {"required": ["deltas"]}},
                        {"required": ["epsilons", "deltas"], "not": _has("epsilon", _LAW)}]},
     "else": {**_has("epsilon", "accountant"), "not": _has("deltas", _LAW)}},
    {"if": {"required": ["accountant"]},
     "then": {"required": ["delta"], "properties": {"divergence": {"const": DP.name}}},
     "else": {"not": _has(*TRAINING_FIELDS, "accounted")}},
    {"if": {"properties": {"divergence": {"enum": [kind.name for kind in (KL, Renyi, IPM, DP, ZCDP)]}}},
     "then": {"not": {"required": ["epsilons"]}}},
    {"if": {"properties": {"divergence": {"enum": list(FAMILIES)}}}, "then": {"not": _has("delta", "on_average")}},
]}})
"""``[[claims]]``' fields (docs/config.md)."""
CURVE_FIELDS: dict[type[Curve], tuple[str, ...]] = {
    GDP: ("epsilon", "epsilons"),
    ZCDP: ("epsilon", "alpha"),
    Profile: ("epsilon", "epsilons", "deltas", _LAW),
}
"""Fields each curve claim takes besides divergence and function_class."""
_PARAMETER = {GDP: "mu, e.g. epsilon = 1.0", ZCDP: "rho, e.g. epsilon = 0.5",
              Profile: 'the law\'s parameter, e.g. profile = "gaussian" with epsilon = 1.0 (its mu)'}
"""What a curve claim's ``epsilon`` is, for messages."""
_SUGGESTED_CLASSES = ("linear", "poly2", "kernel", "mlp", "tree3", "threshold")
"""Classes a refutability error may suggest (besides the claim's own), one of each kind."""


@dataclass(frozen=True)
class Claim:
    """One ``[[claims]]`` entry: Gamma^H(M(D), M(D')) <= epsilon for H = ``function_class``.

    ``alpha`` is a tuple of Renyi orders for ``renyi`` and ``(None,)`` otherwise;
    ``delta`` is used by ``dp`` only.  ``on_average``: the claim bounds the
    mean over ``[neighbours] strategy = "on-average"`` pairs instead of every
    pair (:mod:`audit.results.on_average`; kl and renyi only).  A curve claim (``gdp``,
    ``zcdp``, ``profile``) is never a ``Claim``: :func:`claims_of` expands
    it into its members, dp and renyi claims (:mod:`audit.config.families`).
    ``class_type`` is H as its type (:class:`attacks.classes.FunctionClass`, parsed once when the claim is made):
    what an attack's class must be contained in to refute the claim.
    """

    divergence: str
    function_class: str
    epsilon: float
    alpha: tuple[float | None, ...] = (None,)
    delta: float = 0.0
    on_average: bool = False
    d_in: float | int | None = None
    """The input distance of the pairs the claim is judged on (a library's map at that ``d_in``, or a claim typed by
    hand carried there by group privacy: :mod:`audit.config.group_privacy`); None: every pair."""
    class_type: FunctionClass = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from attacks.classes import parse_function_class

        object.__setattr__(self, "class_type", parse_function_class(self.function_class))

    def holds_at(self, d_in: float | int | None) -> bool:
        """Whether the claim judges a pair at ``d_in``: a claim without one holds for every pair, a pair without one
        (its distance never read) meets every claim."""
        return self.d_in is None or d_in is None or self.d_in == d_in


def claims_of(table: dict, path: str) -> list[Claim]:
    """A ``[[claims]]`` entry's claims: itself, or a curve claim's members (:mod:`audit.config.families`)."""
    check_fields(table, CLAIMS.names, path)
    if "distance" in table:
        _value(table, "distance", path)
    divergence = choice(required(table, "divergence", path, f"one of {', '.join(_NAMES)}"), _NAMES,
                        f"{path}.divergence")
    if not issubclass(divergence_kind(divergence), Curve):
        for key in ("epsilons", "deltas", _LAW):
            if key in table:
                raise ConfigError(f'{path}.{key}: only divergence = "gdp" or "profile" takes {key}. '
                                  f"Found {table[key]!r}.")
        return [_claim(table, path)]
    family = Family.from_table(_curve_table(table, parse_curve(divergence), path))
    return [Claim(divergence=m.divergence, function_class=family.function_class, epsilon=m.epsilon,
                  alpha=(m.alpha,), delta=m.delta) for m in family.members()]


def _check_reason(table: Mapping[str, Any], path: str) -> None:
    """``reason``: one sentence of text (only the report reads it, off the raw config)."""
    reason = table.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ConfigError(f"{path}.reason: one sentence of text, at most {MAX_REASON} characters. "
                          f"Found {str(reason)[:80]!r}{'...' if len(str(reason)) > 80 else ''}.")


def _curve_table(table: dict, curve: Curve, path: str) -> dict:
    """A curve claim's fields checked: the table as given (gdp: mu, zcdp: rho and orders, profile: a law or a table)."""
    _check_reason(table, path)
    for key in table:
        if key not in ("divergence", "function_class", "reason", "distance") + CURVE_FIELDS[type(curve)]:
            takers = [kind.name for kind, fields in CURVE_FIELDS.items() if key in fields]
            hint = f"it applies to {' / '.join(takers)} claims" if takers else "curve claims have no delta or on_average"
            raise ConfigError(f"{path}.{key}: a {curve.name} claim takes no {key}; {hint}. Found {table[key]!r}.")
    class_name(required(table, "function_class", path, 'e.g. function_class = "all"'), f"{path}.function_class")
    words = _PARAMETER[type(curve)]
    table_form = isinstance(curve, Profile) and _LAW not in table
    if table_form:
        if "epsilon" in table or "deltas" not in table or "epsilons" not in table:
            raise ConfigError(
                f'{path}: a profile claim gives either profile = "gaussian" or "laplace" with epsilon (the law\'s '
                "parameter), or a table epsilons = [...] with deltas = [...] (no epsilon). "
                f"Found fields {', '.join(sorted(table))}."
            )
    else:
        found = float(number(required(table, "epsilon", path, words), f"{path}.epsilon"))
        if found <= 0:
            raise ConfigError(f"{path}.epsilon: must be > 0 ({words.split(',')[0]}). Found {found!r}.")
    if _LAW in table:
        choice(table[_LAW], tuple(PROFILES), f"{path}.profile")
        if "deltas" in table:
            raise ConfigError(f"{path}.deltas: a named profile computes its deltas; remove deltas or profile.")
    if "alpha" in table:
        orders = table["alpha"] if isinstance(table["alpha"], list) else [table["alpha"]]
        if not orders:
            raise ConfigError(f"{path}.alpha: the list is empty; give orders > 1, e.g. alpha = [1.5, 2, 4].")
        for i, order in enumerate(orders):
            renyi_order(order, f"{path}.alpha[{i}]")
    for key in ("epsilons", "deltas"):
        if key in table:
            _value(table, key, path)
    if table_form and len(table["epsilons"]) != len(table["deltas"]):
        raise ConfigError(f"{path}.deltas: one delta per epsilon; found {len(table['deltas'])} deltas for "
                          f"{len(table['epsilons'])} epsilons.")
    return table


def _claim(table: dict, path: str) -> Claim:
    divergence = table["divergence"]
    kind = divergence_kind(divergence)
    function_class = class_name(
        required(table, "function_class", path, "e.g. function_class = \"linear\" (or \"all\")"),
        f"{path}.function_class",
    )
    required(table, "epsilon", path, "the claimed value, e.g. epsilon = 0.5")
    epsilon = _value(table, "epsilon", path)
    alpha: tuple[float | None, ...] = (None,)
    if kind.has_order:
        values = required(table, "alpha", path, "Renyi claims need Renyi orders, e.g. alpha = [2, 4, 8]")
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{path}.alpha: the list is empty; give orders > 1, e.g. alpha = [2, 4].")
        alpha = tuple(renyi_order(order, f"{path}.alpha") for order in values)
    elif "alpha" in table:
        raise ConfigError(
            f'{path}.alpha: only Renyi claims take alpha; remove it or set divergence = "renyi". '
            f"Found {table['alpha']!r}."
        )
    delta = 0.0
    if "delta" in table:
        if kind is not DP:
            raise ConfigError(f"{path}.delta: only dp claims take delta. Found {table['delta']!r}.")
        delta = _value(table, "delta", path)
    _check_reason(table, path)
    on_average = _value(table, "on_average", path)
    if on_average and divergence not in ON_AVERAGE_DIVERGENCES:
        raise ConfigError(
            f"{path}.on_average: on-average claims bound an average KL or Renyi divergence (docs/theory.md "
            f'section 8); use divergence = "kl" or "renyi", or drop on_average. Found divergence {divergence!r}.'
        )
    return Claim(divergence=divergence, function_class=function_class, epsilon=epsilon, alpha=alpha, delta=delta,
                 on_average=on_average)


def _value(table: dict, name: str, path: str) -> Any:
    return value(table, CLAIMS[name], f"{path}.{name}")


def check_on_average(claims: Sequence[Claim], neighbours: Mapping[str, Any] | None) -> None:
    """On-average claims need iid pairs from ``[neighbours] strategy = "on-average"``, at least MIN_PAIRS of them."""
    for i, claim in enumerate(claims):
        if not claim.on_average:
            continue
        strategy = None if neighbours is None else neighbours["strategy"]
        if strategy != "on-average":
            raise ConfigError(
                f"claims[{i}].on_average: an on-average claim averages over pairs drawn from a data distribution; "
                f'add [neighbours] strategy = "on-average" with a distribution and size. Found '
                f"{'explicit or default pairs' if strategy is None else f'strategy {strategy!r}'}."
            )
        count = neighbours.get("count", DEFAULT_COUNT)
        if count < MIN_PAIRS:
            raise ConfigError(
                f"neighbours.count: an on-average claim needs at least {MIN_PAIRS} pairs for an interval over pairs "
                f"(10 or more recommended). Found {count!r}."
            )


def renyi_order(found: Any, path: str) -> float:
    """A Renyi order in [MIN_ALPHA, MAX_ALPHA] (see their docstrings for why)."""
    found = float(number(found, path))
    if found <= 1.0:
        raise ConfigError(
            f'{path}: Renyi orders must be > 1 (alpha = 1 is KL: use divergence = "kl"). Found {found!r}.'
        )
    if found < MIN_ALPHA:
        raise ConfigError(
            f"{path}: Renyi orders must be at least {MIN_ALPHA}: the estimate is a moment of order "
            f"alpha / (alpha - 1) = {found / (found - 1):.3g} of the witness, which a finite sample cannot "
            f"estimate stably (above {MIN_ALPHA / (MIN_ALPHA - 1):.3g}); use alpha >= {MIN_ALPHA}, "
            f'or divergence = "kl" for the alpha -> 1 limit. Found {found!r}.'
        )
    if found > MAX_ALPHA:
        raise ConfigError(
            f"{path}: Renyi orders must be at most {MAX_ALPHA:g}; for the alpha -> infinity limit claim "
            f'divergence = "dp". Found {found!r}.'
        )
    return found


def check_refutable(claim: Claim, attacks: AttackSpec, path: str) -> None:
    """Raise unless some attack class can refute ``claim`` (docs/theory.md section 3), and its delta is refutable.

    An attack of class A refutes a claim about class C with divergence D only
    when A is contained in C and A's witnesses estimate D
    (``FunctionClass.is_contained_in``, ``FunctionClass.divergences``);
    without one the claim would read "pass" on no evidence at all.
    """
    from attacks.classes import All, parse_function_class

    claimed = claim.class_type

    def tests(name: str) -> bool:
        attack = parse_function_class(name)
        return attack.is_contained_in(claimed) and claim.divergence in attack.divergences

    if not any(tests(name) for name in attacks.classes):
        candidates = [claimed.name] * (not isinstance(claimed, All)) + list(_SUGGESTED_CLASSES)
        would = [name for name in dict.fromkeys(candidates) if tests(name)]  # the claim's own class at least
        fix = f"add one of {', '.join(would)} to attacks.classes"
        raise ConfigError(
            f"{path}: the claim ({claim.divergence} over {claimed.name!r} <= {claim.epsilon:g}) can be refuted by no "
            f"attack in attacks.classes ({', '.join(attacks.classes)}): an attack refutes a claim only when its class "
            f"is contained in the claim's and estimates its divergence, so the audit would pass on no evidence; {fix}."
        )
    if divergence_kind(claim.divergence) is DP:
        held = attacks.held_out
        largest = (1.0 - attacks.confidence) ** (1.0 / held)
        if claim.delta >= largest:
            raise ConfigError(
                f"{path}.delta: {claim.delta!r} cannot be refuted by this audit: even a set holding all {held} "
                f"held-out outputs bounds P(S) from below by only {largest:.6g} at confidence {attacks.confidence}, "
                f"so P(S) - delta is never shown positive. Give delta < {largest:.6g} or raise attacks.n_samples."
            )
