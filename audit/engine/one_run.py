"""One-run audits of learners: m canaries, each included with probability 1/2 in ONE training run.

Steinke, Nasr and Jagielski, "Privacy auditing with one (1) training run",
NeurIPS 2023 ("SNJ"), applied to a learner that releases a linear model's
coefficients (``one_run_release`` of the mechanism: ``dp_gd_logistic``,
``diffprivlib.logistic_regression``, ``opacus.dp_sgd`` with one linear
layer):

1. **Canaries.**  The first default pair's dataset D, widened by m features
   that it leaves at 0; canary i is a record of the largest feature norm of
   the default pairs (the learner's own worst-case canary norm) on feature
   k + i, label 1.  Each is included independently with probability 1/2
   (drawn from the seed).  Under add/remove neighbours an excluded canary
   is absent; where the default pairs replace a record (equal sizes), it is
   replaced by a blank record (features 0, label 1), so that each inclusion
   bit is one neighbour step of the relation the claim is stated for.
2. **One run** of the learner on D and the canaries, in a forked child
   within ``[run] sample_timeout`` seconds, isolated as the many-run sampler
   draws its chunks (:func:`audit.sampling.chunk_pools.isolated_call`):
   forked from the audit's process with ``[run] backend`` ``threading`` and
   ``loky``, from the worker that runs the training as one job of the cluster
   with ``dask`` and ``ray``; a learner that raises, exits, dies or hangs
   ends the audit with an error naming the cause
   (:class:`audit.sampling.errors.MechanismError`; exit 2, the error report
   written), never the audit's process.
3. **Adversary.**  Each canary's score from the released parameters
   theta: ``linear``, the canary statistic <theta, x_i> (a member of the
   linear class on the parameters); ``loss``, minus its logistic loss at the
   released model (intercept included).  A random ``train_fraction`` of the
   canaries is shown with its inclusion bits: the score's orientation is the
   sign of the difference of the included and excluded mean scores there
   (the linear discriminant in one dimension) and the midpoint of the two
   means is the centre (without shown canaries: larger reads as included,
   and the centre is the held-out scores' midrange); unless ``guess_fraction``
   is given, the share guessed is the one whose pure-DP bound is largest on
   the shown canaries.  On the held-out canaries it guesses "included" above
   the centre and "excluded" below it for that share of the scores farthest
   from it, abstaining on the rest.
4. **Bounds** from the held-out guesses, which may depend on the run and on
   the shown canaries' bits arbitrarily: given those bits, the run is a DP
   mechanism of the m' held-out bits, so SNJ
   Thm 3.1 applies with m' canaries (:func:`attacks.one_run.one_run_bound`:
   epsilon for a ``dp`` claim, with delta when the claim has one, and the
   f-DP analysis of Mahloujifar, Melis and Chaudhuri (ICML 2025) with the
   Gaussian curve for a ``gdp`` claim).
   With several claims each bound is at level (1 - confidence) / (number of
   claims) (Bonferroni), so that no claim is refuted falsely with probability
   above 1 - confidence.

Verdict per claim: ``violation`` when the bound exceeds the claim;
``inconclusive`` when the claim is at or above the **ceiling** (the bound
with every held-out canary guessed right, the most m canaries can show:
5.11 at m = 1000 with half of them shown, 5.81 if all 1000 were guessed), so
that the run could not have refuted it; ``pass`` otherwise.  A bound near
the ceiling says the adversary guessed (nearly) every canary, not that the
learner's epsilon is near it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attacks.one_run import one_run_bound, one_run_ceiling, one_run_lower_bound
from attacks.vocabulary import GDP, divergence_kind
from audit.config.fields import ConfigError
from audit.config.one_run import OneRunSpec
from audit.engine.plan import task_seed
from audit.sampling.chunk_pools import isolated_call
from audit.sampling.errors import MechanismError, one_line

GUESS_SHARES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
"""The guessed shares tried on the training canaries when ``guess_fraction`` is left out."""
RELEASES = ("coefficients", "coefficients_intercept")
"""What a learner's ``one_run_release`` may say: theta starts with the k coefficients, then maybe an intercept."""


