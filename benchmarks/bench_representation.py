"""The representation attacks (atoms, floatbits) over seeds, through ``audit.run_audit`` (run by hand).

    PYTHONPATH=. python benchmarks/bench_representation.py                  # every experiment, 20 seeds
    PYTHONPATH=. python benchmarks/bench_representation.py leaky textbook   # some of them
    PYTHONPATH=. python benchmarks/bench_representation.py libraries --seeds 1            # every adapter
    PYTHONPATH=. python benchmarks/bench_representation.py pydp.gaussian --n 400000 --first-seed 1 --seeds 2

Each experiment is one config run with ``run_audit`` on seeds 0, 1, ...;
the script only reads the results (``tasks.jsonl`` in a temporary folder)
and prints one markdown table.  Per experiment: the audits whose verdict is
``violation``; for the representation rows (``atoms``, ``floatbits``) the
audits where one of them is a violation, and the smallest and largest
Clopper-Pearson lower bound on log(P(S) / Q(S)) of the best such row per
seed, from its held-out counts (k_p of n_p, k_q of n_q) at the audit's
Bonferroni level (two one-sided bounds at 1 - (1 - confidence) / (2 m),
m the rows that refute a claim): a finite bound at zero counts (k_q = 0
bounds Q(S) by about -log(alpha) / n_q), more conservative than Holm,
never "unbounded".  For DP-Sniper's comparison the same bound at 90%
(one row, no multiplicity) is shown beside it.  A mechanism whose library
is missing is skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import beta
from tabulate import tabulate

from audit import run_audit
from audit.mechanisms import list_mechanisms
from results_file import add_out_option, write

REPRESENTATION = ("atoms", "floatbits")
DEFAULT_CLASSES = ["linear", "poly2", "poly3", "tree3", "atoms"]
PAIR = {"pairs": [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}]}  # sums 0 and 1


@dataclass
class Experiment:
    mechanism: str
    params: dict
    claims: list
    classes: list
    n: int
    pairs: dict = field(default_factory=lambda: dict(PAIR))


def dp(epsilon: float, delta: float = 0.0) -> list:
    return [{"divergence": "dp", "function_class": "all", "epsilon": epsilon, "delta": delta}]


FLOAT = ["floatbits", "atoms"]
EXPERIMENTS = {
    "leaky": Experiment("leaky_laplace", {"epsilon": 1.0, "p": 0.001}, dp(1.0), DEFAULT_CLASSES, 100_000),
    "laplace": Experiment("laplace", {"epsilon": 1.0}, dp(1.0), DEFAULT_CLASSES, 100_000),
    "textbook": Experiment("textbook_laplace", {"epsilon": 0.1}, dp(0.1), FLOAT, 100_000),
    "snapping": Experiment("snapping_laplace", {"epsilon": 0.1}, dp(0.1), FLOAT, 100_000),
    "opendp": Experiment("opendp.laplace", {"scale": 10.0}, dp(0.1), FLOAT, 100_000),
    "diffprivlib_snapping": Experiment(
        "diffprivlib.snapping", {"epsilon": 0.1, "lower": -1000.0, "upper": 1000.0}, dp(0.1), FLOAT, 100_000
    ),
}
LIBRARIES = {  # every adapter at its own claim (epsilon 1, delta 1e-5 where the library takes one)
    "opendp.laplace": ({"scale": 1.0}, dp(1.0)),
    "opendp.gaussian": ({"scale": 1.0}, dp(0.5 + 2 * np.sqrt(0.5 * np.log(1e5)), 1e-5)),  # 0.5-zCDP -> (eps, 1e-5)
    "pydp.laplace": ({"epsilon": 1.0}, dp(1.0)),
    "pydp.gaussian": ({"epsilon": 1.0, "delta": 1e-5}, dp(1.0, 1e-5)),
    "diffprivlib.laplace": ({"epsilon": 1.0}, dp(1.0)),
    "diffprivlib.gaussian_analytic": ({"epsilon": 1.0, "delta": 1e-5}, dp(1.0, 1e-5)),
    "diffprivlib.geometric": ({"epsilon": 1.0}, dp(1.0)),
    "diffprivlib.snapping": ({"epsilon": 1.0, "lower": -100.0, "upper": 100.0}, dp(1.0)),
}


def clopper_pearson_log_ratio(details: dict, level: float, delta: float = 0.0) -> float:
    """log((P_low - delta) / Q_up), each a one-sided Clopper-Pearson bound at 1 - (1 - level) / 2.

    -inf when P_low <= delta (no evidence that P(S) exceeds delta).
    """
    tail = (1.0 - level) / 2
    k_p, n_p, k_q, n_q = (int(details[key]) for key in ("k_p", "n_p", "k_q", "n_q"))
    p_low = beta.ppf(tail, k_p, n_p - k_p + 1) if k_p > 0 else 0.0
    q_up = beta.ppf(1.0 - tail, k_q + 1, n_q - k_q) if k_q < n_q else 1.0
    return float(np.log((p_low - delta) / q_up)) if p_low > delta else -np.inf


def audit_once(experiment: Experiment, seed: int, n: int | None) -> dict:
    """One audit; the best representation row's verdict, counts and finite bounds."""
    config = {
        "mechanism": {"name": experiment.mechanism, "params": experiment.params},
        "claims": experiment.claims,
        # policy every: every class's held-out counts on every pair, read back from tasks.jsonl
        "attacks": {"classes": experiment.classes, "n_samples": n or experiment.n, "policy": "every"},
        "run": {"seed": seed, "n_jobs": 1},
        **experiment.pairs,
    }
    with tempfile.TemporaryDirectory() as folder:
        result = run_audit(config, out_dir=folder, progress=False)
        evidence = {}
        with open(f"{folder}/tasks.jsonl") as lines:
            for line in lines:
                record = json.loads(line)
                if record.get("evidence"):
                    evidence[record["task"]] = record["evidence"]
    table = result.table
    m = int(table["refutes_claim"].sum())
    level = 1.0 - (1.0 - 0.95) / m
    claim, delta = float(table["claim"].iloc[0]), float(experiment.claims[0]["delta"])
    best = {"cp": -np.inf, "cp90": -np.inf, "counts": None, "row_verdict": None}
    for row in table[table["function_class"].isin(REPRESENTATION)].itertuples():
        details = evidence.get(row.task, {}).get("details", {})
        if "k_p" not in details:
            continue
        bound = clopper_pearson_log_ratio(details, level, delta)
        if bound > best["cp"] or best["counts"] is None:
            best = {
                "cp": bound,
                "cp90": clopper_pearson_log_ratio(details, 0.90, delta),
                "counts": (details["k_p"], details["n_p"], details["k_q"], details["n_q"]),
                "row_verdict": row.verdict,
                "class": row.function_class,
            }
    return {"verdict": result.verdict, "claim": claim, "seconds": result.seconds, "version": result.versions, **best}


