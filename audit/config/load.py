"""Audit configs: a TOML file or a dict, validated into a frozen :class:`AuditConfig`.

The fields are docs/design.md's "Contract: config".  Every error is a
:class:`ConfigError` whose message names the field path (``claims[1].alpha``),
the value found and what would fix it; ``capaudit`` prints it and exits 2.

This module reads the file and hands each table to the code that owns its
fields (:mod:`audit.config.fields` declares them, :mod:`audit.config.docs` writes
the schema and docs/config.md's tables from the declarations):

=================  ========================================================
``[mechanism]``    :mod:`audit.mechanisms.spec`
``[[pairs]]``      :mod:`audit.config.pairs` (``[neighbours]`` too)
``[[claims]]``     :mod:`audit.config.claims` (curve claims: :mod:`audit.config.families`)
``[[checks]]``     :mod:`audit.config.checks`
``[attacks]``      :mod:`audit.config.attacks`
``[run]``          :mod:`audit.sampling.parallel`
``[one_run]``      :mod:`audit.config.one_run` (one training run, m canaries)
=================  ========================================================

User mechanisms (``[mechanism] callable = "module:function"``) are imported
with the config file's directory and the current directory at the front of
``sys.path``, so a module next to the config (``examples/my_mechanism.py``
beside ``examples/custom.toml``) is found without installing it.  A config
runs the code it names (a trust boundary): that import happens only after the
rest of the config is valid, and only for ``callable``; built-in names and
library adapters never import from those folders.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from audit.config.accounting import accounted_entry
from audit.config.attacks import ATTACKS, DEFAULT_CLASSES, AttackSpec, attack_spec
from audit.config.checks import CHECKS, PROPERTIES, CheckSpec, check_specs
from audit.config.claims import CLAIMS, Claim, check_on_average, check_refutable, claims_of
from audit.config.fields import ConfigError, Section, array_of_tables, check_fields, one_line, table
from audit.mechanisms.spec import MECHANISM, MechanismSpec, check_build, mechanism_spec
from audit.config.one_run import ONE_RUN, OneRunSpec, one_run_spec
from audit.config.pairs import NEIGHBOURS, PAIRS, import_distribution, neighbours_spec, pair
from audit.inputs.neighbours import on_average_pair_names
from audit.sampling.parallel import RUN, RunSpec, run_spec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["DEFAULT_CLASSES", "PROPERTIES", "AttackSpec", "AuditConfig", "CheckSpec", "Claim", "ConfigError",
           "MechanismSpec", "RULES", "RunSpec", "SECTIONS", "load_config", "load_run"]

SECTIONS = ("mechanism", "pairs", "neighbours", "claims", "checks", "attacks", "run", "one_run")
"""The config's tables, in the order the "accepted fields" hint lists them."""
RULES = {"allOf": [{"not": {"required": ["pairs", "neighbours"]}}],
         "anyOf": [{"required": ["claims"]}, {"required": ["checks"]}]}
"""The rules between the tables (:func:`_validate` applies them), as JSON Schema keywords."""


