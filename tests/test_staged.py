"""The staged search: attacks/staged.py (search over a sampling callable) and audit/engine/run.py's policies (run_audit).

Coverage: the confirm bound is a held-out bound of a statistic fixed before
the confirm sample, so at level 0.95 it exceeds the truth in at most 5 % of
runs; the fast tests check one seed each (bound <= truth) and that the bound
is informative (within a few of its own standard errors of the truth); the
slow test counts exceedances over seeds against a binomial allowance.
"""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import numpy as np
import pytest
from scipy.stats import binom, norm

from attacks.budget import DEFAULT_SHARES, StageSizes
from attacks.candidates import Draw, Target
from attacks.held_out import PooledEstimate, count_estimate
from attacks.selection import Option
from attacks.staged import staged_search
import attacks.selection as selection
import audit.engine.run
import audit.engine.memory
from audit.commands.api import AuditInterrupted, run_audit
from attacks.divergences import tail_count
from audit.config.load import ConfigError, load_config
from audit.mechanisms import make_mechanism
from audit.inputs.neighbours import make_pairs
from audit.sampling.sampler import SamplingError, pair_sampler
from audit.theory.bounds import laplace_kl, laplace_renyi

LEVEL = 0.95
SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schema"
RNM3_EPSILON = 0.25  # report_noisy_max_3 at epsilon 0.1 (benchmarks/bench_suite.py's reference: DP-Sniper 0.249)


def laplace_sampler(epsilon: float, shifts=(1.0,), seed: int = 0, log: list | None = None, poison: bool = False):
    """Coupled Laplace pairs: d' = d + shift; each (pair, stage, chunk) from its own seed.  ``log`` records the
    calls; ``poison`` replaces the confirm sample's outputs on d' by outputs far from any training output."""
    stages = ("screen", "train", "check", "confirm")

    def sample(pair: int, n: int, stage: str, chunk: int) -> Draw:
        if log is not None:
            log.append((pair, n, stage, chunk))
        rng = np.random.default_rng([seed, pair, stages.index(stage), chunk])
        noise = rng.laplace(0.0, 1.0 / epsilon, (n, 1))
        shifted = noise + shifts[pair]
        if poison and stage == "confirm":
            shifted = noise + 100.0 * shifts[pair]
        return Draw(noise, shifted, True)

    return sample


def test_stage_sizes_split_the_budget_and_refuse_bad_shares():
    sizes = StageSizes.from_budget(10_000)
    assert (sizes.screen, sizes.train, sizes.check, sizes.confirm) == tuple(
        int(DEFAULT_SHARES[s] * 10_000) for s in ("screen", "train", "check", "confirm"))
    with pytest.raises(ValueError, match="summing to 1"):
        StageSizes.from_budget(10_000, {"screen": 0.5, "train": 0.5, "check": 0.5, "confirm": 0.5})
    with pytest.raises(ValueError, match="at least 20"):
        StageSizes.from_budget(100)


@pytest.mark.parametrize("coupled", [False, True])
def test_a_set_with_3_percent_of_p_and_no_q_outpromises_a_weak_frequent_set(coupled):
    """The check stage at the default budget (1 000 check and 5 000 confirm outputs, a family of 4): a set holding
    30 outputs of P and none of Q (a float's porous support) must win over a set with ratio 1.1 (500 vs 452).
    Its confirm bound at 5 000 outputs (150 vs 0, Clopper-Pearson) is about log(0.026 / 0.0012) = 3, the weak
    set's at most 0.1; the smoothed log-ratio's standard error (1.4 from Q's half count) made it lose before."""
    target = Target.for_claim("dp", "all", ["floatbits"])
    porous = count_estimate(np.array([0, 30, 0, 970]), target, "floatbits", coupled)
    weak = count_estimate(np.array([452, 48, 0, 500]), target, "linear", coupled)
    options = [Option(i, np.ones(1), *selection._dp_error(evidence), counts=evidence)
               for i, evidence in enumerate((porous, weak))]
    porous_promise, weak_promise = (option.promise(1_000, 5_000) for option in options)
    assert porous_promise > 1.5 > 0.1 > weak_promise


