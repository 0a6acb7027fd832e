"""Fabric model, InfiniBand link health and topology-aware gang placement (pure; no Slurm, no DB)."""