@dataclass(frozen=True, eq=False)
class AuditConfig:
    """A validated audit config.

    Attributes
    ----------
    mechanism : MechanismSpec
    pairs : tuple of (numpy.ndarray, numpy.ndarray)
        Explicit neighbouring datasets (d, d'); empty when ``neighbours`` is set
        or when the built-in mechanism's ``default_pairs()`` are used.
    neighbours : mapping or None
        ``[neighbours]`` options for :func:`audit.inputs.neighbours.make_pairs`.
    claims : tuple of Claim
    attacks : AttackSpec
    run : RunSpec
    raw : dict
        The config as given (after command-line overrides), for results.json.
    checks : tuple of CheckSpec
        ``[[checks]]`` entries: CBDP's theorems as audits (:mod:`audit.engine.checks`); empty by default.
    averaged_pairs : frozenset of str or None
        The pairs an on-average claim averages over, read once from ``neighbours``
        (:func:`audit.inputs.neighbours.on_average_pair_names`); None when every pair is one.
    """

    mechanism: MechanismSpec
    pairs: tuple[tuple[np.ndarray, np.ndarray], ...]
    neighbours: Mapping[str, Any] | None
    claims: tuple[Claim, ...]
    attacks: AttackSpec
    run: RunSpec
    raw: Mapping[str, Any]
    checks: tuple[CheckSpec, ...] = ()
    claim_distances: tuple[float | int, ...] = ()
    """The ``d_in`` at which claims are read (a library's map) or carried (group privacy), each pair judged against
    the claims at its own ``d_in`` (:attr:`Claim.d_in`); empty when every claim holds for every pair."""
    pair_d_in: tuple[float | int, ...] = ()
    """Each explicit ``[[pairs]]`` entry's ``d_in`` where :attr:`claim_distances` is set (its distance under its
    relation, :func:`audit.config.pairs.pair_distances`, in the mechanism's input metric where it reads one);
    empty otherwise."""
    one_run: OneRunSpec | None = None
    """``[one_run]``: audit the claims from one training run with canaries (:mod:`audit.engine.one_run`), else None."""
    averaged_pairs: frozenset[str] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "averaged_pairs", on_average_pair_names(self.neighbours))