def test_the_check_chooses_a_rarer_set_it_shows_ahead_by_its_confirm_spread_alone():
    """SVT4's check stage (docs/benchmarks.md): a frequent set reading 0.178 +- 0.0033 and a rarer one reading
    0.180 +- 0.0047 on 10^6 check outputs, 1.27 x 10^7 to confirm.  The promise is the estimate less z(0.95)
    confirm errors, sqrt(check / confirm) = 0.28 check errors (0.1765 and 0.1778): the rarer set wins.  Less
    2.33 check errors as well (the former rule, a Bonferroni quantile over 4 finalists) the frequent one won,
    0.1703 against 0.1690."""
    target, n, check, confirm = Target.for_claim("dp", "all", ["linear"]), 1_000_000, 1_000_000, 12_700_000
    sets = []
    for k_q, ratio in ((143_000, 0.178), (77_000, 0.180)):
        k_p = round(k_q * np.exp(ratio))
        sets.append(count_estimate(np.array([k_q, k_p - k_q, 0, n - k_p]), target, "linear", False))
    options = [Option(i, np.ones(1), *selection._dp_error(evidence), counts=evidence) for i, evidence in enumerate(sets)]
    frequent, rare = (option.promise(check, confirm) for option in options)
    for option, promised in zip(options, (frequent, rare)):
        assert promised == pytest.approx(option.estimate - norm.ppf(LEVEL) * option.error * np.sqrt(check / confirm),
                                         abs=1e-5)
    assert options[0].error == pytest.approx(0.0033, abs=2e-4) and options[1].error == pytest.approx(0.0047, abs=2e-4)
    assert rare > frequent + 1e-3 and selection.choose(options, check, confirm) is options[1]


def test_the_check_chooses_among_one_finalists_options_by_their_simultaneous_lower_bound():
    """Three options of one finalist and one value (a Laplace pair's tail pools: log-ratio epsilon each) read
    0.100 +- 0.0005, 0.104 +- 0.004 and 0.108 +- 0.006 (1 000 check, 12 000 confirm outputs).  At the check estimate
    the luckiest promises most (0.108 - 1.645 x 0.006 x 0.289 = 0.1051); less z(1 - 0.05 / 3) = 2.13 check errors
    the precise one does (0.0987 against 0.0936 and 0.0924), and it represents the finalist.  A second finalist
    reading 0.099 +- 0.0005 loses to it at the check estimate (0.0988 against 0.0998)."""
    options = [Option(0, None, estimate, error) for estimate, error in ((0.100, 0.0005), (0.104, 0.004), (0.108, 0.006))]
    assert max(options, key=lambda option: option.promise(1_000, 12_000)) is options[2]
    cautious = [option.promise(1_000, 12_000, 3) for option in options]
    z = norm.ppf(1 - 0.05 / 3) + norm.ppf(LEVEL) * np.sqrt(1 / 12)
    assert cautious == pytest.approx([0.100 - z * 0.0005, 0.104 - z * 0.004, 0.108 - z * 0.006], abs=1e-12)
    assert selection.choose(options + [Option(1, None, 0.099, 0.0005)], 1_000, 12_000) is options[0]


def test_target_keeps_only_classes_contained_in_the_claim_that_estimate_the_divergence():
    assert Target.for_claim("kl", "all", ["linear", "threshold", "poly2"]).classes == ("linear", "threshold", "poly2")
    assert Target.for_claim("renyi", "linear", ["linear", "threshold", "atoms"], alpha=2.0).classes == ("linear",)
    assert Target.for_claim("dp", "linear", ["linear", "poly2", "threshold"]).classes == ("linear",)


@pytest.mark.parametrize("divergence, alpha, truth", [
    ("dp", None, 1.0),
    ("kl", None, laplace_kl(1.0)),
    ("renyi", 2.0, laplace_renyi(1.0, 2.0)),
    ("ipm", None, 2.0 * (1.0 - np.exp(-0.5))),
])
def test_confirm_bound_covers_the_truth_on_laplace(divergence, alpha, truth):
    """Laplace epsilon = 1, shift 1: the confirm bound lies below the (unrestricted) truth and, for dp and ipm,
    whose restricted value equals it for thresholds, within four of its standard errors."""
    target = Target(divergence, ("threshold",) if divergence in ("dp", "ipm") else ("linear",), alpha)
    result = staged_search(laplace_sampler(1.0), 1, target, StageSizes.from_budget(40_000), seed=0)
    lower = result.evidence.lower_bound(LEVEL)
    assert lower <= truth
    if divergence in ("dp", "ipm"):
        low, high = result.evidence.confidence_interval(0.9)
        error = (high - low) / (2 * norm.ppf(0.95))
        assert lower >= truth - 4 * error - 0.02  # 0.02: the fitted threshold's shortfall from the best set


