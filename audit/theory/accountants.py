"""dp_accounting's accountants for T Poisson-subsampled Gaussian steps: the epsilon of a DP-SGD run.

* ``rdp``: Renyi DP of the subsampled Gaussian (Mironov, Talwar and Zhang,
  "Renyi differential privacy of the sampled Gaussian mechanism", 2019),
  composed over T steps and converted to (epsilon, delta) (dp_accounting's
  ``RdpAccountant``);
* ``pld``: the privacy loss distribution composed numerically (Koskela,
  Jalko and Honkela 2020; dp_accounting's ``PLDAccountant``), tighter.

At q = 1 both read T full-batch Gaussian steps, which are exactly
(sqrt(T) / z)-GDP (Dong, Roth and Su 2022, Cor. 3.3).  Claims read them
through :mod:`audit.config.accounting`; the theory table reads the PLD epsilon as
the composition bound of a learner's law.  dp_accounting is the optional
extra ``capaudit[accounting]``.
"""

from __future__ import annotations

import math
from typing import Any

from audit.config.validation import install_hint

ACCOUNTANTS = ("rdp", "pld")
"""dp_accounting's accountants a claim can name."""
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
    return float(composed_accountant(accountant, noise_multiplier, sampling_rate, steps).get_epsilon(delta))


def composed_accountant(accountant: str, noise_multiplier: float, sampling_rate: float, steps: int) -> Any:
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
