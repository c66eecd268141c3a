"""The ``capaudit`` command line (docs/design.md, "Contract: command line").

Exit codes: 0 no claim violated, 1 a violation, 2 any failure that is not a
verdict (a usage, config or mechanism error, a crash: one line on stderr, no
traceback unless ``--debug``), 3 an inconclusive overall verdict under
``run --strict``, 130 interrupted (Ctrl-C).  Once an audit has started, its
finished rows are saved and the report written to ``--out`` whatever happens
(:func:`audit.commands.api.run_audit`).

``capaudit summary DIR...`` tabulates the results.json of many audits
(:mod:`audit.report.summary`); ``run --json-summary`` prints one line of JSON on
stdout (the human summary line then goes to stderr).

``capaudit run CONFIG`` writes its report to ``--out`` (default
``out/<config name>``, a folder git ignores, so that no run rewrites the committed example reports under
``reports/``); ``capaudit demo`` writes two reports under
``--out`` (default a new temporary directory, printed first, so that the
demo never rewrites files of a checkout): ``correct/`` (a noisy histogram with
Lap(1/epsilon) noise, which passes) and ``buggy/`` (noise scale epsilon
instead of 1/epsilon, which is caught).  Like ``run``, ``demo`` exits 1 when it finds
a violation, which it does by design: the buggy mechanism's claim is refuted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path

EXIT_PASS, EXIT_VIOLATION, EXIT_ERROR, EXIT_INCONCLUSIVE_STRICT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_OUT = "out"
"""Where ``run`` and ``oakl`` write without ``--out`` (under the current directory): ``/out/`` is in .gitignore."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capaudit",
        description="Audit differential-privacy claims with capacity-bounded adversaries.",
        epilog="exit codes: 0 pass or inconclusive, 1 violation, 2 error (no verdict), 3 inconclusive under run --strict, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _add_common(parser, default=False)
    common = argparse.ArgumentParser(add_help=False)  # the same options after the command name
    _add_common(common, default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser = functools.partial(sub.add_parser, parents=[common])  # type: ignore[method-assign]

    theory = sub.add_parser(
        "theory", help="exact restricted divergences and the paper's bounds for Laplace or Gaussian; DP-SGD's per class"
    )
    theory.add_argument("--mechanism", required=True, choices=["laplace", "gaussian", "matrix", "dp_sgd"])
    scale = theory.add_mutually_exclusive_group(required=True)
    scale.add_argument("--epsilon", type=float, help="Laplace: epsilon = sensitivity / scale")
    scale.add_argument("--sigma", type=float,
                       help="Gaussian: noise standard deviation (sensitivity 1); dp_sgd: the noise multiplier")
    theory.add_argument("--alpha", type=float, nargs="+", help="Renyi orders (default: a grid on (1, 10])")
    theory.add_argument(
        "--classes", nargs="+", default=["linear", "poly2", "poly3"], help="function classes (linear, polyK)"
    )
    theory.add_argument("--out", help="directory for report.md and figures/")
    theory.add_argument("--sensitivity", type=float, nargs="+",
                        help="per-coordinate sensitivities v: the d-dim (linear, Renyi) table (Laplace, Gaussian)")
    theory.add_argument("--A", help="matrix mechanism's strategy matrix, rows separated by ';' (e.g. '1 0; 0 1')")
    theory.add_argument("--n", type=int, default=200_000, help="outputs per dataset of the d-dim attacks")
    theory.add_argument("--seed", type=int, default=0, help="seed of the d-dim attacks")
    theory.add_argument("--steps", type=int, help="dp_sgd: the number of steps T")
    theory.add_argument("--sampling-rate", type=float, help="dp_sgd: the Poisson sampling rate q")
    theory.add_argument("--delta", type=float, default=1e-5, help="dp_sgd: the delta of epsilon (default 1e-5)")

    oakl = sub.add_parser("oakl", help="on-average KL privacy of posterior sampling: OAKL Figure 2, Thm 4, Lemma 6")
    oakl.add_argument("--out", default=f"{DEFAULT_OUT}/oakl", help=f"output directory (default: {DEFAULT_OUT}/oakl)")
    oakl.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    oakl.add_argument("--quick", action="store_true", help="a small budget (fewer n, pairs and datasets)")
    oakl.add_argument("--n-jobs", type=int,
                      help="parallel workers of the sampling and the attacks (default 1; -1: all cores)")
    oakl.add_argument("--backend", help="joblib backend: threading, loky, dask, ray (default threading)")
    oakl.add_argument("--sample-timeout", type=float,
                      help="seconds a chunk of a mechanism's outputs may take (default 600)")

    run = sub.add_parser("run", help="audit the claims of a TOML config")
    run.add_argument("config", help="the audit config (TOML); see examples/")
    run.add_argument("--out", help=f"output directory (default: {DEFAULT_OUT}/<config name>)")
    run.add_argument("--n-jobs", type=int, help="parallel workers (overrides [run] n_jobs; -1: all cores)")
    run.add_argument("--backend", help="joblib backend: threading, loky, dask, ray (overrides [run] backend)")
    run.add_argument("--seed", type=int, help="the audit's seed (overrides [run] seed)")
    run.add_argument("--resume", action="store_true", help="continue the interrupted run in --out")
    run.add_argument("--strict", action="store_true", help="exit 3 when the overall verdict is inconclusive")
    run.add_argument("--json-summary", action="store_true",
                     help="print one line of JSON on stdout (verdict, exit code, counts, strongest row per claim)")

    demo = sub.add_parser("demo", help="audit a correct and a buggy Laplace histogram (no config needed)")
    demo.add_argument("--out", help="output directory (default: a new temporary directory, printed)")

    mechanisms = sub.add_parser("mechanisms", help="list built-in mechanisms and library adapters")
    mechanisms.add_argument("--long", action="store_true", help="also kind, parameters and availability")

    summary = sub.add_parser("summary", help="tabulate many audits' results.json as a markdown table")
    summary.add_argument("dirs", nargs="+", metavar="DIR", help="audit output directories (or results.json files)")
    return parser


def _add_common(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--debug", action="store_true", default=default,
                        help="show the traceback of an error and the libraries' warnings")
    parser.add_argument("--quiet", action="store_true", default=default, help="no progress bar")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capaudit`` console script; returns the exit code.

    Every failure that is not a verdict returns 2 with one line on stderr
    (the traceback too with ``--debug``); Ctrl-C returns 130.
    """
    args = _parser().parse_args(argv)
    with warnings.catch_warnings():
        if not args.debug:  # stderr holds the one line of a failure; a library's warnings only with --debug
            warnings.simplefilter("ignore")
        return _command(args, argv)


def _command(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """Run the parsed command: its exit code, a failure as one line on stderr (module docstring)."""
    try:
        if args.command == "run" and not (args.out and Path(args.out).is_dir()):  # else _run: a failure report
            _check_config_path(Path(args.config))  # a typo costs no import of the audit's libraries
        if argv is None and args.command in ("run", "demo"):  # a process of its own (the console script)
            from audit.config.import_path import import_frozen

            import_frozen()  # the whole audit's modules at once, then frozen: quicker (audit.config.import_path)
        if args.command == "theory":
            from audit.commands.theory_report import theory_command

            return theory_command(args)
        if args.command == "oakl":
            from audit.commands.oakl_report import oakl_command

            return oakl_command(args)
        if args.command == "run":
            return _run(args)
        if args.command == "demo":
            return _demo(args)
        if args.command == "mechanisms":
            return _mechanisms(args.long)
        from audit.report.summary import summary_table

        problems: list[str] = []
        print(summary_table(args.dirs, problems))
        for problem in problems:  # named, after the table of the files that could be read
            print(f"capaudit summary: error: {problem}", file=sys.stderr)
        return EXIT_ERROR if problems else EXIT_PASS
    except KeyboardInterrupt as interrupt:
        saved = getattr(interrupt, "saved", None)
        kept = f"finished tasks saved in {saved.parent}, continue with --resume" if saved else "nothing saved"
        print(f"capaudit {args.command}: interrupted; {kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as error:  # noqa: BLE001 - a crash is never a verdict (SystemExit of user code included)
        if args.debug:
            traceback.print_exc()
        print(f"capaudit {args.command}: error: {_message(error)}", file=sys.stderr)
        if getattr(args, "json_summary", False):  # CI reads the line even when there is no verdict
            print(json.dumps({"verdict": "error", "exit_code": EXIT_ERROR, "error": _message(error)}))
        return EXIT_ERROR


def _message(error: BaseException) -> str:
    """The error in one bounded line: the message of capaudit's own errors (they name the field and fix), else its
    type too; user input echoed in it is cut (:func:`audit.report.tables.bounded`)."""
    text = " ".join(str(error).split())
    if isinstance(error, _PathError):  # said before the audit's modules load: its own short line
        return text
    try:
        from audit.commands.api import AuditError
        from audit.mechanisms import MechanismError
        from audit.report.tables import LINE_LIMIT, bounded
        from audit.sampling.errors import one_line
    except Exception:  # a broken install: still one line
        return f"{type(error).__name__}: {text}"[:400]
    if isinstance(error, (ValueError, AuditError, MechanismError)):
        return bounded(text)
    return one_line(error, limit=LINE_LIMIT)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("capaudit")
    except PackageNotFoundError:  # run from a checkout
        return "(not installed)"


def _run(args: argparse.Namespace) -> int:
    from audit.commands.api import AuditError, run_audit, write_failure

    config = Path(args.config)
    out = Path(args.out) if args.out else Path(DEFAULT_OUT) / config.stem
    try:
        _check_config_path(config)
        # stdout carries only the JSON line: what the mechanism prints goes to stderr
        with _stdout_to_stderr() if args.json_summary else contextlib.nullcontext():
            result = run_audit(
                args.config, n_jobs=args.n_jobs, seed=args.seed, out_dir=out, resume=args.resume,
                backend=args.backend, progress=not args.quiet,
            )
    except (AuditError, KeyboardInterrupt):  # the finished rows are saved already
        raise
    except BaseException as error:  # before any task: no rows, but no earlier report left to be misread
        if out.is_dir() or (args.out and not out.exists()):
            write_failure(out, _message(error))  # not in a directory of other files or another run's
        raise
    code = result.exit_code
    if args.strict and code == EXIT_PASS and result.verdict == "inconclusive":
        code = EXIT_INCONCLUSIVE_STRICT
    _summary(f"audit of {args.config}", result, out, sys.stderr if args.json_summary else sys.stdout)
    if args.json_summary:
        from audit.report.summary import json_summary

        print(json_summary(result.table, result.verdict, code, out / "report.md", result.claims))
    return code


def _one_run_summary(title: str, result, out: Path, stream) -> None:
    """A ``[one_run]`` audit's lines: the guesses, then each claim's bound beside its ceiling."""
    from attacks.vocabulary import GDP, divergence_kind

    run = result.one_run
    print(f"{title}: {result.verdict.upper()} (one run: {run['correct']} of {run['guesses']} guesses correct, "
          f"{run['canaries']} canaries; {result.seconds:.1f} s) -> {out / 'report.md'}", file=stream)
    for claim in run["claims"]:
        gdp = divergence_kind(claim["divergence"]) is GDP
        name, low = ("mu", claim["mu_low"]) if gdp else ("epsilon", claim["epsilon_low"])
        print(f"  {name} = {claim[name]:g}: {claim['verdict']} (lower bound {low:.3f}, ceiling {claim['ceiling']:.3f})",
              file=stream)


class _PathError(ValueError):
    """A command-line path that names nothing to read, refused before the audit's libraries are imported."""


def _check_config_path(config: Path) -> None:
    """Refuse a config path that names no file, before anything heavy is imported (:class:`_PathError`)."""
    if config.is_dir():
        raise _PathError(f"config {str(config)!r} is a directory; give a TOML file, e.g. examples/laplace.toml.")
    if not config.exists():
        raise _PathError(f"config file {str(config)!r} does not exist; give the path of a TOML file, "
                         "e.g. examples/laplace.toml.")


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send stdout to stderr meanwhile: ``print`` in this process and file descriptor 1 in forked children."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def demo_configs() -> dict[str, dict]:
    """The demo's two audits: StatDP's noisy histograms, correct and buggy (Ding et al. 2018, Algs. 9-10).

    ``noisy_hist_1`` adds Lap(1/epsilon) to each count (epsilon-DP);
    ``noisy_hist_2`` adds Lap(epsilon) instead, so at epsilon = 0.5 it is only
    2-DP.  Both are held to the KL-DP of a 0.5-DP Laplace count,
    epsilon - 1 + exp(-epsilon) (docs/theory.md section 6), and to the paper's
    (linear, Renyi alpha = 2) bound log(1 + 2 epsilon^2) (CBDP Table 1), over
    their neighbouring histograms: the first passes, the second fails both
    (its values are 1.135 and log 3 = 1.099).
    """
    from audit.theory.bounds import laplace_kl, laplace_linear_renyi_bound

    epsilon = 0.5
    kl, renyi = float(laplace_kl(epsilon)), float(laplace_linear_renyi_bound(epsilon, 2.0))
    claims = [
        {"divergence": "kl", "function_class": "all", "epsilon": kl,
         "reason": f"the KL divergence of a {epsilon}-DP Laplace count, epsilon - 1 + exp(-epsilon) = {kl:.4f} "
                   "at epsilon = 0.5 (docs/theory.md section 6): noisy_hist_1's exact value, a tight claim"},
        {"divergence": "renyi", "alpha": [2.0], "function_class": "linear", "epsilon": renyi,
         "reason": f"CBDP Table 1's bound for linear adversaries at Renyi order 2, log(1 + 2 epsilon^2) = "
                   f"log 1.5 = {renyi:.4f} at epsilon = 0.5"},
    ]
    attacks = {"classes": ["linear", "poly2"], "n_samples": 20_000, "confidence": 0.95}
    return {
        name: {"mechanism": {"name": mechanism, "params": {"epsilon": epsilon}}, "claims": claims,
               "attacks": attacks, "run": {"seed": 0, "n_jobs": -1}}
        for name, mechanism in (("correct", "noisy_hist_1"), ("buggy", "noisy_hist_2"))
    }


def _demo(args: argparse.Namespace) -> int:
    from audit.commands.api import run_audit

    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="capaudit-demo-"))
    print(f"demo: writing the two reports under {root}")
    results = {}
    for name, config in demo_configs().items():
        out = root / name
        results[name] = run_audit(config, out_dir=out, progress=not args.quiet)
        _summary(f"demo {name} ({config['mechanism']['name']})", results[name], out)
    expected = results["correct"].verdict == "pass" and results["buggy"].verdict == "violation"
    print("demo: " + ("as expected, the correct mechanism passes and the buggy one is caught" if expected
                      else "UNEXPECTED: the correct mechanism should pass and the buggy one be caught"))
    return max(result.exit_code for result in results.values())


