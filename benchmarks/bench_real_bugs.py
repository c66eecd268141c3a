"""Real input-handling bugs of DP libraries, audited through the product (run by hand).

    PYTHONPATH=. python benchmarks/bench_real_bugs.py [--out benchmarks/results/bench_real_bugs.md] [--seed S]

Each case calls a pinned, released library version (the optional extra
``capaudit[real-bugs]``; a case whose library does not import is skipped
with a message) the way the issue or pull request named in ``source``
describes, and its correct counterpart (the same call used correctly), and
audits both as a new user would: a user callable, a record domain,
``[neighbours] strategy = "search"`` (the edge-case probes of
docs/probes.md) and the claim ``dp`` over ``all`` at the epsilon given to
the library.  Budgets are small (``BUDGET``) so that the whole run takes
about two CPU-minutes; the buggy releases are refuted at them because their
leaks are events of probability 0 on one dataset (an exact value, a NaN, a
changed output length).  The default budget (``n_samples`` 10 000,
``screen_samples`` 2 000, 50 random candidates) costs one library call per
output: ~0.4 M calls per audit, about 10 CPU-minutes for ``tools.mean`` and
10 CPU-hours for ``LogisticRegression`` (~0.1 s a fit on 2 cores).

Cases that do not reproduce here are listed in ``NOT_REPRODUCED`` with the
reason, in the results file too.

Second edition (``--claims``): bugs in what a library promises, each audited
at default settings from the library's own claim (dp_accounting's
``RdpAccountant`` at each order; OpenDP's privacy map through
``[[claims]] from = "library"``) beside its correct counterpart
(``CLAIM_CASES``; not reproduced: ``NOT_REPRODUCED_CLAIMS``).  Run it in an
environment with the library versions named (docs/benchmarks.md); each audit is
a line of ``CLAIMS_RECORDS`` (a seed already there is not run again), and the
table counts the verdicts over all of them, so that seeds and environments add
up across runs:

    PYTHONPATH=. ENV/bin/python benchmarks/bench_real_bugs.py --claims --seed 0 --seeds 20 [--only "opendp #2911"]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit import run_audit  # noqa: E402
from results_file import RESULTS, append_record, commit, machine, read_records  # noqa: E402

BUDGET = {"n_samples": 1000, "screen_samples": 200, "candidates": 5, "count": 2}
"""Samples per dataset, screening samples per candidate, random candidates and pairs kept (module docstring)."""
FIT_BUDGET = {"n_samples": 100, "screen_samples": 10, "candidates": 1, "count": 1}
"""The same for a release that fits a model per output (~0.1 s each)."""
LABELS = 3
"""The public label set of the logistic-regression cases: {0, 1, 2}."""


# ---------------------------------------------------------------- the releases audited


def _diffprivlib():
    import diffprivlib

    warnings.simplefilter("ignore")  # diffprivlib's PrivacyLeakWarning is the bug itself, announced once per call
    return diffprivlib


def _sanitised(dataset):
    """The records with NaN mapped to 0 and clipped to [0, 1]: the input handling of the correct releases."""
    return np.clip(np.nan_to_num(np.ravel(dataset), nan=0.0), 0.0, 1.0)


def dpl_mean_bounds_from_data(dataset, n, rng):
    """diffprivlib.tools.mean without bounds: read from the data (min, max), so a constant dataset is released exactly.

    The records are sanitised as in the correct release, so that the bounds are the only bug audited here.
    """
    mean = _diffprivlib().tools.mean
    return np.array([mean(_sanitised(dataset), epsilon=1.0, random_state=int(s)) for s in rng.integers(2**31, size=n)])


def dpl_mean_nan(dataset, n, rng):
    """diffprivlib.tools.mean with bounds (0, 1): the clip lets a NaN record through and the release is NaN."""
    mean = _diffprivlib().tools.mean
    records = np.ravel(dataset)
    return np.array([mean(records, epsilon=1.0, bounds=(0, 1), random_state=int(s)) for s in rng.integers(2**31, size=n)])


def dpl_mean_correct(dataset, n, rng):
    """Correct: bounds (0, 1) given, NaN records mapped to 0 and the records clipped before the call."""
    mean = _diffprivlib().tools.mean
    return np.array([mean(_sanitised(dataset), epsilon=1.0, bounds=(0, 1), random_state=int(s))
                     for s in rng.integers(2**31, size=n)])


def _logistic(labels, n, rng):
    """(coef_, intercept_) of diffprivlib's LogisticRegression(epsilon=1) fitted n times on public features."""
    from diffprivlib.models import LogisticRegression

    _diffprivlib()
    features = np.linspace(0.0, 1.0, len(labels))[:, None]  # public, in the unit ball (data_norm = 1)
    outputs = []
    for seed in rng.integers(2**31, size=n):
        # max_iter = 5 keeps the run short: the leak is the output's length, whatever the optimiser does.
        model = LogisticRegression(epsilon=1.0, data_norm=1.0, max_iter=5, random_state=int(seed))
        model.fit(features, labels)
        outputs.append(np.concatenate([model.coef_.ravel(), model.intercept_]))
    return np.array(outputs)


