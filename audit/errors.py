"""The error of a mechanism that fails or returns malformed outputs.

A leaf module: the output checks (:mod:`audit.structure`) and the mechanism
classes (:mod:`audit.mechanisms.base`, which re-exports it) both raise it.
"""


class MechanismError(RuntimeError):
    """A mechanism raised, or returned outputs that are not n finite numeric rows of a fixed width."""
