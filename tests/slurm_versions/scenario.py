"""What tests/slurm_versions runs *inside* a container of a newer Slurm (railgang installed there,
no pytest): bring up a 4-node × 8-GPU cluster (2 leaves of 2 nodes, accounting), drive
job_submit.lua, the CLI backend and ``railgang daemon run --once`` against it, and print one JSON
object of what was seen for the host's test to assert on. Each step's facts are recorded even
when a later step fails (``error``), so a failure says where.

    python3 scenario.py WORKDIR --port-base 28017
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pwd
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat
from railgang.daemon.slurm.cli import backend as backend_module
from railgang.daemon.slurm.cli.narrow import NarrowCache, narrow_argv, new_mark, parse_narrow
from railgang.daemon.slurm.cli.records import parse_squeue
from railgang.daemon.slurm.cli.schemas import PINNED, json_flag
from railgang.devcluster.cluster import DAEMON_USER, DevCluster, daemon_uid, slurm_env
from railgang.devcluster.layout import ClusterSpec
from railgang.errors import SlurmCommandError

RAILGANG = str(Path(sys.executable).with_name("railgang"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--port-base", type=int, default=28017)
    args = ap.parse_args()
    work: Path = args.work
    base: int = args.port_base
    spec = ClusterSpec(dir=work / "cluster", nodes=4, nodes_per_leaf=2, slurmctld_port=base,
                       slurmdbd_port=base + 2, mariadb_port=base - 511, slurmd_base_port=base + 83)
    out: dict[str, Any] = {}
    cluster = DevCluster(spec)
    cluster.down()
    t = time.monotonic()
    cluster.up()
    out["up_s"] = round(time.monotonic() - t, 1)
    try:
        run(spec, work, out)
    except Exception as exc:  # reported, not raised: the host test shows what was reached
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-2000:]
    finally:
        cluster.down()
    print(json.dumps(out))


def run(spec: ClusterSpec, work: Path, out: dict[str, Any]) -> None:
    env = slurm_env(spec)
    script = work / "job.sh"
    script.write_text("#!/bin/bash\nsleep 600\n")
    script.chmod(0o755)

    def sl(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=check,
                              timeout=60)

    def sbatch(*opts: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sl("sbatch", "--parsable", f"--chdir={work}", "--output=/dev/null", *opts,
                  str(script), check=check)

    def show(job: str) -> dict[str, str]:
        line = sl("scontrol", "show", "job", "-o", job).stdout
        return dict(p.split("=", 1) for p in line.split() if "=" in p)

    def wait(job: str, key: str, value: str, timeout: float = 60) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while (rec := show(job)).get(key) != value:
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job}: {key}={rec.get(key)}, not {value}")
            time.sleep(0.3)
        return rec

    out["slurm"] = sl("sinfo", "--version").stdout.strip()
    # job_submit.lua: refuses a job without an account; tags a hinted one
    refused = sbatch("-N1", "--gres=gpu:1", check=False)
    out["lua_refused"] = {"rc": refused.returncode, "stderr": refused.stderr.strip()[-300:]}
    tagged = sbatch("--account=team-b", "-N1", "--gres=gpu:4", "--comment=rg:parallel=tp4",
                    "--nodelist=n01").stdout.strip().split(";")[0]
    out["lua_tag"] = wait(tagged, "JobState", "RUNNING").get("AdminComment", "")
    # the SPANK plugin, built by `up` against this version's libslurm-dev: --rg-parallel reaches
    # job_submit.lua through the job's SPANK environment
    spank = sbatch("--account=team-b", "-N1", "--gres=gpu:2", "--rg-parallel=tp2", "--hold",
                   check=False)
    out["spank"] = {"rc": spank.returncode, "stderr": spank.stderr.strip()[-300:],
                    "tag": show(spank.stdout.strip().split(";")[0]).get("AdminComment", "")
                    if spank.returncode == 0 else ""}
    if spank.returncode == 0:
        sl("scancel", spank.stdout.strip().split(";")[0])
    # a hinted tp8,dp2 gang under a lease (fresh heartbeat): the daemon places it in one leaf;
    # n01 is half used, so only leaf2 (n03, n04) holds it whole
    write_heartbeat(spec.heartbeat_file, time.time(), 600)
    gang = sbatch("--account=team-a", "-N2", "--gres=gpu:8", "--time=UNLIMITED",
                  "--comment=rg:parallel=tp8,dp2;class=1").stdout.strip().split(";")[0]
    out["gang_before"] = {k: v for k, v in wait(gang, "Reason", "BeginTime").items()
                          if k in ("JobState", "Reason", "AdminComment")}
    backend = CliBackend(SlurmSettings(conf=spec.slurm_conf, lease_s=600))
    obs = backend.observe(time.time())
    out["snapshot"] = {
        "nodes": sorted(obs.snapshot.nodes), "running": sorted(obs.snapshot.running),
        "pending": [j.job_id for j in obs.snapshot.pending], "leased": list(obs.leased),
        "skipped": list(obs.skipped), "json_version": backend.json_version,
        "time_limit_s": {j: r.time_limit_s for j, r in obs.jobs.items()},
        "free": {n: len(g) for n, g in obs.snapshot.free.items()}}
    # the daemon and its commands run as the deployment runs them: as the non-root Slurm
    # administrator `railgang` that `devcluster up` created (docs/deploy.md), in a home it owns
    uid = daemon_uid()
    if uid is None:
        raise RuntimeError(f"devcluster up did not create the daemon user {DAEMON_USER!r}")
    home = work / "daemon-home"
    home.mkdir(mode=0o755, exist_ok=True)
    os.chown(home, uid, pwd.getpwuid(uid).pw_gid)
    os.chown(spec.heartbeat_file, uid, -1)  # written above by this root scenario
    as_daemon = ["setpriv", f"--reuid={uid}", f"--regid={pwd.getpwuid(uid).pw_gid}",
                 "--clear-groups", RAILGANG]
    out["daemon_uid"] = uid
    denv = {**os.environ, **env, "RAILGANG_CONFIG": "", "HOME": str(home),
            "RAILGANG_HOME": str(home),
            "RAILGANG_DB__URL": f"sqlite:///{home / 'rg.sqlite'}",
            "RAILGANG_LEDGER__GRANTS_FILE": str(home / "class_grants.txt"),
            "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
            "RAILGANG_SLURM__LEASE_S": "600",
            # renew every lease every cycle: the second cycle must renew a lease given a moment
            # before (by default only leases ending within 40 s are renewed)
            "RAILGANG_SLURM__LEASE_RENEW_BEFORE_S": "600",
            "RAILGANG_DAEMON__HEARTBEAT_FILE": str(spec.heartbeat_file),
            "RAILGANG_DAEMON__METRICS_PORT": "0", "RAILGANG_DAEMON__POLICY": "fifo"}

    def cycle() -> dict[str, Any]:
        res = subprocess.run([*as_daemon, "daemon", "run", "--once", "--log-format", "json"],
                             env=denv, capture_output=True, text=True, timeout=120)
        logged = [json.loads(x) for x in res.stderr.splitlines() if x.startswith("{")]
        found = next((x for x in logged if '"ms"' in json.dumps(x) and "actions" in x), None)
        return {"rc": res.returncode, "cycle": found,
                "errors": [x for x in logged if x.get("level") in ("ERROR", "error")][:3],
                "stderr": res.stderr[-1500:] if found is None else ""}

    out["cycle1"] = cycle()
    # the daemon rewrote the heartbeat as itself: proof it ran as `railgang`, not as root
    out["heartbeat_owner"] = spec.heartbeat_file.stat().st_uid
    rec = wait(gang, "JobState", "RUNNING")
    out["gang_after"] = {"nodes": rec.get("NodeList"), "state": rec.get("JobState")}
    explain = subprocess.run([*as_daemon, "explain", gang, "--json"], env=denv,
                             capture_output=True, text=True, timeout=60)
    out["explain"] = json.loads(explain.stdout or "{}")
    # a second gang that cannot fit (n01 has 4 free, n02 8): it waits and its lease is renewed
    waiting = sbatch("--account=team-a", "-N2", "--gres=gpu:8",
                     "--comment=rg:parallel=tp8,dp2;class=1").stdout.strip().split(";")[0]
    before = wait(waiting, "Reason", "BeginTime")["EligibleTime"]
    time.sleep(1.5)  # EligibleTime has a resolution of one second
    out["cycle2"] = cycle()
    out["renewal"] = {"before": before, "after": show(waiting).get("EligibleTime"),
                      "reason": show(waiting).get("Reason")}
    status = subprocess.run([*as_daemon, "daemon", "status", "--json"], env=denv,
                            capture_output=True, text=True, timeout=60)
    out["status"] = json.loads(status.stdout or "{}")
    out["jobs"] = {"tagged": tagged, "gang": gang, "waiting": waiting}
    # the usage ledger from this version's sacct --json
    time.sleep(2)  # slurmdbd records the starts
    ingest = subprocess.run([*as_daemon, "ledger", "ingest", "--since", "now-1h", "--json"],
                            env=denv, capture_output=True, text=True, timeout=120)
    out["ledger"] = {"rc": ingest.returncode, "stderr": ingest.stderr[-600:],
                     **(json.loads(ingest.stdout) if ingest.returncode == 0 else {})}
    out["narrow"] = narrow_read(spec, sl, sbatch)


def narrow_read(spec: ClusterSpec, sl: Any, sbatch: Any) -> dict[str, Any]:
    """The narrow ``squeue -O`` read against this version's ``squeue --json``: the records it
    builds (beside the running and waiting gangs above: a held job, a pending array, a name
    with a newline) and the backend's full reads over three observes."""
    made = [sbatch(*opts).stdout.strip().split(";")[0] for opts in (
        ("--account=team-a", "-N1", "--gres=gpu:1", "--hold", "--comment=rg:parallel=tp1"),
        ("--account=team-b", "-N1", "--gres=gpu:8", "--array=0-3", "--begin=now+1hour",
         "--time=1-02:03:00"),
        ("--account=team-a", "-N1", "--gres=gpu:2", "--hold", "--job-name=a|name\nwith a newline"))]
    # a GRES type a user wrote with "|" and a newline (issue 38 row 3): it must shift no column
    hostile = sbatch("--account=team-a", "-N1", "--gres=gpu:x|n02\n99999|RUNNING:8", "--hold",
                     check=False)
    if hostile.returncode == 0:
        made.append(hostile.stdout.strip().split(";")[0])
    try:
        # a job its signal ended (a checkpoint's USR1): 24.11+ print its exit code as 0:10
        killed = sbatch("--account=team-b", "-N1", "--gres=gpu:1", "--nodelist=n02").stdout.strip()
        made.append(killed.split(";")[0])
        killed = made[-1]
        for ended in (False, True):
            deadline = time.monotonic() + 60
            while (sl("squeue", "-h", "-t", "all", "-j", made[-1], "-o", "%T").stdout.strip()
                   in (("RUNNING", "COMPLETING") if ended else ("PENDING", "CONFIGURING", ""))):
                if time.monotonic() > deadline:
                    raise AssertionError(f"job {made[-1]} did not {'end' if ended else 'start'}")
                time.sleep(0.3)
            if not ended:
                sl("scancel", "--signal=USR1", "--full", made[-1])
        mark = new_mark()
        rows = parse_narrow(sl(*narrow_argv(mark)).stdout, mark)
        full, _ = parse_squeue(sl("squeue", json_flag(PINNED), "--states=all").stdout,
                               keep_signalled=True)
        cache = NarrowCache.after_full_read(0.0, rows, full)
        stale = cache.stale(rows)
        cache.lines = {}  # every record from its line and the carried fields alone
        narrow, problems = cache.read(rows)
        by_id = {j.job_id: j for j in full}
        differ = {j.job_id: {f.name: [str(getattr(j, f.name)), str(getattr(by_id[j.job_id], f.name, None))]
                             for f in dataclasses.fields(j)
                             if getattr(j, f.name) != getattr(by_id.get(j.job_id), f.name, None)}
                  for j in narrow if by_id.get(j.job_id) != j}
        backend = CliBackend(SlurmSettings(conf=spec.slurm_conf, lease_s=600, narrow_full_read_s=60))
        plain = CliBackend(SlurmSettings(conf=spec.slurm_conf, lease_s=600, narrow_full_read_s=0))
        reads = []
        for _ in range(3):
            mine = backend.observe(time.time())
            reads.append(backend.full_reads)
        same = mine.jobs == plain.observe(time.time()).jobs
        batched = batched_full_read(spec, plain)
        # the held job starts: its GPU indices come from the JSON of that job alone
        sl("scontrol", "release", made[0])
        sl("scontrol", "update", f"jobid={made[0]}", "StartTime=now")  # its lease
        deadline = time.monotonic() + 60
        while "RUNNING" not in sl("squeue", "-h", "-j", made[0], "-o", "%T").stdout:
            if time.monotonic() > deadline:
                raise AssertionError(f"the released job {made[0]} did not start")
            time.sleep(0.3)
        now = time.time()
        started = backend.observe(now)
        after = {"full": backend.full_reads, "changed": backend.changed_reads,
                 "gpus": [list(g) for _, g in started.jobs[made[0]].allocation],
                 "same_as_json": started.jobs == plain.observe(now).jobs}
        backend.observe(time.time())
        after["next"] = [backend.full_reads, backend.changed_reads]
        # a job submitted now: its name (not in the narrow form) read by id, no full read
        made.append(sbatch("--account=team-a", "-N1", "--gres=gpu:1", "--hold",
                           "--job-name=fresh|name\nline").stdout.strip().split(";")[0])
        fresh = backend.observe(time.time())
        after["fresh"] = [backend.full_reads, backend.changed_reads, fresh.jobs[made[-1]].name]
        after["turn"] = records_in_turn(spec, plain)
        signalled = {j.job_id: j.exit_signal for j in narrow}.get(killed)
        return {"rows": len(rows), "records": len(narrow), "json_records": len(full), "differ": differ,
                "problems": problems, "stale": stale, "made": made, "full_reads": reads,
                "same_as_json": same, "names": {j.job_id: j.name for j in narrow if j.job_id in made},
                "batched": batched,
                "started": after, "signalled": signalled,
                "hostile": {"rc": hostile.returncode, "stderr": hostile.stderr[-300:],
                            "gres": [r.fields[-1] for r in rows if r.job_id in made[3:4]]}}
    finally:
        sl("scancel", *made, check=False)