def dpl_logistic_labels(dataset, n, rng):
    """LogisticRegression on records = labels: the label set is np.unique(y), so 3 labels give 3 rows of coef_, 2 one."""
    return _logistic(np.ravel(dataset), n, rng)


def dpl_logistic_public_labels(dataset, n, rng):
    """Correct: labels mapped into the public set {0, 1, 2} and one public record of each added, so the set is fixed."""
    labels = np.clip(np.round(np.nan_to_num(np.ravel(dataset), nan=0.0)), 0, LABELS - 1)
    return _logistic(np.concatenate([np.arange(LABELS), labels]), n, rng)


# ---------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """One real bug: the buggy call, its correct counterpart, and how to audit them."""

    name: str
    library: str
    version: str
    source: str
    true_epsilon: str
    visible: str
    buggy: str
    correct: str
    domain: dict
    claimed: float = 1.0
    budget: dict = field(default_factory=lambda: dict(BUDGET))
    probes: tuple[str, ...] | None = None


CASES = [
    Case("tools.mean, bounds from the data", "diffprivlib", "0.6.6",
         "IBM/differential-privacy-library#20 (bounds computed from the data, a PrivacyLeakWarning only)",
         "inf (a constant dataset is released exactly)", "yes: an exact value on one dataset",
         "dpl_mean_bounds_from_data", "dpl_mean_correct", {"low": [0], "high": [1], "size": 5}),
    Case("tools.mean, a NaN record", "diffprivlib", "0.6.6",
         "found by the special_values probe (the NaN-through-clip family of google/differential-privacy#405)",
         "inf (NaN on one dataset only)", "yes: the output is NaN",
         "dpl_mean_nan", "dpl_mean_correct", {"low": [0], "high": [1], "size": 5}),
    Case("LogisticRegression, label set from the data", "diffprivlib", "0.6.6",
         "IBM/differential-privacy-library#106 (classes_ = np.unique(y))",
         "inf (the number of coefficient rows says which labels are present)", "yes: the output's length",
         "dpl_logistic_labels", "dpl_logistic_public_labels", {"low": [0], "high": [LABELS - 1], "size": 5},
         budget=dict(FIT_BUDGET), probes=("new_category",)),
]
NOT_REPRODUCED = [
    ("opendp #2923, #2941 (float32 / huge-magnitude edge cases)", "opendp 0.16.0 is the only release in this "
     "machine's package index, and the issues' text is not available offline to rebuild the calls; the "
     "special_values probes (2^53, beyond float32, the largest float) are what an audit of an affected release "
     "would screen"),
    ("opacus #571 (dataset size on tiny datasets)", "opacus 1.6.0 downloads here, but needs PyTorch (a 550 MB "
     "wheel plus CUDA libraries) and a training run per output; not attempted within the time box"),
    ("synthcity PrivBayes", "synthcity 0.2.12 pins torch < 2.3 and numpy < 2, with ~20 heavy dependencies "
     "(xgboost, optuna, shap, opacus); not installed within the time box"),
    ("dpmm 0.1.9 / mbi 2.0.0 NaN handling (arXiv 2602.17454)", "dpmm 0.1.9 installs in a venv of its own "
     "(numpy 1.26.4, pandas 2.1.0, scikit-learn 1.5.0, opendp 0.12.1); on 5 records of 2 columns in [0, 1] "
     "(domain given) MSTPipeline takes 15 s a fit (an audit needs hundreds), PrivBayesPipeline.generate raised "
     "ValueError: negative dimensions are not allowed, and a constant dataset raised ValueError: No objects to "
     "concatenate (its columns are dropped as static: a failure on one dataset of a corner pair, which the "
     "search reports as a finding). Its TableBinner fills NaN with a value sampled from the private records. "
     "Not audited within the time box; mbi 2.0.0 needs JAX, not installed"),
]


