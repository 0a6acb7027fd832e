"""``railgang sim sweep`` on the real local Slurm 22.05 cluster: 12 points (3 policies x 2 seeds
x 2 cluster shapes) as one job array, four tasks at a time, submitted with --no-wait; a rerun
while it runs waits for it instead of submitting again; the table and plots come back, every point
was an array task of that one job, and a rerun after it submits nothing."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster, slurm_env
from tests.daemon.sim.sweep.test_run_local import RAILGANG, synthetic_trace

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

GRID = """
[sweep]
name = "e2e"
goals = ["mean_jct_s", "p99_jct_s", "util_allocated"]
timeout_s = 300
[fixed]
trace = "trace.csv"
gpus-per-node = 8
[grid]
policy = ["fifo", "default", "tiresias"]
seed = [0, 1]
[[grid.cluster]]
name = "4x8"
nodes = 4
leaf = 2
[[grid.cluster]]
name = "8x8"
nodes = 8
leaf = 4
"""


def sweep(cluster: DevCluster, grid: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAILGANG, "sim", "sweep", str(grid), "--parallel", "4",
                           "--sbatch-arg=--account=team-a", "--json", *args],
                          capture_output=True, text=True, timeout=900, check=False,
                          env=slurm_env(cluster.spec))


def test_a_12_point_sweep_runs_as_one_job_array(slurm_cluster: DevCluster, tmp_path: Path,
                                               ) -> None:
    synthetic_trace(tmp_path / "trace.csv", jobs=30)
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    first = sweep(slurm_cluster, grid, "--no-wait")  # submit and return
    assert first.returncode == 0 and first.stdout == "", first.stderr[-3000:]
    job = re.search(r"submitted job array (\d+) \(12 tasks, 4 at a time\)", first.stderr)
    assert job is not None, first.stderr
    # run again while the array runs: it waits for that array and submits nothing twice
    res = sweep(slurm_cluster, grid)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "submitted" not in res.stderr
    if "12 with a result" not in res.stderr:  # (unless the array was that quick)
        assert f"job array {job[1]} of an earlier run is still running; waiting" in res.stderr
    assert json.loads(res.stdout)["done"] == 12
    out = grid.with_suffix(".sweep")
    logs = sorted(p.name for p in (out / "logs").glob("slurm-*.out"))
    assert logs == sorted(f"slurm-{job[1]}_{i}.out" for i in range(12))  # one task per point
    with (out / "results.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 12 and {r["status"] for r in table} == {"done"}
    assert {(r["policy"], r["seed"], r["cluster"]) for r in table} == {
        (p, s, c) for p in ("fifo", "default", "tiresias") for s in "01" for c in ("4x8", "8x8")}
    assert all(float(r["cpu_s"]) > 0 and r["key"] and r["code"] for r in table)
    plots = {p.name for p in (out / "plots").iterdir()}
    assert len(plots) == 3 * 3 * 2  # 3 goals x 3 knobs (policy, seed, cluster) x PNG and SVG
    assert "p99_jct_s--cluster.svg" in plots
    again = sweep(slurm_cluster, grid)
    assert again.returncode == 0 and "submitted" not in again.stderr
    assert json.loads(again.stdout)["computed_now"] == 0


def test_sbatch_refusing_the_array_is_one_line(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    synthetic_trace(tmp_path / "trace.csv", jobs=5)
    grid = tmp_path / "grid.toml"
    grid.write_text('[fixed]\ntrace = "trace.csv"\nnodes = 2\n')
    res = subprocess.run([*RAILGANG, "sim", "sweep", str(grid)], capture_output=True, text=True,
                         timeout=120, check=False, env=slurm_env(slurm_cluster.spec))
    assert res.returncode == 1  # job_submit.lua: no account given
    assert res.stderr.strip().splitlines()[-1].startswith("error: sbatch refused the array:")
    assert "account" in res.stderr and "Traceback" not in res.stderr
