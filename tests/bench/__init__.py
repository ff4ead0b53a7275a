"""Benchmarks run by scripts/bench-*: they print figures, they assert nothing (timings live here, not in tests)."""