def test_confirm_bound_covers_report_noisy_max_3_and_refutes_its_claim():
    """report_noisy_max_3 at epsilon 0.1 is 0.25-DP at best (DP-Sniper's 0.249): the bound is below 0.25 and
    above the claimed 0.1."""
    mechanism = make_mechanism("report_noisy_max_3", {"epsilon": 0.1})
    pairs = make_pairs(None, mechanism, np.random.default_rng(0))
    sample = pair_sampler(mechanism, pairs[5:7], seed=0, coupled=True)  # the all-2 and all-0 neighbours of all-1
    result = staged_search(sample, 2, Target("dp", ("threshold",)), StageSizes.from_budget(80_000), seed=0)
    assert 0.1 < result.evidence.lower_bound(LEVEL) <= RNM3_EPSILON


def test_choices_never_see_the_confirm_sample():
    """Poisoning the confirm sample changes the bound but no choice: winner, finalists, pooled sets; and only
    the winner's pair is drawn in the confirm stage, in chunks that add up to its size."""
    sizes = StageSizes.from_budget(10_000)
    results, logs = [], []
    for poison in (False, True):
        log: list = []
        results.append(staged_search(laplace_sampler(1.0, (1.0, 0.5), log=log, poison=poison), 2,
                                     Target("dp", ("threshold", "linear")), sizes, seed=3, chunk=2_000))
        logs.append(log)
    clean, poisoned = results
    assert (clean.winner, clean.finalists, clean.sets_pooled) == (poisoned.winner, poisoned.finalists,
                                                                  poisoned.sets_pooled)
    assert poisoned.evidence.estimate != clean.evidence.estimate
    confirm = [(pair, n) for pair, n, stage, _ in logs[0] if stage == "confirm"]
    assert {pair for pair, _ in confirm} == {clean.winner.pair}
    assert max(n for _, n in confirm) <= 2_000 and sum(n for _, n in confirm) == sizes.confirm
    assert logs[0][: len(logs[0]) - len(confirm)] == logs[1][: len(logs[1]) - len(confirm)]


def test_the_screen_ranks_with_a_cheap_fit_and_the_finalists_get_the_full_one(monkeypatch):
    """Screen fits see at most SCREEN_FIT rows per law (200 here), train fits the whole train sample; the
    screen still ranks the distinguishable pair first (shift 2 against 0.2) and the confirm bound stays valid."""
    import attacks.staged

    rows = []
    fit = attacks.staged.fit_attack

    def counted(candidate, p, q, *args):
        rows.append(len(p))
        return fit(candidate, p, q, *args)

    monkeypatch.setattr(attacks.staged, "SCREEN_FIT", 200)
    monkeypatch.setattr(attacks.staged, "fit_attack", counted)
    sizes = StageSizes.from_budget(20_000)
    result = staged_search(laplace_sampler(1.0, (2.0, 0.2)), 2, Target("kl", ("linear",)), sizes, seed=0)
    screened = 2 * 2  # pairs x directions
    assert rows[:screened] == [200] * screened and set(rows[screened:]) == {sizes.train}
    assert result.winner.pair == 0 and result.evidence.lower_bound(LEVEL) <= laplace_kl(1.0, 2.0)


def test_a_failing_pair_costs_its_candidates_not_the_search():
    healthy = laplace_sampler(1.0, (1.0, 1.0))

    def sample(pair, n, stage, chunk):
        if pair == 1:
            raise RuntimeError("mechanism exploded")
        return healthy(pair, n, stage, chunk)

    result = staged_search(sample, 2, Target("dp", ("threshold",)), StageSizes.from_budget(4_000), seed=0)
    assert result.winner.pair == 0 and "exploded" in result.failures[1]
    assert result.screened == 2  # pair 0's two directions


