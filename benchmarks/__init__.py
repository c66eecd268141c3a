"""Benchmarks run by hand (README, docs/benchmarks.md); a regular package, so that ``PYTHONPATH=.`` finds these
scripts before a ``benchmarks`` package another distribution installs (opacus 1.6 ships one)."""
