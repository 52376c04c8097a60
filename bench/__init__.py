"""evalq's benchmarks: orchestration overhead against a floor measured in the same run, scale,
and statistics. Run everything with `python -m bench` (or `make bench`); `--quick` for a smoke run.

Timing assertions live here, never in tests: results are printed and written to bench/results/.
"""
