"""docs/schema/config.schema.json and docs/config.md's field tables, written from the declared fields.

Each config table's fields are declared once, beside their owner
(:func:`audit.config.load.sections`); this module writes what the docs state
about them: the JSON Schema, and in docs/config.md each table between the
markers ``<!-- fields: NAME -->`` and ``<!-- end of fields -->`` (the prose
around them is written by hand).  ``python -m audit.config.docs`` rewrites
both; ``--check`` exits 1 when the committed files differ (tests/test_docs.py
runs the same comparison).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from audit.config.checks import CHECKS
from audit.config.claims import ALPHA, CLAIMS
from audit.config.load import RULES, sections
from audit.config.pairs import DATASET, PAIRS

SCHEMA = Path("docs") / "schema" / "config.schema.json"
REFERENCE = Path("docs") / "config.md"
"""The generated files, relative to the repository's root (the current directory of ``python -m audit.config.docs``;
an installed package carries no docs/)."""
_MARKERS = re.compile(r"(<!-- fields: (\w+) -->\n)(.*?)(<!-- end of fields -->)", re.S)
_ARRAYS = {PAIRS.name: ("pair", "Explicit neighbouring datasets ([[pairs]]); not with [neighbours]."),
           CLAIMS.name: ("claim", ""),
           CHECKS.name: ("check", "CBDP's theorems as audits (audit.engine.checks); none by default. docs/config.md, [[checks]].")}
"""Arrays of tables: the name of one entry's schema in ``$defs``, and the array's description."""


def schema() -> dict[str, Any]:
    """The config's JSON Schema (draft 2020-12)."""
    properties, definitions = {}, {"dataset": DATASET, "alpha": ALPHA}
    for section in sections():
        if not section.array:
            properties[section.name] = section.schema
            continue
        entry, description = _ARRAYS[section.name]
        definitions[entry] = section.schema
        reference = {"$ref": f"#/$defs/{entry}"}
        properties[section.name] = {**({"description": description} if description else {}), "oneOf": [
            {"type": "array", "minItems": 1, "items": reference}, reference]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "capaudit/config.schema.json",
        "title": "capaudit audit config",
        "description": "The TOML config of `capaudit run` (or the dict given to audit.run_audit), as validated by "
                       "audit.config.load.load_config. Field reference: docs/config.md. Written by `python -m "
                       "audit.config.docs` from the fields declared in the code; the loader's checks are the "
                       "authority for the rules between fields. A config needs [[claims]], [[checks]] or both.",
        "type": "object",
        "additionalProperties": False,
        "required": ["mechanism"],
        **RULES,
        "properties": properties,
        "$defs": definitions,
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def reference_text(text: str) -> str:
    """docs/config.md's ``text`` with each marked table rewritten from its section's fields."""
    tables = {section.name: section.table for section in sections()}

    def table(match: re.Match) -> str:
        return match[1] + tables[match[2]] + match[4]

    return _MARKERS.sub(table, text)


def stale(root: Path) -> list[Path]:
    """The files under the repository ``root`` that differ from what the declarations give."""
    reference = (root / REFERENCE).read_text()
    return [path for path, written, expected in ((SCHEMA, (root / SCHEMA).read_text(), schema_text()),
                                                 (REFERENCE, reference, reference_text(reference)))
            if written != expected]


def main(argv: list[str] | None = None) -> int:
    """In the repository's root (the current directory): rewrite the schema and docs/config.md's tables; with
    ``--check``, only say which differ (exit 1)."""
    arguments = sys.argv[1:] if argv is None else argv
    root = Path.cwd()
    if not (root / REFERENCE).is_file():
        print(f"no {REFERENCE} here: run python -m audit.config.docs from the repository's root", file=sys.stderr)
        return 2
    if "--check" in arguments:
        paths = stale(root)
        for path in paths:
            print(f"{path} differs from the declared fields: run python -m audit.config.docs")
        return 1 if paths else 0
    (root / SCHEMA).write_text(schema_text())
    (root / REFERENCE).write_text(reference_text((root / REFERENCE).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
