"""Benchmarks: each prints a table and JSON, comparing with tinygrad when it is importable (never a dependency)."""
