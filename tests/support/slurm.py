"""Running Slurm's own commands against a test cluster, as root or as another user: the one
helper the real-cluster tests share."""

from __future__ import annotations

import pwd
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from railgang.devcluster.cluster import DevCluster


def sl(cluster: DevCluster, *argv: str, check: bool = True, user: str | None = None,
       ) -> subprocess.CompletedProcess[str]:
    """``argv`` (sbatch, scontrol, ...) against ``cluster``; ``user`` runs it as that user."""
    from railgang.devcluster.cluster import slurm_env

    if user is not None:
        pw = pwd.getpwnam(user)
        argv = ("setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", *argv)
    return subprocess.run(list(argv), capture_output=True, text=True, env=slurm_env(cluster.spec),
                          timeout=60, check=check)


def job_fields(cluster: DevCluster, job: str) -> dict[str, str]:
    """``scontrol show job -o``'s fields of ``job``."""
    out = sl(cluster, "scontrol", "show", "job", "-o", job).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


__all__ = ["job_fields", "sl"]
