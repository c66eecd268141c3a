"""CBDP's theorems as audits: the ``[[checks]]`` of a config (docs/theory.md section 5).

Each check measures, with :func:`attacks.estimate.estimate_divergence` on
held-out samples, both sides of one theorem of CBDP and compares them:

* ``sequential`` (Thm 4): M1 and M2 on the same pair, and the release
  (M1, M2) (outputs concatenated) attacked with the class on the
  concatenation, which for ``linear`` is the sum class H1 (+) H2:
  Gamma(M1, M2) <= eps1 + eps2.  ``adaptive = true`` lets M2 see M1's output
  (:func:`adaptive_sample`), which breaks the theorem's non-adaptive
  hypothesis.
* ``parallel`` (Thm 3): M1 on D1, M2 on D2 (disjoint data): a record changes
  in one block only, so each of the two composed pairs is <= max(eps1, eps2).
* ``post-processing`` (Thm 1): g(M) for a linear map g (a matrix) stays below
  M's eps when i o g is in H for every i in the class (linear, polyK and mlp
  are closed under composition with a linear map).  A nonlinear g
  (``map = "square"``) breaks that hypothesis: the blog's caveat that
  post-processing adds to the adversary's power.
* ``convexity`` (Thm 2): the mixture lambda M1 + (1 - lambda) M2 (an
  independent coin per output) stays below max(eps1, eps2); f-divergences
  only (kl, and ipm, whose objective is linear in the pair of laws).
* ``pinsker`` (Thm 7): IPM^H <= 8 sqrt(KL^H) for H convex, translation
  invariant, closed under negation, range [-1, 1]: capaudit's ``linear``,
  ``polyK`` and ``kernel`` IPM witnesses are +-1 on {g > t}, g in the class,
  limits of clipped members of the class (CBDP Def. 4).  Other classes
  (``threshold``, trees, ``mlp``: not convex) break the hypothesis.
* ``generalization`` (Thm 6): the expected generalization gap of a released
  query is <= 8 sqrt(eps) (:func:`generalization_gaps` states the setting).

The parts' eps ("upper") is the exact restricted divergence of the pair
when the mechanism knows its 1-D output laws (:func:`audit.theory.exact.restricted_divergence`),
else the estimate's upper confidence bound.  A check reads:

* ``"contradicted"``: the composed release's lower confidence bound exceeds
  the theorem's bound (the evidence is in the row);
* ``"holds"``: it does not;
* ``"hypothesis broken"``: the constructed case violates a hypothesis of the
  theorem, whatever was measured (the note says whether the conclusion
  failed too); never a contradiction of the theorem;
* ``"inconclusive"``: a measurement is NaN or carries a caveat (its interval
  cannot be trusted), or the bound cannot be computed;
* ``"error"``: the check could not run (its message in ``error``).

Error control: the audit's error rate 1 - confidence is split evenly over
the checks and, within a check, over its confidence bounds (Bonferroni), so
a true theorem reads "contradicted" in at most 1 - confidence of audits
where the parts' bounds are exact or valid upper bounds.  Samples come from
seeds derived from the audit seed (:func:`audit.plan.task_seed`,
``"checks[i]|<role>"``), so the same config and seed give the same numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from audit.config import MAPS, AuditConfig, CheckSpec
from audit.plan import task_seed
from audit.sampling import one_line
from audit.theory.composition import THEOREMS, theorem_bound
from audit.theory.exact import exact_value, known_laws

CHECK_VERDICTS = ("holds", "contradicted", "hypothesis broken", "inconclusive", "error")
PINSKER_CLASSES = ("poly", "kernel")
"""Class kinds whose IPM witnesses meet Thm 7's hypotheses (module docstring)."""
POST_PROCESSING_CLASSES = ("poly", "mlp")
"""Class kinds closed under composition with a linear map (i o g in H, Thm 1)."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measured side of a theorem: an estimate with one-sided bounds at the check's level.

    ``exact``: the pair's exact restricted divergence when known, which is
    then the part's eps (:meth:`upper`).
    """

    role: str
    estimate: float
    low: float
    high: float
    exact: float | None = None
    caveat: str | None = None

    def upper(self) -> float:
        """The part's eps: its exact value when known, else the upper confidence bound."""
        return self.high if self.exact is None else self.exact


