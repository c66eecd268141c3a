"""Outputs to a decision before and after the pilot rounds and the confirm confidence sequences (issue 34 item 2).

    PYTHONPATH=. python benchmarks/bench_anytime.py [--seeds N] [--cases TEXT ...] [--out F]

Each case is a default audit (no ``n_samples``: the sequential search of
:mod:`attacks.sequential`) of one claim over ``all`` (``dp`` unless the case says ``kl`` or ``renyi``), run through
:func:`audit.run_audit` with every other setting at its default, seeds
0..N-1: the cases of benchmarks/bench_defaults.py that need no extra library
and the cheaper buggy built-ins of benchmarks/bench_sequential.py (epsilon 0.1
claimed 0.1).  "Before" is the median outputs of the same audits in those
benchmarks' records (``bench_defaults.jsonl``; ``bench_sequential_rounds.jsonl``, the sequential
records of bench_sequential.py before the pilot rounds: rounds of 4 000 x 4^r outputs per dataset, each
confirmed at its end);
"after" is this code's: pilot rounds of 250 and 1 000 outputs per dataset
first (their outputs served again to the later rounds' screen and train
stages), the confirm samples of the rounds up to 4 000 read after each batch by
betting confidence sequences.  Outputs: results.json
``outputs_drawn`` of the last row (the search that decided, both datasets,
every pair, stage and round), or of the row of the case's ``layer``; ``interval``: the interval of that row.  Each
audit is appended to ``--records`` (default: ``--out`` with ``.jsonl``) when
it ends and not run again.

The ``kl`` and ``renyi`` cases (built-in Laplace far above its claim) read the value layer's row: its clipped
witness's betting half is read after every batch of the confirm samples up to 4 000 outputs
(:mod:`attacks.confirm_looks`); the representation layer's search of the same audit decides on the float leak of
the built-in ``laplace`` by itself.  Their "before" is the same audits at the code before the looks, run with this
script and ``PYTHONPATH`` at that checkout into ``bench_anytime_kl_before.jsonl`` (``--records``; a record's
``commit`` is the checkout of the ``audit`` package that ran)::

    PYTHONPATH=/path/to/older/checkout python benchmarks/bench_anytime.py --cases "(all, " --seeds 5 \
        --records benchmarks/results/bench_anytime_kl_before.jsonl --out /tmp/before.md
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))

import audit as engine  # noqa: E402
from audit import run_audit  # noqa: E402
from results_file import RESULTS, append_record, commit, machine, read_records  # noqa: E402


KL_BEFORE = "bench_anytime_kl_before.jsonl"
"""The records of the ``kl`` / ``renyi`` cases at the code before their looks (module docstring)."""


@dataclass(frozen=True)
class Case:
    """One default audit: ``before`` names the record file and key of the same audit before this change."""

    label: str
    mechanism: str
    params: dict
    claim: float
    expect: str
    before: tuple[str, str]  # (records file, its case label or mechanism)
    divergence: str = "dp"
    alpha: float | None = None
    layer: str | None = None  # the row read: the last one (None), or the search of this layer


CASES = [
    Case("true epsilon 5, claim 1", "snapping_laplace", {"epsilon": 5.0}, 1.0, "violation",
         ("bench_defaults.jsonl", "true epsilon 5, claim 1")),
    Case("exact-answer leak 0.2 %", "leaky_laplace", {"epsilon": 1.0, "p": 0.002}, 1.0, "violation",
         ("bench_defaults.jsonl", "exact-answer leak 0.2 %")),
    Case("numpy's textbook Laplace, 0.1", "textbook_laplace", {"epsilon": 0.1}, 0.1, "violation",
         ("bench_defaults.jsonl", "numpy's textbook Laplace")),
    Case("noisy_hist_2", "noisy_hist_2", {"epsilon": 0.1}, 0.1, "violation",
         ("bench_sequential_rounds.jsonl", "noisy_hist_2")),
    Case("svt_5", "svt_5", {"epsilon": 0.1}, 0.1, "violation", ("bench_sequential_rounds.jsonl", "svt_5")),
    Case("svt_3", "svt_3", {"epsilon": 0.1}, 0.1, "violation", ("bench_sequential_rounds.jsonl", "svt_3")),
    Case("correct 1-DP Laplace, claim 1.5", "snapping_laplace", {"epsilon": 1.0}, 1.5, "pass",
         ("bench_defaults.jsonl", "correct 1-DP Laplace, claim 1.5")),
    Case("Laplace epsilon 5 (KL 4.007), (all, kl) claim 1", "laplace", {"epsilon": 5.0}, 1.0, "violation",
         (KL_BEFORE, "Laplace epsilon 5 (KL 4.007), (all, kl) claim 1"), "kl", layer="value"),
    Case("Laplace epsilon 2 (KL 1.135), (all, kl) claim 0.5", "laplace", {"epsilon": 2.0}, 0.5, "violation",
         (KL_BEFORE, "Laplace epsilon 2 (KL 1.135), (all, kl) claim 0.5"), "kl", layer="value"),
    Case("Laplace epsilon 5 (Renyi-2 4.595), (all, renyi 2) claim 1", "laplace", {"epsilon": 5.0}, 1.0, "violation",
         (KL_BEFORE, "Laplace epsilon 5 (Renyi-2 4.595), (all, renyi 2) claim 1"), "renyi", 2.0, "value"),
]


def before(case: Case) -> list[int]:
    """Outputs of the default audits of the case in its earlier records (sequential ones only; a seed audited more
    than once counts once, at its latest record)."""
    name, key = case.before
    records = read_records(RESULTS / name)
    if name in ("bench_defaults.jsonl", KL_BEFORE):
        latest = {r["seed"]: r["outputs"] for r in records if r["case"] == key}
    else:
        latest = {r["seed"]: r["outputs"] for r in records if r["mechanism"] == key and r["n_samples"] is None}
    return list(latest.values())


def audit(case: Case, seed: int) -> dict:
    claim = {"divergence": case.divergence, "function_class": "all", "epsilon": case.claim}
    config = {"mechanism": {"name": case.mechanism, "params": case.params}, "run": {"seed": seed},
              "claims": [claim if case.alpha is None else {**claim, "alpha": case.alpha}]}
    start, cpu = time.perf_counter(), cpu_seconds()
    result = run_audit(config, progress=False)
    rows = result.table.dropna(subset=["outputs_drawn"])
    last = (rows if case.layer is None else rows[rows["layer"] == case.layer]).iloc[-1]
    return {"case": case.label, "seed": seed, "verdict": result.verdict, "stop": last["stop"],
            "outputs": int(last["outputs_drawn"]), "interval": last["interval"], "rounds": int(last["rounds"]),
            "at_look": "read at a look" in str(last["note"]),
            "seconds": round(time.perf_counter() - start, 1), "cpu_seconds": round(cpu_seconds() - cpu, 1),
            "machine": machine(),
            "commit": commit(Path(engine.__file__).resolve().parent.parent)}


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that ended (the samplers' forked children)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def row(case: Case, records: list[dict]) -> list[str]:
    outputs, earlier = [r["outputs"] for r in records], before(case)
    intervals = Counter(r["interval"] + (" at a look" if r.get("at_look") else "") for r in records)
    return [case.label, f"{case.divergence} {case.claim:g}", f"{sum(r['verdict'] == case.expect for r in records)}/{len(records)} "
            f"{case.expect}", f"{statistics.median(earlier):,.0f} ({len(earlier)})" if earlier else "-",
            f"{statistics.median(outputs):,.0f}", f"{max(outputs):,}",
            ", ".join(f"{name} {count}" for name, count in intervals.most_common()),
            f"{statistics.median(r['seconds'] for r in records):.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 per case (default 20)")
    parser.add_argument("--cases", nargs="+", default=[], metavar="TEXT", help="cases whose label has one")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_anytime.md")
    parser.add_argument("--records", type=Path, default=None, help="default: --out with suffix .jsonl")
    args = parser.parse_args()
    path = args.records or args.out.with_suffix(".jsonl")
    done = {(r["case"], r["seed"]): r for r in read_records(path)}
    for case in CASES:
        if args.cases and not any(text in case.label for text in args.cases):
            continue
        for seed in range(args.seeds):
            if (case.label, seed) not in done:
                done[case.label, seed] = record = audit(case, seed)
                append_record(path, record)
                print(record, flush=True)
    rows = [row(case, [done[key] for key in sorted(done) if key[0] == case.label])
            for case in CASES if any(key[0] == case.label for key in done)]
    commits = sorted({r.get("commit", "not recorded") for r in done.values()})
    text = "\n".join([
        "# Outputs to a decision: pilot rounds and confirm confidence sequences", "",
        "`PYTHONPATH=. python benchmarks/bench_anytime.py` (benchmarks/bench_anytime.py; every audit is a line of "
        f"`{path.name}`). Claims over `all`, every other setting at its default (sequential: no `n_samples`); outputs: "
        "results.json `outputs_drawn` of the search that decided (kl and renyi cases: the value layer's search; the "
        "built-in laplace's float leak is decided by the representation layer's at 500 outputs); before: the median "
        "of the same audits in `bench_defaults.jsonl` / `bench_sequential_rounds.jsonl` (rounds from 4 000 outputs "
        "per dataset, each confirmed at its end) / `bench_anytime_kl_before.jsonl` (kl and renyi: the code before "
        "their confirm looks); the number of seeds in brackets; interval: results.json `interval` of that row over the "
        "seeds (`betting CS`: dp, stopped at a look of a confirm confidence sequence; kl / renyi, the clipped witness's "
        "betting half gave the bound, `at a look` where the search stopped at a look of it, else at a round's end).", "",
        tabulate(rows, headers=["case", "claim", "verdicts", "outputs before (median)", "outputs after (median)",
                                "after (max)", "interval", "seconds (median)"],
                 tablefmt="github", disable_numparse=True), "",
        f"Code: {', '.join(commits)}. Machine: {'; '.join(sorted({r['machine'] for r in done.values()}))} "
        "(shared with other jobs; run.n_jobs 1).", "",
    ])
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