def audit_case(case: Case, function: str, seed: int) -> dict:
    """One audit of ``function`` (this module's release) as the case says; its verdict and strongest evidence."""
    neighbours = {"strategy": "search", "domain": case.domain, **{k: case.budget[k] for k in
                                                                ("screen_samples", "candidates", "count")}}
    if case.probes is not None:
        neighbours["probes"] = list(case.probes)
    config = {
        "mechanism": {"callable": f"benchmarks.bench_real_bugs:{function}"},
        "neighbours": neighbours,
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": case.claimed}],
        "attacks": {"n_samples": case.budget["n_samples"]},
        "run": {"seed": seed, "n_jobs": 1},
    }
    start = sum(os.times()[:4])  # this process and its forked samplers
    result = run_audit(config, progress=False)
    strongest = result.claims[0].get("strongest_task")
    rows = result.table[result.table["task"] == strongest] if strongest else result.table.iloc[:0]
    pair = rows["pair"].iloc[0] if len(rows) else None
    origin = next((p.get("origin", "") for p in result.pairs if p["name"] == pair), "")
    refused = sum(entry["note"].startswith("dropped: the mechanism refuses") for entry in result.search)
    findings = sum(entry["note"].startswith("finding") for entry in result.search)
    return {
        "verdict": f"{result.verdict} (exit {result.exit_code})",
        "lower bound": f"{rows['ci_low'].iloc[0]:.3g}" if len(rows) else "-",
        "claim note": result.claims[0].get("note") or "-",
        "pair": f"{pair}: {origin}" if pair else "-",
        "refused probes": refused,
        "findings": findings,
        "cpu s": sum(os.times()[:4]) - start,
    }


# ---------------------------------------------------------------- second edition: claims from the library

MULTIPLIER = 2.0
"""dp_accounting #378: the Gaussian noise multiplier z (sigma = z C, C = 1); the true Renyi DP of order alpha of
a sum of records in [-C, C] is 2 alpha / z^2 between replace-one neighbours, alpha / (2 z^2) between add-remove ones."""
ORDERS = (2.0, 4.0)
SCORES = {"d": [0, 0], "d_prime": [1, -1], "distance": 1}
"""OpenDP #2911's pair: score vectors at L-infinity distance 1 (declared: a callable's scores are not records)."""
NOISY_MAX = {"input_domain": "vector_domain(atom_domain(T=i64))", "input_metric": "linf_distance(T=i64)",
             "chain": [{"constructor": "make_noisy_max", "output_measure": "zero_concentrated_divergence()",
                        "scale": 1.0}]}
