"""``railgang sim sweep``: grids of replays as Slurm job arrays or local processes (docs/simulator.md, "Sweeps")."""
