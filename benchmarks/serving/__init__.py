"""Benchmarks of serving beside training."""
