"""The append-only results file ``DIR/tasks.jsonl``: one checksummed JSON line per finished task, and resume.

Each finished task is appended as one JSON line; a resumed run reads it and
redoes only the tasks it lacks, and marks the rows it read ``resumed``.  The
line's ``evidence`` holds the fitted estimate as plain numbers (its
:meth:`attacks.evidence.Evidence.to_record`: for a
:class:`attacks.estimate.DivergenceEstimate` every field but the fitted
adversary), which is all its confidence intervals and p-values (needed by
the verdicts) read.  Reading it back runs no code.  Each
line carries a ``checksum`` of its content (:func:`line_checksum`) and a line
that does not match is refused: this guards against accidents (an edited or
corrupted file), not against an attacker, who can recompute the checksum or
simply rerun the tool.  A torn last line (an interrupted write) is cut off
before new lines are appended.  The engine (:mod:`audit.engine.run`)
writes each unit's records in these lines; its pooled confirm statistic's
record (:meth:`attacks.held_out.PooledEstimate.to_record`) says ``kind = "pooled"``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attacks.evidence import Evidence

TASKS_FILE = "tasks.jsonl"


def append(path: Path, record: dict, estimate: Evidence | None) -> None:
    """Append a task's record and its estimate's plain record as one checksummed line, flushed at once."""
    line = dict(record, evidence=None if estimate is None else estimate.to_record())
    line.pop("resumed", None)
    line["checksum"] = line_checksum(line)
    with path.open("a") as handle:
        handle.write(json.dumps(line, allow_nan=True) + "\n")
        handle.flush()


def line_checksum(line: dict[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys) of a tasks.jsonl line without its ``checksum``.

    It catches a line changed by accident (an edit, a bad merge, a disk
    error), not an attacker: whoever can rewrite the file can recompute it,
    or simply rerun the tool.
    """
    content = {key: value for key, value in line.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, allow_nan=True).encode()).hexdigest()


def read_finished(path: Path, plan: str) -> tuple[dict[str, dict], dict[str, Evidence | None]]:
    """The records of ``tasks.jsonl``, marked ``resumed``, and their estimates; a torn last line is cut off the file.

    Every other line must decode, carry this plan's hash (:func:`audit.engine.run.plan_hash`)
    and a matching :func:`line_checksum`, else the resume is refused (``ValueError``).
    """
    records: dict[str, dict] = {}
    evidence: dict[str, Evidence | None] = {}
    if not path.exists():
        return records, evidence
    lines = drop_torn_line(path)
    fix = "run without --resume (or choose another --out directory) to redo the audit"
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ValueError(f"{path} line {number} is not valid JSON although later lines are; {fix}.") from None
        if not isinstance(record, dict) or record.get("plan") != plan:
            raise ValueError(
                f"{path} line {number} was written by a different config, seed, policy or plan; {fix}."
            )
        if record.pop("checksum", None) != line_checksum(record):
            raise ValueError(
                f"{path} line {number} was changed after capaudit wrote it (its checksum does not match); {fix}."
            )
        stored = record.pop("evidence")
        if not (stored is None or isinstance(stored, dict)):
            raise ValueError(
                f"{path} line {number}: evidence must be a JSON object of numbers (older capaudit versions "
                f"stored it pickled); run without --resume. Found {type(stored).__name__}."
            )
        record["resumed"] = True
        records[record["task"]] = record
        evidence[record["task"]] = None if stored is None else evidence_from_record(stored)
    return records, evidence


def evidence_from_record(stored: dict) -> Evidence:
    """The evidence of a plain record: a pooled confirm statistic (``kind = "pooled"``), a set's confidence
    sequences (``kind = "anytime sets"``), a witness with its clipped betting bound (``kind = "clipped witness"``),
    a sequential search's (``kind = "sequential"``, holding one of the
    others) or a ``DivergenceEstimate``."""
    from attacks.anytime_sets import ANYTIME, AnytimeSetEstimate
    from attacks.clipped_witness import CLIPPED, ClippedWitnessEstimate
    from attacks.estimate import DivergenceEstimate
    from attacks.sequential import SEQUENTIAL, SequentialEstimate
    from attacks.held_out import POOLED, PooledEstimate

    if stored.get("kind") == SEQUENTIAL:
        return SequentialEstimate.from_record(stored, evidence_from_record)
    if stored.get("kind") == ANYTIME:
        return AnytimeSetEstimate.from_record(stored)
    if stored.get("kind") == CLIPPED:
        return ClippedWitnessEstimate.from_record(stored)
    return PooledEstimate.from_record(stored) if stored.get("kind") == POOLED else DivergenceEstimate.from_record(stored)


def drop_torn_line(path: Path) -> list[str]:
    """The complete lines of ``path``; a last line cut short by an interrupted write is removed from the file.

    A line is torn when it does not end with a newline or does not decode
    (the newline of a later write may follow a torn line); the records
    appended next then start on a line of their own.
    """
    text = path.read_text()
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    else:  # no final newline: the last write was interrupted
        lines, text = lines[:-1], text[: len(text) - len(lines[-1])]
    if lines:
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines.pop()
            text = "".join(line + "\n" for line in lines)
    path.write_text(text)
    return lines
