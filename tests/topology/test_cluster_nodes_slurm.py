"""``railgang topology check --from-slurm`` / ``--slurm-conf`` on the real session cluster (16 nodes,
22.05 here, 24.11 in CI's container run): its own topology.conf passes, a switch naming a node the
cluster lacks is refused, as slurmctld refuses such a file (issue 35 item 5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster, slurm_env

pytestmark = [pytest.mark.slurm]

RAILGANG = str(Path(sys.executable).with_name("railgang"))


def check(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **slurm_env(cluster.spec), "RAILGANG_CONFIG": "",
           "RAILGANG_SLURM__CONF": str(cluster.spec.slurm_conf)}
    return subprocess.run([RAILGANG, "topology", "check", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_clusters_own_node_list_decides(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    own = slurm_cluster.spec.etc / "topology.conf"
    for source in (["--from-slurm"], ["--slurm-conf", str(slurm_cluster.spec.slurm_conf)]):
        res = check(slurm_cluster, str(own), *source)
        assert res.returncode == 0 and "16 nodes" in res.stdout, res.stderr
    bad = tmp_path / "topology.conf"
    bad.write_text(own.read_text() + "SwitchName=extra Nodes=n[16-18]\n")
    for source in (["--from-slurm"], ["--slurm-conf", str(slurm_cluster.spec.slurm_conf)]):
        res = check(slurm_cluster, str(bad), *source)
        assert res.returncode == 1, res.stdout
        lines = res.stderr.splitlines()
        assert any(line.endswith("switch extra names 2 node(s) the cluster does not have: n[17-18] "
                                 "(slurmctld refuses the file: Invalid node name in switch config)")
                   for line in lines), res.stderr