# --------------------------------------------------------------------------- pure computation


def check_verdict(measured_low: float, bound: float, broken: str | None, trusted: bool) -> str:
    """A check's verdict from its composed lower bound, the theorem's bound and its hypotheses.

    A broken hypothesis is flagged whatever was measured; an untrusted or
    NaN measurement or bound is inconclusive (NaN is never "holds");
    otherwise "contradicted" exactly when the lower bound exceeds the bound.
    """
    if broken:
        return "hypothesis broken"
    if not trusted or math.isnan(measured_low) or math.isnan(bound):
        return "inconclusive"
    return "contradicted" if measured_low > bound else "holds"


def check_level(confidence: float, n_checks: int, n_bounds: int) -> float:
    """One-sided level of each bound: 1 - (1 - confidence) / (n_checks n_bounds) (Bonferroni)."""
    return 1.0 - (1.0 - confidence) / (max(n_checks, 1) * max(n_bounds, 1))


def apply_map(outputs: np.ndarray, mapping: str | Sequence[Sequence[float]]) -> np.ndarray:
    """g(y): a matrix A gives y -> A y (rows of ``outputs`` are outputs); ``"square"`` y -> y**2 elementwise,
    ``"append-square"`` y -> (y, y**2)."""
    if isinstance(mapping, str):
        if mapping not in MAPS:
            raise ValueError(f"map must be a matrix or one of {MAPS}. Found {mapping!r}.")
        return outputs**2 if mapping == "square" else np.hstack([outputs, outputs**2])
    matrix = np.asarray(mapping, dtype=float)
    if matrix.shape[1] != outputs.shape[1]:
        raise ValueError(
            f"map has {matrix.shape[1]} column(s) but the mechanism's outputs have {outputs.shape[1]} coordinate(s); "
            f"give a matrix with {outputs.shape[1]} column(s)."
        )
    return outputs @ matrix.T


def mixture(first: np.ndarray, second: np.ndarray, weight: float, rng: np.random.Generator) -> np.ndarray:
    """Row i from ``first`` with probability ``weight``, else from ``second`` (an independent coin per row; Thm 2)."""
    if first.shape != second.shape:
        raise ValueError(
            f"convexity mixes mechanisms with the same range; their outputs have shapes {first.shape} and "
            f"{second.shape}: choose mechanisms with the same output dimension."
        )
    return np.where(rng.random(len(first))[:, None] < weight, first, second)


def adaptive_sample(first_outputs: np.ndarray, on_data: np.ndarray, on_reference: np.ndarray) -> np.ndarray:
    """An adaptive second release: M2 queries the data when M1's first coordinate is >= 0, else a fixed reference.

    ``on_data`` and ``on_reference`` are M2's outputs on the dataset and on
    the all-zeros dataset of its shape; the choice depends on M1's output,
    which Thm 4 (non-adaptive) excludes.
    """
    return np.where(first_outputs[:, :1] >= 0, on_data, on_reference)


def generalization_gaps(thresholds: np.ndarray, sample_means: np.ndarray, fresh_means: np.ndarray) -> np.ndarray:
    """Per trial, (1/m) sum_i q_t(x_i) - (1/m) sum_j q_t(x'_j) for the query q_t(x) = (1 + t x) / 2 (CBDP Thm 6).

    Setting: records x in {-1, +1} (fair coin), S and a fresh sample S' of m
    records each; the mechanism releases y = M(S) and the query uses
    t = clip(y / m, -1, 1), so q_t maps X to [0, 1].  The gap of a trial is
    t (mean(S) - mean(S')) / 2; its average estimates the expected
    generalization gap E[(1/m) sum q(x_i)] - E_x q(x).
    """
    return thresholds * (sample_means - fresh_means) / 2.0


# --------------------------------------------------------------------------- driver


