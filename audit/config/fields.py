"""Config fields declared once: name, type, default, limits and meaning, and the validators generic over them.

Each config table's fields are declared next to the code that owns them
(``[attacks]`` in :mod:`audit.config.attacks`, ``[run]`` in
:mod:`audit.sampling.parallel`, ``[[claims]]`` in :mod:`audit.config.claims`, ...) as a
:class:`Section` of :class:`Field` s, in the spirit of scikit-learn's
``_parameter_constraints``.  One declaration serves three readers:

* the loader (:mod:`audit.config.load`): :func:`value` reads a field from its
  table, checking its type and limits, and :func:`check_fields` refuses an
  unknown field with a "did you mean";
* the JSON Schema (:attr:`Field.schema`), and
* docs/config.md's field tables (:attr:`Field.row`); both written by
  :mod:`audit.config.docs`.

Every error is a :class:`ConfigError` whose message names the field path
(``claims[1].alpha``), the value found and the fix.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """An audit config is invalid; the message names the field, the value found and the fix."""


REQUIRED = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()
"""The default of a field the config must give."""
_KINDS = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string", "table": "object"}
_BOOLEAN = "must be true or false (a TOML boolean, unquoted)"


@dataclass(frozen=True)
class Field:
    """One config field.

    Attributes
    ----------
    name : str
    kind : str
        ``integer``, ``number``, ``numbers`` (a non-empty list of numbers, each within the limits), ``boolean``,
        ``string``, ``table``, or ``other`` (read by its owner's code;
        the declaration then serves the docs and the schema only).
    default : object
        :data:`REQUIRED`, None (unset), or the value a config that leaves it out gets.
    low, high : float, optional
        Limits of a number; ``open_low`` / ``open_high`` exclude them.
    choices : tuple of str
        The accepted strings (a choice field).
    forbid : tuple
        Values refused although within the limits (``n_jobs = 0``).
    limits : str
        What a value must be, the error message's middle (``must be in [0.5, 1), e.g. 0.95``).
    meaning : str
        docs/config.md's "limits and meaning" (markdown), also the schema's description.
    type_doc, default_doc : str
        docs/config.md's "type" and "default" columns, when the kind and default do not say it.
    schema_extra : mapping
        JSON Schema keywords beyond those the kind, limits and choices give.
    documented : bool
        False for a retired field: accepted by name only to be refused with a message naming its successor.
    """

    name: str
    kind: str
    default: Any = None
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    forbid: tuple[Any, ...] = ()
    limits: str = ""
    meaning: str = ""
    type_doc: str = ""
    default_doc: str = ""
    schema_extra: Mapping[str, Any] = field(default_factory=dict)
    documented: bool = True

    def accepts(self, value: float) -> bool:
        """Whether a number of the right type is within the limits."""
        below = self.low is not None and (value <= self.low if self.open_low else value < self.low)
        above = self.high is not None and (value >= self.high if self.open_high else value > self.high)
        return not (below or above or value in self.forbid)

    @property
    def schema(self) -> dict[str, Any]:
        """The field's JSON Schema (draft 2020-12)."""
        schema: dict[str, Any] = {}
        if self.choices:
            schema["enum"] = list(self.choices)
        elif self.kind in _KINDS:
            schema["type"] = _KINDS[self.kind]
        bounds = {f"exclusive{key.title()}" if exclusive else key: bound for bound, key, exclusive in (
            (self.low, "minimum", self.open_low), (self.high, "maximum", self.open_high)) if bound is not None}
        if self.kind == "numbers":
            schema.update({"type": "array", "minItems": 1, "items": {"type": "number", **bounds}})
        else:
            schema.update(bounds)
        if self.forbid:
            schema["not"] = {"enum": list(self.forbid)} if len(self.forbid) > 1 else {"const": self.forbid[0]}
        schema.update(self.schema_extra)
        if self.default is not None and self.default is not REQUIRED:
            schema["default"] = _plain(self.default)
        if self.meaning:
            schema["description"] = self.meaning
        return schema

    @property
    def row(self) -> str:
        """The field's row of docs/config.md's table: field, type, default, limits and meaning."""
        kind = self.type_doc or (" \\| ".join(f'`"{c}"`' for c in self.choices) if self.choices else self.kind)
        default = self.default_doc or ("required" if self.default is REQUIRED else "none" if self.default is None
                                       else f"`{_toml(self.default)}`" if isinstance(self.default, (str, Mapping, tuple))
                                       else _toml(self.default))
        return f"| `{self.name}` | {kind} | {default} | {self.meaning} |"


