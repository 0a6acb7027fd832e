"""Benchmarks that replay traces through the simulator."""
