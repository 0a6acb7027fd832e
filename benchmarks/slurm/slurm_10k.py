"""10,000 waiting railgang jobs on a real Slurm slurmctld (issue 17 item 4): the daemon's cycle
per phase, slurmctld's RPCs and its own scheduling cycles (sdiag), and users' sbatch latency,
without the daemon and with it (every lease renewed every cycle, or only the leases due).

Run as root on a machine with Debian's Slurm 22.05 (the devcluster's packages):

    .venv/bin/python -m benchmarks.slurm.slurm_10k [--nodes 64] [--running 1000] [--waiting 10000]
        [--window-s 80] [--probe-rate 4] [--modes none,due,all] [--port-base 24817]

It brings up its own cluster under --dir (MaxJobCount raised), fills it with --running plain
jobs (two job arrays: one GPU each until the GPUs are taken, then CPU-only), submits --waiting
hinted jobs (``rg:parallel=tp2;class=3``, 2 GPUs each, one sbatch each, --workers at a time,
under a fresh 120 s heartbeat as a live daemon would give) that cannot start, then measures one
window per mode: ``none`` (no daemon, no heartbeat), ``due`` (``railgang daemon run``, 10 s
cycles, 120 s lease, renewing what ends within 40 s; on 22.05 the narrow squeue read between
full JSON reads, slurm/cli/narrow.py), ``json`` (the same reading squeue --json every cycle, as
before the narrow read) and ``all`` (``json`` with lease_renew_before_s = lease_s: every lease
every cycle, as before issue 17); ``due600`` is ``due`` with a 600 s lease (a dead daemon's
jobs wait up to 10 min; a cycle renews 1/56 of the queue instead of 1/8); ``inline`` is ``due``
with the leases renewed on the cycle's own path (``lease_renew_thread = false``, as before issue
37 item 3; in every other mode the renewals run on the backend's thread); ``explain0`` is ``due``
with ``daemon.explain_refresh_s = 0`` (every waiting job's explanation rewritten whenever its
position, the free GPUs or its account's fair share moved, as before the refresh). In each window
hinted probe jobs are submitted at --probe-rate per second and timed (then cancelled), sdiag is
reset at its start and read at its end. The daemon runs from this checkout (PYTHONPATH).
Mode ``parts`` times the CLI backend's own steps at this queue in CPU seconds as well as wall
(observe, leases_due, renewing one steady cycle's leases vs the whole queue, with slurmctld's
time and CPU for those updates): on a machine shared with other work, wall times measure the
neighbours as much as railgang.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import REPO as ROOT
from railgang.daemon.slurm.cli.lease import write_heartbeat
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec

LEASE_S, RENEW_BEFORE_S, CYCLE_S = 120, 40, 10.0
HINT = "--comment=rg:parallel=tp2;class=3"
_RPC = re.compile(r"^\s*(REQUEST_\w+|MESSAGE_\w+|RESPONSE_\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+"
                  r"ave_time:(\d+)\s+total_time:(\d+)", re.M)


class Bench:
    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.env = slurm_env(spec)
        self.work = spec.dir / "work"
        self.work.mkdir(parents=True, exist_ok=True)

    def sl(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=timeout, check=check)

    def sbatch(self, *opts: str) -> tuple[float, str]:
        """One hinted sbatch as a user would run it: (seconds, job id or '')."""
        t = time.perf_counter()
        res = self.sl("sbatch", "--parsable", f"--chdir={self.work}", "--output=/dev/null", *opts,
                      check=False)
        return time.perf_counter() - t, res.stdout.strip().split(";")[0] if res.returncode == 0 else ""

    def hinted(self, i: int) -> tuple[float, str]:
        return self.sbatch(f"--account=team-{'ab'[i % 2]}", "--gres=gpu:2", "-c1", "--mem=512", HINT,
                           "--wrap=sleep 60")

    def count(self, state: str) -> int:
        out = self.sl("squeue", "-h", "-r", "-t", state, "-o", "%i").stdout
        return len(out.split())

    def sdiag(self) -> dict[str, Any]:
        text = self.sl("sdiag").stdout
        out: dict[str, Any] = {"rpcs": {m[0]: {"count": int(m[1]), "total_ms": int(m[3]) / 1e3}
                                        for m in _RPC.findall(text)}}
        main, _, rest = text.partition("Backfilling stats")
        for label, part in (("main", main), ("backfill", rest)):
            for key in ("Last cycle", "Max cycle", "Mean cycle", "Total cycles"):
                m = re.search(rf"^\s*{key}:\s+(\d+)", part, re.M)
                if m:
                    out[f"{label} {key.lower()}"] = int(m.group(1))
        return out


def fill_running(b: Bench, running: int, gpus: int) -> None:
    """``running`` plain jobs that hold every GPU (one each) and then CPUs; waits until they run."""
    with_gpu = min(running, gpus)
    for n, gres in ((with_gpu, ["--gres=gpu:1"]), (running - with_gpu, [])):
        for lo in range(0, n, 1000):  # MaxArraySize is 1001
            hi = min(n, lo + 1000) - 1
            b.sl("sbatch", "--parsable", f"--chdir={b.work}", "--output=/dev/null", "--account=team-a",
                 f"--array=0-{hi - lo}", "-c1", "--mem=512", *gres, "--wrap=sleep 86400")
    deadline = time.monotonic() + 900
    while (seen := b.count("R")) < running:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {seen} of {running} filler jobs run after 900 s")
        time.sleep(5)
    print(f"running: {seen} plain jobs; load {os.getloadavg()[0]:.1f}", flush=True)


def beat(b: Bench, stop: threading.Event) -> None:
    while not stop.wait(5):
        write_heartbeat(b.spec.heartbeat_file, time.time(), LEASE_S)


def submit_waiting(b: Bench, n: int, workers: int) -> dict[str, Any]:
    """``n`` hinted jobs under a fresh heartbeat (a 120 s lease each, as a live daemon gives)."""
    write_heartbeat(b.spec.heartbeat_file, time.time(), LEASE_S)
    stop = threading.Event()
    threading.Thread(target=beat, args=(b, stop), daemon=True).start()
    t0 = time.perf_counter()
    lat: list[float] = []
    with ThreadPoolExecutor(workers) as pool:
        for i, (dt, job) in enumerate(pool.map(b.hinted, range(n))):
            lat.append(dt)
            if not job:
                raise SystemExit(f"sbatch {i} failed")
            if (i + 1) % 1000 == 0:
                print(f"  submitted {i + 1:,} in {time.perf_counter() - t0:.0f} s", flush=True)
    stop.set()
    b.spec.heartbeat_file.unlink(missing_ok=True)
    return {"jobs": n, "seconds": round(time.perf_counter() - t0, 1), "workers": workers,
            **pct(lat)}


def pct(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"n": len(s), "p50_ms": round(1e3 * statistics.median(s), 1),
            "p99_ms": round(1e3 * s[min(len(s) - 1, int(0.99 * len(s)))], 1),
            "max_ms": round(1e3 * s[-1], 1)}


def probe(b: Bench, rate: float, seconds: float) -> tuple[list[float], list[str]]:
    """Hinted sbatch at ``rate`` per second (open loop, one at a time) for ``seconds``."""
    lat: list[float] = []
    ids: list[str] = []
    t0 = time.monotonic()
    i = 0
    while (due := t0 + i / rate) < t0 + seconds:
        time.sleep(max(0.0, due - time.monotonic()))
        dt, job = b.hinted(i)
        lat.append(dt)
        ids.append(job)
        i += 1
    return lat, [j for j in ids if j]


def cpu_s(pid: int, children: bool = True) -> float:
    """CPU seconds ``pid`` used so far (user + system), with its waited-for children's (the Slurm
    clients the daemon forks): unlike wall time, not inflated by other work on the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def start_daemon(b: Bench, renew_before: int, log: Path, full_read_s: float = 60.0,
                 lease_s: int = LEASE_S, thread: bool = True,
                 explain_refresh_s: float = 60.0) -> subprocess.Popen[bytes]:
    home = b.spec.dir / "daemon"
    home.mkdir(exist_ok=True)
    env = {**b.env, "PYTHONPATH": str(ROOT), "RAILGANG_CONFIG": "", "RAILGANG_HOME": str(home),
           "RAILGANG_DB__URL": f"sqlite:///{home / 'rg.sqlite'}",
           "RAILGANG_LEDGER__GRANTS_FILE": str(home / "class_grants.txt"),
           "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(b.spec.slurm_conf),
           "RAILGANG_SLURM__LEASE_S": str(lease_s),
           "RAILGANG_SLURM__LEASE_RENEW_BEFORE_S": str(renew_before),
           "RAILGANG_SLURM__LEASE_RENEW_THREAD": "true" if thread else "false",
           "RAILGANG_SLURM__NARROW_FULL_READ_S": str(full_read_s),
           "RAILGANG_DAEMON__HEARTBEAT_FILE": str(b.spec.heartbeat_file),
           "RAILGANG_DAEMON__METRICS_PORT": "0", "RAILGANG_DAEMON__CYCLE_INTERVAL_S": str(CYCLE_S),
           "RAILGANG_DAEMON__EXPLAIN_REFRESH_S": str(explain_refresh_s)}
    with log.open("wb") as err:
        return subprocess.Popen([sys.executable, "-c", "from railgang.daemon.cli.main import main; main()",
                                 "daemon", "run", "--log-format", "json"],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)


