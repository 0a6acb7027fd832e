"""Running Slurm's own commands against a test cluster, as root or as another user: the one
helper the real-cluster tests share."""

from __future__ import annotations

import pwd
import subprocess
import time
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
    res = subprocess.run(list(argv), capture_output=True, text=True, env=slurm_env(cluster.spec),
                         timeout=60, check=False)
    if check and res.returncode != 0:  # what Slurm said, not only the exit status
        raise AssertionError(f"{' '.join(argv)} exited {res.returncode}: "
                             f"{(res.stderr or res.stdout).strip()[-2000:]}")
    return res


def job_fields(cluster: DevCluster, job: str) -> dict[str, str]:
    """``scontrol show job -o``'s fields of ``job``."""
    out = sl(cluster, "scontrol", "show", "job", "-o", job).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


TENANT = "rgtenant"


def tenant(cluster: DevCluster, account: str = "team-a") -> str:
    """A plain user of ``account`` (neither root nor the daemon's operator), created on this
    machine if missing, once slurmctld knows its association. Not ``nobody``: Slurm 26.05
    refuses every job of uid 65534 ("Invalid account or account/partition combination")."""
    if subprocess.run(["id", TENANT], capture_output=True, check=False).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", TENANT], check=True, timeout=60)
    sl(cluster, "sacctmgr", "-i", "add", "user", TENANT, f"account={account}",
       f"cluster={cluster.spec.cluster_name}", check=False)  # already there: fine
    deadline = time.monotonic() + 30
    while f"UserName={TENANT}" not in sl(cluster, "scontrol", "show", "assoc_mgr",
                                          f"users={TENANT}", "flags=assoc").stdout:
        assert time.monotonic() < deadline, f"slurmctld never learnt {TENANT}'s association"
        time.sleep(0.5)
    return TENANT


__all__ = ["TENANT", "job_fields", "sl", "tenant"]