def test_pooled_estimate_p_value_matches_its_bound_and_is_one_without_evidence():
    pooled = PooledEstimate(0.3, 0.05, n=1000, weights=(0.5, 0.5))
    assert pooled.p_value(pooled.lower_bound(LEVEL)) == pytest.approx(1 - LEVEL)
    assert PooledEstimate(np.nan, np.nan, "no counts", n=1000, weights=(0.5, 0.5)).p_value(0.0) == 1.0


def laplace_unless_two(dataset, n, rng):
    """The sum plus Lap(1); raises on a dataset summing to 2 (the failing pair)."""
    if np.sum(dataset) == 2:
        raise ArithmeticError("boom on the sum 2")
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


@pytest.mark.parametrize("policy", ["best", "every"])
def test_a_mechanism_failing_on_a_pair_gives_an_error_row_and_exit_code_2(policy):
    config = {
        "mechanism": {"callable": "test_staged:laplace_unless_two"},
        # p1 fails on both datasets (on one only, the failure would be evidence: tests/test_probes.py)
        "pairs": [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}, {"d": [[2.0], [0.0]], "d_prime": [[2.0], [0.0], [0.0]]}],
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 5.0}],
        "attacks": {"classes": ["threshold"], "n_samples": 2_000, "policy": policy},
    }
    result = run_audit(config, progress=False)
    assert result.exit_code == 2
    errors = result.table[result.table["error"].notna()]
    assert set(errors["pair"]) == {"p1"} and errors["error"].str.contains("boom on the sum 2").all()
    assert set(result.table.loc[result.table["error"].isna(), "pair"]) == {"p0"}


def laplace_failing_on_many_outputs(dataset, n, rng):
    """The sum plus Lap(1); raises when asked for 1 000 outputs or more at once on a dataset summing to 2."""
    if np.sum(dataset) == 2 and n >= 1_000:
        raise MemoryError(f"{n} outputs at once")
    return np.sum(dataset) + rng.laplace(0.0, 1.0, size=n)


@pytest.mark.parametrize("policy, attacks", [
    ("best", {"n_samples": 4_000}),  # screen 800, train 800, check 400: fine; confirm 2 000 on the winner p1: fails
    ("every", {"n_samples": 2_200, "train_fraction": 0.45}),  # train 990: fine; confirm 1 210: fails on p1
])
def test_a_mechanism_failing_only_in_the_confirm_stage_gives_error_rows(tmp_path, policy, attacks):
    """The confirm stage's failure costs its pair's rows (and, for "best", its claim's statistic), never the
    audit: exit code 2, the other rows kept, the report written."""
    config = {
        "mechanism": {"callable": "test_staged:laplace_failing_on_many_outputs"},
        "pairs": [{"d": [[0.0], [0.0]], "d_prime": [[0.0], [1.0]]}, {"d": [[0.0], [0.0]], "d_prime": [[0.0], [2.0]]}],
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": 5.0},
                   {"divergence": "kl", "function_class": "linear", "epsilon": 5.0}],
        "attacks": {"classes": ["linear", "threshold"], "policy": policy, **attacks},
    }
    result = run_audit(config, out_dir=tmp_path, progress=False)
    table = result.table
    assert result.exit_code == 2 and (tmp_path / "report.md").exists()
    errors = table[table["error"].notna()]
    assert errors["error"].str.contains("1000 outputs at once|1210 outputs at once|2000 outputs at once").any()
    assert set(errors["pair"]) <= {"p1", "-"} and (errors["pair"] == "p1").any()
    if policy == "best":  # both claims' searches chose p1; each says why it has no statistic
        assert errors["error"].str.contains("staged search found no statistic: sampling pair 1 failed in the "
                                            "confirm stage").sum() == 2
    else:
        kept = table[table["error"].isna()]
        assert set(kept["pair"]) == {"p0"} and len(kept) == 2 * 4  # p0: dp and kl, each linear and threshold
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["verdict"] == result.verdict and len(saved["rows"]) == len(table)


def staged_config(epsilon_claim: float, seed: int, n_samples: int = 6_000, **attacks) -> dict:
    return {
        "mechanism": {"name": "laplace", "params": {"epsilon": 1.0, "sensitivity": 1.0}},
        "claims": [{"divergence": "dp", "function_class": "all", "epsilon": epsilon_claim},
                   {"divergence": "kl", "function_class": "linear", "epsilon": float(laplace_kl(1.0))}],
        "attacks": {"n_samples": n_samples, "classes": ["linear", "threshold"], "policy": "best",
                    "coupled": True, **attacks},
        "run": {"seed": seed},
    }