def run_checks(config: AuditConfig) -> list[dict[str, Any]]:
    """Run the config's ``[[checks]]`` in order; one row (dict, results.json's ``checks``) each.

    A check that fails (a mechanism error, a bad map) gives a row with
    verdict ``"error"`` and its message; the others still run.
    """
    rows = []
    for index, spec in enumerate(config.checks):
        try:
            rows.append(_run_check(spec, index, config))
        except Exception as error:  # a crash is never a verdict: the row says what failed
            rows.append(_row(spec, index, verdict="error", error=f"checks[{index}] ({spec.property}): {one_line(error)}"))
    return rows


def checks_verdict(rows: Sequence[dict[str, Any]]) -> str | None:
    """The checks' verdict: "violation" if any contradicted, "inconclusive" if any inconclusive or failed, else "pass".

    None when there are no checks.  "hypothesis broken" reads as pass: a
    flagged construction is not evidence against anything.
    """
    if not rows:
        return None
    verdicts = {row["verdict"] for row in rows}
    if "contradicted" in verdicts:
        return "violation"
    return "inconclusive" if verdicts & {"inconclusive", "error"} else "pass"


def combine(claims_verdict: str | None, claims_exit: int | None, rows: Sequence[dict[str, Any]]) -> tuple[str, int]:
    """The audit's verdict and exit code from the claims' (None: no claims) and the checks'.

    Verdict: "error" whenever the exit code is 2 (a task or a check failed,
    a claim went untested: no verdict about the claims), else "violation" if
    either reads violation, else "inconclusive" if either does, else "pass".
    Exit code: 2 when a check failed, else the claims' code raised to 1 when
    a check is contradicted (docs/design.md).
    """
    verdicts = {v for v in (claims_verdict, checks_verdict(rows)) if v is not None}
    verdict = next((v for v in ("violation", "inconclusive") if v in verdicts), "pass")
    code = claims_exit or 0
    if code == 2 or any(row["verdict"] == "error" for row in rows):
        return "error", 2
    if any(row["verdict"] == "contradicted" for row in rows) and code == 0:
        code = 1
    return verdict, code


def _run_check(spec: CheckSpec, index: int, config: AuditConfig) -> dict[str, Any]:
    runner = _RUNNERS[spec.property]
    return runner(_Context(spec, index, config))


@dataclasses.dataclass
class _Context:
    """What a property's runner needs: the spec, its index (seeds), the config (seed, confidence, split)."""

    spec: CheckSpec
    index: int
    config: AuditConfig

    def level(self, n_bounds: int) -> float:
        return check_level(self.config.attacks.confidence, len(self.config.checks), n_bounds)

    def rng(self, role: str) -> np.random.Generator:
        return np.random.default_rng(task_seed(self.config.run.seed, f"checks[{self.index}]|{role}"))

    def sample(self, mechanism: Any, dataset: np.ndarray, role: str, n: int | None = None) -> np.ndarray:
        from audit.mechanisms import check_output

        n = self.spec.n_samples if n is None else n
        return check_output(mechanism.sample(dataset, n, self.rng(role)), n)

    def measure(self, p: np.ndarray, q: np.ndarray, role: str, level: float, *, divergence: str | None = None,
                laws: Any = None) -> Measurement:
        """Estimate Gamma^H(P, Q) on held-out samples; bounds at ``level``; the exact value when ``laws`` are known."""
        from attacks.estimate import estimate_divergence

        spec = self.spec
        divergence = divergence or spec.divergence
        estimate = estimate_divergence(
            p, q, spec.function_class, divergence, alpha=spec.alpha,
            train_fraction=self.config.attacks.train_fraction,
            random_state=int(task_seed(self.config.run.seed, f"checks[{self.index}]|{role}|attack").generate_state(1)[0]),
            class_params=self.config.attacks.class_params.get(spec.function_class),
        )
        return Measurement(
            role=role, estimate=float(estimate.estimate), low=float(estimate.lower_bound(level)),
            high=float(estimate.confidence_interval(2 * level - 1)[1]),
            exact=exact_value(laws, spec.function_class, divergence, spec.alpha), caveat=estimate.caveat,
        )


