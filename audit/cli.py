"""The ``capaudit`` command line (DESIGN.md, "Contract: command line").

Exit codes: 0 no claim violated, 1 a violation, 2 a usage, config or
mechanism error (a message on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EXIT_PASS, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capaudit",
        description="Audit differential-privacy claims with capacity-bounded adversaries.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    theory = sub.add_parser(
        "theory", help="exact restricted divergences and the paper's bounds for Laplace or Gaussian"
    )
    theory.add_argument("--mechanism", required=True, choices=["laplace", "gaussian"])
    scale = theory.add_mutually_exclusive_group(required=True)
    scale.add_argument("--epsilon", type=float, help="Laplace: epsilon = sensitivity / scale")
    scale.add_argument("--sigma", type=float, help="Gaussian: noise standard deviation (sensitivity 1)")
    theory.add_argument("--alpha", type=float, nargs="+", help="Renyi orders (default: a grid on (1, 10])")
    theory.add_argument(
        "--classes", nargs="+", default=["linear", "poly2", "poly3"], help="function classes (linear, polyK)"
    )
    theory.add_argument("--out", help="directory for report.md and figures/")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capaudit`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "theory":
            from audit.theory_report import theory_command

            return theory_command(args)
    except ValueError as error:
        print(f"capaudit {args.command}: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    raise AssertionError(f"unhandled command {args.command!r}")


if __name__ == "__main__":
    sys.exit(main())
