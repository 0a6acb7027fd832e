"""What --rg-needs costs slurmctld at submit: sdiag's REQUEST_SUBMIT_BATCH_JOB time per RPC.

Brings up its own mixed-pool devcluster (4 A100 + 4 V100 nodes, no accounting) under --dir on
--port (slurmctld; slurmds from port+10), then submits held jobs in interleaved blocks:

- ``plain``: a railgang job without needs (``--comment=rg:class=3``);
- ``needs``: ``--rg-needs=gpumem>=40G,nvlink`` against the cluster's own 2-line fleet file;
- ``needs-200``: the same with a 200-line fleet file (a very heterogeneous fleet; the extra kinds
  all meet the needs, so the exclusion list stays the V100 nodes).

sdiag is reset before each block and read after it (slurmctld's own timing of the RPC, which
includes job_submit.lua; sbatch's round trip hides it). Then the script alone under lua5.1
(Slurm's table stubbed by plain values): microseconds per call for the same three conditions.
Prints one JSON object.

    .venv/bin/python -m benchmarks.slurm.needs_submit_bench --dir /tmp/rg-bench-needs --port 21800
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

from benchmarks.common import REPO
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec, parse_pools

SUBMIT = re.compile(r"REQUEST_SUBMIT_BATCH_JOB\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:(\d+)")
CONDITIONS = {
    "plain": ("--comment=rg:class=3",),
    "needs": ("--rg-needs=gpumem>=40G,nvlink",),
    "needs-200": ("--rg-needs=gpumem>=40G,nvlink",),
}


def big_fleet(own: str) -> str:
    extra = "".join(f"x{i:03d} nodes=1 gpus=8 type=h100 gpumem=80 nvlink=1 net=ib cc=9.{i % 10}\n"
                    for i in range(198))
    return own + extra


LUA_BENCH = """
slurm = {SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, INFINITE = 4294967295,
         log_user = function() end, log_info = function() end}
dofile(arg[1])
local n, comment = tonumber(arg[2]), arg[3]
local t = os.clock()
for i = 1, n do
    local job = {account = "team-a", user_name = "root", comment = comment, time_limit = slurm.NO_VAL,
                 tres_per_node = "gres:gpu:8", min_nodes = 1}
    assert(slurm_job_submit(job, nil, 0) == 0)
end
print(string.format("%.2f", (os.clock() - t) / n * 1e6))
"""


def lua_us(workdir: Path, fleet: str | None, comment: str, n: int = 20000) -> float:
    script = REPO / "slurm_plugins" / "job_submit.lua"
    (workdir / "bench.lua").write_text(LUA_BENCH)
    env = {"PATH": "/usr/bin:/bin"}
    if fleet is not None:
        (workdir / "fleet.txt").write_text(fleet)
        env["RAILGANG_FLEET_FILE"] = str(workdir / "fleet.txt")
    out = subprocess.run(["/usr/bin/lua5.1", str(workdir / "bench.lua"), str(script), str(n), comment],
                         env=env, capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--port", type=int, default=21800)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--per-block", type=int, default=40)
    args = ap.parse_args()
    spec = ClusterSpec(dir=args.dir, cluster_name="rgbench", accounting=False,
                       slurmctld_port=args.port, slurmd_base_port=args.port + 10,
                       nodes_per_leaf=4).with_pools(parse_pools("a100=4,v100=4"))
    cluster = DevCluster(spec)
    cluster.up()
    env = slurm_env(spec)
    own = spec.gpu_fleet_file.read_text()
    per_rpc: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    jobs: list[str] = []
    try:
        for block in range(args.blocks):
            for name in list(CONDITIONS)[:: 1 if block % 2 else -1]:
                spec.gpu_fleet_file.write_text(big_fleet(own) if name == "needs-200" else own)
                subprocess.run(["sdiag", "-r"], env=env, check=True, capture_output=True)
                for _ in range(args.per_block):
                    res = subprocess.run(["sbatch", "--parsable", "--hold", "--account=team-a",
                                          "--gres=gpu:8", "--output=/dev/null", *CONDITIONS[name],
                                          "--wrap=true"], env=env, capture_output=True, text=True,
                                         check=True)
                    jobs.append(res.stdout.strip())
                m = SUBMIT.search(subprocess.run(["sdiag"], env=env, check=True, capture_output=True,
                                                 text=True).stdout)
                assert m is not None and int(m.group(1)) == args.per_block, m
                per_rpc[name].append(float(m.group(2)))
            subprocess.run(["scancel", *jobs], env=env, check=False, capture_output=True)
            jobs.clear()
    finally:
        spec.gpu_fleet_file.write_text(own)
        cluster.down()
    lua = {"plain": lua_us(args.dir, None, "rg:class=3"),
           "needs": lua_us(args.dir, own, "rg:class=3;needs=gpumem>=40G,nvlink"),
           "needs-200": lua_us(args.dir, big_fleet(own), "rg:class=3;needs=gpumem>=40G,nvlink")}
    print(json.dumps({
        "lua_us_per_call": lua,
        "submissions_per_condition": args.blocks * args.per_block,
        "sdiag_submit_us_median_of_blocks": {k: statistics.median(v) for k, v in per_rpc.items()},
        "sdiag_submit_us_blocks": per_rpc,
        "load": os.getloadavg(),
    }, indent=1))


if __name__ == "__main__":
    main()
