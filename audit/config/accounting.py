"""Claims as DP-SGD users state them: (epsilon, delta) from training parameters through dp_accounting.

A ``[[claims]]`` entry with ``accountant = "rdp"`` or ``"pld"`` and no
``epsilon`` states its epsilon as the accountant computes it at the entry's
``delta`` for T = ``steps`` steps of the Poisson-subsampled Gaussian
mechanism with sampling rate q = ``sampling_rate`` and noise multiplier
z = ``noise_multiplier`` (noise standard deviation over the sensitivity), by
dp_accounting's RDP or PLD accountant (:mod:`audit.theory.accountants`).  Fields the entry does
not give come from a learner that states them
(:meth:`audit.mechanisms.learners.DPGradientDescent.training_parameters`,
and the Opacus adapter's), so its claim is the accountant's.  The computed epsilon is written into the
entry (results.json ``config`` records it), and the report names the claim's
source (:func:`claim_source`).  dp_accounting is the optional extra
``capaudit[accounting]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attacks.vocabulary import DP, divergence_kind
from audit.config.fields import ConfigError, number, one_line, required
from audit.theory.accountants import ACCOUNTANTS, accountant_epsilon, composed_accountant

TRAINING_FIELDS = ("noise_multiplier", "sampling_rate", "steps")
"""The training parameters an accountant claim reads (from the entry, else from the mechanism)."""
def pld_profile_claim(parameters: Mapping[str, float], d_in: int, epsilons: Sequence[float] | None = None) -> Any:
    """dp_accounting's PLD privacy profile of a training run as a ``profile`` claim (``[[claims]] from = "library"``).

    ``parameters``: noise_multiplier, sampling_rate and steps (the learner's
    ``training_parameters()``).  The profile delta(epsilon) of the composed
    privacy loss distribution (Koskela, Jalko and Honkela 2020) is read at
    ``epsilons``, by default :data:`audit.config.library_claims.PROFILE_EPSILONS`
    times its epsilon at delta :data:`audit.config.library_claims.PROFILE_DELTA`;
    the accountant's neighbours are one record apart, so ``d_in`` must be 1.
    Returns a :class:`audit.mechanisms.adapters.library.LibraryClaim`.
    """
    import importlib.metadata

    from audit.config.library_claims import PROFILE_DELTA, PROFILE_EPSILONS
    from audit.mechanisms.adapters.library import LibraryClaim

    if d_in != 1:
        raise ValueError(f"dp_accounting's privacy profile is stated for neighbours one record apart; the pairs are "
                         f"at d_in = {d_in}: give neighbours (distance = 1).")
    account = composed_accountant("pld", *(float(parameters[field]) for field in TRAINING_FIELDS[:2]), int(parameters["steps"]))
    grid = list(epsilons) if epsilons else [x * float(account.get_epsilon(PROFILE_DELTA)) for x in PROFILE_EPSILONS]
    deltas = [min(float(account.get_delta(epsilon)), 0.999) for epsilon in grid]
    points = ", ".join(f"({e:.4g}, {d:.3g})" for e, d in zip(grid, deltas))
    used = ", ".join(f"{field} {parameters[field]:g}" for field in TRAINING_FIELDS)
    return LibraryClaim({"divergence": "profile", "epsilons": grid, "deltas": deltas},
                        f"dp_accounting {importlib.metadata.version('dp-accounting')}'s PLD accountant ({used}): the "
                        f"privacy profile (epsilon, delta) at {points}")


def training_parameters(entry: Mapping[str, Any], stated: Mapping[str, float] | None) -> dict[str, float]:
    """The entry's training parameters, each missing one taken from ``stated`` (the mechanism's); KeyError names
    the first that neither gives."""
    values = {}
    for field in TRAINING_FIELDS:
        if field in entry:
            values[field] = entry[field]
        elif stated is not None and field in stated:
            values[field] = stated[field]
        else:
            raise KeyError(field)
    return values


def accounted_entry(entry: dict, path: str, mechanism: Any) -> dict:
    """A ``[[claims]]`` entry, with ``epsilon`` and ``accounted`` (the parameters used) when it names an accountant.

    ``mechanism``: the config's :class:`audit.mechanisms.spec.MechanismSpec`, built only when the entry leaves a
    training parameter out (a built-in that states them: ``training_parameters()``).  Raises ConfigError naming
    the field.
    """
    if "accountant" not in entry:
        for field in TRAINING_FIELDS + ("accounted",):
            if field in entry:
                raise ConfigError(f'{path}.{field}: only a claim with accountant = "rdp" or "pld" takes {field}. '
                                  f"Found {entry[field]!r}.")
        return entry
    if entry["accountant"] not in ACCOUNTANTS:
        raise ConfigError(f"{path}.accountant: must be one of {', '.join(map(repr, ACCOUNTANTS))}. "
                          f"Found {entry['accountant']!r}.")
    if entry.get("divergence") != DP.name:
        raise ConfigError(f'{path}.divergence: an accountant claim is an (epsilon, delta) claim; set divergence = '
                          f'"dp". Found {entry.get("divergence")!r}.')
    if "epsilon" in entry and "accounted" not in entry:
        raise ConfigError(f"{path}.epsilon: an accountant claim computes its epsilon; remove epsilon or accountant. "
                          f"Found {entry['epsilon']!r}.")
    delta = float(number(required(entry, "delta", path, "the accountant's delta, e.g. delta = 1e-5"), f"{path}.delta"))
    stated = None if all(field in entry for field in TRAINING_FIELDS) else _stated(mechanism)
    try:
        used = training_parameters(entry, stated)
    except KeyError as missing:
        raise ConfigError(f"{path}.{missing.args[0]}: missing; an accountant claim needs noise_multiplier, "
                          "sampling_rate and steps unless its mechanism states them (dp_gd_logistic and "
                          "opacus.dp_sgd do).") from None
    for field, found in used.items():
        number(found, f"{path}.{field}", integer=field == "steps")
    try:
        epsilon = accountant_epsilon(entry["accountant"], float(used["noise_multiplier"]),
                                     float(used["sampling_rate"]), int(used["steps"]), delta)
    except ImportError as error:
        raise ConfigError(f"{path}.accountant: {one_line(error)}") from None
    except ValueError as error:
        raise ConfigError(f"{path}: {one_line(error)}") from None
    return {**entry, "epsilon": epsilon, "accounted": dict(used)}


def _stated(mechanism: Any) -> Mapping[str, float] | None:
    """The training parameters a learner states (built-in or adapter), None for user code and other mechanisms."""
    if mechanism.name is None:
        return None
    built = mechanism.build()
    return built.training_parameters() if hasattr(built, "training_parameters") else None


def claim_source(entry: Mapping[str, Any]) -> str:
    """The report's words for where an accountant claim's epsilon came from ("" for a claim typed by hand)."""
    if "accountant" not in entry:
        return ""
    used = entry.get("accounted", {})
    parts = ", ".join(f"{field} {used[field]:g}" for field in TRAINING_FIELDS if field in used)
    origin = "" if all(field in entry for field in TRAINING_FIELDS) else " (parameters the mechanism states)"
    return (f"claim from dp_accounting's {entry['accountant'].upper()} accountant: {parts}, delta "
            f"{entry['delta']:g}{origin} -> epsilon {entry['epsilon']:.4g}")


def source_note(claim: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """:func:`claim_source` of the config entry a dp claim summary (results.json ``claims``) came from, or ""."""
    entries = config.get("claims") or []
    for entry in [entries] if isinstance(entries, Mapping) else entries:
        if (divergence_kind(claim["divergence"]) is DP and "accounted" in entry and entry["function_class"] == claim["claim_class"]
                and float(entry["epsilon"]) == claim["claim"] and float(entry["delta"]) == claim["delta"]):
            return claim_source(entry)
    return ""