def cycles(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        found = rec.get("cycle") if isinstance(rec.get("cycle"), dict) else rec
        if isinstance(found, dict) and "ms" in found and "pending" in found:
            out.append(found)
    return out


def timed(fn: Any, *a: Any) -> tuple[Any, dict[str, float]]:
    """``fn(*a)`` with its wall time, this process's CPU and its children's (the Slurm clients)."""
    import resource

    kids0, own0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time(), time.perf_counter()
    out = fn(*a)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - own0, 2),
                 "clients_cpu_s": round(kids.ru_utime + kids.ru_stime - kids0.ru_utime - kids0.ru_stime, 2)}


def parts(b: Bench, reps: int = 5) -> dict[str, Any]:
    """The CLI backend's share of a cycle at this queue, part by part, in CPU seconds as well as
    wall (the wall time on a shared machine is mostly other people's work): observe (squeue,
    sinfo, sshare and the parsing; on 22.05 the first two read squeue --json, the later ones
    the narrow form), leases_due, and renewing one due cycle's worth of leases vs
    the whole queue, with slurmctld's own time for those updates (sdiag) and CPU."""
    from railgang.daemon.config import SlurmSettings
    from railgang.daemon.slurm.cli import CliBackend

    be = CliBackend(SlurmSettings(conf=b.spec.slurm_conf, lease_s=LEASE_S,
                                  lease_renew_before_s=RENEW_BEFORE_S, narrow_full_read_s=60))
    out: dict[str, Any] = {"observe": []}
    for _ in range(reps):
        obs, t = timed(be.observe, time.time())
        out["observe"].append({**t, "full_read": be.full_reads})  # 22.05: narrow from the 3rd
    queue = [j.job_id for j in obs.snapshot.pending]
    out["pending"] = len(queue)
    due, out["leases_due"] = timed(be.leases_due, queue, time.time())
    out["due_now"] = len(due)
    steady = queue[: -(-len(queue) * int(CYCLE_S) // (LEASE_S - RENEW_BEFORE_S))]
    ctld = int((b.spec.run / "slurmctld.pid").read_text())
    for label, ids in (("renew_steady", steady), ("renew_all", queue)):
        b.sl("sdiag", "--reset")
        c0 = cpu_s(ctld, children=False)
        refused, t = timed(be.renew_leases, ids, time.time())
        upd = b.sdiag()["rpcs"].get("REQUEST_UPDATE_JOB", {"count": 0, "total_ms": 0.0})
        out[label] = {"jobs": len(ids), "refused": len(refused), **t, "processes": -(-len(ids) // 300),
                      "slurmctld_rpcs": upd["count"], "slurmctld_rpc_ms": round(upd["total_ms"]),
                      "slurmctld_cpu_s": round(cpu_s(ctld, children=False) - c0, 2)}
    return out


def window(b: Bench, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement window: the daemon (or none) settles, then probes + sdiag."""
    log = b.spec.dir / f"daemon-{mode}.log"
    proc = None
    if mode != "none":
        proc = start_daemon(b, LEASE_S if mode == "all" else RENEW_BEFORE_S, log,
                            0.0 if mode in ("all", "json") else 60.0,
                            600 if mode == "due600" else LEASE_S, thread=mode != "inline",
                            explain_refresh_s=0.0 if mode == "explain0" else 60.0)
        deadline = time.monotonic() + args.settle_s
        while len(cycles(log)) < args.warmup_cycles:  # the first renews every lapsed lease
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"daemon ({mode}) did not settle: {log.read_text()[-2000:]}")
            time.sleep(1)
    before = len(cycles(log)) if proc else 0
    load0 = os.getloadavg()
    ctld = int((b.spec.run / "slurmctld.pid").read_text())
    b.sl("sdiag", "--reset")
    t0, ctld0, own0 = time.time(), cpu_s(ctld, children=False), cpu_s(proc.pid) if proc else 0.0
    lat, ids = probe(b, args.probe_rate, args.window_s)
    diag = b.sdiag()
    seen = cycles(log)[before:] if proc else []
    own = cpu_s(proc.pid) - own0 if proc else 0.0
    elapsed = time.time() - t0
    ctld_cpu = cpu_s(ctld, children=False) - ctld0
    load1 = os.getloadavg()
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    for lo in range(0, len(ids), 500):
        b.sl("scancel", *ids[lo:lo + 500], check=False)
    phases = sorted({k for c in seen for k in c["ms"]})
    return {"mode": mode, "window_s": round(elapsed, 1), "load_1m": [round(load0[0], 2), round(load1[0], 2)],
            "sbatch": pct(lat), "cycles": len(seen),
            "slurmctld_cpu_per_s": round(ctld_cpu / elapsed, 3),
            "daemon_cpu_s_per_cycle": round(own / max(1, len(seen)), 2),
            "pending": [c["pending"] for c in seen], "leases_renewed": [c.get("leases_renewed") for c in seen],
            "phase_ms": {k: [round(c["ms"].get(k, 0.0)) for c in seen] for k in phases},
            "sdiag": diag}


def report(r: dict[str, Any]) -> None:
    s, d = r["sbatch"], r["sdiag"]
    print(f"\n== {r['mode']}: {r['window_s']} s, load {r['load_1m']}, {r['cycles']} daemon cycles")
    print(f"  sbatch ({s['n']}): p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms")
    print(f"  slurmctld CPU {r['slurmctld_cpu_per_s']:.2f} s/s; daemon + its Slurm clients "
          f"{r['daemon_cpu_s_per_cycle']} CPU s per cycle")
    for k, v in r["phase_ms"].items():
        if v and max(v) >= 5:
            print(f"  {k:>10}: {min(v)}-{max(v)} ms (median {statistics.median(v):.0f})")
    if r["leases_renewed"]:
        print(f"  leases renewed per cycle: {r['leases_renewed']}; pending {r['pending'][:1]}")
    print(f"  slurmctld main sched: mean {d.get('main mean cycle', 0) / 1e3:.1f} ms, max "
          f"{d.get('main max cycle', 0) / 1e3:.1f} ms, {d.get('main total cycles')} cycles; backfill: "
          f"mean {d.get('backfill mean cycle', 0) / 1e3:.0f} ms, max {d.get('backfill max cycle', 0) / 1e3:.0f} ms")
    per = max(1, r["cycles"])
    for name, v in sorted(d["rpcs"].items(), key=lambda kv: -kv[1]["count"])[:6]:
        print(f"  {name}: {v['count']} ({v['count'] / per:.0f} per cycle), {v['total_ms']:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--running", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--window-s", type=float, default=80)
    ap.add_argument("--warmup-cycles", type=int, default=2)
    ap.add_argument("--settle-s", type=float, default=600,
                    help="how long the daemon may take for its warm-up cycles (26.05 at 50,000: more)")
    ap.add_argument("--probe-rate", type=float, default=4)
    ap.add_argument("--modes", default="none,due,all")
    ap.add_argument("--port-base", type=int, default=24817)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/railgang-slurm-10k"))
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--keep", action="store_true", help="leave the cluster up")
    ap.add_argument("--reuse", action="store_true",
                    help="the cluster of --dir is up and filled (an earlier --keep): windows only")
    args = ap.parse_args()
    spec = ClusterSpec(dir=args.dir, nodes=args.nodes, nodes_per_leaf=8,
                       slurmctld_port=args.port_base, slurmdbd_port=args.port_base + 2,
                       mariadb_port=args.port_base - 511, slurmd_base_port=args.port_base + 83,
                       max_job_count=4 * (args.running + args.waiting))
    cluster = DevCluster(spec)
    b = Bench(spec)
    results: dict[str, Any] = {"nodes": args.nodes, "argv": sys.argv[1:]}
    if not args.reuse:
        cluster.down()
        t = time.perf_counter()
        cluster.up(timeout_s=600)
        print(f"{args.nodes} nodes up in {time.perf_counter() - t:.0f} s", flush=True)
    try:
        if not args.reuse:
            fill_running(b, args.running, args.nodes * spec.gpus_per_node)
            results["submit"] = submit_waiting(b, args.waiting, args.workers)
            print(f"submitted: {results['submit']}", flush=True)
        print(f"running {b.count('R')}, pending {b.count('PD')}", flush=True)
        results["windows"] = []
        for mode in args.modes.split(","):
            if mode == "parts":
                results["parts"] = parts(b)
                print(json.dumps(results["parts"], indent=1), flush=True)
                continue
            results["windows"].append(window(b, mode, args))
            report(results["windows"][-1])
            if args.out:
                args.out.write_text(json.dumps(results, indent=1))
    finally:
        if not args.keep:
            # the jobs first: `down` stops the daemons, and a running job's slurmstepd and its
            # processes would outlive its slurmd; a scancel of 11,000 jobs can outlast its
            # timeout, and `down` (which kills the stepd trees itself) must run all the same
            try:
                b.sl("scancel", "--user=root", check=False, timeout=600)
                time.sleep(15)
            except subprocess.TimeoutExpired:
                print("scancel timed out: stopping the cluster with its jobs", flush=True)
            cluster.down()


if __name__ == "__main__":
    main()