def plant_canaries(mechanism: Any, canaries: int, included: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(dataset of the run, the canaries' records, k): step 1 of the module docstring."""
    d, d_prime = mechanism.default_pairs()[0]
    d, d_prime = np.asarray(d, dtype=float), np.asarray(d_prime, dtype=float)
    k = d.shape[1] - 1
    norms = np.linalg.norm(d_prime[:, :k], axis=1)
    norm = float(np.max(norms[np.isfinite(norms)]))
    widen = np.zeros((len(d), canaries))
    base = np.column_stack([d[:, :k], widen, d[:, k]])
    records = np.zeros((canaries, k + canaries + 1))
    records[np.arange(canaries), k + np.arange(canaries)] = norm
    records[:, -1] = 1.0
    if len(d) == len(d_prime):  # replace-one: an excluded canary's place holds a blank record
        blank = np.zeros_like(records)
        blank[:, -1] = 1.0
        return np.vstack([base, np.where(included[:, None], records, blank)]), records, k
    return np.vstack([base, records[included]]), records, k


def canary_scores(theta: np.ndarray, records: np.ndarray, k: int, score: str, intercept: bool) -> np.ndarray:
    """Each canary's score from the released parameters ``theta`` (step 3: larger reads as included)."""
    canaries = len(records)
    width = k + canaries
    features = records[:, :width]
    margins = features @ theta[:width]
    if score == "loss":
        shift = float(theta[width]) if intercept else 0.0
        return -np.logaddexp(0.0, -(margins + shift))  # minus the logistic loss of label 1
    return margins


def guesses_by_margin(scores: np.ndarray, centre: float, share: float) -> np.ndarray:
    """+1 (included) for a score above ``centre``, -1 below it, for the round(share n) scores farthest from it (at
    least 1), 0 (abstain) for the rest: SNJ section 5's abstention, its k+ and k- set by the centre."""
    margins = np.abs(scores - centre)
    keep = np.argsort(-margins, kind="stable")[:max(1, round(share * len(scores)))]
    guessed = np.zeros(len(scores), dtype=int)
    guessed[keep] = np.where(scores[keep] >= centre, 1, -1)
    return guessed


def tally(guessed: np.ndarray, included: np.ndarray) -> tuple[int, int]:
    """(correct, guesses): the guesses made and those matching the inclusion bits."""
    made = guessed != 0
    return int(np.sum(guessed[made] == np.where(included[made], 1, -1))), int(np.sum(made))


def _chosen_share(scores: np.ndarray, included: np.ndarray, centre: float, confidence: float) -> float:
    """The share of :data:`GUESS_SHARES` whose pure-DP bound is largest on the training canaries (the first)."""
    bounds = [one_run_lower_bound(*tally(guesses_by_margin(scores, centre, share), included), confidence)
              for share in GUESS_SHARES]
    return GUESS_SHARES[int(np.argmax(bounds))]


def train_isolated(mechanism: Any, dataset: np.ndarray, rng: np.random.Generator, timeout: float | None,
                   backend: str = "threading") -> np.ndarray:
    """The released parameters of one training run on ``dataset`` (step 2), drawn in a forked child that is killed
    after ``timeout`` seconds (None: no limit); the same numbers as a run in this process (the child draws from a
    copy of ``rng``).  ``backend`` is ``[run] backend``, which says where the child is forked
    (:func:`audit.sampling.chunk_pools.isolated_call`).

    Raises
    ------
    MechanismError
        Naming the cause in one line: the learner raised or called ``sys.exit``, its process ended without a
        result (``os._exit``, a signal, the out-of-memory killer), it ran past ``timeout``, or its cluster job
        ended without a result (the worker died).
    """
    name = getattr(mechanism, "name", "a callable")

    def run() -> np.ndarray | str:
        try:
            return np.asarray(mechanism.sample(dataset, 1, rng), dtype=float)[0]
        except (Exception, SystemExit) as error:  # what the audited code does is its own error, sent back as text
            return one_line(error)

    try:
        theta = isolated_call(backend, run, timeout)
    except TimeoutError:
        raise MechanismError(f"the training run of {name!r} took longer than run.sample_timeout = {timeout:g} s and "
                             "was stopped; raise run.sample_timeout if the learner is merely slow") from None
    except ChildProcessError as error:
        raise MechanismError(f"the training run of {name!r} ended its process without a result (exit code "
                             f"{error.args[0]}: os._exit, a signal, a crash or the out-of-memory killer)") from None
    except MechanismError as error:
        raise MechanismError(f"the training run of {name!r}: {error}") from None
    if isinstance(theta, str):
        raise MechanismError(f"the training run of {name!r} failed: {theta}")
    return theta


def one_run_audit(mechanism: Any, spec: OneRunSpec, claims: Sequence[Mapping[str, Any]], confidence: float,
                  seed: int, timeout: float | None = None, backend: str = "threading") -> dict[str, Any]:
    """The one-run audit of ``claims`` (``[[claims]]`` tables) on ``mechanism``: results.json's ``one_run``.

    ``timeout``: seconds the training run may take (``[run] sample_timeout``; None: no limit); ``backend``:
    where it runs (``[run] backend``, :func:`train_isolated`).

    Raises
    ------
    ConfigError
        When the mechanism releases no linear model's coefficients.
    MechanismError
        When the training run fails (:func:`train_isolated`).
    """
    release = getattr(mechanism, "one_run_release", None)
    if release not in RELEASES:
        raise ConfigError(f"one_run: mechanism {getattr(mechanism, 'name', mechanism)!r} does not release a linear "
                          "model's coefficients; use dp_gd_logistic, diffprivlib.logistic_regression or opacus.dp_sgd "
                          "(hidden = 0, release = \"parameters\").")
    m = spec.canaries
    rng = np.random.default_rng(task_seed(seed, "one_run"))
    included = rng.random(m) < 0.5
    order = rng.permutation(m)
    shown, held = order[:round(spec.train_fraction * m)], order[round(spec.train_fraction * m):]
    dataset, records, k = plant_canaries(mechanism, m, included)
    theta = train_isolated(mechanism, dataset, rng, timeout, backend)
    scores = canary_scores(theta, records, k, spec.score, release == "coefficients_intercept")
    if not np.all(np.isfinite(scores)):
        scores = np.nan_to_num(scores, nan=0.0)  # a NaN release shows nothing: ties, guessed in index order
    level = (1.0 - confidence) / max(len(claims), 1)
    centre = float(np.min(scores[held]) + np.ptp(scores[held]) / 2)  # untrained: the midrange, from the run alone
    seen = included[shown]
    if 0 < seen.sum() < len(shown):  # the linear discriminant in one dimension: orientation and midpoint
        high, low = scores[shown][seen].mean(), scores[shown][~seen].mean()
        centre, scores = ((high + low) / 2, scores) if high >= low else (-(high + low) / 2, -scores)
    share = spec.guess_fraction or _chosen_share(scores[shown], seen, centre, 1.0 - level)
    correct, guesses = tally(guesses_by_margin(scores[held], centre, share), included[held])
    return {
        "canaries": m, "shown": len(shown), "held_out": len(held), "score": spec.score, "guess_share": share,
        "guesses": guesses, "correct": correct, "confidence": confidence, "claim_confidence": 1.0 - level,
        "ceiling_all_guessed": one_run_ceiling(m, 1.0 - level),
        "claims": [_claim_reading(claim, correct, guesses, len(held), 1.0 - level) for claim in claims],
    }


def _claim_reading(claim: Mapping[str, Any], correct: int, guesses: int, held: int,
                   confidence: float) -> dict[str, Any]:
    """One claim's bound, ceiling (:func:`attacks.one_run.one_run_bound`) and verdict (module docstring)."""
    value, delta = float(claim["epsilon"]), float(claim.get("delta", 0.0))
    found = one_run_bound(claim["divergence"], correct, guesses, held, confidence, delta)
    if divergence_kind(claim["divergence"]) is GDP:
        entry = {"label": f"mu={value:g} GDP (one run)", "divergence": "gdp", "mu": value, "mu_low": found.bound}
    else:
        entry = {"label": f"({value:g}, {delta:g})-DP (one run)", "divergence": "dp", "epsilon": value,
                 "delta": delta, "epsilon_low": found.bound}
    verdict = "violation" if found.bound > value else "inconclusive" if value >= found.ceiling else "pass"
    return {**entry, "ceiling": found.ceiling, "verdict": verdict}


def overall(readings: Mapping[str, Any]) -> str:
    """violation if any claim reads it, else inconclusive if any does, else pass."""
    verdicts = [claim["verdict"] for claim in readings["claims"]]
    return next((v for v in ("violation", "inconclusive") if v in verdicts), "pass")


def one_run_lines(readings: Mapping[str, Any]) -> list[str]:
    """report.md's "One run" section."""
    lines = ["## One run (Steinke, Nasr and Jagielski 2023)", "",
             f"{readings['canaries']} canaries, each included with probability 1/2 in one training run; the adversary "
             f"({readings['score']} score) saw the inclusion of {readings['shown']} and guessed "
             f"{readings['guesses']} of the other {readings['held_out']} (share {readings['guess_share']:g}, "
             f"abstaining on the rest): **{readings['correct']} correct**.", "",
             "| claim | lower bound | ceiling | verdict |", "|---|---|---|---|"]
    for claim in readings["claims"]:
        if divergence_kind(claim["divergence"]) is GDP:
            lines.append(f"| mu = {claim['mu']:g} (gdp) | mu >= {claim['mu_low']:.3f} | {claim['ceiling']:.3f} | "
                         f"{claim['verdict']} |")
        else:
            lines.append(f"| ({claim['epsilon']:g}, {claim['delta']:g})-DP | epsilon >= {claim['epsilon_low']:.3f} "
                         f"| {claim['ceiling']:.3f} | {claim['verdict']} |")
    lines += ["", f"Bounds at confidence {readings['claim_confidence']:g} each. The **ceiling** is the bound when "
              f"every held-out canary is guessed right (with all {readings['canaries']} canaries guessed it would be "
              f"{readings['ceiling_all_guessed']:.2f}): it is set by the number of canaries, not by the learner, so "
              "a bound near it does not estimate the learner's epsilon, and a claim at or above it cannot be "
              "refuted by this run (inconclusive).", ""]
    return lines


def write_one_run_report(out: Any, meta: Mapping[str, Any]) -> Any:
    """Write results.json (``meta``: the audit's fields and ``one_run``; no rows), results.csv (empty), report.md
    (the verdict and :func:`one_run_lines`) and report.html into ``out``; return report.md's path."""
    from pathlib import Path

    from audit.report.html_report import write_html_report
    from audit.results.files import results_table, write_results

    out = Path(out)
    write_results(out, meta, results_table(()))
    report = out / "report.md"
    mechanism = meta["config"]["mechanism"].get("name", "a callable")
    report.write_text("\n".join([
        "# capaudit audit report", "", f"## Verdict: **{meta['verdict'].upper()}**", "",
        f"Mechanism `{mechanism}`, seed {meta['seed']}, audited in one run (`[one_run]`).", "",
        *one_run_lines(meta["one_run"]),
    ]))
    write_html_report(report)
    return report
