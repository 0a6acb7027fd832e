"""What one hostile ``--comment`` costs slurmctld: sdiag's REQUEST_SUBMIT_BATCH_JOB time per RPC,
job_submit.lua before (a git revision's script) and after (this checkout's), side by side.

Brings up its own small devcluster (4 nodes, no accounting) under --dir on --port, then for each
condition swaps job_submit.lua in place (slurmctld reloads the script when the file changes),
resets sdiag, submits held jobs and reads sdiag back:

- ``plain``: a normal hinted job (``--comment=rg:parallel=tp8;class=3``), the baseline;
- ``hostile-NK``: ``rg:class=3;x=`` + N KiB of spaces + ``y``: the input that made the old
  script's ``(.-)%s*$`` quadratic (the issue measured 1.3 s at 16 KB, 19.6 s at 64 KB).

The old script is only given sizes up to --old-max-kib (each of its submissions holds slurmctld's
locks for seconds); the new one gets 64 KiB. Then both scripts alone under lua5.1 (Slurm's table
stubbed). Prints one JSON object.

    .venv/bin/python -m benchmarks.slurm.hostile_submit_bench --dir /tmp/rg-bench-hostile --port 21900 --before 998fe2b
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from benchmarks.common import REPO
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec

ROOT = REPO
SUBMIT = re.compile(r"REQUEST_SUBMIT_BATCH_JOB\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:(\d+)")
LUA_ONE = """
slurm = {SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, INFINITE = 4294967295,
         log_user = function() end, log_info = function() end}
dofile(arg[1])
local comment, n = arg[2], tonumber(arg[3])
local t = os.clock()
for i = 1, n do
    local job = {account = "team-a", user_name = "root", comment = comment,
                 time_limit = slurm.NO_VAL, min_nodes = 1}
    slurm_job_submit(job, nil, 0)
end
print(string.format("%.3f", (os.clock() - t) / n * 1e6))
"""


def hostile(kib: int) -> str:
    return "rg:class=3;x=" + " " * (kib * 1024) + "y"


def lua_us(workdir: Path, script: Path, comment: str, n: int) -> float:
    (workdir / "one.lua").write_text(LUA_ONE)
    out = subprocess.run(["/usr/bin/lua5.1", str(workdir / "one.lua"), str(script), comment, str(n)],
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--port", type=int, default=21900)
    ap.add_argument("--before", default="998fe2b", help="git revision of the old job_submit.lua")
    ap.add_argument("--old-max-kib", type=int, default=16)
    ap.add_argument("--per-block", type=int, default=20)
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    old = args.dir / "job_submit_old.lua"
    old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{args.before}:slurm_plugins/job_submit.lua"],
                                  capture_output=True, text=True, check=True).stdout)
    new = ROOT / "slurm_plugins" / "job_submit.lua"
    conditions = [("old", old, "plain", "rg:parallel=tp8;class=3", args.per_block),
                  ("new", new, "plain", "rg:parallel=tp8;class=3", args.per_block),
                  *(("old", old, f"hostile-{k}K", hostile(k), 3) for k in (4, 8, args.old_max_kib)),
                  *(("new", new, f"hostile-{k}K", hostile(k), args.per_block) for k in (16, 64))]
    spec = ClusterSpec(dir=args.dir / "cluster", cluster_name="rghostile", accounting=False, nodes=4,
                       nodes_per_leaf=4, slurmctld_port=args.port, slurmd_base_port=args.port + 10)
    cluster = DevCluster(spec)
    cluster.up()
    env = slurm_env(spec)
    rows = []
    jobs: list[str] = []
    try:
        for which, script, name, comment, count in conditions:
            shutil.copyfile(script, spec.etc / "job_submit.lua")
            time.sleep(1.1)  # a new mtime second: slurmctld reloads the script on the next call
            subprocess.run(["sbatch", "--hold", "--account=team-a", "--wrap=true", "--output=/dev/null",
                            "--comment=warm-up"], env=env, capture_output=True, check=False)
            subprocess.run(["sdiag", "-r"], env=env, check=True, capture_output=True)
            refused = 0
            t0 = time.monotonic()
            for _ in range(count):
                res = subprocess.run(["sbatch", "--parsable", "--hold", "--account=team-a", "--gres=gpu:8",
                                      "--output=/dev/null", f"--comment={comment}", "--wrap=true"],
                                     env=env, capture_output=True, text=True, check=False, timeout=600)
                if res.returncode == 0:
                    jobs.append(res.stdout.strip())
                else:
                    refused += 1
            wall = (time.monotonic() - t0) / count
            m = SUBMIT.search(subprocess.run(["sdiag"], env=env, check=True, capture_output=True,
                                             text=True).stdout)
            rows.append({"script": which, "condition": name, "comment_bytes": len(comment),
                         "submissions": count, "refused": refused,
                         "sdiag_rpcs": int(m.group(1)) if m else 0,
                         "sdiag_us_per_rpc": float(m.group(2)) if m else None,
                         "sbatch_wall_ms": round(wall * 1e3, 1)})
            print(json.dumps(rows[-1]), flush=True)
        subprocess.run(["scancel", *jobs], env=env, check=False, capture_output=True)
    finally:
        shutil.copyfile(new, spec.etc / "job_submit.lua")
        cluster.down()
    lua = {f"{which} {k}K": lua_us(args.dir, script, hostile(k), n)
           for which, script, k, n in (("old", old, 4, 3), ("old", old, 16, 1), ("new", new, 16, 1000),
                                       ("new", new, 64, 1000))}
    print(json.dumps({"sdiag": rows, "lua_alone_us_per_call": lua, "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
