"""CBDP's theorems as audits: the ``[[checks]]`` of a config (docs/theory.md section 5).

Each check is an audit of a composed mechanism: the combinators of
:mod:`audit.mechanisms.compose` build the release the theorem is about
(sequential, parallel, mixture, post-processing), and the parts and the
composed mechanism are sampled as every audit samples, through
:func:`audit.sampling.sampler.draw_pair_isolated` (forked children within
``[run] sample_timeout`` seconds a chunk, on ``[run] n_jobs`` workers), and
measured with :func:`attacks.estimate.estimate_divergence` on held-out
samples; the measurement is compared with the theorem's right-hand side
(:mod:`audit.theory.composition`):

* ``sequential`` (Thm 4): M1 and M2 on the same pair, and the release
  (M1, M2) (outputs concatenated) attacked with the class on the
  concatenation, which for ``linear`` is the sum class H1 (+) H2:
  Gamma(M1, M2) <= eps1 + eps2.  ``adaptive = true`` lets M2 see M1's output
  (:class:`audit.mechanisms.compose.Sequential`), which breaks the theorem's non-adaptive
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
* ``on-average-post-processing`` and ``on-average-composition`` (OAKL
  Lemmas 5 and 7): the same releases, each side measured on average over
  iid pairs from a data distribution (:mod:`audit.engine.on_average_checks`).

The parts' eps ("upper") is the exact restricted divergence of the pair
when the mechanism knows its 1-D output laws (:func:`audit.theory.exact.restricted_divergence`)
or, on its default pair, when the bound table has the exact value
(:func:`audit.theory.table.exact_closed_form`, e.g. (lin, KL) of a d-dim
Gaussian), else the estimate's upper confidence bound.  A check reads:

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
seeds derived from the audit seed (:func:`audit.sampling.chunks.chunk_seed` of the
pair ``"checks[i]|<role>"``), so the same config and seed give the same
numbers for any ``n_jobs``.  A mechanism that raises or hangs makes its
check an ``"error"`` row (exit 2), within about ``sample_timeout``.

Each check is one unit of the audit's engine (:func:`audit.engine.run.run_engine`:
its progress bar, its backend, its ``tasks.jsonl``), after the claims' units:
its row, an :class:`audit.results.schema.Row` (the theorem's bound as the claim, the
decisive composed measurement as the estimate, the check's own fields in its
``check`` column group), is appended to tasks.jsonl when the check finishes,
so ``--resume`` keeps finished checks and runs the others.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import joblib
import numpy as np

from attacks.classes import parse_function_class
from attacks.evidence import Evidence, NormalEstimate
from audit.config.load import AuditConfig, CheckSpec
from audit.sampling.errors import one_line
from audit.mechanisms.compose import Mixture, Parallel, PostProcessed, Sequential
from audit.inputs.neighbours import NeighbourPair
from audit.engine.on_average_checks import on_average_composition, on_average_post_processing
from audit.engine.plan import task_seed
from audit.sampling.sampler import draw_pair_isolated
from audit.results.on_average import average_over_pairs
from audit.results.schema import Row
from audit.theory.composition import THEOREMS, post_processing_hypothesis, sum_class_hypothesis, theorem_bound
from audit.theory.exact import exact_value, known_laws
from audit.theory.table import exact_closed_form

CHECK_VERDICTS = ("holds", "contradicted", "hypothesis broken", "inconclusive", "error")


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measured side of a theorem: an estimate and the check's one-sided level.

    Evidence (:class:`attacks.evidence.Evidence`): ``estimate``,
    ``standard_error``, ``caveat``, the bounds and the p-value are those of
    ``evidence``, the estimate measured.  ``exact``: the pair's exact
    restricted divergence when known, which is then the part's eps
    (:meth:`upper`).
    """

    role: str
    evidence: Evidence = dataclasses.field(repr=False)
    level: float
    exact: float | None = None

    @property
    def estimate(self) -> float:
        return float(self.evidence.estimate)

    @property
    def standard_error(self) -> float:
        return float(self.evidence.standard_error)

    @property
    def caveat(self) -> str | None:
        return self.evidence.caveat

    def lower_bound(self, level: float = 0.95) -> float:
        return float(self.evidence.lower_bound(level))

    def confidence_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        low, high = self.evidence.confidence_interval(confidence)
        return float(low), float(high)

    def p_value(self, claim: float) -> float:
        return float(self.evidence.p_value(claim))

    def bounds(self) -> tuple[float, float]:
        """The one-sided lower and upper bounds at the check's level (the interval at ``2 level - 1``)."""
        return self.lower_bound(self.level), self.confidence_interval(2 * self.level - 1)[1]

    def upper(self) -> float:
        """The part's eps: its exact value when known, else the upper confidence bound."""
        return self.bounds()[1] if self.exact is None else self.exact

    def ceiling(self, level: float = 0.95) -> float:
        """The measured evidence's ceiling (:meth:`attacks.evidence.Evidence.ceiling`)."""
        return float(self.evidence.ceiling(level))

    def to_record(self) -> dict[str, Any]:
        """results.json's ``checks[].measurements`` entry: role, estimate, the :meth:`bounds` (``low``, ``high``),
        exact value and caveat."""
        low, high = self.bounds()
        return dict(role=self.role, estimate=self.estimate, low=low, high=high, exact=self.exact, caveat=self.caveat)


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


