"""Benchmarks against a real slurmctld (the local cluster or a container)."""
