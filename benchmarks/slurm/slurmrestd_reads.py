"""One read of every job, three ways, on a filled cluster (issue 17 item 5): ``squeue --json``
(what the CLI backend read every cycle), the narrow ``squeue -O`` read of 22.05 between full
reads (slurm/cli/narrow.py), and slurmrestd's ``GET /slurm/VERSION/jobs`` (what a REST backend
would read): wall time, CPU of the client process or of slurmrestd, slurmctld's CPU, bytes, and
the records each gives (the REST document must read as the CLI's does).

Run as root against a cluster benchmarks/slurm/slurm_10k.py left up (--keep), with Debian's
``slurmrestd`` installed (apt-get install slurmrestd):

    .venv/bin/python -m benchmarks.slurm.slurmrestd_reads --dir /tmp/railgang-slurm-10k [--reps 5]

slurmrestd runs as the daemon's user ``railgang`` (it refuses root) on a unix socket with
``rest_auth/local`` (the caller is who the socket says: no token). A deployment would listen on a
loopback port with JWT (``AuthAltTypes=auth/jwt``); the authentication does not change what a
read costs. The cluster's slurmctld is not restarted (the devcluster restarts it clean).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pwd
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.slurm.slurm_10k import cpu_s
from railgang.daemon.slurm.cli.narrow import NarrowCache, narrow_argv, new_mark, parse_narrow
from railgang.daemon.slurm.cli.records import parse_squeue
from railgang.devcluster.cluster import DAEMON_USER, slurm_env
from railgang.devcluster.layout import ClusterSpec


class UnixHTTP(http.client.HTTPConnection):
    """HTTP over slurmrestd's unix socket (the standard library; no HTTP client in the images)."""

    def __init__(self, path: str, uid: int, gid: int) -> None:
        super().__init__("slurmrestd", timeout=300)
        self.path, self.uid, self.gid = path, uid, gid

    def connect(self) -> None:
        # rest_auth/local: slurmrestd takes the caller from the socket's peer credentials, which
        # are fixed at connect(): connect as the daemon's user, not root
        os.setegid(self.gid)
        os.seteuid(self.uid)
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(self.path)
        finally:
            os.seteuid(0)
            os.setegid(0)


def get(sock: Path, pw: pwd.struct_passwd, url: str) -> bytes:
    conn = UnixHTTP(str(sock), pw.pw_uid, pw.pw_gid)
    try:
        conn.request("GET", url)
        reply = conn.getresponse()
        body = reply.read()
        if reply.status != 200:
            raise SystemExit(f"slurmrestd answered {reply.status}: {body[:300]!r}")
        return body
    finally:
        conn.close()


def child_cpu() -> float:
    r = os.times()
    return r.children_user + r.children_system


def timed_run(argv: list[str], env: dict[str, str]) -> tuple[str, float, float]:
    c0, t0 = child_cpu(), time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    return out, time.perf_counter() - t0, child_cpu() - c0


