"""Repositories: typed reads and writes on a caller's ``Session``. None of them commits: the daemon
cycle (or an API request) owns the transaction and decides when a write becomes durable."""
