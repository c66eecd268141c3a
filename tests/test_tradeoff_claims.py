"""gdp, zcdp and profile claims: their members, their one-line verdicts, and audits of the Gaussian mechanism."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from audit import run_audit
from audit.config.load import ConfigError, load_config
from audit.config.families import GRID, ORDERS, claim_summaries, families
from audit.results.files import load_results
from audit.results.schema import Row
from audit.theory.tradeoff import gaussian_profile, gaussian_tradeoff, laplace_profile
from audit.report.tradeoff import LEVELS, tradeoff_panels

CURVE_CLAIMS = [
    {"divergence": "gdp", "function_class": "all", "epsilon": 1.0},
    {"divergence": "zcdp", "function_class": "all", "epsilon": 0.5},
]


def gaussian_config(sigma: float, seed: int = 0, claims=CURVE_CLAIMS, n_samples: int = 10_000) -> dict:
    """The Gaussian mechanism (sensitivity 1: mu = 1 / sigma, rho = 1 / (2 sigma^2)) at default attack settings."""
    return {"mechanism": {"name": "gaussian", "params": {"sigma": sigma}}, "claims": claims,
            "attacks": {"classes": ["linear", "threshold"], "n_samples": n_samples}, "run": {"seed": seed}}


def members(claim: dict) -> list:
    return list(load_config(gaussian_config(1.0, claims=[claim])).claims)


def test_gdp_is_its_profile_at_a_grid():
    claims = members({"divergence": "gdp", "function_class": "linear", "epsilon": 1.5})
    assert [c.divergence for c in claims] == ["dp"] * len(GRID)
    assert_allclose([c.epsilon for c in claims], 1.5 * np.asarray(GRID))
    assert_allclose([c.delta for c in claims], gaussian_profile(1.5 * np.asarray(GRID), 1.5))
    assert {c.function_class for c in claims} == {"linear"}
    custom = members({"divergence": "gdp", "function_class": "all", "epsilon": 1.0, "epsilons": [0.25, 3.0]})
    assert [c.epsilon for c in custom] == [0.25, 3.0]


def test_zcdp_is_renyi_at_a_grid_of_orders():
    claims = members({"divergence": "zcdp", "function_class": "all", "epsilon": 0.5})
    assert [(c.divergence, c.alpha, c.epsilon) for c in claims] == [("renyi", (a,), 0.5 * a) for a in ORDERS]
    custom = members({"divergence": "zcdp", "function_class": "all", "epsilon": 0.2, "alpha": [3, 10]})
    assert [(c.alpha, c.epsilon) for c in custom] == [((3.0,), pytest.approx(0.6)), ((10.0,), pytest.approx(2.0))]


def test_profile_from_a_table_or_a_named_law():
    table = members({"divergence": "profile", "function_class": "all", "epsilons": [0.5, 1.0], "deltas": [0.1, 0.01]})
    assert [(c.divergence, c.epsilon, c.delta) for c in table] == [("dp", 0.5, 0.1), ("dp", 1.0, 0.01)]
    laplace = members({"divergence": "profile", "function_class": "all", "profile": "laplace", "epsilon": 2.0})
    assert_allclose([c.delta for c in laplace], laplace_profile([c.epsilon for c in laplace], 2.0))
    assert laplace[-1].delta == 0.0  # at its epsilon the Laplace profile is pure DP


@pytest.mark.parametrize("claim, message", [
    ({"divergence": "gdp", "function_class": "all"}, "epsilon: missing"),
    ({"divergence": "gdp", "function_class": "all", "epsilon": 0.0}, "must be > 0"),
    ({"divergence": "gdp", "function_class": "all", "epsilon": 1.0, "delta": 1e-5}, "takes no delta"),
    ({"divergence": "zcdp", "function_class": "all", "epsilon": 1.0, "epsilons": [1.0]}, "gdp / profile"),
    ({"divergence": "zcdp", "function_class": "all", "epsilon": 1.0, "alpha": [1.01]}, "alpha"),
    ({"divergence": "profile", "function_class": "all", "epsilon": 1.0}, "either profile"),
    ({"divergence": "profile", "function_class": "all", "epsilons": [1.0], "deltas": [0.1, 0.2]}, "one delta"),
    ({"divergence": "profile", "function_class": "all", "epsilons": [1.0], "deltas": [1.0]}, r"deltas\[0\]"),
    ({"divergence": "profile", "function_class": "all", "profile": "cauchy", "epsilon": 1.0}, "cauchy"),
    ({"divergence": "dp", "function_class": "all", "epsilon": 1.0, "epsilons": [1.0]}, "only divergence"),
])
def test_curve_claim_errors_name_the_field(claim, message):
    with pytest.raises(ConfigError, match=message):
        load_config(gaussian_config(1.0, claims=[claim]))


def _row(divergence, claim, verdict, p, alpha=math.nan, task="t"):
    return Row(pair="p0", direction="P|Q", function_class="linear", divergence=divergence, alpha=alpha,
               estimate=0.0, claim=claim, claim_class="all", refutes_claim=True, verdict=verdict, p_adjusted=p,
               detectable_excess=0.1, task=task)


def test_a_curve_claim_is_one_line_refuted_by_its_member():
    config = {"claims": [{"divergence": "zcdp", "function_class": "all", "epsilon": 0.5, "alpha": [2, 4]},
                         {"divergence": "kl", "function_class": "all", "epsilon": 0.5}]}
    rows = [_row("renyi", 1.0, "pass", 0.6, 2.0, "a2"), _row("renyi", 2.0, "violation", 0.001, 4.0, "a4"),
            _row("kl", 0.5, "pass", 0.5, task="kl")]
    summaries = claim_summaries(rows, config)
    assert [s["divergence"] for s in summaries] == ["kl", "zcdp"]  # the members' own lines are replaced
    line = summaries[1]
    assert (line["verdict"], line["strongest_task"], line["claim"]) == ("violation", "a4", 0.5)
    assert "Renyi alpha=4" in line["note"] and [m["verdict"] for m in line["members"]] == ["pass", "violation"]
    passing = claim_summaries([_row("renyi", 1.0, "pass", 0.6, 2.0), _row("renyi", 2.0, "inconclusive", 0.2, 4.0)],
                              config)
    assert passing[-1]["verdict"] == "inconclusive"
    assert claim_summaries([], config)[-1]["verdict"] == "untested"


def test_true_claims_of_the_gaussian_are_not_refuted():
    """sigma = 1 is exactly 1-GDP and 0.5-zCDP (every member tight at class all); one seed at default settings."""
    result = run_audit(gaussian_config(1.0), progress=False)
    assert result.verdict != "violation"
    assert {c["divergence"]: c["verdict"] for c in result.claims}.keys() == {"gdp", "zcdp"}


def test_false_claims_are_caught_at_default_settings(tmp_path):
    """sigma = 0.5 is 2-GDP and 2-zCDP: the 1-GDP and 0.5-zCDP claims are violations; the report draws the curves."""
    result = run_audit(gaussian_config(0.5), progress=False, out_dir=tmp_path)
    verdicts = {c["divergence"]: c["verdict"] for c in result.claims}
    assert verdicts == {"gdp": "violation", "zcdp": "violation"}
    assert result.exit_code == 1
    meta = load_results(tmp_path)[1]
    panels = tradeoff_panels(result.rows, meta["config"], meta["pairs"], meta["claims"])
    assert [p.family.divergence for p in panels] == ["gdp", "zcdp"]
    assert_allclose(panels[0].exact, gaussian_tradeoff(LEVELS, 2.0), atol=1e-12)  # mu = 1 / sigma
    assert_allclose(panels[0].linear, panels[0].exact, atol=1e-9)
    assert panels[0].classes and panels[0].classes[0].crossing is not None  # the band lies below G_1
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[1] / "docs" / "schema" / "results.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads((tmp_path / "results.json").read_text()))) == []
    report = (tmp_path / "report.md").read_text()
    assert "## Trade-off curves" in report and "the claim is false at this pair" in report
    assert (tmp_path / "figures" / "tradeoff.svg").exists()


@pytest.mark.slow
def test_true_gaussian_claims_are_flagged_at_most_at_the_error_rate():
    """30 seeds of sigma = 1 against its true 1-GDP and 0.5-zCDP (8 tight members each audit): the share of audits
    with a violation is at most 1 - confidence = 0.05 up to the binomial 0.99 quantile of 30 draws (4)."""
    seeds = 30
    violations = sum(run_audit(gaussian_config(1.0, seed), progress=False).verdict == "violation"
                     for seed in range(seeds))
    assert violations <= stats.binom(seeds, 0.05).ppf(0.99)


def test_families_read_back_from_results_config():
    config = gaussian_config(1.0)
    assert [f.label for f in families(config)] == ["(all, mu=1 GDP)", "(all, rho=0.5 zCDP)"]


VALID_CURVES = [
    {"divergence": "gdp", "function_class": "all", "epsilon": 1.0, "epsilons": [0.5, 1.0]},
    {"divergence": "zcdp", "function_class": "linear", "epsilon": 0.5, "alpha": [2, 4]},
    {"divergence": "profile", "function_class": "all", "profile": "laplace", "epsilon": 1.0},
    {"divergence": "profile", "function_class": "all", "epsilons": [0.5, 1.0], "deltas": [0.2, 0.1]},
]
INVALID_CURVES = [
    {"divergence": "gdp", "function_class": "all", "epsilon": 1.0, "delta": 1e-5},
    {"divergence": "gdp", "function_class": "all", "epsilon": 1.0, "alpha": 2},
    {"divergence": "zcdp", "function_class": "all", "epsilon": 1.0, "epsilons": [1.0]},
    {"divergence": "profile", "function_class": "all", "epsilon": 1.0},
    {"divergence": "profile", "function_class": "all", "profile": "gaussian", "epsilon": 1.0, "deltas": [0.1]},
    {"divergence": "profile", "function_class": "all", "epsilons": [1.0], "deltas": [0.1], "epsilon": 1.0},
    {"divergence": "dp", "function_class": "all", "epsilon": 1.0, "profile": "gaussian"},
    {"divergence": "gdp", "function_class": "all", "epsilon": 1.0, "on_average": True},
]


@pytest.mark.parametrize("claim", VALID_CURVES + INVALID_CURVES)
def test_the_schema_and_the_loader_agree_on_curve_claims(claim):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[1] / "docs" / "schema" / "config.schema.json").read_text())
    config = gaussian_config(1.0, claims=[claim])
    schema_errors = list(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if claim in VALID_CURVES:
        assert schema_errors == []
        load_config(config)
    else:
        assert schema_errors
        with pytest.raises(ConfigError):
            load_config(config)
