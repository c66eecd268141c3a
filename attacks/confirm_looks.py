"""Confirm samples read after every batch: the batches of the looks, and the looks of a clipped ``kl`` / ``renyi``
witness.

A confirm stage that looks (:func:`attacks.sequential.anytime_confirm`) draws its
sample in batches (:func:`confirm_batches`: :data:`LOOK` outputs per dataset, then
half as many more as drawn so far) and reads a confidence sequence after each:
a ``dp`` or ``ipm`` set's (:mod:`attacks.anytime_sets`), or, here, the betting
sequences of a clipped witness (:func:`witness_looks`).

Why the witness's looks cost no error of their own (theory.md section 7,
"Looks inside a round").  At the end of a confirm sample of fixed size n, a
witness with a clipped bound is confirmed two ways at once
(:class:`attacks.clipped_witness.ClippedWitnessEstimate`): the delta method at
error a w / 2 and the clipped witness's betting bound at a w / 2, w the round's
weight.  The betting half is a confidence sequence: the event B that its bound
ever exceeds the clipped objective, at any n, has probability at most a w / 2
(Ville's inequality, Waudby-Smith and Ramdas 2024).  So the looks read that same
half, at that same error, after every batch: a look declares a violation only
on B; the sample's end (no look decided) on B or on the event D that the delta
method's bound at the fixed n exceeds the witness's objective, P(D) <= a w / 2.
Whatever the look it stopped at, the round's error is at most
P(B) + P(D) <= a w: the round spends its weight w, as a round without looks, and
the split (half to each bound) is fixed before the confirm sample, by the
check stage's choice of a witness with a clipped bound
(:func:`attacks.clipped_witness.clipped_serves`), never by which bound came out
tighter.  The capital is fed in drawing order, batch after batch, each batch
drawn as chunk ``batch`` of the stage, so the numbers do not depend on
``n_jobs``.

Reference
---------
I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting", J. R. Stat. Soc. B
86(1):1-27, 2024.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from attacks.candidates import Candidate, Target
from attacks.clipped_witness import ClippedWitnessEstimate
from attacks.divergences import tail_count
from attacks.evidence import Evidence
from attacks.held_out import FIGURE_OUTPUTS, Attack, score_summary, witness_estimate
from attacks.witness_moments import WitnessMoments

LOOK = 50
"""Outputs per dataset between the first looks of a confirm confidence sequence; later looks come after half as
many more as drawn so far (a geometric grid: 3 looks in 125 outputs, 16 in 32 000), so that a search stops at most
half again past the look that could decide, in few draws (each a call of the sampler, e.g. a process started)."""


def confirm_batches(draw, winner: Candidate, n: int) -> Iterator[tuple[np.ndarray, np.ndarray, bool] | None]:
    """The ``n`` confirm outputs per dataset of the winner's pair in batches: :data:`LOOK`, then half as many as
    drawn so far (up to n); batch k drawn as chunk k of the ``confirm`` stage.  Each batch's (outputs of P,
    outputs of Q, coupled); None, and no more, where a draw failed."""
    drawn, batch = 0, 0
    while drawn < n:
        size = min(max(LOOK, drawn // 2), n - drawn)
        samples = draw(winner.pair, size, "confirm", batch)
        if samples is None:
            yield None
            return
        yield (*winner.laws(samples), samples.coupled)
        drawn, batch = drawn + size, batch + 1


class FirstOutputs:
    """The first :data:`attacks.held_out.FIGURE_OUTPUTS` outputs of each law of a confirm sample drawn in
    batches, whose scores the report's figures bin (:func:`attacks.held_out.score_summary`)."""

    def __init__(self):
        self.p: list[np.ndarray] = []
        self.q: list[np.ndarray] = []
        self.n = 0

    def keep(self, p: np.ndarray, q: np.ndarray) -> None:
        room = max(FIGURE_OUTPUTS - self.n, 0)
        self.p.append(p[:room].copy())
        self.q.append(q[:room].copy())
        self.n += len(p)

    def scores(self, attack: Attack, weights: np.ndarray | None, coupled: bool) -> dict:
        return score_summary(attack, np.concatenate(self.p), np.concatenate(self.q), weights, coupled)


def witness_looks(draw, winner: Candidate, attack: Attack, target: Target, n: int, weight: float,
                  decides: Callable[[Evidence, float], bool]) -> ClippedWitnessEstimate | None:
    """The confirm stage of a ``kl`` / ``renyi`` witness with a clipped bound (``attack.betting``), read after
    every batch (module docstring).

    After each batch of :func:`confirm_batches` the clipped witness's betting
    sequences, fed in drawing order, give a look
    (:class:`attacks.clipped_witness.ClippedWitnessEstimate` with ``at_look``:
    the betting half alone, at half the error); the stage stops at the first
    look where ``decides(look, weight)``.  If none does, the whole sample's
    estimate (the delta method and the betting bound, each at half the error)
    is the round's statistic, at the same ``weight``: the looks spent the
    betting half's error only, which the sequences hold at every n at once.

    Parameters
    ----------
    draw : callable
        The round's sampler, called as ``draw(pair, n, "confirm", batch)``.
    winner, attack, target
        The check stage's choice: a witness (not a counted event) whose ``betting`` sequences are set.
    n : int
        Confirm outputs per dataset.
    weight : float
        The round's share of the error (:func:`attacks.sequential.spending_weights`).
    decides : callable
        Whether a look decides at a weight (:func:`attacks.sequential.decide`).

    Returns
    -------
    ClippedWitnessEstimate or None
        The deciding look's or the whole sample's estimate, ``details`` ``weight`` and ``looks`` (the looks
        read) and ``scores``; None where a draw failed.
    """
    if attack.betting is None or attack.counted:
        raise ValueError("witness_looks needs a witness with clipped betting sequences (attacks.staged.with_betting).")
    tail, witness = tail_count(n) + 1, attack.adversary.witness
    betting, moments, coupled, first, looks = attack.betting, None, True, FirstOutputs(), 0
    for batch in confirm_batches(draw, winner, n):
        if batch is None:
            return None
        p, q, batch_coupled = batch
        first.keep(p, q)
        w_p, w_q = witness(p), witness(q)
        part = WitnessMoments.from_values(w_p, w_q, target.divergence, target.alpha, tail, attack.adversary.supremum_)
        moments = part if moments is None else moments + part
        betting = betting.update(*betting.rescaling.rescaled(w_p, w_q))
        coupled, looks = coupled and batch_coupled, looks + 1
        evidence = ClippedWitnessEstimate(witness_estimate(moments, target, winner.function_class, coupled), betting,
                                          at_look=True)
        if decides(evidence, weight):
            return evidence.with_details(weight=weight, looks=looks, scores=first.scores(attack, None, coupled))
    whole = ClippedWitnessEstimate(witness_estimate(moments, target, winner.function_class, coupled), betting)
    return whole.with_details(weight=weight, looks=looks, scores=first.scores(attack, None, coupled))
