"""Mechanisms to audit: the protocol, built-ins, the known-buggy suite, library adapters, the registry."""

from audit.mechanisms.base import (
    REQUIRED,
    BaseMechanism,
    CallableMechanism,
    Mechanism,
    MechanismError,
    MechanismInfo,
    check_output,
    sample_coupled,
)
from audit.mechanisms.registry import list_mechanisms, make_mechanism, register

__all__ = [
    "REQUIRED",
    "BaseMechanism",
    "CallableMechanism",
    "Mechanism",
    "MechanismError",
    "MechanismInfo",
    "check_output",
    "list_mechanisms",
    "make_mechanism",
    "register",
    "sample_coupled",
]