def _pair(spec: CheckSpec, mechanism: Any) -> tuple[np.ndarray, np.ndarray]:
    if spec.pair is not None:
        return spec.pair
    try:
        return tuple(mechanism.default_pairs()[0])
    except (AttributeError, IndexError):
        raise ValueError(
            f"mechanism {mechanism.name!r} has no default neighbouring pair; give d and d_prime in the check."
        ) from None


def _two_parts(ctx: _Context, first: Any, second: Any, pair: tuple, level: float) -> tuple:
    """Outputs of M1 and M2 on the same pair (d, d') and the parts' measurements (exact when the laws are known)."""
    d, d_prime = pair
    p1, q1 = ctx.sample(first, d, "M1|d"), ctx.sample(first, d_prime, "M1|d_prime")
    p2, q2 = ctx.sample(second, d, "M2|d"), ctx.sample(second, d_prime, "M2|d_prime")
    parts = [ctx.measure(p1, q1, "M1", level, laws=known_laws(first, *pair)),
             ctx.measure(p2, q2, "M2", level, laws=known_laws(second, *pair))]
    return (p1, q1), (p2, q2), parts


def _sequential(ctx: _Context) -> dict[str, Any]:
    spec = ctx.spec
    first, second = (m.build() for m in spec.mechanisms)
    d, d_prime = _pair(spec, first)
    level = ctx.level(3)
    (p1, q1), (p2, q2), parts = _two_parts(ctx, first, second, (d, d_prime), level)
    broken = _sum_class_broken(spec)
    if spec.adaptive:
        reference = np.zeros_like(np.asarray(d, dtype=float))
        p2 = adaptive_sample(p1, p2, ctx.sample(second, reference, "M2|reference|d"))
        q2 = adaptive_sample(q1, q2, ctx.sample(second, reference, "M2|reference|d_prime"))
        broken = "adaptive: M2 sees M1's output (it queries the data only when M1's first coordinate is >= 0); " \
                 "Thm 4 is non-adaptive" + (f"; {broken}" if broken else "")
    composed = ctx.measure(np.hstack([p1, p2]), np.hstack([q1, q2]), "(M1, M2)", level)
    return _finish(ctx, level, parts, [composed], theorem_bound("sequential", [m.upper() for m in parts]), broken)


def _parallel(ctx: _Context) -> dict[str, Any]:
    spec = ctx.spec
    first, second = (m.build() for m in spec.mechanisms)
    pair1, pair2 = _pair(spec, first), _pair(spec, second)
    level = ctx.level(4)
    # r: a second, independent draw on d, for the block that does not change
    p1, q1, r1 = (ctx.sample(first, pair1[i], f"M1|{name}") for i, name in ((0, "d"), (1, "d_prime"), (0, "d|again")))
    p2, q2, r2 = (ctx.sample(second, pair2[i], f"M2|{name}") for i, name in ((0, "d"), (1, "d_prime"), (0, "d|again")))
    parts = [ctx.measure(p1, q1, "M1", level, laws=known_laws(first, *pair1)),
             ctx.measure(p2, q2, "M2", level, laws=known_laws(second, *pair2))]
    # A record changes in D1 or in D2, never both: two composed pairs, each held to max(eps1, eps2).
    composed = [ctx.measure(np.hstack([p1, p2]), np.hstack([q1, r2]), "(M1, M2): change in D1", level),
                ctx.measure(np.hstack([p1, p2]), np.hstack([r1, q2]), "(M1, M2): change in D2", level)]
    return _finish(ctx, level, parts, composed, theorem_bound("parallel", [m.upper() for m in parts]),
                   _sum_class_broken(spec))