def test_a_correct_mechanism_with_true_tight_claims_is_rarely_flagged(tmp_path):
    """Laplace at epsilon 1 claimed 1-DP (tight: every tail set has the ratio e) and its KL: a claim at its truth
    reads violation with probability at most 0.05, so at most one of three seeds may (P(two or more) < 0.01;
    seed 2 is one, p = 0.02 before Holm).  One row per claim with the stage fields; the report's
    "Staged search" section names the winner."""
    verdicts = []
    for seed in range(3):
        result = run_audit(staged_config(1.0, seed), progress=False, out_dir=tmp_path if seed == 0 else None)
        assert len(result.table) == 2 and result.table["n_confirm"].eq(3_000).all()
        verdicts.append(result.verdict)
    assert verdicts.count("violation") <= binom.ppf(0.99, 3, 1 - LEVEL)  # = 1
    report = (tmp_path / "report.md").read_text()
    assert "## Staged search" in report and "- Samples (policy best):" in report  # the Method says what n_samples means
    jsonschema = pytest.importorskip("jsonschema")
    document = json.loads((tmp_path / "results.json").read_text())
    for name, part in (("results", document), ("config", document["config"])):
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        assert [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(part)] == []


def test_results_do_not_depend_on_n_jobs():
    """Every fit is seeded by (seed, stage, candidate) (``fit_seed``), so workers change no number (threading
    here: loky's start-up would dominate the test)."""
    columns = ["pair", "direction", "function_class", "estimate", "ci_low", "ci_high", "sets_pooled"]
    one, two = (run_audit(staged_config(1.0, 5, n_samples=4_000), n_jobs=n_jobs, backend=backend,
                          progress=False).table[columns] for n_jobs, backend in ((1, "loky"), (2, "threading")))
    assert one.equals(two)


def _rows(out: Path) -> list[str]:
    """results.json's rows as JSON text, without ``resumed`` (what a resume must reproduce byte for byte)."""
    rows = json.loads((out / "results.json").read_text())["rows"]
    return [json.dumps({key: value for key, value in row.items() if key != "resumed"}, sort_keys=True) for row in rows]


def test_resume_after_an_interrupted_search_gives_the_rows_of_an_uninterrupted_run(tmp_path, monkeypatch):
    """Ctrl-C in the second search (kl) keeps the first's (dp) records in tasks.jsonl; the resume reads them
    back (its evidence: a pooled or one-set estimate from its plain record) and runs the second only."""
    config = staged_config(1.0, 3, n_samples=4_000)
    run_audit(config, out_dir=tmp_path / "full", progress=False)
    searches = []

    def interrupted_second(*args, **kwargs):
        searches.append(args[2].divergence)
        if len(searches) == 2:
            raise KeyboardInterrupt
        return staged_search(*args, **kwargs)

    monkeypatch.setattr(audit.engine.run, "staged_search", interrupted_second)
    with pytest.raises(AuditInterrupted):
        run_audit(config, out_dir=tmp_path / "cut", progress=False)
    saved = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert saved["verdict"] == "error" and [row["divergence"] for row in saved["rows"]] == ["dp"]
    monkeypatch.undo()
    searches.clear()
    monkeypatch.setattr(audit.engine.run, "staged_search",
                        lambda *args, **kwargs: searches.append(args[2].divergence) or staged_search(*args, **kwargs))
    resumed = run_audit(config, out_dir=tmp_path / "cut", resume=True, progress=False)
    assert searches == ["kl"] and resumed.table["resumed"].tolist() == [True, False]
    assert _rows(tmp_path / "cut") == _rows(tmp_path / "full")


def test_pooled_estimate_record_round_trips_through_json():
    pooled = PooledEstimate(0.93, 0.04, n=3_000, weights=(0.25, 0.75), delta=0.0, coupled=True)
    back = PooledEstimate.from_record(json.loads(json.dumps(pooled.to_record())))
    assert back == pooled and back.p_value(0.9) == pooled.p_value(0.9)


