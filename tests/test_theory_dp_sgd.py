"""``capaudit theory --mechanism dp_sgd``: the DP-SGD law's rows per class, printed and as a report, against the
closed forms (the last-iterate heuristic, the PLD composition, and at q = 1 the Gaussian-DP epsilon)."""

from __future__ import annotations

import pytest

from audit.commands.cli import main
from audit.theory.last_iterate import last_iterate_epsilon
from audit.theory.tradeoff import gdp_epsilon

pytest.importorskip("dp_accounting")

COLUMNS = ["function_class", "divergence", "delta", "kind", "epsilon", "source"]


def _printed(capsys, argv: list[str]) -> dict[str, dict[str, str]]:
    """The rows ``capaudit theory`` printed, by class (each row's cells by column name)."""
    assert main(["theory", "--mechanism", "dp_sgd", *argv]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[2:]]
    return {row["function_class"]: row for row in rows}


def test_linear_reads_the_last_iterate_heuristic_and_every_other_class_the_composition(capsys):
    """Steinke et al. (ICLR 2025) at T = 1000, q = 0.01, sigma = 0.7, delta = 1e-5: 1.955 for the last iterate
    (linear) against 4.618 for the PLD composition (every class, as the paper reports it; the PLD against a closed
    form: the next test); printed to 4 significant digits."""
    rows = _printed(capsys, ["--sigma", "0.7", "--steps", "1000", "--sampling-rate", "0.01", "--classes",
                             "linear", "poly2"])
    assert list(rows) == ["linear", "poly2", "all"]
    assert rows["linear"]["kind"] == "heuristic" and "last-iterate" in rows["linear"]["source"]
    assert float(rows["linear"]["epsilon"]) == pytest.approx(last_iterate_epsilon(1000, 0.01, 0.7, 1e-5), rel=5e-4)
    assert float(rows["linear"]["epsilon"]) == pytest.approx(1.955, abs=5e-4)
    for name in ("poly2", "all"):
        assert rows[name]["kind"] == "upper bound" and "composition" in rows[name]["source"]
        assert float(rows[name]["epsilon"]) == pytest.approx(4.618, abs=5e-3)  # the PLD to its discretization


def test_full_batch_steps_read_the_gaussian_dp_epsilon_for_every_class(capsys, tmp_path):
    """At q = 1 both the heuristic and the composition are exactly (sqrt(T) / sigma)-GDP (Dong, Roth and Su 2022,
    Cor. 3.3): T = 4, sigma = 2 gives mu = 1, epsilon = gdp_epsilon(1, 1e-4) (the PLD to its discretization)."""
    rows = _printed(capsys, ["--sigma", "2", "--steps", "4", "--sampling-rate", "1", "--delta", "1e-4",
                             "--out", str(tmp_path)])
    expected = gdp_epsilon(1.0, 1e-4)
    assert float(rows["linear"]["epsilon"]) == pytest.approx(expected, rel=5e-4)
    assert float(rows["all"]["epsilon"]) == pytest.approx(expected, rel=2e-3)
    report = (tmp_path / "report.md").read_text()
    assert "--sampling-rate 1 --delta 0.0001" in report and "| linear" in report and "heuristic" in report
    assert (tmp_path / "report.html").is_file()


def test_without_dp_accounting_the_composition_is_blank_and_says_what_to_install(capsys, monkeypatch):
    from audit.theory import accountants

    def missing(*args):
        raise ImportError("accountant claims need dp_accounting")

    monkeypatch.setattr(accountants, "composed_accountant", missing)
    rows = _printed(capsys, ["--sigma", "2", "--steps", "4", "--sampling-rate", "1"])
    assert rows["all"]["epsilon"] == "" and "capaudit[accounting]" in rows["all"]["source"]
    assert float(rows["linear"]["epsilon"]) == pytest.approx(gdp_epsilon(1.0, 1e-5), rel=5e-4)