def check_name(index: int) -> str:
    """The name of the config's ``index``-th check, ``checks[i]``: its row's ``task`` and ``pair``, its unit's id."""
    return f"checks[{index}]"


def run_check(config: AuditConfig, index: int, on_outputs: Callable[[int], Any] = lambda n: None) -> Row:
    """Run the config's ``index``-th check: one unit of :func:`audit.engine.run.run_engine`, its :class:`Row`.

    ``on_outputs(n)``: n more outputs per dataset were drawn (the engine's
    progress bar).  A check that fails (a mechanism error, a bad map) gives a
    row with verdict ``"error"`` and its message.  The caller sets the
    backend (:func:`audit.sampling.parallel.backend`: dask and ray sample the parts on
    the cluster's workers).
    """
    spec = config.checks[index]
    try:
        return _RUNNERS[spec.property](_Context(spec, index, config, on_outputs))
    except Exception as error:  # a crash is never a verdict: the row says what failed
        message = str(error) if isinstance(error, SamplingFailed) else one_line(error)
        return _row(spec, index, verdict="error", error=f"{check_name(index)} ({spec.property}): {message}")


def checks_verdict(rows: Sequence[Row]) -> str | None:
    """The checks' verdict: "violation" if any contradicted, "inconclusive" if any inconclusive or failed, else "pass".

    None when there are no checks.  "hypothesis broken" reads as pass: a
    flagged construction is not evidence against anything.
    """
    if not rows:
        return None
    verdicts = {row.verdict for row in rows}
    if "contradicted" in verdicts:
        return "violation"
    return "inconclusive" if verdicts & {"inconclusive", "error"} else "pass"


def combine(claims_verdict: str | None, claims_exit: int | None, rows: Sequence[Row]) -> tuple[str, int]:
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
    if code == 2 or any(row.verdict == "error" for row in rows):
        return "error", 2
    if any(row.verdict == "contradicted" for row in rows) and code == 0:
        code = 1
    return verdict, code


class SamplingFailed(RuntimeError):
    """A part or the composed mechanism could not be sampled; the message says why (the sampler's, as in audits)."""