@dataclass(frozen=True)
class Section:
    """A config table (``[attacks]``) or array of tables (``[[claims]]``) and its fields, in the order the
    "accepted fields" hint lists them."""

    name: str
    fields: tuple[Field, ...]
    array: bool = False
    schema_extra: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Field:
        return next(entry for entry in self.fields if entry.name == name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.fields)

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of one table of the section."""
        required = [entry.name for entry in self.fields if entry.default is REQUIRED and entry.kind != "other"]
        schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
        if required:
            schema["required"] = required
        schema["properties"] = {entry.name: entry.schema for entry in self.fields if entry.documented}
        schema.update(self.schema_extra)
        return schema

    @property
    def table(self) -> str:
        """docs/config.md's table of the section's fields."""
        rows = [entry.row for entry in self.fields if entry.documented]
        return "\n".join(["| field | type | default | limits and meaning |", "|---|---|---|---|", *rows]) + "\n"


def _plain(value: Any) -> Any:
    """A default as JSON (tuples as lists)."""
    return json.loads(json.dumps(value))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_fields(table: Mapping, known: Sequence[str], where: str) -> None:
    """Refuse a field not in ``known``, suggesting the nearest name or listing them."""
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"accepted fields: {', '.join(known)}."
            raise ConfigError(f"{where}: unknown field {key!r}; {hint}")


def value(table: Mapping, declared: Field, path: str, default: Any = REQUIRED) -> Any:
    """Field ``declared`` of ``table`` (its declared default when absent, or ``default`` when given), checked
    against the declaration's type and limits; ``path`` is the field's path (``attacks.confidence``)."""
    fallback = declared.default if default is REQUIRED else default
    if declared.name not in table:
        if fallback is REQUIRED:
            raise ConfigError(f"{path}: missing required field; {declared.limits}.")
        return fallback
    found = table[declared.name]
    if found is None and fallback is None:
        return None
    if declared.kind == "boolean":
        if not isinstance(found, bool):
            raise ConfigError(f"{path}: {declared.limits or _BOOLEAN}. Found {found!r}.")
        return found
    if declared.choices:
        return choice(found, declared.choices, path)
    if declared.kind == "string":
        return string(found, path)
    if declared.kind == "numbers":
        if not isinstance(found, list) or not found:
            raise ConfigError(f"{path}: must be a non-empty list of numbers, e.g. [0.5, 1.0, 2.0]. Found {found!r}.")
        return tuple(_scalar(item, declared, f"{path}[{i}]") for i, item in enumerate(found))
    return _scalar(found, declared, path)


def _scalar(found: Any, declared: Field, path: str) -> int | float:
    """A number of the declared kind (an integer, or any finite number as a float) within the declared limits."""
    integer = declared.kind == "integer"
    found = number(found, path, integer=integer)
    found = int(found) if integer else float(found)
    if not declared.accepts(found):
        raise ConfigError(f"{path}: {declared.limits}. Found {found!r}.")
    return found


def table(raw: Mapping, key: str, path: str) -> dict:
    """Table ``key`` of ``raw`` (empty when absent)."""
    found = raw.get(key, {})
    if not isinstance(found, Mapping):
        raise ConfigError(f"{path}: must be a table ([{key}] or {key} = {{...}}). Found {found!r}.")
    return dict(found)


def array_of_tables(raw: Mapping, key: str) -> list[dict]:
    """Array of tables ``key`` of ``raw`` (empty when absent; one table reads as a list of one)."""
    found = raw.get(key, [])
    if isinstance(found, Mapping):
        found = [found]
    if not isinstance(found, list) or not all(isinstance(entry, Mapping) for entry in found):
        raise ConfigError(f"{key}: must be an array of tables ([[{key}]] entries). Found {found!r}.")
    return [dict(entry) for entry in found]


def required(table: Mapping, key: str, path: str, hint: str) -> Any:
    if key not in table:
        raise ConfigError(f"{path}.{key}: missing required field; {hint}.")
    return table[key]


def number(found: Any, path: str, *, integer: bool = False) -> float | int:
    """``found`` if it is an integer (``integer``) or a finite number, never a bool or a string."""
    kinds = (int,) if integer else (int, float)
    if isinstance(found, bool) or not isinstance(found, kinds) or (not integer and not math.isfinite(found)):
        kind = "an integer" if integer else "a finite number"
        raise ConfigError(f"{path}: must be {kind} (unquoted; true / false are not numbers). Found {found!r}.")
    return found


def string(found: Any, path: str) -> str:
    if not isinstance(found, str):
        raise ConfigError(f"{path}: must be a string. Found {found!r}.")
    return found


def choice(found: Any, accepted: Sequence[str], path: str) -> str:
    """``found`` if it is one of ``accepted``, else an error with the nearest name."""
    found = string(found, path)
    if found not in accepted:
        close = difflib.get_close_matches(found, accepted, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{path}: unknown value {found!r}{hint}; accepted: {', '.join(accepted)}.")
    return found


def class_name(found: Any, path: str) -> str:
    """A function class's name (:func:`attacks.classes.parse_function_class`), as given."""
    from attacks.classes import parse_function_class

    found = string(found, path)
    try:
        parse_function_class(found)
    except ValueError as error:
        raise ConfigError(f"{path}: {one_line(error)}") from None
    return found


def one_line(error: Exception) -> str:
    """An error's message on one line (numpy reprs and user mechanisms' messages span several)."""
    return " ".join(str(error).split())
