"""The results row, typed and listed once: results.json's ``rows``, results.csv, ``AuditResult.table``.

A row is described field by field in docs/results.md and
docs/schema/results.schema.json.  :class:`Row` is that row as a frozen
dataclass: its fields, in order, ARE the columns, and each field's
``metadata["group"]`` says which column list it belongs to, so the tuples
below (:data:`ROW_COLUMNS`, :data:`VERDICT_COLUMNS`, ...) are derived from
the dataclass and a column exists once.  Every module that orders, converts
or selects row columns reads them from here; the verdicts, the report and the
summaries read :class:`Row` objects, which the engine builds
(:mod:`audit.engine.run`) with their evidence (the ``evidence`` field), and
plain dicts exist only at the boundaries (:meth:`Row.to_record` for JSON,
CSV and the pandas table, :meth:`Row.from_record` for the tables read back).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attacks.classes import parse_function_class

if TYPE_CHECKING:  # a leaf module at run time: no SciPy for readers of tables
    from attacks.evidence import Evidence

GROUPS = ("row", "verdict", "task", "on_average", "claim", "staged", "distance", "check", "internal")
"""The column lists a field can belong to; ``internal`` fields are never written."""
OPTIONAL_GROUPS = ("on_average", "staged", "distance", "check")
"""Groups whose fields only some rows carry: None means absent (left out of :meth:`Row.to_record`)."""


def _column(group: str, default: Any = dataclasses.MISSING) -> Any:
    """A :class:`Row` field in column list ``group`` (one of :data:`GROUPS`)."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"group": group})
    return dataclasses.field(default=default, metadata={"group": group})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One results row: an attack's estimate against one claim, and its verdict.

    Missing numbers are NaN (null in results.json), as in the table.  The
    on-average and staged fields are None on the rows that do not carry them.

    Attributes
    ----------
    pair, direction, function_class, divergence : str
        The task: the neighbouring pair's name (``"average"`` for an
        on-average aggregate), ``"P|Q"`` or ``"Q|P"``, the attack class and
        the divergence.
    alpha : float
        The Renyi order, NaN for other divergences.
    estimate, ci_low, ci_high : float
        The held-out estimate and its interval (:mod:`audit.results.verdicts`).
    n_samples : int or float
        Outputs per dataset (NaN when unknown).
    claim : float
    claim_class : str
    refutes_claim : bool
        The attack class is contained in the claim's (docs/theory.md section 3).
    theory_bound, exact : float
        The paper's closed-form bound and the exact value, NaN when unknown.
    verdict : str or None
        None until :func:`audit.results.verdicts.assign_verdicts` judges the row.
    note : str
    p_adjusted, detectable_excess : float
        :data:`VERDICT_COLUMNS`, NaN outside Holm's family.
    task : str or None
        The task's stable id (None in tables of old versions).
    error : str or None
        The task's error message; None when it ran.
    resumed : bool
        Read back from tasks.jsonl by ``--resume``.
    on_average : bool
        The row belongs to an on-average claim (:mod:`audit.results.on_average`).
    pairs_averaged, worst_case, worst_case_low : int, float, float or None
        An on-average aggregate row's fields; None on other rows.
    delta : float
        The task's and its claim's delta (``dp``; 0 for the other divergences): with the claim, its class,
        divergence, order and ``on_average`` it names the claim a row answers (:func:`audit.results.verdicts.claim_key`).
    layer : str
        ``"value"`` or ``"representation"``: what the attack class reads, the released values or how they are
        stored (:attr:`attacks.classes.FunctionClass.layer`); set from ``function_class`` when not given.
    d_in : float or None
        The pair's input distance when the claims are read or carried to several distances (a library's map at
        ``d_in``, a claim typed by hand by group privacy; :attr:`audit.config.claims.Claim.d_in`): the row's
        ``claim`` is the claim at that distance, and ``d_in`` is part of the claim's key; None otherwise.
    policy, n_screen, n_train, n_check, n_confirm, candidates, finalists, sets_pooled : str, int or None
        The policy that confirmed the row (``"best"`` or ``"every"``, :mod:`audit.engine.run`), its stage sizes
        and counts; None on other rows (on-average aggregates).
    outputs_drawn, rounds, stop : int, int, str or None
        The row's unit (a search, or a pair of policy ``every``): all the outputs it drew (both datasets,
        every pair, stage and round), its rounds, and why it stopped (:data:`attacks.sequential.STOPS`);
        None on other rows.
    interval : str or None
        Which interval the row's lower bound is at its level (:func:`attacks.sequential.interval_of`: ``"betting CS"``,
        ``"binomial counts"``, ``"event counts"``, ``"delta method"``); None on rows without a staged statistic.
    checked, theorem, mechanisms, level, measurements : str, str, tuple, float, tuple or None
        A ``[[checks]]`` row's fields (:mod:`audit.engine.checks`): the property checked (results.json's
        ``property``), the theorem's statement, the
        mechanisms in words, the one-sided level of each bound and every measurement (role, estimate, bounds,
        exact value, caveat); None on other rows.  A check row's ``task`` and ``pair`` are its name
        (``checks[i]``), its ``claim`` the theorem's bound, ``estimate`` and ``ci_low`` the decisive composed
        measurement and its lower bound, ``verdict`` one of :data:`audit.engine.checks.CHECK_VERDICTS`
        (:meth:`Row.to_check_record` writes it as results.json's ``checks`` entry).
    evidence : Evidence or None
        The row's statistic (:class:`attacks.evidence.Evidence`: its bounds and
        p-value for :mod:`audit.results.verdicts` and the theory check), None for a failed
        task or a row read back from a table (internal: never written, not compared).
    """

    pair: str = _column("row")
    direction: str = _column("row")
    function_class: str = _column("row")
    divergence: str = _column("row")
    alpha: float = _column("row", math.nan)
    estimate: float = _column("row", math.nan)
    ci_low: float = _column("row", math.nan)
    ci_high: float = _column("row", math.nan)
    n_samples: int | float = _column("row", math.nan)
    claim: float = _column("row")
    claim_class: str = _column("row")
    refutes_claim: bool = _column("row", False)
    theory_bound: float = _column("row", math.nan)
    exact: float = _column("row", math.nan)
    verdict: str | None = _column("row", None)
    note: str = _column("row", "")
    p_adjusted: float = _column("verdict", math.nan)
    detectable_excess: float = _column("verdict", math.nan)
    task: str | None = _column("task", None)
    error: str | None = _column("task", None)
    resumed: bool = _column("task", False)
    on_average: bool = _column("on_average", False)
    pairs_averaged: int | None = _column("on_average", None)
    worst_case: float | None = _column("on_average", None)
    worst_case_low: float | None = _column("on_average", None)
    delta: float = _column("claim", 0.0)
    layer: str | None = _column("claim", None)
    policy: str | None = _column("staged", None)
    n_screen: int | None = _column("staged", None)
    n_train: int | None = _column("staged", None)
    n_check: int | None = _column("staged", None)
    n_confirm: int | None = _column("staged", None)
    candidates: int | None = _column("staged", None)
    finalists: int | None = _column("staged", None)
    sets_pooled: int | None = _column("staged", None)
    outputs_drawn: int | None = _column("staged", None)
    rounds: int | None = _column("staged", None)
    stop: str | None = _column("staged", None)
    interval: str | None = _column("staged", None)
    d_in: float | None = _column("distance", None)
    checked: str | None = _column("check", None)
    theorem: str | None = _column("check", None)
    mechanisms: tuple[str, ...] | None = _column("check", None)
    level: float | None = _column("check", None)
    measurements: tuple[Mapping[str, Any], ...] | None = _column("check", None)
    evidence: Evidence | None = dataclasses.field(default=None, compare=False, repr=False, metadata={"group": "internal"})

    def __post_init__(self):
        if self.layer is None:  # derived from the class (tables of older versions have no layer column)
            object.__setattr__(self, "layer", parse_function_class(self.function_class).layer)

    @property
    def held_out_scores(self) -> Mapping[str, Any] | None:
        """The binned held-out scores behind the estimate (:func:`attacks.estimate.score_histogram`'s dict, kept
        in the evidence's ``details``), None for a row without them (an error, a row read back from a file)."""
        return getattr(self.evidence, "details", {}).get("scores")

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Row:
        """The row of a plain record: a results.json / table row read back (without its evidence).

        Tolerant of older tables: a missing column takes its default (NaN,
        None, False or ``""``), and so do null and NaN; keys that are not
        columns (e.g. ``held_out_scores``, ``evidence``) are left out.  Values are
        converted to the field's type (numpy scalars to Python ones).

        Raises
        ------
        ValueError
            When a column without a default (:data:`REQUIRED_COLUMNS`: the
            task's pair, direction, class and divergence, the claim and its
            class) is missing.
        """
        missing = [name for name in REQUIRED_COLUMNS if _missing(record.get(name))]
        if missing:
            raise ValueError(f"a results row needs the columns {missing}; add them. Found columns {sorted(record)!r}.")
        return cls(**{name: _convert(name, record[name]) for name in _READ if name in record})

    def to_record(self) -> dict[str, Any]:
        """Today's plain row dict: every written column in order, optional ones only when the row carries them.

        ``pd.DataFrame(records, columns=...)`` of these is ``AuditResult.table``;
        results.json and results.csv are written from that table.
        """
        return {
            name: getattr(self, name) for name in WRITTEN_COLUMNS
            if not (_GROUP_OF[name] in OPTIONAL_GROUPS and getattr(self, name) is None)
        }

    def to_check_record(self) -> dict[str, Any]:
        """results.json's ``checks`` entry of a check row (docs/results.md, ``checks``): :data:`CHECK_RECORD`'s
        fields, ``alpha`` null for other divergences than Renyi."""
        record = {name: getattr(self, field) for name, field in CHECK_RECORD.items()}
        record.update(alpha=None if math.isnan(self.alpha) else self.alpha, mechanisms=list(self.mechanisms),
                      measurements=[dict(m) for m in self.measurements])
        return record

    @classmethod
    def from_check_record(cls, record: Mapping[str, Any]) -> Row:
        """The check row of a :meth:`to_check_record` record (a tasks.jsonl line read back by ``--resume``)."""
        fields = {field: record[name] for name, field in CHECK_RECORD.items() if name in record}
        fields.update({name: math.nan if fields[name] is None else float(fields[name])
                       for name in ("alpha", "claim", "estimate", "ci_low")},
                      pair=record["check"], direction="P|Q", claim_class=record["function_class"],
                      mechanisms=tuple(record["mechanisms"]), measurements=tuple(record["measurements"]))
        return cls(**fields)


CHECK_RECORD = {
    "check": "task", "property": "checked", "theorem": "theorem", "mechanisms": "mechanisms",
    "function_class": "function_class", "divergence": "divergence", "alpha": "alpha", "n_samples": "n_samples",
    "bound": "claim", "measured": "estimate", "measured_low": "ci_low", "level": "level",
    "measurements": "measurements", "verdict": "verdict", "note": "note", "error": "error", "resumed": "resumed",
}
"""results.json's ``checks`` entry, field by field: its name -> the check row's field (:meth:`Row.to_check_record`)."""


def has_scores(scores: Any) -> bool:
    """Whether ``scores`` is a binned histogram of held-out scores with at least one bin (what
    :attr:`Row.held_out_scores` holds when the row has scores): what its figures and trade-off curve need."""
    return isinstance(scores, Mapping) and len(scores.get("edges", ())) >= 2


def _columns(group: str) -> tuple[str, ...]:
    """The :class:`Row` fields of column list ``group``, in order."""
    return tuple(field.name for field in dataclasses.fields(Row) if field.metadata["group"] == group)


_GROUP_OF = {field.name: field.metadata["group"] for field in dataclasses.fields(Row)}
FIELD_TYPES = {field.name: field.type for field in dataclasses.fields(Row)}
"""Each :class:`Row` field's annotation (a string: ``from __future__ import annotations``)."""
_READ = tuple(name for name in FIELD_TYPES if name != "evidence")
"""The fields :meth:`Row.from_record` reads: all but the evidence object."""
REQUIRED_COLUMNS = tuple(field.name for field in dataclasses.fields(Row) if field.default is dataclasses.MISSING)
"""The columns :meth:`Row.from_record` cannot default."""

ROW_COLUMNS = _columns("row")
"""The columns every row has, first and in this order in results.json and results.csv."""
VERDICT_COLUMNS = _columns("verdict")
"""Filled by :func:`audit.results.verdicts.assign_verdicts`; tables of older versions lack them."""
TASK_COLUMNS = _columns("task")
"""The task's stable id (:class:`audit.engine.plan.Task`), its error message or None, and whether ``--resume`` read it back."""
ON_AVERAGE_COLUMNS = _columns("on_average")
"""On-average claims (:mod:`audit.results.on_average`): whether the row belongs to one, and its aggregate's fields."""
CLAIM_COLUMNS = _columns("claim")
"""What else tells a row's claim and finding apart: the claim's ``delta`` and the attack class's ``layer``."""
TABLE_COLUMNS = ROW_COLUMNS + VERDICT_COLUMNS + TASK_COLUMNS + ON_AVERAGE_COLUMNS + CLAIM_COLUMNS
"""The columns of ``AuditResult.table`` and of the rows ``run_audit`` writes."""
STAGED_COLUMNS = _columns("staged")
"""Result fields of an engine row (:mod:`audit.engine.run`, either policy), after :data:`TABLE_COLUMNS`."""
STAGE_SIZE_COLUMNS = STAGED_COLUMNS[1:]
"""A row's stage sizes and counts (report.md's "Staged search" for policy ``best``)."""
DISTANCE_COLUMNS = _columns("distance")
"""The pair's ``d_in`` of a row judged against a claim at one of several distances (absent otherwise)."""
WRITTEN_COLUMNS = TABLE_COLUMNS + STAGED_COLUMNS + DISTANCE_COLUMNS
"""Every column :meth:`Row.to_record` can write (all fields but the internal ones)."""
NUMERIC_COLUMNS = tuple(name for name in ROW_COLUMNS if FIELD_TYPES[name] in ("float", "int | float"))
"""Columns read back as floats (None and null become NaN)."""


def column_order(columns: Iterable[str]) -> list[str]:
    """:data:`ROW_COLUMNS` first, then the other ``columns`` in their order."""
    return list(ROW_COLUMNS) + [column for column in columns if column not in ROW_COLUMNS]


def _missing(value: Any) -> bool:
    """None or NaN: a cell with no value."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _convert(name: str, value: Any) -> Any:
    """``value`` as field ``name``'s type; a missing cell (:func:`_missing`) as the field's default."""
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    kind = FIELD_TYPES[name]
    if _missing(value):
        return _DEFAULTS[name]
    if kind == "bool":
        return bool(value)
    if kind in ("float", "float | None"):
        return float(value)
    if kind in ("int | float", "int | None"):
        return int(value) if float(value).is_integer() else float(value)
    return value


_DEFAULTS = {field.name: field.default for field in dataclasses.fields(Row)}