@dataclasses.dataclass
class _Context:
    """What a property's runner needs: the spec, its index (seeds), the config (seed, confidence, split, run) and
    the engine's progress callback."""

    spec: CheckSpec
    index: int
    config: AuditConfig
    on_outputs: Callable[[int], Any]

    def level(self, n_bounds: int) -> float:
        return check_level(self.config.attacks.confidence, len(self.config.checks), n_bounds)

    def draw(self, mechanism: Any, pair: Sequence[np.ndarray], role: str, n: int | None = None) -> tuple:
        """n outputs on d and on d' through the audit's sampler (:func:`audit.sampling.sampler.draw_pair_isolated`).

        Forked children (or, with ``run.backend`` dask or ray, jobs of the
        cluster's workers) within ``run.sample_timeout`` seconds a chunk, on
        ``run.n_jobs`` workers, seeded by the pair name ``checks[i]|<role>``:
        a mechanism that raises, exits or hangs fails the check, not the audit.
        """
        run = self.config.run
        named = NeighbourPair(f"checks[{self.index}]|{role}", np.asarray(pair[0]), np.asarray(pair[1]))
        drawn = draw_pair_isolated(mechanism, named, self.spec.n_samples if n is None else n, run.seed, False,
                                   workers=max(joblib.effective_n_jobs(run.n_jobs), 1), timeout=run.sample_timeout,
                                   backend=run.backend)
        if isinstance(drawn, str):
            raise SamplingFailed(drawn)
        self.on_outputs(len(drawn.d))
        return drawn.d, drawn.d_prime

    def measure(self, p: np.ndarray, q: np.ndarray, role: str, level: float, *, divergence: str | None = None,
                exact: float | None = None) -> Measurement:
        """Estimate Gamma^H(P, Q) on held-out samples; bounds at ``level``; ``exact`` the pair's exact value if known."""
        from attacks.estimate import estimate_divergence

        spec = self.spec
        estimate = estimate_divergence(
            p, q, spec.function_class, divergence or spec.divergence, alpha=spec.alpha,
            train_fraction=self.config.attacks.train_fraction,
            random_state=int(task_seed(self.config.run.seed, f"checks[{self.index}]|{role}|attack").generate_state(1)[0]),
            class_params=self.config.attacks.class_params.get(spec.function_class),
        )
        return Measurement(role, estimate, level, exact)

    def exact(self, mechanism: Any, pair: Sequence[np.ndarray], divergence: str | None = None) -> float | None:
        """The pair's exact (class, divergence): from the 1-D output laws (:mod:`audit.theory.exact`), else on the
        mechanism's own default pair the bound table's closed form (:func:`audit.theory.table.exact_closed_form`)."""
        spec = self.spec
        divergence = divergence or spec.divergence
        value = exact_value(known_laws(mechanism, *pair), spec.function_class, divergence, spec.alpha)
        if value is None and _is_default_pair(mechanism, pair):
            try:
                value = exact_closed_form(getattr(mechanism, "theory_law", None), spec.function_class, divergence,
                                          spec.alpha)
            except (ArithmeticError, ValueError):
                value = None
        return value

    def averaged(self, mechanism: Any, pairs: Sequence[Sequence[np.ndarray]], role: str, level: float,
                 exact: float | None = None) -> Measurement:
        """The mean over ``pairs`` of the mechanism's per-pair held-out estimates, with the Student-t interval over
        pairs of :func:`audit.results.on_average.average_over_pairs` (an on-average claim's statistic): the
        on-average side of OAKL Lemmas 5 and 7.  Pair k is drawn and attacked under the role ``<role>|p<k>``."""
        estimates = [self.measure(*self.draw(mechanism, pair, f"{role}|p{k}"), f"{role}|p{k}", level)
                     for k, pair in enumerate(pairs)]
        untrusted = sum(m.caveat is not None for m in estimates)
        caveat = f"{untrusted} of {len(estimates)} pairs' estimates are not trusted" if untrusted else None
        return Measurement(role, average_over_pairs([m.estimate for m in estimates], caveat=caveat), level, exact)

    def part(self, mechanism: Any, pair: Sequence[np.ndarray], role: str, level: float) -> Measurement:
        """A part of the theorem: its outputs on the pair measured, with its exact value where known."""
        return self.measure(*self.draw(mechanism, pair, role), role, level, exact=self.exact(mechanism, pair))

    def composed(self, mechanism: Any, pair: Sequence[np.ndarray], role: str, level: float) -> Measurement:
        """The composed release measured on the pair: the theorem's left-hand side, always from samples."""
        return self.measure(*self.draw(mechanism, pair, role), role, level)


def _pair(spec: CheckSpec, mechanism: Any) -> tuple[np.ndarray, np.ndarray]:
    if spec.pair is not None:
        return spec.pair
    try:
        return tuple(mechanism.default_pairs()[0])
    except (AttributeError, IndexError):
        raise ValueError(
            f"mechanism {mechanism.name!r} has no default neighbouring pair; give d and d_prime in the check."
        ) from None


def _is_default_pair(mechanism: Any, pair: Sequence[np.ndarray]) -> bool:
    """Whether ``pair`` is the mechanism's first default pair, the pair its ``theory_law`` describes."""
    try:
        default = mechanism.default_pairs()[0]
    except (AttributeError, IndexError):
        return False
    return all(np.shape(a) == np.shape(b) and np.array_equal(a, b) for a, b in zip(default, pair))


def _both_on_one_pair(ctx: _Context) -> tuple[Any, Any, tuple[np.ndarray, np.ndarray], float, list[Measurement]]:
    """M1 and M2 built, M1's pair, the level of three bounds and each mechanism measured alone on that pair (the
    sequential and convexity checks: their composed mechanism reads the same pair)."""
    first, second = (m.build() for m in ctx.spec.mechanisms)
    pair = _pair(ctx.spec, first)
    level = ctx.level(3)
    return first, second, pair, level, [ctx.part(first, pair, "M1", level), ctx.part(second, pair, "M2", level)]