def test_resume_refuses_another_policys_or_seeds_tasks_file(tmp_path):
    def config(seed, **attacks):
        small = staged_config(1.0, seed, n_samples=1_000, classes=["threshold"], **attacks)
        return dict(small, claims=small["claims"][:1])

    run_audit(config(0, policy="every"), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="line 1 was written by a different config, seed, policy or plan"):
        run_audit(config(0), out_dir=tmp_path, resume=True, progress=False)
    run_audit(config(0), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="different config, seed, policy or plan"):
        run_audit(config(1), out_dir=tmp_path, resume=True, progress=False)


def test_staged_audit_flags_a_false_claim():
    result = run_audit(staged_config(0.7, 0), progress=False)
    assert result.verdict == "violation" and result.exit_code == 1


@pytest.mark.parametrize("attacks, message", [
    ({"policy": "fast"}, "attacks.policy"),
    ({"engine": "rows"}, r'attacks.engine: replaced by attacks.policy \("best" for engine = "staged", "every" for '
                         r'engine = "rows"\); rename the field. Found engine = \'rows\'.$'),
    ({"engine": "staged"}, "attacks.engine: replaced by attacks.policy"),
    ({"policy": "best", "stages": {"screen": 0.5, "train": 0.5, "check": 0.1, "confirm": 0.1}}, "summing to 1"),
    ({"policy": "best", "stages": {"screen": "a"}}, "attacks.stages"),
    ({"policy": "every", "stages": DEFAULT_SHARES}, 'only policy = "best" has'),
    ({"policy": "best", "train_fraction": 0.5}, "no train / held-out split"),
    ({"policy": "best", "n_samples": 1_000, "stages": {"screen": 0.5, "train": 0.3, "check": 0.18, "confirm": 0.02}},
     "leaves 20 confirm outputs per dataset; an audit at confidence 0.95 needs at least 30"),
])
def test_config_refuses_bad_policy_old_engine_and_stages(attacks, message):
    config = staged_config(1.0, 0)
    config["attacks"] = {"n_samples": 20_000, "classes": ["linear"], **attacks}
    with pytest.raises(ConfigError, match=message):
        load_config(config)


@pytest.mark.parametrize("attacks, policy", [
    ({}, "best"),
    ({"n_samples": 199}, "every"),
    ({"train_fraction": 0.7}, "every"),
])
def test_the_default_policy_is_best_unless_the_config_needs_every(attacks, policy):
    config = staged_config(1.0, 0)
    config["attacks"] = {"n_samples": 20_000, "classes": ["linear"], **attacks}
    assert load_config(config).attacks.policy == policy


@pytest.mark.slow
def test_confirm_bound_coverage_over_seeds():
    """Laplace epsilon = 1 (truth 1 for dp): over 60 seeds the 95 % bound exceeds it no more often than a
    binomial(60, 0.05) count does with probability 0.999."""
    runs = 60
    above = sum(
        staged_search(laplace_sampler(1.0, seed=seed), 1, Target("dp", ("threshold", "linear")),
                      StageSizes.from_budget(20_000), seed=seed).evidence.lower_bound(LEVEL) > 1.0
        for seed in range(runs)
    )
    assert above <= binom.ppf(0.999, runs, 1 - LEVEL)


@pytest.mark.slow
def test_tight_claims_read_violation_at_most_at_the_nominal_rate():
    runs = 40
    violations = sum(run_audit(staged_config(1.0, seed), progress=False).verdict == "violation" for seed in range(runs))
    assert violations <= binom.ppf(0.999, runs, 1 - LEVEL)


@pytest.mark.slow
def test_report_noisy_max_3_coverage_over_seeds():
    mechanism = make_mechanism("report_noisy_max_3", {"epsilon": 0.1})
    pairs = make_pairs(None, mechanism, np.random.default_rng(0))
    runs = 20
    bounds = [staged_search(pair_sampler(mechanism, pairs, seed, True), len(pairs), Target("dp", ("threshold",)),
                            StageSizes.from_budget(100_000), seed=seed).evidence.lower_bound(LEVEL)
              for seed in range(runs)]
    assert sum(bound > RNM3_EPSILON for bound in bounds) <= binom.ppf(0.999, runs, 1 - LEVEL)
    assert np.mean(np.array(bounds) > 0.1) >= 0.8