def summarise(name: str, experiment: Experiment, seeds: range, n: int | None) -> list:
    runs = [audit_once(experiment, seed, n) for seed in seeds]
    caught = [run for run in runs if run["row_verdict"] == "violation" and run["cp"] > run["claim"]]
    cps = [run["cp"] for run in runs]
    example = max(runs, key=lambda run: run["cp"])
    version = example["version"].get("mechanism_library")
    return [
        name, experiment.mechanism, version or "-", n or experiment.n, len(runs),
        sum(run["verdict"] == "violation" for run in runs),
        f"{len(caught)} (cp > claim)",
        f"{min(cps):.3f} .. {max(cps):.3f}", f"{example['cp90']:.3f}",
        f"{example['class']} {example['counts']}", f"{np.mean([run['seconds'] for run in runs]):.1f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="*", help=f"some of {sorted(EXPERIMENTS)} or 'libraries'")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=None, help="samples per input (default: the experiment's)")
    add_out_option(parser, "bench_representation")
    args = parser.parse_args()
    available = {info.name for info in list_mechanisms() if info.available}
    names = args.experiments or list(EXPERIMENTS)
    chosen = {name: EXPERIMENTS[name] for name in names if name in EXPERIMENTS}
    for name, (params, claims) in LIBRARIES.items():
        if not args.experiments or "libraries" in args.experiments or name in args.experiments:
            chosen[f"library {name}"] = Experiment(name, params, claims, FLOAT, 100_000, pairs={})
    rows = []
    for name, experiment in chosen.items():
        if experiment.mechanism not in available:
            print(f"skipped {name}: {experiment.mechanism} is unavailable")
            continue
        start = time.perf_counter()
        rows.append(summarise(name, experiment, range(args.first_seed, args.first_seed + args.seeds), args.n))
        print(f"{name}: {time.perf_counter() - start:.0f} s;", " | ".join(map(str, rows[-1])), flush=True)
    headers = ["experiment", "mechanism", "version", "n per input", "audits", "violation", "repr. row violation",
               "CP bound (Bonferroni) min .. max", "CP 90% (best)", "best row (k_p, n_p, k_q, n_q)", "s per audit"]
    text = tabulate(rows, headers=headers, tablefmt="github")
    print(text)
    write(args.out, text)


if __name__ == "__main__":
    main()