def _summary(title: str, result, out: Path, stream=None) -> None:
    if getattr(result, "one_run", None) is not None:
        _one_run_summary(title, result, out, stream or sys.stdout)
        return
    rows = result.rows
    counts = collections.Counter("failed" if row.error else row.verdict for row in rows if row.verdict or row.error)
    checks = collections.Counter(check.verdict for check in getattr(result, "checks", ()))
    tally = ", ".join([f"{count} {verdict}" for verdict, count in sorted(counts.items())]
                      + [f"{count} checks {verdict}" for verdict, count in sorted(checks.items())])
    print(f"{title}: {result.verdict.upper()} ({tally}; {result.seconds:.1f} s) -> {out / 'report.md'}",
          file=stream or sys.stdout)
    from audit.sampling.events import event_tally
    from audit.results.provenance import not_neighbours
    from audit.report.summary import claim_verdicts, layer_text
    from audit.results.verdicts import SEPARATED

    claims = getattr(result, "claims", ())
    for line, claim in zip(claim_verdicts(claims), claims):  # each layer's verdict, where it is read
        if layer_text(claim):
            note = str(claim.get("note") or "")  # why separated outputs leave it open
            why = f"; {note.split('; ')[0]}" if note.startswith(SEPARATED) else ""
            print(f"  {line['claim']}: {line['verdict']} ({layer_text(claim)}){why}", file=stream or sys.stdout)
    if getattr(result, "events", ()):  # absorbed by the audit, but the reader must know
        print(event_tally(result.events), file=stream or sys.stdout)
    strangers = not_neighbours(getattr(result, "pairs", ()), getattr(result, "config", None))
    if strangers:
        print(f"WARNING: {len(strangers)} audited pair(s) are not neighbours (report.md, first screen)",
              file=stream or sys.stdout)
    failing = [entry for entry in getattr(result, "theory", ()) if entry["fails"]]
    if failing:  # a published bound that fails does not change the verdict: say so where it is read
        print(f"PUBLISHED BOUND FAILS: {len(failing)} of {len(result.theory)} closed-form bounds compared "
              "(report.md, Theory)", file=stream or sys.stdout)
    # Failed tasks make the exit code 2: one line on stderr, the first failure's own message (a search that lost
    # its candidates repeats its pairs' cause: named only when nothing else failed), and how many more there are.
    messages = [row.error for row in rows if row.error]
    messages += [check.error for check in getattr(result, "checks", ()) if check.error]
    from audit.engine.run import NO_STATISTIC
    from audit.report.summary import failure_lines

    lines = sorted(failure_lines(messages), key=lambda line: line.startswith(NO_STATISTIC))
    if lines:
        more = f" (and {len(lines) - 1} more failure(s), listed in {out / 'report.md'})" if len(lines) > 1 else ""
        print(f"capaudit: error: {lines[0]}{more}", file=sys.stderr)