def _post_processing(ctx: _Context) -> dict[str, Any]:
    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    d, d_prime = _pair(spec, mechanism)
    level = ctx.level(2)
    p, q = ctx.sample(mechanism, d, "M|d"), ctx.sample(mechanism, d_prime, "M|d_prime")
    parts = [ctx.measure(p, q, "M", level, laws=known_laws(mechanism, d, d_prime))]
    composed = ctx.measure(apply_map(p, spec.map), apply_map(q, spec.map), "g(M)", level)
    broken = None
    if isinstance(spec.map, str):
        broken = (f"map {spec.map!r} is nonlinear: i o g is not in {spec.function_class!r} "
                  "(post-processing widens the adversary's class, CBDP blog)")
    elif _kind(spec.function_class) not in POST_PROCESSING_CLASSES:
        broken = f"class {spec.function_class!r} is not closed under linear maps of its input: i o g is not in it"
    return _finish(ctx, level, parts, [composed], theorem_bound("post-processing", [parts[0].upper()]), broken)


def _convexity(ctx: _Context) -> dict[str, Any]:
    spec = ctx.spec
    first, second = (m.build() for m in spec.mechanisms)
    d, d_prime = _pair(spec, first)
    level = ctx.level(3)
    (p1, q1), (p2, q2), parts = _two_parts(ctx, first, second, (d, d_prime), level)
    mixed = ctx.measure(mixture(p1, p2, spec.weight, ctx.rng("coin|d")),
                        mixture(q1, q2, spec.weight, ctx.rng("coin|d_prime")), f"mixture (lambda = {spec.weight:g})", level)
    return _finish(ctx, level, parts, [mixed], theorem_bound("convexity", [m.upper() for m in parts]), None)


def _pinsker(ctx: _Context) -> dict[str, Any]:
    from attacks.classes import parse_function_class

    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    pair = _pair(spec, mechanism)
    level = ctx.level(2)
    p, q = ctx.sample(mechanism, pair[0], "M|d"), ctx.sample(mechanism, pair[1], "M|d_prime")
    parts = []
    if "kl" in parse_function_class(spec.function_class).divergences:
        parts.append(ctx.measure(p, q, "KL^H", level, divergence="kl", laws=known_laws(mechanism, *pair)))
    ipm = ctx.measure(p, q, "IPM^H", level, divergence="ipm")
    broken = None
    if _kind(spec.function_class) not in PINSKER_CLASSES:
        broken = (f"class {spec.function_class!r} is not convex and translation invariant (Thm 7's hypotheses); "
                  "a bare threshold class can have KL^H = 0 with IPM^H > 0")
    bound = theorem_bound("pinsker", [parts[0].upper()]) if parts else math.nan
    return _finish(ctx, level, parts, [ipm], bound, broken)


def _generalization(ctx: _Context) -> dict[str, Any]:
    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    m, trials = spec.n_records, spec.n_samples
    level = ctx.level(2)
    worst = (-np.ones((m, 1)), np.vstack([[1.0], -np.ones((m - 1, 1))]))  # one record from -1 to +1
    p, q = ctx.sample(mechanism, worst[0], "M|d"), ctx.sample(mechanism, worst[1], "M|d_prime")
    # eps: the unrestricted KL of the worst pair bounds KL^H for every H, so H contains the queries' evaluations.
    epsilon = exact_value(known_laws(mechanism, *worst), "all", "kl")
    part = dataclasses.replace(ctx.measure(p, q, "M on the worst pair (exact: KL over all functions)", level), exact=epsilon)
    rng = ctx.rng("data")
    records = np.where(rng.random((trials, 2, m)) < 0.5, -1.0, 1.0)
    releases = np.array([ctx.sample(mechanism, records[i, 0][:, None], f"release|{i}", 1)[0, 0] for i in range(trials)])
    gaps = generalization_gaps(np.clip(releases / m, -1.0, 1.0), records[:, 0].mean(axis=1), records[:, 1].mean(axis=1))
    gap = _mean_bounds(gaps, level, "generalization gap")
    row = _finish(ctx, level, [part], [gap], theorem_bound("generalization", [math.nan if epsilon is None else epsilon]),
                  None, two_sided=True)
    if epsilon is None:
        row["note"] = "the mechanism's output laws are unknown: no exact eps (unrestricted KL) for the bound"
    return row


