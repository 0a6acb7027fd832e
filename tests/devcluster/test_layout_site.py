"""The site-like cluster's configuration (issue 35 item 1; railgang/devcluster/site.py): pure
rendering; tests/e2e/test_site_e2e.py brings it up and checks what slurmctld made of it."""

from __future__ import annotations

from pathlib import Path

from railgang.devcluster.layout import ClusterSpec, render_gres_conf, render_slurm_conf, site_spec
from railgang.devcluster.site import site_commands


def test_the_site_spec_renders_partitions_types_room_limits_and_a_license() -> None:
    spec = site_spec(ClusterSpec(dir=Path("/c"), accounting=False))
    assert spec.accounting and spec.nodes == 6 and spec.node_names[-1] == "n06"
    conf = render_slurm_conf(spec)
    assert "AccountingStorageEnforce=associations,limits,qos" in conf
    assert "Licenses=fluent:2" in conf
    assert "Gres=gpu:a100:8 Feature=gpumem_80g,nvlink,ib CPUs=32 RealMemory=32768" in conf
    assert "Gres=gpu:v100:8 Feature=gpumem_32g,eth CPUs=8 RealMemory=65536" in conf
    parts = [line.split()[:5] for line in conf.splitlines() if line.startswith("PartitionName=")]
    assert parts == [["PartitionName=gpu", "Nodes=ALL", "Default=YES", "MaxTime=INFINITE", "PriorityTier=1"],
                     ["PartitionName=short", "Nodes=n[03-06]", "MaxTime=30", "PriorityTier=10", "State=UP"],
                     ["PartitionName=big", "Nodes=n[01-02]", "MaxTime=INFINITE", "PriorityTier=1", "State=UP"]]
    assert "Type=h100" in render_gres_conf(spec)
    reservation = site_commands()[-1]
    assert "Accounts=team-b" in reservation and "Nodes=n06" in reservation


def test_the_plain_spec_is_unchanged() -> None:
    conf = render_slurm_conf(ClusterSpec(dir=Path("/c")))
    assert "Licenses" not in conf and "AccountingStorageEnforce=associations\n" in conf
    assert "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in conf


def test_up_site_takes_no_size_of_its_own(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from railgang.daemon.cli.main import app
    from railgang.errors import DevClusterError

    res = CliRunner().invoke(app, ["devcluster", "up", "--site", "--dir", str(tmp_path), "--pools", "a100=2"],
                             env={"RAILGANG_CONFIG": ""})
    assert isinstance(res.exception, DevClusterError) and "--site has its own" in str(res.exception)
