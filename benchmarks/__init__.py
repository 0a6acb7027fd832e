"""Side-by-side measurements recorded in BENCHMARKS.md, one folder per area, each script run from
the checkout as ``.venv/bin/python -m benchmarks.<area>.<name>``:

- ``core/``: one decision cycle and the daemon's whole cycle at scale (no Slurm, no simulator).
- ``sim/``: replays through the simulator (policies, traces, Gavel, failures, spot, elasticity).
- ``slurm/``: against a real slurmctld (the local cluster or a container): placement, submit
  and read costs, the simulator's fidelity to the live daemon.
- ``topology/``: placement, discovery and link health on fabrics alone.
- ``serving/``: serving beside training: forecasts, lending, demand files.
- ``api/``: the admin API, the usage ledger and the report.
- ``baselines/``: Slurm's own placement, transcribed from its C, that railgang is measured
  against (not part of the product: only benchmarks and tests import it).

``common.py`` is what the scripts share. Nothing here is imported by ``railgang``."""
