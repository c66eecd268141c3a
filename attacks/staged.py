"""The staged search: many candidate attacks screened on small samples, one statistic confirmed on a large fresh one.

A claim about a divergence (``dp``, ``kl``, ``renyi`` or ``ipm``) and a class
C is attacked by *candidates*: a neighbouring pair, a direction (P = M(d),
Q = M(d'), or swapped) and an attack class A contained in C
(:meth:`attacks.classes.FunctionClass.is_contained_in`) that estimates the
divergence.  Four stages, each on samples no earlier stage saw:

1. **screen**: every candidate's adversary is fitted on half of a small
   sample of its pair (a ``dp`` set chosen for the other half's size, so
   that the screen can measure it: sets chosen for the confirm size from a
   small sample are rare tails whose screen counts rank the pairs at random,
   report-noisy-max 3 at 21 M picked a 0.15 pair over the 0.25 ones) and
   scored on the other half; each gets the bound its attack is projected to
   reach on the confirm sample (:func:`attacks.selection.projected_bound`) and that bound's noise;
2. **train**: the best class of each (pair, direction) whose projection is
   within two standard errors of the best one's (at most ``MAX_FINALISTS``)
   is fitted again on a larger sample.  A ``dp`` attack is graded into
   nested sets {s g > c_0} ⊇ {s g > c_1} ⊇ ... of its oriented score
   (:func:`attacks.held_out.graded_attack`);
3. **check**: the finalists are scored on fresh samples and ONE statistic is
   chosen by its *promise* (:func:`attacks.selection.choose`): for ``kl``, ``renyi`` and
   ``ipm`` the fitted witness of a finalist (for ``kl`` and ``renyi`` the set
   of a set class, or the separating event of a witness whose check values
   show no spread, :func:`attacks.held_out.event_attack`: counted, not summarised by moments);
   for ``dp`` the fitted set of a finalist or a minimum-variance pool of its
   nested sets (:mod:`attacks.pooled_ratio`);
4. **confirm**: that statistic alone is computed on a large fresh sample of
   its pair, counted in chunks (memory bounded at any budget: ``dp`` and
   ``ipm`` keep counts, ``kl`` and ``renyi`` the witness's summary
   :class:`attacks.witness_moments.WitnessMoments`, of fixed size but for
   its 3 sqrt(n) largest log weights of Q), and one lower confidence bound
   comes out.

No choice sees the confirm sample, so the confirm statistic is a held-out
estimate of a fixed witness: its intervals are those of
:mod:`attacks.estimate` (``kl`` / ``renyi``: the variational bound with its
unseen-mass term, or an event's count bound, :mod:`attacks.event_divergence`; ``ipm``: the difference bounds on the set's counts;
``dp``: the score / Clopper-Pearson bounds on one set's counts, or the
pooled delta-method bound of :func:`attacks.pooled_ratio.pooled_lower_bound`),
valid whatever the search did, and one statistic per claim needs no
correction for the candidates it was chosen from.

Samples come from a *sampling callable* (:class:`attacks.candidates.Sampler`), so this module
never imports :mod:`audit`: ``sample(pair, n, stage, chunk)`` returns a
:class:`attacks.candidates.Draw` (n outputs on d and on d', and whether they are coupled pairs)
and must give independent draws for different (stage, chunk) keys.  A
sampler that raises costs its pair (``StagedResult.failures``), not the
search.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import joblib
import numpy as np

from attacks.budget import StageSizes
from attacks.candidates import Candidate, Draw, Sampler, Target
from attacks.estimate import DivergenceEstimate
from attacks.clipped_witness import clipped_serves, start_betting
from attacks.held_out import (CHUNK, FIGURE_OUTPUTS, Attack, PooledEstimate, accumulate, confirm_statistic,
                              draw_together, event_attack, fit_attack, fit_seed, graded_attack, held_out_estimate,
                              score_summary, summed_estimate, with_scores)
from attacks.selection import check_options, choose, projected_bound
from attacks.vocabulary import DP, divergence_of
from attacks.witness_moments import WitnessMoments

MAX_FINALISTS = 4
SCREEN_FIT = 20_000
"""Most training rows per law of a screen fit: a cheap fit that ranks the candidates (the L-BFGS, tree and scale
searches cost in proportion to the rows), while the held-out half that projects each one keeps its full size."""


@dataclass(frozen=True)
class StagedResult:
    """The outcome of :func:`staged_search` for one target.

    ``evidence`` is the confirm statistic (a :class:`DivergenceEstimate` or a
    :class:`attacks.held_out.PooledEstimate`), None when no candidate could be sampled and
    fitted (``error`` says why); ``failures`` maps a pair to its sampler's error.  ``rounds`` and ``stop``:
    the rounds of a sequential search (:func:`attacks.sequential.sequential_search`) and why it stopped (None
    for one fixed-design search).
    """

    target: Target
    sizes: StageSizes
    winner: Candidate | None
    evidence: DivergenceEstimate | PooledEstimate | None
    screened: int
    finalists: tuple[Candidate, ...]
    sets_pooled: int = 0
    failures: Mapping[int, str] = field(default_factory=dict)
    error: str | None = None
    rounds: int = 1
    stop: str | None = None


def staged_search(sample: Sampler, n_pairs: int, target: Target, sizes: StageSizes, *, seed: int = 0,
                  chunk: int = CHUNK, n_jobs: int = 1,
                  on_screened: Callable[[int], object] = lambda outputs: None,
                  confirm: Callable | None = None) -> StagedResult:
    """Screen, train, check and confirm the candidates of one target (module docstring).

    Parameters
    ----------
    sample : Sampler
        ``sample(pair, n, stage, chunk) -> Draw`` for pairs 0 .. n_pairs - 1.
    n_pairs : int
    target : Target
        Its ``classes`` are the candidates' attack classes.
    sizes : StageSizes
    seed : int
        Seeds the adversaries' fits (:func:`attacks.held_out.fit_seed`; the samples are the sampler's).
    chunk : int
        Outputs per dataset drawn at once in the check and confirm stages.
    n_jobs : int
        joblib workers for the screen and train fits and the check and confirm
        summaries (the active joblib backend); the results do not depend on it.
    on_screened : callable, optional
        Called once the screen is over with the outputs per dataset the
        later stages will draw (:func:`later_outputs`), e.g. for a progress bar.
    confirm : callable, optional
        The confirm stage, called as :func:`attacks.held_out.confirm_statistic` is (the default): e.g. one that looks as it draws
        (:func:`attacks.sequential.anytime_confirm`).

    Returns
    -------
    StagedResult
    """
    failures: dict[int, str] = {}

    def draw(pair: int, n: int, stage: str, index: int = 0) -> Draw | None:
        if pair in failures:
            return None
        try:
            return sample(pair, n, stage, index)
        except Exception as error:  # the audited code failed: its pair is out of the search
            failures[pair] = " ".join(f"{type(error).__name__}: {error}".split())
            return None

    scored = _screen(draw, n_pairs, target, sizes, seed, n_jobs)
    if not scored:
        return StagedResult(target, sizes, None, None, 0, (), failures=failures,
                            error="no candidate could be sampled and fitted: " + "; ".join(failures.values()))
    finalists = _finalists(scored)
    on_screened(later_outputs(sizes, len({candidate.pair for candidate in finalists})))
    attacks = _train(draw, finalists, target, sizes, seed, n_jobs)
    kept = [i for i, attack in enumerate(attacks) if attack is not None]
    if not kept:
        return StagedResult(target, sizes, None, None, len(scored), tuple(finalists), failures=failures,
                            error="sampling failed for every finalist: " + "; ".join(failures.values()))
    options = check_options(draw, [finalists[i] for i in kept], [attacks[i] for i in kept], target, sizes, chunk, n_jobs)
    if not options:
        return StagedResult(target, sizes, None, None, len(scored), tuple(finalists), failures=failures,
                            error="sampling failed for every finalist in the check stage")
    best = choose(options, sizes.check, sizes.confirm)
    winner, attack = finalists[kept[best.finalist]], attacks[kept[best.finalist]]
    if best.event is not None:
        attack = replace(attack, event=best.event)
    evidence = (confirm or confirm_statistic)(draw, winner, attack, best.weights, target, sizes, chunk, n_jobs)
    if evidence is None:
        return StagedResult(target, sizes, winner, None, len(scored), tuple(finalists), failures=failures,
                            error=f"sampling pair {winner.pair} failed in the confirm stage: {failures[winner.pair]}")
    pooled = 0 if best.weights is None else int(np.count_nonzero(best.weights))
    return StagedResult(target, sizes, winner, evidence, len(scored), tuple(finalists), pooled, failures)


def confirm_every(sample: Sampler, pair: int, target: Target, sizes: StageSizes, *, seed: int = 0,
                  chunk: int = CHUNK, n_jobs: int = 1) -> list[tuple[Candidate, DivergenceEstimate | str]]:
    """Every candidate of one pair (both directions x ``target.classes``) trained and confirmed: no choice.

    Each candidate is fitted on ``sizes.train`` outputs of the pair (a ``dp``
    set chosen for the confirm size) and its own fitted set or witness is
    counted on ``sizes.confirm`` fresh outputs, as the winner of
    :func:`staged_search` is (no pool: pooling would choose among sets), so
    every row is a held-out estimate of a fixed statistic and Holm's
    correction over the rows covers the many of them.  The sampler's
    exceptions propagate (the pair has no row without its samples); an attack
    whose fit fails gives its message in place of its evidence.

    Returns
    -------
    list of (Candidate, DivergenceEstimate or str)
        In candidate order (direction, then class); ``details["scores"]``
        holds each statistic's binned scores on the first
        :data:`attacks.held_out.FIGURE_OUTPUTS` confirm outputs (:func:`attacks.held_out.score_summary`).
    """
    candidates = [Candidate(pair, swapped, name) for swapped in (False, True) for name in target.classes]
    train = sample(pair, sizes.train, "train", 0)
    fitted = joblib.Parallel(n_jobs=n_jobs)(
        joblib.delayed(_train_or_error)(candidate, train, target, sizes, seed) for candidate in candidates)
    del train
    kept = [i for i, attack in enumerate(fitted) if isinstance(attack, Attack)]
    first: list[Draw] = []

    def keep_first(pair: int, n: int, stage: str, index: int) -> Draw:
        samples = sample(pair, n, stage, index)
        if index == 0:
            first.append(Draw(samples.d[:FIGURE_OUTPUTS].copy(), samples.d_prime[:FIGURE_OUTPUTS].copy(),
                              samples.coupled))
        return samples

    totals = accumulate(keep_first, [candidates[i] for i in kept], [fitted[i] for i in kept], sizes.confirm,
                         "confirm", target, chunk, n_jobs)
    results: list[tuple[Candidate, DivergenceEstimate | str]] = [
        (candidate, attack) for candidate, attack in zip(candidates, fitted) if isinstance(attack, str)]
    for position, i in enumerate(kept):
        candidate, attack = candidates[i], fitted[i]
        weights = None if attack.cuts is None else np.eye(attack.cuts.size)[attack.fitted]
        total, coupled = totals[position]
        evidence = summed_estimate(total, candidate, target, coupled, weights)
        scores = score_summary(attack, *candidate.laws(first[0]), weights, first[0].coupled)
        results.append((candidate, with_scores(evidence, scores)))
    return sorted(results, key=lambda item: candidates.index(item[0]))


def _train_or_error(candidate: Candidate, train: Draw, target: Target, sizes: StageSizes, seed: int) -> Attack | str:
    """A candidate fitted on its pair's train sample (a ``dp`` attack: its own set alone, ungraded), or the message
    of the fit's failure (an attack that fails costs its candidate only)."""
    p, q = candidate.laws(train)
    try:
        attack = fit_attack(candidate, p, q, target, sizes.confirm, train.coupled, fit_seed(seed, "train", candidate))
    except Exception as error:
        return f"attack {candidate.function_class}/{target.divergence} failed: " + " ".join(
            f"{type(error).__name__}: {error}".split())
    if divergence_of(target).weighted and not attack.counted:  # chosen on the training sample
        return with_betting(event_attack(attack, WitnessMoments.from_values(
            attack.adversary.witness(p), attack.adversary.witness(q), target.divergence, target.alpha)),
            candidate, p, q, target, sizes)
    if not isinstance(divergence_of(target), DP):
        return attack
    adversary = attack.adversary
    return Attack(adversary, np.array([adversary.side_ * adversary.threshold_]))


