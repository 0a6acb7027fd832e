"""The backend the daemon drives, chosen by ``slurm.backend``.

- ``cli``: the real cluster through Slurm's command-line tools (``railgang.daemon.slurm.cli``).
- ``sim``: a self-contained demo — a simulated cluster of the dev cluster's shape
  (``devcluster.nodes`` × ``devcluster.gpus_per_node``, ``devcluster.nodes_per_leaf`` per leaf)
  fed with a seeded stream of ``daemon.demo_jobs`` mixed jobs, running in wall-clock time. It
  shows the daemon (journal, metrics, explain) working without Slurm; jobs only exist in memory,
  so a restarted demo starts a fresh cluster.
"""

from __future__ import annotations

from railgang.daemon.backend import Backend
from railgang.daemon.config import Settings, unsupported_backend
from railgang.daemon.sim.live import LiveSim, demo_jobs


def make_backend(settings: Settings, now: float) -> Backend:
    kind = settings.slurm.backend
    if kind == "sim":
        from railgang.topology.fabric import fabric_from_shape

        dc = settings.devcluster
        fabric = fabric_from_shape(dc.nodes, dc.gpus_per_node, dc.nodes_per_leaf)
        jobs = demo_jobs(settings.daemon.demo_jobs, settings.daemon.seed,
                         max_gpus=dc.nodes * dc.gpus_per_node)
        return LiveSim(fabric, jobs, now)
    if kind == "cli":
        from railgang.daemon.slurm.cli import CliBackend

        return CliBackend(settings.slurm, grants_file=settings.ledger.grants_file,
                          failures=settings.failures, speed_file=settings.daemon.speed_file)
    raise unsupported_backend(kind)


__all__ = ["make_backend"]