@pytest.mark.parametrize("divergence, alpha", [("dp", None), ("renyi", 2.0)])
def test_check_and_confirm_summaries_in_blocks_do_not_depend_on_n_jobs(monkeypatch, divergence, alpha):
    """The check and confirm stages summarise chunks in blocks on the workers: blocks of 250 outputs over 1 or
    2 threads give the same numbers (added in block order), and those of one block per chunk (counts exactly,
    witness moments up to rounding)."""
    import attacks.held_out

    classes = ["linear", "threshold"] if divergence == "dp" else ["linear"]  # renyi: a witness's moments
    target = Target.for_claim(divergence, "all", classes, alpha)
    sizes = StageSizes.from_budget(4_000)

    def evidence(block, n_jobs):
        monkeypatch.setattr(attacks.held_out, "SUMMARY_BLOCK", block)
        with joblib.parallel_config(backend="threading"):
            result = staged_search(laplace_sampler(1.0, shifts=(1.0, 0.5)), 2, target, sizes, seed=4, n_jobs=n_jobs)
        return result.winner, result.evidence

    whole, blocks = evidence(10**6, 1), evidence(250, 1)
    assert evidence(250, 2) == blocks
    assert blocks[0] == whole[0]
    if divergence == "dp":
        assert blocks == whole
    else:
        numbers = [(e.estimate, e.standard_error, e.details["log_unseen_ratio"]) for _, e in (blocks, whole)]
        assert numbers[0] == pytest.approx(numbers[1], rel=1e-9)
        assert (blocks[1].n, blocks[1].caveat, blocks[1].coupled) == (whole[1].n, whole[1].caveat, whole[1].coupled)


def independent_sampler(sample):
    """``sample``'s draws with the outputs on d' reversed: no row-aligned pairs."""
    def reversed_pairs(pair, n, stage, chunk):
        draw = sample(pair, n, stage, chunk)
        return Draw(draw.d, draw.d_prime[::-1], False)
    return reversed_pairs


# The confirm evidence of staged_search(laplace_sampler(1.0, (1.0, 0.5)) [independent_sampler of it when not
# coupled], 2 pairs, classes linear and poly2, n_samples 6 000, seed 3) computed by main before the check and
# confirm stages summarised witness values (they then kept the values): (winner, estimate, standard error,
# log_unseen_ratio).  The kl rows' poly2 witness is bounded above: its log_unseen_ratio is read from its
# supremum (attacks.bounded_witness.quadratic_supremum) since, 5e-6 above the largest value seen.
WITNESS_CONFIRM_BEFORE = {
    ("kl", None, True): ((0, True, "poly2"), 0.2674485720623555, 0.011037566977123976, 1.3338500160190412),
    ("kl", None, False): ((0, True, "poly2"), 0.2674485720623555, 0.02096738688720655, 1.333850016019041),
    ("renyi", 2.0, True): ((0, False, "linear"), 0.41941114703620813, 0.010971665220537292, 2.6745006277857803),
    ("renyi", 1.1, False): ((0, True, "poly2"), 0.28936253692771396, 0.021943008847661385, 1.4014417929400032),
    ("renyi", 8.0, True): ((0, False, "poly2"), 0.6993327402445653, 0.01510059846042012, 3.4703027373447477),
}


@pytest.mark.parametrize("divergence, alpha, coupled", list(WITNESS_CONFIRM_BEFORE))
def test_witness_confirm_in_blocks_gives_the_numbers_of_the_values(monkeypatch, divergence, alpha, coupled):
    """kl / renyi confirm evidence summed over uneven blocks (700 outputs: 4 of them and 200) equals the numbers
    the stage gave when it kept every witness value, to rounding (1e-9 relative)."""
    import attacks.held_out

    monkeypatch.setattr(attacks.held_out, "SUMMARY_BLOCK", 700)
    sample = laplace_sampler(1.0, shifts=(1.0, 0.5))
    result = staged_search(sample if coupled else independent_sampler(sample), 2,
                           Target.for_claim(divergence, "all", ["linear", "poly2"], alpha),
                           StageSizes.from_budget(6_000), seed=3)
    winner, *numbers = WITNESS_CONFIRM_BEFORE[divergence, alpha, coupled]
    evidence = result.evidence.moments  # the delta-method half: an `all` claim adds the clipped betting bound
    assert (result.winner.pair, result.winner.swapped, result.winner.function_class) == winner
    assert (evidence.n, evidence.coupled, evidence.caveat) == (3_000, coupled, None)
    assert [evidence.estimate, evidence.standard_error, evidence.details["log_unseen_ratio"]] == pytest.approx(
        numbers, rel=1e-9)