"""OpenDP's noisy max under zCDP at scale 1: its map states rho = 0.5 at d_in = 1 (epsilon 2, rho = epsilon^2 / 8)."""
PF_RENYI = (1.091, 1.377, 1.769)
"""Permute-and-flip's Renyi divergences at orders 1.5, 2, 4 on SCORES at scale 1 (P(index 1) = 1/2 against
e^-2 / 2), against rho alpha = 0.75, 1.0, 2.0: the zCDP claim fails at orders 1.5 and 2."""
EM_RENYI = (0.674, 0.868, 1.204)
"""The exponential mechanism's at the same orders (P(index 1) = 1/2 against 1 / (1 + e^2)): within rho alpha."""
NOT_REPRODUCED_CLAIMS = [
    ("opendp #2911 on the released wheels", "opendp 0.15.1's wheel already samples the exponential mechanism under "
     "zCDP (noisy_top_k's REPLACEMENT = true): on [1, -1] at scale 1, P(index 1) = 0.117 and 0.118 in 20 000 draws "
     "on 0.15.1 and 0.16.0 (exponential mechanism 0.119, permute-and-flip 0.068), so Renyi-2 is 0.868 <= 1.0 on "
     "both; 1.377 is permute-and-flip's value. The rows 'as released' audit the wheel; 'as described' samples "
     "OpenDP's own permute-and-flip (its max-divergence noisy max) under the zCDP map, the issue's scenario"),
]


def gaussian_sum(dataset, n, rng, multiplier=MULTIPLIER):
    """The Gaussian sum dp_accounting's GaussianDpEvent(multiplier) accounts: records clipped to [-1, 1], N(0, z^2)."""
    return np.clip(np.ravel(dataset), -1.0, 1.0).sum() + rng.normal(0.0, multiplier, size=(n, 1))


def permute_and_flip(dataset, n, rng):
    """OpenDP's permute-and-flip noisy max (its max-divergence measurement) at NOISY_MAX's scale: one call per output."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.linf_distance(T=int)
    measurement = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=NOISY_MAX["chain"][0]["scale"])
    scores = [int(x) for x in np.ravel(dataset)]
    return np.array([[measurement(scores)] for _ in range(n)], dtype=float)


GROUP_ROWS = 3
"""OpenDP #2945: the margin's max_length, and the rows of the one group "a" in each dataset."""
GROUP_PAIR = {"d": [[10]] * GROUP_ROWS, "d_prime": [[-10]] * GROUP_ROWS}
"""The issue's pair: every row of the group replaced, symmetric distance 2 GROUP_ROWS = 6; the sums are 30 and -30."""
GROUP_SCALE = 30.0
"""The discrete Laplace scale of the grouped sum of B in [-10, 10]: the true epsilon at d_in = 6 is 60 / 30 = 2."""


GROUP_BATCH = 1000
"""Releases per library call of the grouped sum (:func:`grouped_sum`): ~0.1 ms an output, against ~0.8 ms for one
call per output, whose cost is OpenDP's per-call conversion of the frame and the plan, not the noise."""


@functools.lru_cache(maxsize=8)
def _grouped_sum(max_length: int, copies: int = 1):
    """OpenDP's grouped sum of #2945 (make_private_lazyframe, one group "a", margin max_length, keys public); with
    ``copies`` > 1 the query aggregates that many copies of the same noisy sum, columns B0, B1, ...: each a draw of
    the one-sum measurement (same domain, margin, bounds and scale; OpenDP samples each expression's noise apart),
    whose map, not the copies', is the claim audited."""
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    schema = {"A": pl.String, "B": pl.Int32}
    query = pl.LazyFrame(schema=schema).group_by("A").agg(
        [pl.col("B").dp.sum((-10, 10), scale=GROUP_SCALE).alias(f"B{i}") for i in range(copies)])
    domain = dp.with_margin(dp.lazyframe_domain([dp.series_domain("A", dp.atom_domain(T=str)),
                                                 dp.series_domain("B", dp.atom_domain(T=int))]),
                            dp.polars.Margin(by=["A"], max_length=max_length, max_groups=1, invariant="keys"))
    return dp.m.make_private_lazyframe(domain, dp.symmetric_distance(), dp.max_divergence(), query), schema


