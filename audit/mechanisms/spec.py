"""``[mechanism]``: which mechanism to audit, a registry ``name`` or a user ``callable``, and its ``params``.

The fields are declared once (:data:`MECHANISM`); :func:`mechanism_spec`
reads a table into a :class:`MechanismSpec` and builds a built-in once to
check it.  A user ``callable`` is imported from the config's folder
(:func:`audit.config.import_path.user_import_path`) only when :func:`check_build` is
called, after the rest of the config is valid: a config runs the code it
names (a trust boundary).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.config.fields import ConfigError, Field, Section, check_fields, one_line, string
from audit.config.import_path import user_import_path

_TARGET = "^[^:]+:[^:]+$"
MECHANISM = Section("mechanism", (
    Field("name", "string", default_doc="—",
          meaning="a built-in, buggy or adapter mechanism: see `capaudit mechanisms`. Exactly one of `name` and "
                  "`callable`."),
    Field("callable", "string", default_doc="—", schema_extra={"pattern": _TARGET},
          meaning="user code, `\"module:function\"`; the module is imported with the config file's directory and the "
                  "current directory at the front of `sys.path`. The function is `f(dataset, n, rng, **params)` "
                  "returning n outputs of shape (n, d) ([design.md](design.md), \"Contract: config\")."),
    Field("params", "table", {},
          meaning="keyword parameters of the mechanism (e.g. `{ epsilon = 1.0, sensitivity = 1.0 }`); unknown or "
                  "invalid ones are refused when the mechanism is built."),
), schema_extra={"oneOf": [{"required": ["name"], "not": {"required": ["callable"]}},
                           {"required": ["callable"], "not": {"required": ["name"]}}]})
"""``[mechanism]``'s fields (docs/config.md)."""


@dataclass(frozen=True)
class MechanismSpec:
    """``[mechanism]``: a registry ``name`` or a user ``callable``, with its ``params``."""

    name: str | None
    callable: str | Callable[..., Any] | None
    params: Mapping[str, Any]
    base_dir: Path

    def build(self):
        """Build the mechanism (:func:`audit.mechanisms.make_mechanism`), user modules found from ``base_dir``."""
        from audit.mechanisms import make_mechanism

        if self.callable is None:  # built-ins and adapters never import from the config's folder
            return make_mechanism(self.name, dict(self.params))
        with user_import_path(self.base_dir):
            return make_mechanism(callable=self.callable, params=dict(self.params))


def mechanism_spec(table: dict, base_dir: Path) -> MechanismSpec:
    """A ``[mechanism]`` table validated; a built-in is built once to check it (a user callable is not)."""
    check_fields(table, MECHANISM.names, "mechanism")
    name, target = table.get("name"), table.get("callable")
    if (name is None) == (target is None):
        raise ConfigError(
            "mechanism: give exactly one of name (a built-in: see `capaudit mechanisms`) or "
            f"callable = \"module:function\". Found name={name!r}, callable={target!r}."
        )
    params = table.get("params", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"mechanism.params: must be a table, e.g. {{ epsilon = 1.0 }}. Found {params!r}.")
    spec = MechanismSpec(
        name=None if name is None else string(name, "mechanism.name"),
        callable=target if target is None or callable(target) else string(target, "mechanism.callable"),
        params=dict(params),
        base_dir=base_dir,
    )
    if spec.callable is None:  # a built-in runs no user code: check it early
        check_build(spec)
    return spec


def check_build(spec: MechanismSpec) -> None:
    """Build the mechanism once to check it; a ConfigError names the field."""
    try:
        spec.build()
    except (TypeError, ValueError) as error:
        raise ConfigError(f"mechanism.{'name' if spec.callable is None else 'callable'}: {one_line(error)}") from None
