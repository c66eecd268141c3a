"""Issue 35's one-run target: `[one_run]` audits of the built-in DP-GD learner with m = 1000 canaries.

    PYTHONPATH=. python benchmarks/bench_one_run.py [--seeds N] [--canaries M] [--out F]

Each reading is ``capaudit``'s one-run audit (:mod:`audit.engine.one_run`) of
``dp_gd_logistic`` (one full-batch step, clip C = 1, learning rate 0.1) over
seeds 0..N-1, confidence 0.95:

* **non-private**: noise a millionth of the clip norm (``sigma = 1e-6``),
  claim (1, 0)-DP; with half the canaries shown (the default: 500 guessed,
  ceiling 5.11) and with none shown (``train_fraction = 0``, every canary
  guessed: ceiling 5.81).  Target: a bound of at least 5.0 (the issue's
  figure at m = 1000; a bound at the ceiling says every guess was right,
  not that the learner's epsilon is 5);
* **DP**: noise calibrated to mu = 1 Gaussian DP, claims mu = 1 (``gdp``, the
  f-DP bound of Mahloujifar, Melis and Chaudhuri) and the (epsilon, 1e-5) of
  1-GDP (``dp``, Steinke, Nasr and Jagielski with delta), each at
  confidence 0.975 (two claims).  Target: at or below the claim in every
  seed (a violation is allowed in at most 5 % of seeds).

CPU seconds: this process's (``resource.getrusage``), all readings together.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit import run_audit  # noqa: E402
from audit.theory.tradeoff import gdp_epsilon  # noqa: E402
from results_file import add_out_option, commit, machine, write  # noqa: E402

TARGET = 5.0
DELTA = 1e-5
STEP = {"steps": 1, "learning_rate": 0.1, "clip_norm": 1.0}


def _claim(divergence: str, value: float, delta: float = 0.0) -> dict:
    return {"divergence": divergence, "function_class": "all", "epsilon": value,
            **({"delta": delta} if delta else {})}


READINGS = [
    ("non-private (sigma = 1e-6), half shown", {"sigma": 1e-6}, [_claim("dp", 1.0)], {}),
    ("non-private (sigma = 1e-6), none shown, all guessed", {"sigma": 1e-6}, [_claim("dp", 1.0)],
     {"train_fraction": 0.0, "guess_fraction": 1.0}),
    ("DP-GD at mu = 1, half shown", {"mu": 1.0},
     [_claim("gdp", 1.0), _claim("dp", round(gdp_epsilon(1.0, DELTA), 3), DELTA)], {}),
]
"""(label, learner parameters, claims, [one_run] fields)."""


def readings(params: dict, claims: list[dict], one_run: dict, canaries: int, seeds: int) -> list[dict]:
    """results.json ``one_run`` of each seed's audit."""
    return [run_audit({"mechanism": {"name": "dp_gd_logistic", "params": {**params, **STEP}}, "claims": claims,
                       "one_run": {"canaries": canaries, **one_run}, "run": {"seed": seed}},
                      progress=False).one_run for seed in range(seeds)]


def rows(label: str, runs: list[dict]) -> list[list[str]]:
    """One table row per claim: guesses, the bound (median, min, max), the ceiling, seeds at the target, violations."""
    found = []
    for i, claim in enumerate(runs[0]["claims"]):
        key = "mu_low" if claim["divergence"] == "gdp" else "epsilon_low"
        bounds = [run["claims"][i][key] for run in runs]
        violations = sum(run["claims"][i]["verdict"] == "violation" for run in runs)
        found.append([label, claim["label"].removesuffix(" (one run)"),
                      f"{statistics.median(r['correct'] for r in runs):.0f} of "
                      f"{statistics.median(r['guesses'] for r in runs):.0f}",
                      f"{statistics.median(bounds):.3f}", f"{min(bounds):.3f}", f"{max(bounds):.3f}",
                      f"{claim['ceiling']:.3f}", f"{sum(b >= TARGET for b in bounds)}/{len(runs)}",
                      f"{violations}/{len(runs)}"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    parser.add_argument("--canaries", type=int, default=1000, help="m (default 1000)")
    add_out_option(parser, "bench_one_run")
    args = parser.parse_args()
    table = []
    for label, params, claims, one_run in READINGS:
        table += rows(label, readings(params, claims, one_run, args.canaries, args.seeds))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    write(args.out, "\n".join([
        f"`[one_run]` audits of `dp_gd_logistic` ({', '.join(f'{k} = {v}' for k, v in STEP.items())}), m = "
        f"{args.canaries} canaries, confidence 0.95 (0.975 per claim with two claims), seeds 0..{args.seeds - 1}. "
        f"Bound: epsilon_low (dp) or mu_low (gdp); ceiling: the bound with every guessed-about canary right, the "
        f"most this m shows (not the learner's epsilon); target: >= {TARGET} for the non-private learner, no "
        f"violation of a true claim beyond 5 % of seeds.", "",
        tabulate(table, headers=["learner", "claim", "correct of guesses (median)", "bound (median)", "bound (min)",
                                 "bound (max)", "ceiling", f">= {TARGET}", "violations"],
                 tablefmt="github", disable_numparse=True), "",
        f"CPU time, all readings: {usage.ru_utime + usage.ru_stime:.1f} s. Code: {commit()}. Machine: {machine()}.",
    ]))


if __name__ == "__main__":
    main()