def grouped_sum(dataset, n, rng, max_length=GROUP_ROWS):
    """The grouped sum's noisy B of group "a" on the records B = ``dataset``: GROUP_BATCH outputs a library call,
    each one column of :func:`_grouped_sum`'s copies."""
    import polars as pl

    values = [int(x) for x in np.ravel(dataset)]
    frame = pl.LazyFrame({"A": ["a"] * len(values), "B": values}, schema=_grouped_sum(max_length)[1])
    draws = []
    for start in range(0, n, GROUP_BATCH):
        measurement = _grouped_sum(max_length, min(GROUP_BATCH, n - start))[0]
        draws.extend(measurement(frame).collect().drop("A").row(0))
    return np.array(draws, dtype=float)[:, None]


def grouped_sum_fixed_map(dataset, n, rng):
    """The same call with max_length = 2 GROUP_ROWS: its map at d_in = 6 bounds a group's change by 6 rows, as the
    fix of #2945 bounds it by 2 max_length (the records stay within 3 rows a group)."""
    return grouped_sum(dataset, n, rng, max_length=2 * GROUP_ROWS)


def _group_by_case(max_length: int) -> dict:
    """#2945's pair audited against the grouped sum's own map at the pair's symmetric distance (d_in = 6): a claim
    stated for pairs GROUP_ROWS records apart (its ``distance``), which the pair is."""
    import importlib.metadata

    d_in = 2 * GROUP_ROWS  # every record of d replaced: GROUP_ROWS out, GROUP_ROWS in
    epsilon = float(_grouped_sum(max_length)[0].map(d_in))
    function = "grouped_sum" if max_length == GROUP_ROWS else "grouped_sum_fixed_map"
    return {"mechanism": {"callable": f"benchmarks.bench_real_bugs:{function}"}, "pairs": [GROUP_PAIR],
            "claims": [{"divergence": "dp", "function_class": "all", "epsilon": epsilon, "distance": GROUP_ROWS,
                        "reason": f"opendp {importlib.metadata.version('opendp')}'s privacy map of "
                                  f"make_private_lazyframe (max_length = {max_length}) at d_in = {d_in}: "
                                  f"epsilon = {epsilon:.6g}"}]}


def accountant_claims(relation: str) -> list[dict]:
    """The Renyi DP claims dp_accounting's RdpAccountant states for one GaussianDpEvent at ORDERS under ``relation``."""
    import importlib.metadata

    import dp_accounting

    accountant = dp_accounting.rdp.RdpAccountant(orders=list(ORDERS),
                                                 neighboring_relation=dp_accounting.NeighboringRelation[relation])
    accountant.compose(dp_accounting.GaussianDpEvent(MULTIPLIER))
    version = importlib.metadata.version("dp-accounting")
    return [{"divergence": "renyi", "alpha": [float(a)], "function_class": "all", "epsilon": float(e),
             "reason": f"dp_accounting {version} RdpAccountant({relation}) at order {a:g}"}
            for a, e in zip(accountant._orders, accountant._rdp)]


def _accountant_case(relation: str, pair: dict) -> dict:
    return {"mechanism": {"callable": "benchmarks.bench_real_bugs:gaussian_sum"}, "pairs": [pair],
            "claims": accountant_claims(relation), "attacks": {"representation": False}}


def _noisy_max_case(described: bool) -> dict:
    """#2911's pair audited against the zCDP map, sampling the wheel's noisy max or, as described, permute-and-flip."""
    from audit.mechanisms import make_mechanism

    if not described:
        return {"mechanism": {"name": "opendp.measurement", "params": NOISY_MAX}, "pairs": [SCORES],
                "claims": [{"from": "library"}]}
    claim = make_mechanism("opendp.measurement", NOISY_MAX).library_claim(1)
    return {"mechanism": {"callable": "benchmarks.bench_real_bugs:permute_and_flip"}, "pairs": [SCORES],
            "claims": [{**claim.table, "function_class": "all", "reason": claim.source}]}