def _sequential(ctx: _Context) -> Row:
    spec = ctx.spec
    first, second, pair, level, parts = _both_on_one_pair(ctx)
    broken = sum_class_hypothesis(spec.function_class)
    if spec.adaptive:
        broken = "adaptive: M2 sees M1's output (it queries the data only when M1's first coordinate is >= 0); " \
                 "Thm 4 is non-adaptive" + (f"; {broken}" if broken else "")
    composed = ctx.composed(Sequential(first, second, adaptive=spec.adaptive), pair, "(M1, M2)", level)
    return _finish(ctx, level, parts, [composed], theorem_bound("sequential", [m.upper() for m in parts]), broken)


def _parallel(ctx: _Context) -> Row:
    spec = ctx.spec
    first, second = (m.build() for m in spec.mechanisms)
    pair1, pair2 = _pair(spec, first), _pair(spec, second)
    if len(pair1[0]) != len(pair1[1]):
        raise ValueError(f"parallel composition splits a dataset after D1's rows: d and d' of M1's pair must have "
                         f"as many rows. Found {len(pair1[0])} and {len(pair1[1])}.")
    level = ctx.level(4)
    parts = [ctx.part(first, pair1, "M1", level), ctx.part(second, pair2, "M2", level)]
    # A record changes in D1 or in D2, never both: two composed pairs, each held to max(eps1, eps2).
    composed_mechanism = Parallel(first, second, split=len(pair1[0]))
    composed = [ctx.composed(composed_mechanism, pair, f"(M1, M2): change in {block}", level)
                for pair, block in zip(Parallel.pairs(pair1, pair2), ("D1", "D2"))]
    return _finish(ctx, level, parts, composed, theorem_bound("parallel", [m.upper() for m in parts]),
                   sum_class_hypothesis(spec.function_class))


def _post_processing(ctx: _Context) -> Row:
    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    pair = _pair(spec, mechanism)
    level = ctx.level(2)
    parts = [ctx.part(mechanism, pair, "M", level)]
    composed = ctx.composed(PostProcessed(mechanism, spec.map), pair, "g(M)", level)
    broken = post_processing_hypothesis(spec.map, spec.function_class)
    return _finish(ctx, level, parts, [composed], theorem_bound("post-processing", [parts[0].upper()]), broken)


def _convexity(ctx: _Context) -> Row:
    spec = ctx.spec
    first, second, pair, level, parts = _both_on_one_pair(ctx)
    mixed = ctx.composed(Mixture(first, second, spec.weight), pair, f"mixture (lambda = {spec.weight:g})", level)
    return _finish(ctx, level, parts, [mixed], theorem_bound("convexity", [m.upper() for m in parts]), None)


def _pinsker(ctx: _Context) -> Row:
    from attacks.vocabulary import KL

    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    pair = _pair(spec, mechanism)
    level = ctx.level(2)
    p, q = ctx.draw(mechanism, pair, "M")
    parts = []
    if KL.name in parse_function_class(spec.function_class).divergences:
        parts.append(ctx.measure(p, q, "KL^H", level, divergence="kl", exact=ctx.exact(mechanism, pair, "kl")))
    ipm = ctx.measure(p, q, "IPM^H", level, divergence="ipm")
    broken = None
    if not parse_function_class(spec.function_class).convex_translation_invariant:
        broken = (f"class {spec.function_class!r} is not convex and translation invariant (Thm 7's hypotheses); "
                  "a bare threshold class can have KL^H = 0 with IPM^H > 0")
    bound = theorem_bound("pinsker", [parts[0].upper()]) if parts else math.nan
    return _finish(ctx, level, parts, [ipm], bound, broken)