def _mean_bounds(values: np.ndarray, level: float, role: str) -> Measurement:
    """The mean of i.i.d. values with normal-approximation bounds at ``level`` (one-sided each)."""
    from scipy.stats import norm

    mean = float(np.mean(values))
    step = float(norm.ppf(level) * np.std(values, ddof=1) / math.sqrt(len(values)))
    return Measurement(role=role, estimate=mean, low=mean - step, high=mean + step)


def _kind(function_class: str) -> str:
    """The class's kind (``poly`` for linear and polyK, ``kernel``, ``mlp``, ``tree``, ...)."""
    from attacks.classes import parse_function_class

    return parse_function_class(function_class).kind


def _sum_class_broken(spec: CheckSpec) -> str | None:
    """Why the class on the concatenation is not H1 (+) H2 (Thms 3, 4), None for linear, where it is."""
    from attacks.classes import parse_function_class

    if parse_function_class(spec.function_class).name == "linear":
        return None
    return (f"class {spec.function_class!r} on the concatenated output is not the sum class H1 (+) H2 "
            "of the theorem (only linear is)")


def _finish(ctx: _Context, level: float, parts: list[Measurement], composed: list[Measurement], bound: float,
            broken: str | None, two_sided: bool = False) -> dict[str, Any]:
    """The check's row: the decisive composed measurement (largest lower bound) against the bound."""
    lows = [max(m.low, -m.high) if two_sided else m.low for m in composed]
    decisive = composed[int(np.nanargmax(lows))] if not all(math.isnan(x) for x in lows) else composed[0]
    measured_low = max(lows) if not any(math.isnan(x) for x in lows) else math.nan
    # A part whose exact value is its epsilon does not need its interval; every other bound must be trusted.
    used = [m for m in parts if m.exact is None] + composed
    verdict = check_verdict(measured_low, bound, broken, all(m.caveat is None for m in used))
    notes = [f"{m.role}: {m.caveat}" for m in used if m.caveat]
    if broken:
        if math.isnan(measured_low) or math.isnan(bound):
            outcome = "cannot be compared with the bound (none computed)"
        elif measured_low > bound:
            outcome = "exceeds the bound: the conclusion fails without the hypothesis"
        else:
            outcome = "stays within the bound"
        notes.insert(0, f"hypothesis broken: {broken}; the measurement {outcome}")
    return _row(ctx.spec, ctx.index, verdict=verdict, bound=bound, measured=decisive.estimate,
                measured_low=measured_low, level=level, measurements=[*parts, *composed], note="; ".join(notes))


def _row(spec: CheckSpec, index: int, *, verdict: str, bound: float = math.nan, measured: float = math.nan,
         measured_low: float = math.nan, level: float = math.nan, measurements: Sequence[Measurement] = (),
         note: str = "", error: str | None = None) -> dict[str, Any]:
    """A results.json ``checks`` entry (docs/results.md)."""
    return {
        "check": f"checks[{index}]",
        "property": spec.property,
        "theorem": THEOREMS[spec.property],
        "mechanisms": [_label(m) for m in spec.mechanisms],
        "function_class": spec.function_class,
        "divergence": "ipm" if spec.property == "pinsker" else spec.divergence,
        "alpha": spec.alpha,
        "n_samples": spec.n_samples,
        "bound": bound,
        "measured": measured,
        "measured_low": measured_low,
        "level": level,
        "measurements": [dataclasses.asdict(m) for m in measurements],
        "verdict": verdict,
        "note": note,
        "error": error,
    }


def _label(spec: Any) -> str:
    params = ", ".join(f"{key}={value}" for key, value in spec.params.items())
    return f"{spec.name or spec.callable}({params})"


_RUNNERS: dict[str, Callable[[_Context], dict[str, Any]]] = {
    "sequential": _sequential,
    "parallel": _parallel,
    "post-processing": _post_processing,
    "convexity": _convexity,
    "pinsker": _pinsker,
    "generalization": _generalization,
}
