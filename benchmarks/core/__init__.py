"""Benchmarks of one decision cycle and the daemon's whole cycle at scale."""
