"""Slurm's own placement, transcribed from its C: what railgang is measured against (only
benchmarks and tests import these; the product does not)."""
