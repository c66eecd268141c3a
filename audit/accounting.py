"""Claims as DP-SGD users state them: (epsilon, delta) from training parameters through dp_accounting.

A ``[[claims]]`` entry with ``accountant = "rdp"`` or ``"pld"`` and no
``epsilon`` states its epsilon as the accountant computes it at the entry's
``delta`` for T = ``steps`` steps of the Poisson-subsampled Gaussian
mechanism with sampling rate q = ``sampling_rate`` and noise multiplier
z = ``noise_multiplier`` (noise standard deviation over the sensitivity):

* ``rdp``: Renyi DP of the subsampled Gaussian (Mironov, Talwar and Zhang,
  "Renyi differential privacy of the sampled Gaussian mechanism", 2019),
  composed over T steps and converted to (epsilon, delta) (dp_accounting's
  ``RdpAccountant``);
* ``pld``: the privacy loss distribution composed numerically (Koskela,
  Jalko and Honkela 2020; dp_accounting's ``PLDAccountant``), tighter.

At q = 1 both read T full-batch Gaussian steps, which are exactly
(sqrt(T) / z)-GDP (Dong, Roth and Su 2022, Cor. 3.3).  Fields the entry does
not give come from a learner that states them
(:meth:`audit.mechanisms.learners.DPGradientDescent.training_parameters`,
and the Opacus adapter's), so its claim is the accountant's.  The computed epsilon is written into the
entry (results.json ``config`` records it), and the report names the claim's
source (:func:`claim_source`).  dp_accounting is the optional extra
``capaudit[accounting]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from attacks.vocabulary import DP, divergence_kind
from audit.fields import ConfigError, number, one_line, required
from audit.mechanisms.base import install_hint

ACCOUNTANTS = ("rdp", "pld")
"""dp_accounting's accountants a claim can name."""
TRAINING_FIELDS = ("noise_multiplier", "sampling_rate", "steps")
"""The training parameters an accountant claim reads (from the entry, else from the mechanism)."""
PLD_DISCRETIZATION = 1e-4
"""The PLD accountant's value discretization interval (dp_accounting's default)."""


def accountant_epsilon(accountant: str, noise_multiplier: float, sampling_rate: float, steps: int,
                       delta: float) -> float:
    """The accountant's epsilon at ``delta`` for ``steps`` Poisson-subsampled Gaussian steps (module docstring).

    Raises
    ------
    ImportError
        dp_accounting is not installed (the message names the extra).
    ValueError
        A parameter out of range: noise_multiplier > 0, sampling_rate in (0, 1], steps >= 1, delta in (0, 1).
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(map(repr, ACCOUNTANTS))}. Found {accountant!r}.")
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ValueError(f"noise_multiplier must be a number > 0. Found {noise_multiplier!r}.")
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1]. Found {sampling_rate!r}.")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a whole number >= 1. Found {steps!r}.")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"an accountant claim needs delta in (0, 1), e.g. delta = 1e-5. Found {delta!r}.")
    return float(_composed(accountant, noise_multiplier, sampling_rate, steps).get_epsilon(delta))


def _composed(accountant: str, noise_multiplier: float, sampling_rate: float, steps: int) -> Any:
    """dp_accounting's ``accountant`` ("rdp" or "pld") with ``steps`` Poisson-subsampled Gaussian steps composed."""
    try:
        from dp_accounting import dp_event
        from dp_accounting.pld import pld_privacy_accountant
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError as error:
        raise ImportError(f"accountant claims need dp_accounting; {install_hint('accounting')} ({error}).") from None
    step = dp_event.GaussianDpEvent(noise_multiplier)
    if sampling_rate < 1.0:
        step = dp_event.PoissonSampledDpEvent(sampling_rate, step)
    account = (rdp_privacy_accountant.RdpAccountant() if accountant == "rdp"
               else pld_privacy_accountant.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION))
    account.compose(dp_event.SelfComposedDpEvent(step, int(steps)))
    return account


def pld_profile_claim(parameters: Mapping[str, float], d_in: int, epsilons: Sequence[float] | None = None) -> Any:
    """dp_accounting's PLD privacy profile of a training run as a ``profile`` claim (``[[claims]] from = "library"``).

    ``parameters``: noise_multiplier, sampling_rate and steps (the learner's
    ``training_parameters()``).  The profile delta(epsilon) of the composed
    privacy loss distribution (Koskela, Jalko and Honkela 2020) is read at
    ``epsilons``, by default :data:`audit.library_claims.PROFILE_EPSILONS`
    times its epsilon at delta :data:`audit.library_claims.PROFILE_DELTA`;
    the accountant's neighbours are one record apart, so ``d_in`` must be 1.
    Returns a :class:`audit.mechanisms.adapters.library.LibraryClaim`.
    """
    import importlib.metadata

    from audit.library_claims import PROFILE_DELTA, PROFILE_EPSILONS
    from audit.mechanisms.adapters.library import LibraryClaim

    if d_in != 1:
        raise ValueError(f"dp_accounting's privacy profile is stated for neighbours one record apart; the pairs are "
                         f"at d_in = {d_in}: give neighbours (distance = 1).")
    account = _composed("pld", *(float(parameters[field]) for field in TRAINING_FIELDS[:2]), int(parameters["steps"]))
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