CLAIM_CASES = [  # (case, release, library, config builder, true values at the claims' orders)
    ("dp_accounting #378 (fix PR #464)", "buggy: RdpAccountant(REPLACE_ONE), replace-one pair [-1] / [1]",
     "dp-accounting", lambda: _accountant_case("REPLACE_ONE", {"d": [[-1.0]], "d_prime": [[1.0]]}),
     [2 * a / MULTIPLIER**2 for a in ORDERS]),
    ("dp_accounting #378 (fix PR #464)", "correct: RdpAccountant(ADD_OR_REMOVE_ONE), add-remove pair [0] / [0, 1]",
     "dp-accounting", lambda: _accountant_case("ADD_OR_REMOVE_ONE", {"d": [[0.0]], "d_prime": [[0.0], [1.0]]}),
     [a / (2 * MULTIPLIER**2) for a in ORDERS]),
    ("opendp #2911", "as described: permute-and-flip sampled, the zCDP map claimed", "opendp",
     lambda: _noisy_max_case(True), list(PF_RENYI)),
    ("opendp #2911", "as released: make_noisy_max under zCDP, from = \"library\"", "opendp",
     lambda: _noisy_max_case(False), list(EM_RENYI)),
    ("opendp #2945", "buggy: grouped sum, margin max_length = 3, map at d_in = 6", "opendp",
     lambda: _group_by_case(GROUP_ROWS), [2 * GROUP_ROWS * 10 / GROUP_SCALE]),
    ("opendp #2945", "fixed map: the same call with max_length = 6 (a group's change bounded by 2k rows)", "opendp",
     lambda: _group_by_case(2 * GROUP_ROWS), [2 * GROUP_ROWS * 10 / GROUP_SCALE]),
]


CLAIMS_RECORDS = RESULTS / "bench_real_bugs_claims.jsonl"
"""The claims edition's records, one JSON line per case, release, library version and seed (:func:`claims_edition`)."""


def claim_record(case: str, release: str, library: str, true: list[float], config: dict, seed: int,
                 code: str) -> dict:
    """One audit of a claims case at ``seed``: verdict, claims, lower bounds per order, the outputs drawn
    (results.json), the CPU seconds of this process and its samplers, and the library and ``code`` (the commit
    this process started at) it ran."""
    import importlib.metadata

    start = sum(os.times()[:4])
    with tempfile.TemporaryDirectory() as out:
        result = run_audit({**config, "run": {"seed": seed}}, out_dir=out, progress=False)
        drawn = json.loads((Path(out) / "results.json").read_text())["outputs_drawn"]
    return {"case": case, "release": release, "library": f"{library} {importlib.metadata.version(library)}",
            "seed": seed, "verdict": result.verdict,
            "claims": ", ".join(str(c.get("label", c.get("claim"))) for c in result.claims),
            "true": [round(t, 4) for t in true],
            "lower bounds": [round(float(low), 4) for low in result.table.groupby("alpha", dropna=False)["ci_low"].max()],
            "outputs": int(drawn), "cpu s": round(sum(os.times()[:4]) - start, 1), "commit": code,
            "machine": machine()}


