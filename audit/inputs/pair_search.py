"""The dataset search (``[neighbours] strategy = "search"``): edge-case probes, screening, the best candidates.

Many random and extreme candidates (:mod:`audit.inputs.pair_generators`) and the
edge-case probes of :func:`probe_pairs` are each screened with a cheap attack
on few samples, in a child forked from this process within
``run.sample_timeout`` (:func:`screen_candidates`), and the most
distinguishable are kept (:func:`best_screened`); the screening log records
every candidate, its score and why a probe was dropped (docs/probes.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from attacks.vocabulary import IPM, KL
from audit.sampling import isolation
from audit.sampling.errors import one_line
from audit.mechanisms import Mechanism
from audit.inputs.pair_generators import MAX_DOMAIN_SIZE, Domain, neighbour_of

PROBES = ("out_of_domain", "special_values", "small_sizes", "duplicates", "new_category")
"""The families of edge-case datasets ``search`` screens besides the domain's (:func:`probe_pairs`)."""
SPECIAL_VALUES = (
    ("NaN", np.nan), ("+inf", np.inf), ("-inf", -np.inf), ("-0.0", -0.0),
    ("the largest finite float", np.finfo(float).max), ("minus the largest finite float", -np.finfo(float).max),
    ("2^53", 2.0**53), ("2^53 + 2", 2.0**53 + 2), ("1e39, beyond float32", 1e39), ("-1e39, beyond float32", -1e39),
)
"""Record values that break float arithmetic: NaN passes ``np.clip``, inf and huge values overflow sums,
integers beyond 2^53 and values beyond float32's range lose or change their value when cast."""
FAILURE_CALLS = 5
"""Calls per dataset that count the failures of a candidate that fails on one dataset only."""
SCREENING_DIVERGENCES = (KL.name, IPM.name)
"""Divergences the screening attack of ``search`` may use (``neighbours.divergence``)."""


@dataclass(frozen=True)
class Screened:
    """One candidate of the dataset search and what its screening found.

    Attributes
    ----------
    label : str
        What the candidate is (e.g. ``"probe special_values: NaN record"``).
    score : float
        The screening attack's larger held-out estimate; NaN when it was not sampled on both datasets.
    note : str
        Why it was dropped (the mechanism refuses a probe, or fails on both
        datasets) or, for an in-domain candidate on one of whose datasets the
        mechanism fails, the finding and its counts; "" when screened.
    pair : str
        The name of the audited pair it became (``"p0"`` is the best screened), "" when not kept.
    """

    label: str
    score: float
    note: str = ""
    pair: str = ""