def records_in_turn(spec: ClusterSpec, plain: CliBackend) -> dict[str, Any]:
    """The records read again by id in turn (``NarrowCache.due``) instead of every job at once
    every ``narrow_full_read_filtered_s`` (20 s here): 30 s of cycles, a second apart."""
    turn = CliBackend(SlurmSettings(conf=spec.slurm_conf, lease_s=600, narrow_full_read_s=5,
                                    narrow_full_read_filtered_s=20))
    reads, by_id = [], set[str]()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        before = len(turn.runner.history)
        got = turn.observe(time.time())
        reads.append(turn.full_reads)
        by_id |= {i for r in turn.runner.history[before:] if r.argv[0] == "squeue" and "--states=all" in r.argv
                  for a in r.argv if a.startswith("--jobs=") for i in a.removeprefix("--jobs=").split(",")}
        time.sleep(1)
    now = time.time()
    got = turn.observe(now)
    return {"full_reads": reads, "unread": sorted(set(got.jobs) - by_id), "jobs": len(got.jobs),
            "same_as_json": got.jobs == plain.observe(now).jobs}


def batched_full_read(spec: ClusterSpec, plain: CliBackend) -> dict[str, Any]:
    """A full read of more jobs than ``FULL_READ_BATCH`` (two here) is read by id in batches
    (26.05's squeue --json of 51,000 jobs outlasted every timeout): a fresh daemon's first
    cycle (the ids from its narrow read, the schema from sinfo); and, where that cycle's reads
    all timed out, the next one's. Their records must equal one read of every job."""
    batch = backend_module.FULL_READ_BATCH
    backend_module.FULL_READ_BATCH = 2
    out: dict[str, Any] = {}
    try:
        for how in ("fresh", "timed_out"):
            backend = CliBackend(SlurmSettings(conf=spec.slurm_conf, lease_s=600, narrow_full_read_s=60))
            if how == "timed_out":  # every try of the first cycle's reads times out
                backend.runner.timeout_s = 0.001
                try:
                    backend.observe(time.time())
                except SlurmCommandError as exc:
                    out[f"{how}_first"] = str(exc)[:200]
                backend.runner.timeout_s, backend.runner.read_timeouts = 30.0, {}
            got = backend.observe(time.time())
            by_id = [r.argv for r in backend.runner.history if r.argv[0] == "squeue"
                     and "--states=all" in r.argv and any(a.startswith("--jobs=") for a in r.argv)]
            out[how] = {"full_reads": backend.full_reads, "commands": len(by_id), "jobs": len(got.jobs),
                        "ids_per_command": max((len(a[-1].split(",")) for a in by_id), default=0),
                        "same_as_json": got.jobs == plain.observe(time.time()).jobs}
    finally:
        backend_module.FULL_READ_BATCH = batch
    return out


if __name__ == "__main__":
    main()
