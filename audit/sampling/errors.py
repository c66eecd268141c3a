"""The error of a mechanism that fails or returns malformed outputs, and a failure in one line.

A leaf module: the output checks (:mod:`audit.sampling.structure`) and the mechanism
classes (:mod:`audit.mechanisms.base`, which re-exports it) both raise it;
the sampler (:mod:`audit.sampling.sampler`) and the dataset search
(:mod:`audit.inputs.pair_search`) both name a failure with :func:`one_line`.
"""


class MechanismError(RuntimeError):
    """A mechanism raised, or returned outputs that are not n finite numeric rows of a fixed width."""


def one_line(error: BaseException, limit: int = 400) -> str:
    """``"Type: message"`` on one line (whitespace collapsed), cut to ``limit`` characters; an exit of the audited
    code as ``called sys.exit(<code>)``."""
    if isinstance(error, SystemExit):
        text = f"called sys.exit({error.code!r})"
    else:
        text = " ".join(f"{type(error).__name__}: {error}".split()).rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