_FLOAT_SAFE = {True: "yes", False: "no", None: "-"}
"""``capaudit mechanisms``' float-safe column (:attr:`audit.mechanisms.base.MechanismInfo.float_safe`; -: not stated)."""


def _mechanisms(long: bool) -> int:
    """Name, description, true privacy and whether it is float-safe (:attr:`audit.mechanisms.base.BaseMechanism.float_safe`:
    its float outputs carry no more than its values); ``long`` adds kind, parameters and availability."""
    from tabulate import tabulate

    from audit.mechanisms import list_mechanisms

    if long:
        rows = [
            (info.name, info.kind, info.description, ", ".join(f"{k}={v}" for k, v in info.parameters.items()),
             info.true_privacy + ("" if info.float_safe is None else f"; float-safe: {_FLOAT_SAFE[info.float_safe]}"),
             info.availability)
            for info in list_mechanisms()
        ]
        # name and kind stay whole; the four text columns share what is left of the terminal's width
        fixed = sum(max(len(row[i]) for row in rows) for i in (0, 1)) + 2 * 5 + 1
        left = max(48, shutil.get_terminal_size((120, 24)).columns - fixed)
        widths = [None, None, *(max(10, int(left * share)) for share in (0.32, 0.28, 0.22, 0.18))]
        print(tabulate(rows, headers=["name", "kind", "description", "parameters", "true privacy", "status"],
                       maxcolwidths=widths))
    else:
        infos = list_mechanisms()
        rows = [(info.name + ("" if info.available else " *"), info.description, info.true_privacy,
                 _FLOAT_SAFE[info.float_safe]) for info in infos]
        print(tabulate(rows, headers=["name", "description", "true privacy", "float-safe"],
                       maxcolwidths=[None, 60, 50, None]))
        print("float-safe: its float64 outputs carry no more than its values; 'no': noise drawn in floating point, "
              "refuted by the floatbits class (Mironov 2012) whatever its values' privacy")
        if not all(info.available for info in infos):
            print("* unavailable here: its library is missing; `capaudit mechanisms --long` says how to install it")
    return EXIT_PASS


if __name__ == "__main__":
    from audit.config.import_path import drop_current_directory

    drop_current_directory()  # python -m put it first: built-ins never import local files (audit.config.import_path)
    sys.exit(main())