def start_restd(env: dict[str, str], sock: Path, version: str) -> subprocess.Popen[bytes]:
    """22.05 names its OpenAPI plugin by version (openapi/v0.0.38); 23.11+ serve the jobs from
    openapi/slurmctld with a data_parser (24.11 refuses ``-s openapi/v0.0.42``: no such plugin)."""
    pw = pwd.getpwnam(DAEMON_USER)
    sock.parent.chmod(0o777)
    plugins = (["-s", f"openapi/{version}"] if version == "v0.0.38"
               else ["-s", "openapi/slurmctld", "-d", f"data_parser/{version}"])
    return subprocess.Popen(
        ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
         "/usr/sbin/slurmrestd", "-a", "rest_auth/local", *plugins, f"unix:{sock}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/railgang-slurm-10k"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--version", default="v0.0.38", help="the REST API version (22.05: v0.0.38)")
    ap.add_argument("--no-narrow", action="store_true",
                    help="skip the narrow read (the backend uses it on 22.05 only)")
    args = ap.parse_args()
    spec = ClusterSpec(dir=args.dir)
    env = {**os.environ, **slurm_env(spec)}
    ctld = int((spec.run / "slurmctld.pid").read_text())
    sock = Path(tempfile.mkdtemp(prefix="restd-")) / "slurmrestd.sock"
    restd = start_restd(env, sock, args.version)
    pw = pwd.getpwnam(DAEMON_USER)
    res: dict[str, list[dict[str, float]]] = {"json": [], "narrow": [], "rest": []}
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if restd.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"slurmrestd did not start: {restd.stderr.read().decode()[-800:]}"
                                 if restd.stderr else "slurmrestd did not start")
            time.sleep(0.2)
        text, _, _ = timed_run(["squeue", "--json"], env)
        full, _ = parse_squeue(text, keep_signalled=True)
        cache = None
        if not args.no_narrow:
            mark = new_mark()
            rows = parse_narrow(subprocess.run(narrow_argv(mark), env=env, capture_output=True,
                                               text=True, check=True).stdout, mark)
            cache = NarrowCache.after_full_read(time.time(), rows, full)
        for _ in range(args.reps):
            k0 = cpu_s(ctld, children=False)
            text, wall, cpu = timed_run(["squeue", "--json"], env)
            p0 = time.process_time()
            jobs, _ = parse_squeue(text, keep_signalled=True)
            res["json"].append({"wall_s": wall, "client_cpu_s": cpu, "parse_cpu_s": time.process_time() - p0,
                                "slurmctld_cpu_s": cpu_s(ctld, children=False) - k0,
                                "bytes": len(text.encode()), "jobs": len(jobs)})
            k0 = cpu_s(ctld, children=False)
            if cache is None:
                res.pop("narrow", None)
            else:
                mark = new_mark()
                text, wall, cpu = timed_run(narrow_argv(mark), env)
                p0 = time.process_time()
                jobs, _ = cache.read(parse_narrow(text, mark))
                res["narrow"].append({"wall_s": wall, "client_cpu_s": cpu,
                                      "parse_cpu_s": time.process_time() - p0,
                                      "slurmctld_cpu_s": cpu_s(ctld, children=False) - k0,
                                      "bytes": len(text.encode()), "jobs": len(jobs)})
            k0, r0, t0 = cpu_s(ctld, children=False), cpu_s(restd.pid, children=False), time.perf_counter()
            body = get(sock, pw, f"/slurm/{args.version}/jobs")
            wall = time.perf_counter() - t0
            p0 = time.process_time()
            jobs, _ = parse_squeue(body.decode("utf-8", "replace"), keep_signalled=True)
            res["rest"].append({"wall_s": wall, "client_cpu_s": cpu_s(restd.pid, children=False) - r0,
                                "parse_cpu_s": time.process_time() - p0,
                                "slurmctld_cpu_s": cpu_s(ctld, children=False) - k0,
                                "bytes": len(body), "jobs": len(jobs)})
        same = {j.job_id for j in jobs} == {j.job_id for j in full}
    finally:
        restd.terminate()
        restd.wait(30)
    out = {"load_1m": os.getloadavg()[0], "rest_jobs_match_cli": same,
           **{k: {f: [round(x[f], 3) for x in v] for f in v[0]} for k, v in res.items()}}
    print(json.dumps(out, indent=1))
    for k, v in res.items():
        print(f"{k:>7}: wall {statistics.median(x['wall_s'] for x in v):.2f} s, "
              f"client/server CPU {statistics.median(x['client_cpu_s'] for x in v):.2f} s, "
              f"parse {statistics.median(x['parse_cpu_s'] for x in v):.2f} s, slurmctld "
              f"{statistics.median(x['slurmctld_cpu_s'] for x in v):.2f} s, "
              f"{v[0]['bytes'] / 1e6:.1f} MB, {v[0]['jobs']} jobs")


if __name__ == "__main__":
    main()