def later_outputs(sizes: StageSizes, pairs: int) -> int:
    """Outputs per dataset the train, check and confirm stages draw when the finalists lie on ``pairs`` pairs
    (train and check on each, confirm on the winner's)."""
    return pairs * (sizes.train + sizes.check) + sizes.confirm


def _screen_one(candidate: Candidate, samples: Draw, target: Target, sizes: StageSizes,
                seed: int) -> tuple[Candidate, float, float]:
    """A candidate fitted cheaply on the first half of its pair's screen sample, at most :data:`SCREEN_FIT` rows
    of it (a ``dp`` set chosen for the second half's size), and projected from the whole second half to the
    confirm size.  The screen only ranks: the finalists get the full fit on the train sample."""
    half = sizes.screen // 2
    fit = min(half, SCREEN_FIT)
    p, q = candidate.laws(samples)
    attack = fit_attack(candidate, p[:fit], q[:fit], target, len(p) - half, samples.coupled,
                        fit_seed(seed, "screen", candidate))
    evidence = held_out_estimate(attack, candidate, p[half:], q[half:], target, samples.coupled)
    return (candidate, *projected_bound(evidence, sizes.confirm))


def _screen(draw, n_pairs: int, target: Target, sizes: StageSizes, seed: int,
            n_jobs: int) -> list[tuple[Candidate, float, float]]:
    """(candidate, projected bound, its standard error) of every candidate whose pair could be sampled; the
    pairs drawn together in groups of up to min(n_jobs, MAX_FINALISTS) (the memory check's pairs held at once),
    each pair's candidates fitted in parallel."""
    scored = []
    group = min(MAX_FINALISTS, max(joblib.effective_n_jobs(n_jobs), 1))
    for first in range(0, n_pairs, group):
        pairs = range(first, min(first + group, n_pairs))
        for pair, samples in zip(pairs, draw_together(draw, [(pair, sizes.screen, "screen") for pair in pairs],
                                                       n_jobs)):
            if samples is None:
                continue
            candidates = [Candidate(pair, swapped, name) for swapped in (False, True) for name in target.classes]
            scored += joblib.Parallel(n_jobs=n_jobs)(
                joblib.delayed(_screen_one)(candidate, samples, target, sizes, seed) for candidate in candidates)
    return scored