def probe_pairs(
    domain: Domain, relation: str, families: Sequence[str] = PROBES, rng: np.random.Generator | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Edge-case pairs beyond the domain's random and corner datasets: ``(label, d, d_prime)`` each.

    The inputs that break real implementations (docs/config.md, ``probes``):

    * ``out_of_domain``: one record beyond the domain, by its width and by a
      million times it (the domain states what the mechanism must clip or
      refuse; a mechanism that claims DP for any input is tested beyond it);
    * ``special_values``: one record of :data:`SPECIAL_VALUES` (NaN, +-inf,
      -0.0, the largest finite float, 2^53, beyond float32's range);
    * ``small_sizes``: datasets of the smallest sizes the relation allows
      (0 and 1, 1 and 2 records under ``add-remove``; 1 and 2 under
      ``replace-one``), at the domain's corners;
    * ``duplicates``: random records and one of them duplicated;
    * ``new_category``: for integer domains (categories), every category but
      one in d and that category in d' only.

    Each changed record is the dataset's last (``replace-one``) or an added
    one (``add-remove``), the others at the domain's low corner unless said.
    """
    rng = np.random.default_rng(rng)
    base = np.tile(domain.low, (domain.size, 1))
    probes: list[tuple[str, np.ndarray, np.ndarray]] = []

    def one_record(label: str, record: np.ndarray, d: np.ndarray = base) -> None:
        probes.append((label, d, neighbour_of(d, record, relation, len(d) - 1)))

    span = np.where(domain.high > domain.low, domain.high - domain.low, 1.0)
    if "out_of_domain" in families:
        for label, record in (
            ("a record above the domain by its width", domain.high + span),
            ("a record below the domain by its width", domain.low - span),
            ("a record 1e6 widths above the domain", domain.high + 1e6 * span),
            ("a record 1e6 widths below the domain", domain.low - 1e6 * span),
        ):
            one_record(f"out_of_domain: {label}", record)
    if "special_values" in families:
        for label, value in SPECIAL_VALUES:
            one_record(f"special_values: a record of {label}", np.full(domain.low.size, value))
    if "small_sizes" in families:
        empty, low, high = np.empty((0, domain.low.size)), domain.low[None, :], domain.high[None, :]
        if relation == "add-remove":
            probes += [
                ("small_sizes: 0 and 1 records (the low corner added)", empty, low),
                ("small_sizes: 0 and 1 records (the high corner added)", empty, high),
                ("small_sizes: 1 and 2 records (low corner, high corner added)", low, np.vstack([low, high])),
            ]
        else:
            probes += [
                ("small_sizes: 1 record, low corner to high corner", low, high),
                ("small_sizes: 2 records, one moved from the low to the high corner",
                 np.vstack([low, low]), np.vstack([low, high])),
            ]
    if "duplicates" in families:
        records = domain.random_records(rng, max(domain.size, 2))
        one_record("duplicates: random records, one of them duplicated", records[0], records)
    categories = np.arange(domain.low[0], domain.high[0] + 1)
    integer = np.all(domain.low == np.round(domain.low)) and np.all(domain.high == np.round(domain.high))
    if "new_category" in families and integer and 1 < len(categories) <= MAX_DOMAIN_SIZE:
        for new in (categories[-1], categories[0]):
            present = np.resize(categories[categories != new], max(domain.size, 2))
            d = np.tile(domain.low, (len(present), 1))
            d[:, 0] = present
            record = domain.low.copy()
            record[0] = new
            one_record(f"new_category: category {new:g} in d' only", record, d)
    return probes


def screen_candidates(
    candidates: Sequence[tuple[np.ndarray, np.ndarray]],
    labels: Sequence[str],
    mechanism: Mechanism,
    rng: np.random.Generator,
    *,
    n: int = 2000,
    function_class: str = "linear",
    divergence: str = "kl",
    timeout: float | None = None,
    on_screened: Callable[[int, int], None] | None = None,
) -> list[Screened]:
    """Screen each candidate pair with a cheap attack; record what the mechanism refused.

    Each candidate is sampled ``n`` times per dataset in a child forked from
    this process (:func:`audit.sampling.isolation.call`), which hands back the
    outputs and the layout of structural outputs its copy of the mechanism
    ended with (:mod:`audit.sampling.structure`; this process's mechanism adopts it),
    and scored by the larger held-out estimate of
    :func:`attacks.estimate_divergence` over both directions (divergences are
    directional).  A candidate the mechanism raises on is not scored (NaN):
    a probe (label ``"probe ..."``) on one of whose datasets it raises is
    dropped with a note (the mechanism refuses the input: no error, no
    violation); an in-domain candidate on one of whose datasets only it
    raises is a finding, its failures counted over :data:`FAILURE_CALLS`
    calls per dataset (in the same child); failures on both datasets are
    noted.  A child that runs past ``timeout`` seconds (a mechanism that
    hangs, in Python or in C) is killed: a probe's candidate is dropped with
    a note, an in-domain candidate's stops the search (a mechanism that hangs
    on a dataset of its domain is an error, as a hung pair is in the audit; a
    search in which every candidate hangs costs one timeout, not one per
    candidate); a child that dies drops its candidate with its exit code.  Seeds are drawn from
    ``rng`` in order, so a seed fixes the result.  ``on_screened(k, len(candidates))`` is called before the
    first draw (k = 0) and after each candidate (a progress bar from the first call on).

    Raises
    ------
    MechanismError
        When no candidate could be scored (the first failure's message), or an in-domain candidate hung.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 10:
        raise ValueError(f"neighbours.screen_samples must be an integer >= 10. Found {n!r}.")
    if divergence not in SCREENING_DIVERGENCES:
        raise ValueError(f"neighbours.divergence (of the screening attack) must be 'kl' or 'ipm'. Found {divergence!r}.")
    from attacks.estimate import estimate_divergence

    screening, first_failure = [], None
    encoder = getattr(mechanism, "structure", None)
    screened = on_screened or (lambda done, total: None)
    for (d, d_prime), label in zip(candidates, labels):
        screened(len(screening), len(candidates))
        seed = int(rng.integers(2**32))
        try:
            draw = isolation.call(functools.partial(_screen_draw, mechanism, (d, d_prime), n, seed), timeout)
        except (TimeoutError, ChildProcessError) as error:
            failure = (f"{HUNG} = {timeout:g} s" if isinstance(error, TimeoutError) else
                       f"the mechanism's process ended without a result (exit code {error.args[0]})")
            if isinstance(error, TimeoutError) and not label.startswith("probe"):
                from audit.mechanisms import MechanismError

                raise MechanismError(f"the search stopped: {failure} on the in-domain candidate pair "
                                     f"{label or len(screening)} (a hung pair is an error, as in the audit)")
            first_failure = first_failure or failure
            screening.append(Screened(label, np.nan, f"dropped: {failure}"))
            continue
        if draw.layout is not None and hasattr(encoder, "adopt"):
            encoder.adopt(*draw.layout)
        if draw.failure is not None:
            first_failure = first_failure or draw.failure
            screening.append(Screened(label, np.nan, _failure_note(label, draw.failure, draw.failures)))
            continue
        p, q = draw.outputs
        try:
            score = max(
                estimate_divergence(x, y, function_class, divergence, random_state=seed).estimate
                for x, y in ((p, q), (q, p))
            )
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:  # outputs the cheap attack cannot fit
            screening.append(Screened(label, np.nan, f"dropped: the screening attack failed ({error})"))
            continue
        screening.append(Screened(label, float(score)))
    screened(len(screening), len(candidates))
    if screening and all(entry.note for entry in screening):
        from audit.mechanisms import MechanismError

        first = first_failure.split("|", 1)[-1] if first_failure else screening[0].note
        raise MechanismError(f"the mechanism failed on every candidate pair of the search: {first}")
    return screening


@dataclass(frozen=True)
class _ScreenDraw:
    """What a screening child hands back: both datasets' outputs, or which failed and how (``"d|message"``)
    with the failures in :data:`FAILURE_CALLS` calls per dataset; the layout its mechanism ended with."""

    outputs: tuple[np.ndarray, np.ndarray] | None
    failure: str | None
    failures: tuple[int, int]
    layout: tuple[int | None, bool] | None


HUNG = "the mechanism took longer than run.sample_timeout"
"""How a candidate whose screening ran past its time limit is reported (the note of its candidate)."""


def _screen_draw(mechanism: Mechanism, pair: tuple[np.ndarray, np.ndarray], n: int, seed: int) -> _ScreenDraw:
    """In the screening child: :func:`_sample_both`, and on a failure :func:`_failure_counts`."""
    outputs = _sample_both(mechanism, pair, n, seed)
    failures = (0, 0) if not isinstance(outputs, str) else _failure_counts(mechanism, pair, seed)
    encoder = getattr(mechanism, "structure", None)
    layout = (encoder.width, encoder.structural) if hasattr(encoder, "adopt") else None
    if isinstance(outputs, str):
        return _ScreenDraw(None, outputs, failures, layout)
    return _ScreenDraw(outputs, None, failures, layout)


def _sample_both(mechanism: Mechanism, datasets: Sequence[np.ndarray], n: int, seed: int) -> tuple[np.ndarray, ...] | str:
    """n outputs on each dataset from one seeded generator, or which dataset failed and how.

    The first structural output widens the layout (:mod:`audit.sampling.structure`):
    outputs drawn before it are drawn again in the new layout.
    """
    for _ in range(2):
        sample_rng, outputs = np.random.default_rng(seed), []
        for name, dataset in zip(("d", "d'"), datasets):
            try:
                outputs.append(mechanism.sample(dataset, n, sample_rng))
            except SystemExit as error:  # the audited code's exit, in its own words (not "exit code 0" of the child)
                return f"{name}|{one_line(error)}"
            except Exception as error:
                return f"{name}|{' '.join(str(error).split())}"
        if len({output.shape[1] for output in outputs}) == 1:
            return tuple(outputs)
    return f"d|the output width changed between the datasets after the layout was fixed: {[o.shape for o in outputs]}"


def _failure_counts(mechanism: Mechanism, pair: tuple[np.ndarray, np.ndarray], seed: int) -> tuple[int, int]:
    """How many of :data:`FAILURE_CALLS` one-output calls per dataset raise."""
    failures = [0, 0]
    sample_rng = np.random.default_rng(seed)
    for _ in range(FAILURE_CALLS):
        for side, dataset in enumerate(pair):
            try:
                mechanism.sample(dataset, 1, sample_rng)
            except (Exception, SystemExit):
                failures[side] += 1
    return failures[0], failures[1]


def _failure_note(label: str, failure: str, failures: tuple[int, int]) -> str:
    """Why a candidate was not scored: a refused probe, a one-sided failure (a finding, with counts), or both failing."""
    message = failure.split("|", 1)[1]
    if all(failures):
        return f"dropped: the mechanism fails on both datasets ({message})"
    side = "d" if failures[0] else "d'" if failures[1] else failure.split("|", 1)[0]  # else: n outputs at once only
    if label.startswith("probe"):
        return f"dropped: the mechanism refuses the probe's {side} ({message})"
    return (
        f"finding: the mechanism fails on {side} only, so the failure itself distinguishes the datasets "
        f"({failures[0]} of {FAILURE_CALLS} calls failed on d, {failures[1]} of {FAILURE_CALLS} on d'; {message})"
    )


def best_screened(screening: Sequence[Screened], count: int) -> list[int]:
    """Indices of the ``count`` highest scores of the candidates sampled on both datasets (NaN last; ties keep the
    earlier candidate)."""
    scores = np.nan_to_num(np.array([entry.score for entry in screening], dtype=float), nan=-np.inf)
    scored = [i for i in np.argsort(-scores, kind="stable") if not screening[i].note]
    return [int(i) for i in scored[:count]]


def search_pairs(
    candidates: list[tuple[np.ndarray, np.ndarray]],
    mechanism: Mechanism,
    count: int,
    rng: np.random.Generator,
    *,
    n: int = 2000,
    function_class: str = "linear",
    divergence: str = "kl",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Keep the ``count`` candidates that a cheap attack distinguishes best (:func:`screen_candidates`).

    Candidates the mechanism fails on are never kept; ties keep the earlier candidate.
    """
    screening = screen_candidates(
        candidates, [""] * len(candidates), mechanism, rng, n=n, function_class=function_class, divergence=divergence
    )
    return [candidates[i] for i in best_screened(screening, count)]
