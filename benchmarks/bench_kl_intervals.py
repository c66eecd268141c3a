"""How much of the exact (linear, KL) and (poly2, KL) of Laplace pairs a 95 % lower bound keeps at 100 000 outputs.

    PYTHONPATH=. python benchmarks/bench_kl_intervals.py [--seeds N] [--out F]

Laplace epsilon in {2, 4} (P at 0, Q at 1, scale 1 / epsilon), n = 100 000
outputs per dataset, train half / held-out half (:func:`attacks.estimate_divergence`),
seeds 0..N-1.  Per class, as fractions (median over the seeds) of the exact
restricted value (:func:`audit.theory.exact.restricted_divergence`):

* ``delta method``: the row's lower bound today (:func:`attacks.divergences.variational_bound`);
* ``betting, clipped``: :func:`attacks.bounded_witness.betting_bound` of the same fitted witness clipped to
  its training range.  The clipped witness is outside linear and poly2, so this bound serves only an ``all``
  (or tree) claim and is shown as a fraction of the unrestricted KL, its estimand's ceiling;
* ``all row, run_audit``: the 95 % lower bound of the row of a (kl, ``all``) claim that ``run_audit`` gives the
  builtin Laplace mechanism at ``n_samples`` = n with that attack class alone (policy best: its confirm sample is
  half of n, as the held-out half above; :mod:`attacks.clipped_witness`: the larger of the delta method and the
  betting bound of the witness steepened and clipped on the training split, each at half the error), as a
  fraction of the unrestricted KL, with how many seeds took the betting half;
* ``oracle ceiling``: max over the class's witnesses h of DV(h) - z_0.95 sigma(h) / sqrt(n_test), the best
  lower bound an interval of the efficient (delta-method) width attains with the law's true variance
  sigma^2 = var_P(h) + var_Q(e^h) / (E_Q e^h)^2, by quadrature; witnesses whose e^h has no finite variance
  under Q (a linear slope above epsilon / 2) are excluded, since no sqrt(n) interval covers them.  An interval
  valid at every n (a confidence sequence) is wider still, so no valid interval reaches past this ceiling;
* ``ceiling, tail index <= 0.4``: the same with the linear slope below 0.4 epsilon, the tail cap that keeps the
  delta method's variance estimate consistent (:func:`attacks.adversary._witness_scale`); poly2's fitted
  witnesses bounded above need no cap (:func:`attacks.bounded_witness.quadratic_supremum`).

Writes benchmarks/results/bench_kl_intervals.md and .json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy import optimize, stats
from scipy.special import logsumexp, ndtri
from sklearn.utils import check_random_state
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parent))

from attacks import estimate_divergence  # noqa: E402
from audit import run_audit  # noqa: E402
from attacks.bounded_witness import betting_bound, training_range  # noqa: E402
from attacks.sequential import interval_of  # noqa: E402
from attacks.budget import train_size  # noqa: E402
from audit.theory.exact import restricted_divergence  # noqa: E402
from results_file import RESULTS, add_out_option, write  # noqa: E402

EPSILONS = (2.0, 4.0)
CLASSES = ("linear", "poly2")
N = 100_000
LEVEL = 0.95
GRID = np.linspace(-40.0, 41.0, 400_001)


def oracle_ceiling(epsilon: float, degree: int, n_test: int, max_tail: float = 0.5) -> tuple[float, list[float]]:
    """max over polynomial witnesses of degree ``degree`` of DV(h) - z sigma(h) / sqrt(n_test) (module docstring),
    by quadrature of the two Laplace densities on :data:`GRID`; returns the value and the maximising coefficients.
    A linear witness a x has exp(h) of tail index |a| / epsilon under Q, kept below ``max_tail`` (1/2: a finite
    variance; 0.4: the cap of :func:`attacks.adversary._witness_scale`)."""
    b = 1.0 / epsilon
    step = GRID[1] - GRID[0]
    log_p, log_q = stats.laplace(0, b).logpdf(GRID), stats.laplace(1, b).logpdf(GRID)
    z = float(ndtri(LEVEL))

    def negative(coef: np.ndarray) -> float:
        h = sum(c * GRID ** (k + 1) for k, c in enumerate(coef))
        if degree == 2 and coef[1] > 0 or degree == 1 and abs(coef[0]) >= max_tail * epsilon:
            return 1e6  # E_Q e^(2h) infinite: no finite variance
        mean_p = float(np.sum(np.exp(log_p) * h) * step)
        var_p = float(np.sum(np.exp(log_p) * (h - mean_p) ** 2) * step)
        log_m1 = logsumexp(log_q + h) + np.log(step)
        log_m2 = logsumexp(log_q + 2 * h) + np.log(step)
        relative = np.expm1(log_m2 - 2 * log_m1)
        return -(mean_p - log_m1 - z * np.sqrt((var_p + relative) / n_test))

    starts = [np.array([-0.9 * max_tail * epsilon])] if degree == 1 else [np.array([-e, -e / 2]) for e in (0.5, 1.0, 2.0)]
    best = min((optimize.minimize(negative, s, method="Nelder-Mead", options=dict(xatol=1e-5, fatol=1e-7))
                for s in starts), key=lambda r: r.fun)
    return -float(best.fun), best.x.tolist()


def one_seed(epsilon: float, function_class: str, seed: int) -> dict:
    """The delta-method and clipped betting bounds of one audit's fitted witness."""
    p, q = stats.laplace(0, 1 / epsilon), stats.laplace(1, 1 / epsilon)
    rng = np.random.default_rng(seed)
    x_p, x_q = p.rvs(N, random_state=rng)[:, None], q.rvs(N, random_state=rng)[:, None]
    result = estimate_divergence(x_p, x_q, function_class, "kl", random_state=seed)
    split = check_random_state(seed)  # the split of estimate_divergence
    order_p, order_q = split.permutation(N), split.permutation(N)
    n_train = train_size(N, 0.5)
    witness = result.adversary.witness
    value_range = training_range(witness(x_p[order_p[:n_train]]), witness(x_q[order_q[:n_train]]))
    betting = betting_bound(witness(x_p[order_p[n_train:]]), witness(x_q[order_q[n_train:]]), "kl", value_range,
                            LEVEL)
    audit = run_audit({"mechanism": {"name": "laplace", "params": {"epsilon": epsilon}},
                       "claims": [{"divergence": "kl", "function_class": "all", "epsilon": 100.0}],
                       "attacks": {"classes": [function_class], "n_samples": N}, "run": {"seed": seed, "n_jobs": 1}},
                      seed=seed, progress=False)
    [row] = audit.rows
    return dict(estimate=result.estimate, delta_method=result.lower_bound(LEVEL), betting_clipped=betting,
                n_test=result.n_test, all_row=row.evidence.lower_bound(LEVEL),
                all_row_interval=interval_of(row.evidence, LEVEL), all_row_exact=row.exact)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    add_out_option(parser, "bench_kl_intervals")
    args = parser.parse_args()
    rows, records = [], []
    for epsilon in EPSILONS:
        p, q = stats.laplace(0, 1 / epsilon), stats.laplace(1, 1 / epsilon)
        unrestricted = restricted_divergence(p, q, "all", "kl")
        for function_class in CLASSES:
            exact = restricted_divergence(p, q, function_class, "kl")
            runs = [one_seed(epsilon, function_class, seed) for seed in range(args.seeds)]
            degree = 1 if function_class == "linear" else 2
            ceiling, coef = oracle_ceiling(epsilon, degree, runs[0]["n_test"])
            capped = oracle_ceiling(epsilon, degree, runs[0]["n_test"], 0.4)[0] if degree == 1 else ceiling

            def median(key: str) -> float:
                return statistics.median(run[key] for run in runs)

            record = dict(epsilon=epsilon, function_class=function_class, exact=exact, unrestricted=unrestricted,
                          n=N, seeds=args.seeds, estimate=median("estimate"), delta_method=median("delta_method"),
                          betting_clipped=median("betting_clipped"), all_row=median("all_row"),
                          all_row_betting=sum(run["all_row_interval"] == "betting CS" for run in runs),
                          oracle_ceiling=ceiling, oracle_witness=coef,
                          oracle_ceiling_tail_cap=capped,
                          runs=runs)
            records.append(record)
            rows.append([f"laplace eps={epsilon:g}", function_class, f"{exact:.4f}",
                         f"{record['estimate'] / exact:.1%}", f"{record['delta_method'] / exact:.1%}",
                         f"{ceiling / exact:.1%}", f"{capped / exact:.1%}", f"{record['betting_clipped'] / unrestricted:.1%} of {unrestricted:.4f}",
                         f"{record['all_row'] / unrestricted:.1%} ({record['all_row_betting']}/{args.seeds} betting CS)"])
            print(rows[-1], flush=True)
    text = tabulate(rows, headers=["law", "class", "exact (class, KL)", "estimate", "delta method",
                                   "oracle ceiling", "ceiling, tail index <= 0.4", "betting, clipped (all only)",
                                   "all row, run_audit"], tablefmt="github")
    write(args.out, f"Median over seeds 0-{args.seeds - 1}, n = {N:,} per dataset (half held out), 95 % lower "
                    "bounds as fractions of the exact restricted value (the clipped betting bound and the all "
                    f"row: of the unrestricted KL).\n\n{text}")
    json_out = args.out.with_suffix(".json") if args.out.suffix == ".md" else RESULTS / "bench_kl_intervals.json"
    json_out.write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