def claims_table(records: list[dict]) -> list[dict]:
    """One row per case, release and library version over every record of it (a later record of the same seed
    replaces an earlier): the verdicts counted, the first seed's lower bounds, medians of outputs and CPU s."""
    latest = {(r["case"], r["release"], r["library"], r["seed"]): r for r in records}
    groups: dict[tuple, list[dict]] = {}
    for (case, release, library, _), record in sorted(latest.items(), key=lambda item: item[0][3]):
        groups.setdefault((case, release, library), []).append(record)
    order = {(case, release): i for i, (case, release, *_) in enumerate(CLAIM_CASES)}
    rows = []
    for (case, release, library), runs in sorted(groups.items(), key=lambda item: (order.get(item[0][:2], 99), item[0][2])):
        seeds = [r["seed"] for r in runs]
        verdicts = Counter(r["verdict"] for r in runs)
        rows.append({"case": case, "release": release, "library": library, "claims": runs[0]["claims"],
                     "true (same orders)": ", ".join(f"{t:.3g}" for t in runs[0]["true"]),
                     "seeds": f"{len(seeds)} ({min(seeds)}-{max(seeds)})" if len(seeds) > 1 else str(seeds[0]),
                     "verdicts": ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())),
                     f"lower bounds (seed {seeds[0]})": ", ".join(f"{low:.3g}" for low in runs[0]["lower bounds"]),
                     "outputs drawn (median)": f"{round(np.median([r['outputs'] for r in runs])):,}".replace(",", " "),
                     "cpu s a seed (median)": f"{np.median([r['cpu s'] for r in runs]):.0f}"})
    return rows