def test_kl_confirm_memory_does_not_grow_with_the_sample():
    """The confirm stage keeps the witness's moments, not its values: ten times the outputs (2e5 -> 2e6 per
    dataset, drawn in chunks of 1e5) raise the traced peak by far less than the 16 bytes per pair that keeping
    the values would cost (29 MB); what grows is the 3 sqrt(n) largest log weights of Q (34 kB)."""
    import tracemalloc

    import attacks.candidates
    import attacks.held_out

    sample, target = laplace_sampler(1.0), Target("kl", ("linear",))
    candidate = attacks.candidates.Candidate(0, False, "linear")
    train = sample(0, 2_000, "train", 0)
    attack = attacks.held_out.fit_attack(candidate, *candidate.laws(train), target, 1_000, True, 0)

    def peak(n):
        tracemalloc.start()
        totals = attacks.held_out.accumulate(sample, [candidate], [attack], n, "confirm", target, 100_000, 1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert totals[0][0].n_p == n and totals[0][0].top_q.size == tail_count(n) + 1
        return peak

    growth = peak(2_000_000) - peak(200_000)
    assert growth < 0.05 * 16 * 1_800_000


def test_stages_that_do_not_fit_in_memory_are_refused(monkeypatch):
    """The train stage holds min(4, pairs) pairs at n_train outputs per dataset; with 1 MiB available the
    plan is refused before any search, naming the budget to lower."""
    monkeypatch.setattr(audit.engine.memory, "available_memory", lambda: 2**20)
    with pytest.raises(ValueError, match=r"would need about .* GiB.*1 pairs x 2 datasets x 1200 samples.*"
                                         r"lower attacks.n_samples"):
        run_audit(staged_config(1.0, 0), progress=False)


def test_a_search_in_rounds_that_does_not_fit_in_memory_is_refused_naming_max_outputs(monkeypatch):
    """Without ``n_samples`` the largest round's sizes come from ``max_outputs``, and the search holds its earlier
    rounds' outputs too (``EARLIER_BYTES``): the refusal names ``attacks.max_outputs`` and its value."""
    monkeypatch.setattr(audit.engine.memory, "available_memory", lambda: 2**28)
    config = staged_config(1.0, 0)
    del config["attacks"]["n_samples"]
    with pytest.raises(ValueError, match=r"lower attacks.max_outputs or run.n_jobs. Found attacks.max_outputs = "
                                         r"4000000"):
        run_audit(config, progress=False)


def test_the_confirm_stage_bins_the_winners_scores_for_the_figures(tmp_path):
    """Each row's held_out_scores bin the winner's scores on the confirm sample (n_confirm = 3 000 outputs per
    dataset here, all in the first block); the dp row's threshold is one of its attack's cuts, the kl row has none;
    the report draws witness.svg and roc.svg from them."""
    result = run_audit(staged_config(1.0, 0), out_dir=tmp_path, progress=False)
    for row in result.table.itertuples():
        scores = row.held_out_scores
        assert sum(scores["p"]) == sum(scores["q"]) == row.n_confirm == 3_000
        assert len(scores["edges"]) == len(scores["p"]) + 1
        assert (scores["threshold"] is None) == (row.divergence == "kl")
    assert {"witness.svg", "roc.svg"} <= {path.name for path in (tmp_path / "figures").iterdir()}


def test_a_pair_whose_probe_failed_is_not_sampled_again():
    """The memory check's probe found pair p0 failing (e.g. hung for sample_timeout): the search's sampler fails
    it at once with the probe's message, without calling the mechanism, and counts its outputs as drawn."""
    mechanism = make_mechanism("laplace", {"epsilon": 1.0})
    pairs = make_pairs(None, mechanism, np.random.default_rng(0))
    drawn = []
    sample = pair_sampler(None, pairs, 0, False, on_outputs=drawn.append, failed={pairs[0].name: "probe: hung"})
    with pytest.raises(SamplingError, match="probe: hung"):
        sample(0, 500, "screen", 0)
    assert drawn == [500]