def load_config(
    source: str | os.PathLike | Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> AuditConfig:
    """Read and validate an audit config.

    Parameters
    ----------
    source : path or mapping
        A TOML file (docs/design.md, "Contract: config") or the same structure as a dict.
    overrides : mapping, optional
        ``[run]`` values that replace the config's (``seed``, ``n_jobs``,
        ``backend``; None values are ignored): the command line's options.

    Returns
    -------
    AuditConfig

    Raises
    ------
    ConfigError
        Naming the field path, the value found and the fix.
    """
    try:
        raw, base_dir = _read(source)
        run = dict(table(raw, "run", "run"))
        run.update({key: value for key, value in (overrides or {}).items() if value is not None})
        if run:
            raw["run"] = run
        return _validate(raw, base_dir)
    except RecursionError:
        raise ConfigError(
            "config: nested too deeply to read (tables or arrays within each other hundreds of levels deep); "
            "a config needs at most a few levels, e.g. [[pairs]] d = [[0.0], [1.0]]."
        ) from None


def load_run(run: Mapping[str, Any]) -> RunSpec:
    """A ``[run]`` table alone, validated as in a config (``capaudit oakl``'s options); ConfigError names the field."""
    return run_spec(dict(run))


def _read(source: str | os.PathLike | Mapping[str, Any]) -> tuple[dict, Path]:
    """The raw config and the directory user mechanisms are imported from."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), Path.cwd()
    path = Path(source)
    try:
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist.") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(path)!r} is a directory; give the path of a .toml file.") from None
    except OSError as error:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {error.strerror or error}.") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {one_line(error)}.") from None
    return raw, path.resolve().parent


def _validate(raw: dict, base_dir: Path) -> AuditConfig:
    check_fields(raw, SECTIONS, "the config")
    if "mechanism" not in raw:
        raise ConfigError(
            'config: missing required table [mechanism] (name = "laplace" or callable = "module:function").'
        )
    mechanism = mechanism_spec(table(raw, "mechanism", "mechanism"), base_dir)
    if callable(mechanism.callable):  # a function object (Python API): results.json records its name
        from audit.mechanisms.registry import function_name

        raw["mechanism"] = dict(raw["mechanism"], callable=function_name(mechanism.callable))
    if "pairs" in raw and "neighbours" in raw:
        raise ConfigError("config: give either [[pairs]] or [neighbours], not both.")
    entries = array_of_tables(raw, "pairs")
    pairs = tuple(pair(entry, f"pairs[{i}]") for i, entry in enumerate(entries))
    if pairs:  # plain lists, so that results.json can record the config as run
        raw["pairs"] = [
            {**entry, "d": d.tolist(), "d_prime": d_prime.tolist()} for entry, (d, d_prime) in zip(entries, pairs)
        ]
    neighbours = neighbours_spec(table(raw, "neighbours", "neighbours")) if "neighbours" in raw else None
    if "pairs" in raw and not pairs:
        raise ConfigError("pairs: the list is empty; give at least one [[pairs]] entry with d and d_prime.")
    if not pairs and neighbours is None and mechanism.callable is not None:
        raise ConfigError(
            "pairs: missing required field for a user mechanism (it has no default neighbours); "
            "add [[pairs]] entries with d and d_prime, or a [neighbours] table."
        )
    if "claims" in raw:  # an accountant claim's epsilon computed and written into its entry (audit.config.accounting)
        raw["claims"] = [accounted_entry(entry, f"claims[{i}]", mechanism)
                         for i, entry in enumerate(array_of_tables(raw, "claims"))]
    entries, tables, claim_distances, pair_d_in = _claim_tables(raw, mechanism, pairs, neighbours)
    one_run = one_run_spec(table(raw, "one_run", "one_run"), raw, entries) if "one_run" in raw else None
    # a curve claim (gdp, zcdp, profile) is audited as its members, ordinary dp / renyi claims (audit.config.families)
    members = [(f"claims[{i}]", replace(claim, d_in=d_in))
               for i, entry, d_in in tables for claim in claims_of(entry, f"claims[{i}]")]
    claims = tuple(claim for _, claim in members)
    check_on_average(claims, neighbours)
    attacks = attack_spec(table(raw, "attacks", "attacks"), on_average=any(claim.on_average for claim in claims))
    checks = check_specs(raw, mechanism, attacks)
    if not claims and not checks:
        raise ConfigError(
            "claims: missing required field; add at least one [[claims]] entry (divergence, function_class, epsilon) "
            "or a [[checks]] entry (property = \"sequential\", ...)."
        )
    for path, claim in members if one_run is None else ():  # the many-runs ceiling; one run has its own
        check_refutable(claim, attacks, path)
    config = AuditConfig(
        mechanism=mechanism,
        pairs=pairs,
        neighbours=neighbours,
        claims=claims,
        attacks=attacks,
        run=run_spec(table(raw, "run", "run")),
        raw=raw,
        checks=checks,
        claim_distances=claim_distances,
        pair_d_in=pair_d_in,
        one_run=one_run,
    )
    if mechanism.callable is not None:  # user code runs last, once the rest of the config is valid
        check_build(mechanism)
    if isinstance((neighbours or {}).get("distribution"), str):
        import_distribution(neighbours["distribution"], base_dir)
    return config


def _claim_tables(raw: dict, mechanism: MechanismSpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                  neighbours: Mapping[str, Any] | None
                  ) -> tuple[list[dict], list[tuple[int, dict, float | int | None]], tuple[float | int, ...],
                             tuple[float | int, ...]]:
    """The ``[[claims]]`` tables as audited: one per entry (a claim from the library read from the mechanism's
    privacy map, :mod:`audit.config.library_claims`, written into ``raw`` with its source as the reason); each
    entry's tables with the ``d_in`` they hold at (None: every pair): a library's map at each ``d_in`` of the pairs,
    a claim typed by hand carried by group privacy to each pair farther apart than it is stated for
    (:mod:`audit.config.group_privacy`: a ``[neighbours] distance`` list, or explicit ``[[pairs]]`` at their own
    distances, :func:`audit.config.pairs.pair_distances`); the ``d_in`` of the pairs when they are read at
    several; and each explicit pair's ``d_in`` (empty unless those are)."""
    from audit.config.group_privacy import carried_tables, steps
    from audit.config.library_claims import claim_distances, library_claim_table, library_reason, neighbour_distances
    from audit.config.pairs import pair_distances

    entries = array_of_tables(raw, "claims")
    library = any("from" in entry for entry in entries)
    if library and mechanism.callable is not None:
        raise ConfigError('claims: from = "library" reads a library\'s privacy map; a callable states none. Use '
                          'name = "opendp.measurement", or give divergence and epsilon.')
    for i, entry in enumerate(entries):
        if "from" not in entry:
            claims_of(entry, f"claims[{i}]")  # the claim as typed checked first: errors show the user's values
    built = mechanism.build() if mechanism.callable is None and (library or pairs) else None
    spec_distance = (neighbours or {}).get("distance", 1)
    stated = {i: int(entry.get("distance", spec_distance if isinstance(spec_distance, int) else 1))
              for i, entry in enumerate(entries) if "from" not in entry}  # an integer distance: the claims' own
    if pairs:  # each pair at its own distance, checked
        ks = pair_distances(array_of_tables(raw, "pairs"), pairs, built)
    else:
        ks = neighbour_distances(neighbours) if neighbours is not None else [1]
    group = isinstance(spec_distance, list) or len(set(ks)) > 1  # pairs at several distances
    carry = group or any(steps(k, s) > 1 for k in ks for s in stated.values())  # some claim carried
    if carry and built is None and mechanism.callable is None:
        built = mechanism.build()
    try:
        d_ins = claim_distances(built, pairs, neighbours) if library else []
        placed = _placed(built, pairs, ks, neighbours) if carry or (library and pairs) else []
    except ValueError as error:
        raise ConfigError(f"claims: {one_line(error)}") from None
    if "one_run" in raw and (group or len(d_ins) > 1):
        raise ConfigError(f"one_run: a one-run audit reads its claim at one distance; give neighbours.distance as one "
                          f"integer, or pairs at one d_in. Found {spec_distance if group else d_ins!r}.")
    resolved, tables, held = [], [], set(d_ins)
    for i, entry in enumerate(entries):
        path = f"claims[{i}]"
        if "from" in entry:
            check_fields(entry, CLAIMS.names, path)
            try:
                read = [library_claim_table(entry, path, built, d_in) for d_in in d_ins]
            except ValueError as error:
                raise ConfigError(one_line(error)) from None
            written = read[0][0] if len(read) == 1 else {}  # several d_in: the rows carry each claim
            raw["claims"][i] = {**entry, **written,
                                "reason": library_reason(entry, "; ".join(source for _, source in read))}
            resolved.append(read[0][0])
            tables += [(i, found, d_in) for (found, _), d_in in zip(read, d_ins)]
            continue
        try:
            carried = carried_tables(entry, path, placed, stated[i]) if carry else [(entry, None)]
        except ValueError as error:
            raise ConfigError(one_line(error)) from None
        tables += [(i, found, d_in) for found, d_in in carried]
        resolved.append(entry)
    if carry:  # the pairs are read at their own d_in
        held.update(d_in for _, d_in, _ in placed)
    explicit = tuple(d_in for _, d_in, _ in placed) if pairs and held else ()
    return resolved, tables, tuple(sorted(held)), explicit


def _placed(built: Any, pairs: Sequence[tuple[np.ndarray, np.ndarray]], ks: Sequence[int],
            neighbours: Mapping[str, Any] | None) -> list[tuple[int, float | int, str]]:
    """(records apart, ``d_in``, name) of each explicit pair (``pairs[i]``), else of each distance generated
    (no name): ``d_in`` in the mechanism's input metric where it reads one
    (:func:`audit.config.library_claims.pair_d_in`, :func:`~audit.config.library_claims.relation_d_in`), else k."""
    from audit.config.library_claims import pair_d_in, relation_d_in

    if pairs:
        return [(k, pair_d_in(built, d, d_prime, k), f"pairs[{i}]") for i, (k, (d, d_prime)) in enumerate(zip(ks, pairs))]
    relation = (neighbours or {}).get("relation", "replace-one")
    return [(k, k if built is None else relation_d_in(built, relation, k), "") for k in ks]


def sections() -> tuple[Section, ...]:
    """Every table's declared fields, in :data:`SECTIONS` order (for :mod:`audit.config.docs`)."""
    return MECHANISM, PAIRS, NEIGHBOURS, CLAIMS, CHECKS, ATTACKS, RUN, ONE_RUN
