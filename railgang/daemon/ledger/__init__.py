"""Accounting: the quota tree's rules, the usage ledger (sacct ingest, reconciliation) and
telemetry intake for the compute and productive utilisation tiers."""