def claims_edition(seeds: range, only: str | None = None, path: Path = CLAIMS_RECORDS, run: bool = True) -> str:
    """The second edition: each case audited from the library's own claim at default settings (module docstring)
    at each of ``seeds`` not yet in ``path`` (one JSON line per case, release, library version and seed, appended
    as each audit ends), for the cases whose library imports here and whose "case, release" contains ``only``; the table is
    rebuilt from every record of ``path``, so that runs in several environments and sessions add to one table."""
    import importlib.metadata

    skipped, code = [], commit()
    done = {(r["case"], r["release"], r["library"], r["seed"]) for r in read_records(path)}
    for case, release, library, build, true in CLAIM_CASES if run else ():
        if only and only not in f"{case}, {release}":
            continue
        try:
            version = f"{library} {importlib.metadata.version(library)}"
            config = build()
        except Exception as error:  # a missing library: skip with the reason
            skipped.append({"case": f"{case}, {release}", "why": f"skipped: {type(error).__name__}: {error}"})
            continue
        for seed in seeds:
            if (case, release, version, seed) not in done:
                record = claim_record(case, release, library, true, config, seed, code)
                append_record(path, record)
                print(record, flush=True)
    records = read_records(path)
    commits: dict[str, set[str]] = {}
    for record in records:
        commits.setdefault(record["commit"], set()).add(f"{record['case']} ({record['library']})")
    return "\n".join([
        "# Claims from the library (benchmarks/bench_real_bugs.py --claims)", "",
        f"`PYTHONPATH=. python benchmarks/bench_real_bugs.py --claims --seed S --seeds N [--only CASE]`, in an "
        "environment with the library versions named (docs/benchmarks.md), each run adding one line per case, "
        f"library version and seed to `{path.name}`; the table counts every line. Default audit settings (the "
        "dp_accounting cases: `representation = false`: the accountant bounds the released values, and the sum adds "
        "numpy's float Gaussian, which the representation layer refutes whatever the accounting, Mironov 2012); "
        "claims over `all` as the library states them (RdpAccountant's Renyi DP at each order; OpenDP's map "
        "rho = 0.5 read as Renyi claims 0.5 alpha at orders 1.5, 2, 4; OpenDP #2945: the grouped sum's map at the "
        "pair's symmetric distance, d_in = 6, epsilon over all); `lower bounds` per order, of the first seed; "
        "`outputs drawn` every output of an audit (both datasets, every stage and round); `cpu s` this process and "
        "its samplers. OpenDP cannot be seeded: its rows' seeds seed the audit, each a fresh draw of the library's "
        "noise.", "",
        tabulate(claims_table(records), headers="keys", tablefmt="github", disable_numparse=True)
        if records else "(no case ran)", "",
        "Code each record ran (`commit`: the commit its run started at, + when the code differed from it): "
        + "; ".join(f"{c}: {', '.join(sorted(cases))}" for c, cases in sorted(commits.items())) + ".", "",
        f"Machine: {'; '.join(sorted({r['machine'] for r in records}))} (shared; `nice -n 10`).", "",
        "## Not reproduced here", "",
        tabulate([{"case": case, "why": why} for case, why in NOT_REPRODUCED_CLAIMS] + skipped, headers="keys",
                 tablefmt="github"),
        ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--claims", action="store_true", help="the second edition: claims from the library")
    parser.add_argument("--seeds", type=int, default=1, help="--claims: audit each case at seeds --seed to "
                        "--seed + N - 1 (those not yet in --records)")
    parser.add_argument("--only", default=None, help="--claims: only the cases whose \"case, release\" contains this")
    parser.add_argument("--records", type=Path, default=CLAIMS_RECORDS, help="--claims: the JSON-lines records "
                        "(default benchmarks/results/bench_real_bugs_claims.jsonl); the table counts all of them")
    parser.add_argument("--table", action="store_true", help="--claims: only rebuild the table from --records")
    args = parser.parse_args()
    if args.claims:
        text = claims_edition(range(args.seed, args.seed + args.seeds), args.only, args.records, not args.table)
        Path(args.out or args.records.with_suffix(".md")).write_text(text)
        print(text)
        return
    args.out = args.out or "benchmarks/results/bench_real_bugs.md"
    rows, skipped, audited = [], [], {}
    for case in CASES:
        try:
            import importlib.metadata

            version = importlib.metadata.version(case.library)
            _diffprivlib()
        except Exception as error:  # a missing or broken install: skip with the reason
            skipped.append((f"{case.library} {case.version}: {case.name}", f"skipped: {type(error).__name__}: {error}"))
            print(f"skipped {case.name}: {error}", flush=True)
            continue
        for role, function in (("buggy", case.buggy), ("correct", case.correct)):
            if function not in audited:
                audited[function] = audit_case(case, function, args.seed)
                print(case.name, role, audited[function], flush=True)
            outcome = audited[function]
            rows.append({
                "case": case.name, "library": f"{case.library} {version}", "release": f"{role}: `{function}`",
                "source": case.source if role == "buggy" else "the same call used correctly",
                "claimed eps": case.claimed, "true eps": case.true_epsilon if role == "buggy" else f"<= {case.claimed:g}",
                "output-only audit sees it": case.visible if role == "buggy" else "-",
                **{key: value for key, value in outcome.items() if key != "cpu s"},
                "cpu s": f"{outcome['cpu s']:.0f}",
            })
    total = sum(outcome["cpu s"] for outcome in audited.values())
    text = "\n".join([
        "# Real input-handling bugs (benchmarks/bench_real_bugs.py)",
        "",
        f"`PYTHONPATH=. python benchmarks/bench_real_bugs.py --seed {args.seed}` "
        f"(diffprivlib 0.6.6 with scikit-learn < 1.7: `pip install \".[real-bugs]\"`); {total:.0f} CPU-s in the "
        "audits. Each release is audited with only a record domain, `[neighbours] strategy = \"search\"` (the "
        "edge-case probes, docs/probes.md) and the claim dp over all <= the epsilon given to the library, at "
        f"small budgets: {BUDGET} ({FIT_BUDGET} and probes = [\"new_category\"] for the logistic regression, "
        "one fit per output). `pair` is the audited pair of the strongest row and how the search made it; "
        "`lower bound` its lower confidence bound on epsilon (confidence 0.95); `refused probes` the probes "
        "the release raised on (dropped, never a violation), `findings` the in-domain pairs on one of whose "
        "datasets only it raised (a finding of the report, not a verdict). `inconclusive` is a row whose estimate "
        "exceeds the claim without significance (exit 0), not a violation.",
        "",
        tabulate(rows, headers="keys", tablefmt="github") if rows else "(no case ran)",
        "",
        "## Not reproduced here",
        "",
        tabulate([{"case": case, "why": why} for case, why in NOT_REPRODUCED + skipped], headers="keys",
                 tablefmt="github"),
        "",
    ])
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