def _generalization(ctx: _Context) -> Row:
    spec = ctx.spec
    mechanism = spec.mechanisms[0].build()
    m, trials = spec.n_records, spec.n_samples
    level = ctx.level(2)
    worst = (-np.ones((m, 1)), np.vstack([[1.0], -np.ones((m - 1, 1))]))  # one record from -1 to +1
    p, q = ctx.draw(mechanism, worst, "M")
    # eps: the unrestricted KL of the worst pair bounds KL^H for every H, so H contains the queries' evaluations.
    epsilon = exact_value(known_laws(mechanism, *worst), "all", "kl")
    part = ctx.measure(p, q, "M on the worst pair (exact: KL over all functions)", level, exact=epsilon)
    # Trials on both sides of one sampled "pair": every output is a trial of its own, on fresh data.
    on_d, on_d_prime = ctx.draw(_GeneralizationTrial(mechanism, m), worst, "trials", -(-trials // 2))
    releases, sample_means, fresh_means = np.vstack([on_d, on_d_prime])[:trials].T
    gaps = generalization_gaps(np.clip(releases / m, -1.0, 1.0), sample_means, fresh_means)
    gap = _mean_bounds(gaps, level, "generalization gap")
    row = _finish(ctx, level, [part], [gap], theorem_bound("generalization", [math.nan if epsilon is None else epsilon]),
                  None, two_sided=True)
    if epsilon is None:
        row = dataclasses.replace(row, note="the mechanism's output laws are unknown: no exact eps (unrestricted KL) "
                                            "for the bound")
    return row


class _GeneralizationTrial:
    """One trial of Thm 6's experiment per output: S and a fresh S' of m fair-coin records in {-1, +1}, the release
    y = M(S); the output is (y, mean(S), mean(S')).  The dataset it is given is not used: each trial draws its own."""

    def __init__(self, mechanism: Any, m: int) -> None:
        self.mechanism, self.m = mechanism, m
        self.name = f"{getattr(mechanism, 'name', 'mechanism')} on fresh samples of {m} records"

    def sample(self, dataset: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        records = np.where(rng.random((n, 2, self.m)) < 0.5, -1.0, 1.0)
        releases = [np.asarray(self.mechanism.sample(records[i, 0][:, None], 1, rng), dtype=float).ravel()[0]
                    for i in range(n)]
        return np.column_stack([releases, records[:, 0].mean(axis=1), records[:, 1].mean(axis=1)])


def _mean_bounds(values: np.ndarray, level: float, role: str) -> Measurement:
    """The mean of i.i.d. values with normal-approximation bounds at ``level`` (one-sided each)."""
    error = float(np.std(values, ddof=1) / math.sqrt(len(values)))
    return Measurement(role, NormalEstimate(float(np.mean(values)), error), level)


def _finish(ctx: _Context, level: float, parts: list[Measurement], composed: list[Measurement], bound: float,
            broken: str | None, two_sided: bool = False) -> Row:
    """The check's row: the decisive composed measurement (largest lower bound) against the bound."""
    bounds = [m.bounds() for m in composed]
    lows = [max(low, -high) if two_sided else low for low, high in bounds]
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


def _finish_on_average(ctx: _Context, level: float, parts: list[Measurement], composed: list[Measurement],
                       bound: float, broken: str | None, source: str) -> Row:
    """:func:`_finish` for OAKL's lemmas (:mod:`audit.engine.on_average_checks`), the note led by where eps comes from."""
    row = _finish(ctx, level, parts, composed, bound, broken)
    return dataclasses.replace(row, note="; ".join(part for part in (source, row.note) if part))


def _row(spec: CheckSpec, index: int, *, verdict: str, bound: float = math.nan, measured: float = math.nan,
         measured_low: float = math.nan, level: float = math.nan, measurements: Sequence[Measurement] = (),
         note: str = "", error: str | None = None) -> Row:
    """The check's :class:`Row`: the theorem's bound as its claim, the decisive composed measurement as its
    estimate and lower bound (:meth:`audit.results.schema.Row.to_check_record` writes results.json's ``checks`` entry,
    docs/results.md)."""
    name = check_name(index)
    return Row(
        pair=name, direction="P|Q", task=name, function_class=spec.function_class,
        divergence="ipm" if spec.property == "pinsker" else spec.divergence,
        alpha=math.nan if spec.alpha is None else float(spec.alpha), n_samples=spec.n_samples,
        claim=bound, claim_class=spec.function_class,
        estimate=measured, ci_low=measured_low, verdict=verdict, note=note, error=error,
        checked=spec.property, theorem=THEOREMS[spec.property], mechanisms=tuple(_label(m) for m in spec.mechanisms),
        level=level, measurements=tuple(m.to_record() for m in measurements),
    )


def _label(spec: Any) -> str:
    params = ", ".join(f"{key}={value}" for key, value in spec.params.items())
    return f"{spec.name or spec.callable}({params})"


_RUNNERS: dict[str, Callable[[_Context], Row]] = {
    "sequential": _sequential,
    "parallel": _parallel,
    "post-processing": _post_processing,
    "convexity": _convexity,
    "pinsker": _pinsker,
    "generalization": _generalization,
    "on-average-post-processing": lambda ctx: _finish_on_average(ctx, *on_average_post_processing(ctx)),
    "on-average-composition": lambda ctx: _finish_on_average(ctx, *on_average_composition(ctx)),
}
