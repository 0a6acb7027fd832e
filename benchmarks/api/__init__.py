"""Benchmarks of the admin API, the usage ledger and the report."""
