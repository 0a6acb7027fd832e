"""Which slurmstepds are this cluster's (railgang/devcluster/leftovers.py), on a fake /proc:
22.05 names its slurm.conf in the environment; 24.11+ overwrite the environment with the
process title, so an open file of the cluster's directory decides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from railgang.devcluster import leftovers


def _proc(root: Path, pid: int, ppid: int, exe: str, environ: bytes, files: list[Path]) -> None:
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    os.symlink(f"/usr/sbin/{exe}", d / "exe")
    (d / "stat").write_text(f"{pid} ({exe}) S {ppid} 1 1 0")
    (d / "environ").write_bytes(environ)
    for i, f in enumerate(files):
        os.symlink(f, d / "fd" / str(i + 3))


def test_slurmstepds_of_this_cluster_by_environment_or_open_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = tmp_path / "proc"
    mine, other = tmp_path / "dc", tmp_path / "dc2"  # dc2: a name that starts like dc
    conf = mine / "etc" / "slurm.conf"
    _proc(proc, 10, 1, "slurmstepd", f"A=1\0SLURM_CONF={conf}\0".encode(), [])  # 22.05
    _proc(proc, 11, 10, "bash", b"", [])  # its job script
    _proc(proc, 20, 1, "slurmstepd-wlm", b"\0" * 40, [mine / "log" / "slurmd-n01.log"])  # 24.11
    _proc(proc, 30, 1, "slurmstepd", f"SLURM_CONF={other}/etc/slurm.conf\0".encode(),
          [mine / "log" / "x"])  # another cluster's, whatever it holds
    _proc(proc, 40, 1, "slurmstepd-wlm", b"", [other / "log" / "slurmd-n01.log"])
    _proc(proc, 50, 1, "sleep", b"", [mine / "log" / "y"])  # not a slurmstepd
    monkeypatch.setattr(leftovers, "PROC", proc)
    assert sorted(leftovers.stepd_trees(conf)) == [10, 11, 20]
