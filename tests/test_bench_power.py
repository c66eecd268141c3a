"""bench_power's results file: its command, the commit it ran at and its two tables (audits replaced by counts)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
_SPEC = importlib.util.spec_from_file_location("bench_power", BENCHMARKS / "bench_power.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_the_results_file_names_command_commit_and_holds_both_tables(tmp_path, monkeypatch):
    # every budget catches 19 of 20 (>= 90 %), so the ladder tries 10 000 after the default budget and stops there
    monkeypatch.setattr(bench, "caught", lambda name, n_samples, seeds, max_misses=None: (seeds - 1, seeds, 0, 0.5))
    out = tmp_path / "power.md"
    monkeypatch.setattr(sys, "argv", ["bench_power.py", "--mechanisms", "svt_4", "svt_1", "--out", str(out)])
    bench.main(sys.argv[1:])
    text = out.read_text()
    assert text.startswith(f"# power\n\nCommand: `python benchmarks/bench_power.py --mechanisms svt_4 svt_1 --out {out}`")
    assert re.search(r"^Code: [0-9a-f]{7,}\+?\. CPU time, all audits: \d+ s\. Machine: .+\.$", text, re.M)
    assert "| svt_4             | 19/20               | 0.5                  | 10 000" in text
    assert "| svt_1               | 19/20                         | 0        | 0.5       |" in text
