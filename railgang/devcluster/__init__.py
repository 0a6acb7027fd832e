"""Local GPU Slurm test cluster."""