def _finalists(scored: list[tuple[Candidate, float, float]]) -> list[Candidate]:
    """The best class of each (pair, direction) whose projected bound is within two standard errors of the best
    one's, at most MAX_FINALISTS: classes on the same pair mostly find the same set."""
    ranked = sorted(scored, key=lambda item: -item[1])
    _, best, best_error = ranked[0]
    kept: dict[tuple[int, bool], Candidate] = {}
    for candidate, projected, error in ranked:
        close = not np.isfinite(best) or projected >= best - 2 * np.hypot(best_error, error)
        if close:
            kept.setdefault((candidate.pair, candidate.swapped), candidate)
    return list(kept.values())[:MAX_FINALISTS]


def _train_one(candidate: Candidate, train: Draw, target: Target, sizes: StageSizes, seed: int) -> Attack:
    """A finalist fitted on its pair's train sample; a ``dp`` attack graded into nested sets."""
    p, q = candidate.laws(train)
    attack = fit_attack(candidate, p, q, target, sizes.confirm, train.coupled, fit_seed(seed, "train", candidate))
    if isinstance(divergence_of(target), DP):
        return graded_attack(attack.adversary, p)
    return with_betting(attack, candidate, p, q, target, sizes)


def with_betting(attack: Attack, candidate: Candidate, p: np.ndarray, q: np.ndarray, target: Target,
                 sizes: StageSizes) -> Attack:
    """The attack with its clipped witness's empty betting sequences (:func:`attacks.clipped_witness.start_betting`,
    clip range and candidate means from its training outputs ``p``, ``q``) where a clipped bound may serve its
    rows (:func:`attacks.clipped_witness.clipped_serves`), else as it is: decided before the confirm sample."""
    if attack.counted or not clipped_serves(target, candidate):
        return attack
    try:
        betting = start_betting(target, attack.adversary.witness(p), attack.adversary.witness(q), sizes.confirm)
    except ValueError:  # no finite clipped objective on the training split (chosen_rescaling): the delta method alone
        return attack
    return replace(attack, betting=betting)


def _train(draw, finalists: list[Candidate], target: Target, sizes: StageSizes, seed: int,
           n_jobs: int) -> list[Attack | None]:
    """Each finalist's attack fitted on ``sizes.train`` fresh outputs of its pair (None where sampling failed)."""
    pairs = list(dict.fromkeys(c.pair for c in finalists))
    samples = dict(zip(pairs, draw_together(draw, [(pair, sizes.train, "train") for pair in pairs], n_jobs)))
    fitted = iter(joblib.Parallel(n_jobs=n_jobs)(
        joblib.delayed(_train_one)(c, samples[c.pair], target, sizes, seed)
        for c in finalists if samples[c.pair] is not None))
    return [None if samples[c.pair] is None else next(fitted) for c in finalists]
