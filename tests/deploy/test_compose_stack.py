"""The compose stack started for real (issue 17 item 3): docker-compose.yml with the host-network
override (deploy/docker-compose.host.yml) on a Docker engine, once on Debian bookworm (Slurm
22.05) and once on trixie (Slurm 24.11). Each run: the base image (bookworm: debootstrap + `docker
import`, scripts/debian_base.sh; trixie: railgang/slurm:trixie where scripts/slurm_image.sh made
it), `compose build` (host network; one database image serves both), `compose up --wait` (every
health check green), the daemon running as the non-root Slurm Administrator `railgang`, two
hinted 2-node gangs submitted in the slurmctld container (`--rg-parallel`, `--comment=rg:`), placed
by the daemon (its Starts in its log, each gang on the two nodes of one leaf, within the lease),
billed by the API (GET /v1/chargeback, once the daemon has ingested sacct), today's report so far
with the job in it written by the daemon into the railgang-reports volume (no command typed), and
`compose down -v`. Any failure prints every service's log.

Run: ``.venv/bin/pytest tests/deploy/test_compose_stack.py -m compose`` as root with a Docker
engine (dockerd --iptables=false --bridge=none; scripts/install.sh starts one when
RAILGANG_TEST_REQUIRE lists ``compose``, as CI does). Without root or an engine the tests skip,
or fail when ``compose`` is required. Ports: RAILGANG_TEST_PORT_BASE + 300 … + 314, loopback.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRED
from tests.deploy.compose_stack import ComposeStack, StackError, json_lines, wait_for
from tests.deploy.conftest import ROOT
from tests.support.ports import PORT_BASE

pytestmark = [pytest.mark.compose, pytest.mark.slow]
SUITES = {"bookworm": "22.05", "trixie": "24.11"}
BASE = PORT_BASE + 300
PORTS = {"RAILGANG_SLURMCTLD_PORT": BASE, "RAILGANG_SLURMDBD_PORT": BASE + 2,
         "RAILGANG_MARIADB_PORT": BASE + 3, "RAILGANG_POSTGRES_PORT": BASE + 4,
         "RAILGANG_API_PORT": BASE + 5, "RAILGANG_METRICS_PORT": BASE + 6,
         "RAILGANG_SLURMD_BASE_PORT": BASE + 10}  # n01..n04 on BASE + 11 … + 14
LEAVES = ({"n01", "n02"}, {"n03", "n04"})  # deploy/railgang.toml: nodes_per_leaf = 2
HINTS = ("--rg-parallel=tp8,dp2", "--comment=rg:parallel=tp8,dp2")  # SPANK option; Comment
TRIXIE_TEST_IMAGE = "railgang/slurm:trixie"  # scripts/slurm_image.sh trixie (marker slurm2411)


def _unavailable(why: str) -> None:
    if "compose" in REQUIRED:
        pytest.fail(f"compose is required (RAILGANG_TEST_REQUIRE) but unavailable: {why}")
    pytest.skip(f"compose unavailable: {why}")


def _script(name: str, *args: str, timeout: float) -> str:
    res = subprocess.run(["bash", str(ROOT / "scripts" / name), *args], capture_output=True,
                         text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        _unavailable(f"scripts/{name} {' '.join(args)}: {res.stderr.strip()[-800:]}")
    return res.stdout.strip()


@pytest.fixture(scope="module")
def compose_bin() -> str:
    if os.geteuid() != 0:
        _unavailable("needs root (a Docker engine and debootstrap)")
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False).returncode:
        _unavailable("no Docker engine (dockerd --iptables=false --bridge=none; scripts/install.sh)")
    return _script("compose_v2.sh", timeout=300).splitlines()[-1]


def _image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True, timeout=60,
                          check=False).returncode == 0


def _base_image(suite: str) -> str:
    """What the suite's images start from. Trixie: railgang/slurm:trixie where it exists (CI builds
    it for slurm2411: Debian's Slurm 24.11, MariaDB and railgang's Python dependencies already in,
    so the stack's build is mostly cache), else the bare debootstrap base; bookworm: the bare base."""
    if suite == "trixie" and _image_exists(TRIXIE_TEST_IMAGE):
        return TRIXIE_TEST_IMAGE
    _script("debian_base.sh", suite, timeout=600)
    return f"railgang/debian:{suite}"


@pytest.fixture(params=list(SUITES), ids=[f"slurm{v}" for v in SUITES.values()])
def stack(request: pytest.FixtureRequest, compose_bin: str, tmp_path: Path) -> Iterator[ComposeStack]:
    suite: str = request.param
    t0 = time.monotonic()
    base = _base_image(suite)
    env = {"RAILGANG_API__SECRET_KEY": secrets.token_hex(32),
           "POSTGRES_PASSWORD": secrets.token_hex(16), "SLURM_DB_PASSWORD": secrets.token_hex(16),
           "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(16),
           "RAILGANG_BASE_IMAGE": base, "RAILGANG_IMAGE": f"railgang:compose-{suite}",
           # one database image for both suites (MariaDB and PostgreSQL do not care about Slurm)
           "RAILGANG_DB_BASE_IMAGE": _base_image("trixie"), "RAILGANG_DB_IMAGE": "railgang-db:compose",
           **{k: str(v) for k, v in PORTS.items()}}
    box = ComposeStack(compose_bin, f"railgang-test-{suite}-{PORT_BASE}", env, tmp_path / "env")
    box.timings["base image"] = round(time.monotonic() - t0, 1)
    box.down()  # leftovers of an interrupted earlier run of this project
    try:
        yield box
    finally:
        box.down()
        print(f"compose stack {suite} on {base}: {json.dumps(box.timings)}")


def test_stack_places_and_bills_a_hinted_gang(stack: ComposeStack) -> None:
    t0 = time.monotonic()
    try:
        seen = _drive(stack)
    except (StackError, AssertionError, KeyError, ValueError) as exc:
        pytest.fail(f"{exc}\n{stack.logs()}", pytrace=False)
    stack.timings["total"] = round(time.monotonic() - t0 + stack.timings["base image"], 1)
    assert seen["cost"] > 0 and seen["report"]["totals"]["allocated_gpu_h"] > 0


def _drive(stack: ComposeStack) -> dict[str, Any]:
    """Build, up, submit, place, bill; the values the test checks, or StackError/AssertionError."""
    stack.timed("build", lambda: stack.run("build", timeout=900))
    stack.timed("up --wait", lambda: stack.run("up", "-d", "--wait", "--wait-timeout", "240",
                                               timeout=300))
    user = stack.exec("railgang-daemon", "ps", "-o", "user=,args=", "-C", "railgang")
    assert user.split()[:1] == ["railgang"], f"the daemon does not run as railgang: {user!r}"
    level = stack.exec("slurmctld", "sacctmgr", "-n", "-P", "show", "user", "railgang",
                       "format=adminlevel")
    assert level.strip() == "Administrator", level
    # two gangs, one per hint syntax: together they fill both leaves. Each waits under a 120 s
    # lease (slurm.lease_s) and starts within 90 s: only the daemon can have started it
    t_sub = time.monotonic()
    jobs = [_sbatch(stack, hint) for hint in HINTS]
    recs = {job: wait_for(f"job {job} started", lambda job=job: _started(stack, job), timeout=90)
            for job in jobs}
    stack.timings["jobs placed"] = round(time.monotonic() - t_sub, 1)
    placed = []
    for job, rec in recs.items():
        assert rec["AdminComment"].startswith("railgang:tp=8,pp=1,dp=2"), rec
        nodes = set(stack.exec("slurmctld", "scontrol", "show", "hostnames", rec["NodeList"]).split())
        assert nodes in LEAVES, f"job {job} on {nodes}, not on one leaf"
        placed.append(nodes)
    assert placed[0] != placed[1], f"both gangs on {placed[0]}"
    logged = json_lines(stack.run("logs", "--no-color", "railgang-daemon").stdout)
    starts = sum((r.get("actions") or {}).get("Start", 0) for r in logged)
    assert starts >= len(jobs), f"the daemon logged {starts} Start(s) for jobs {jobs}"
    for job in jobs:
        wait_for(f"job {job} completed",
                 lambda job=job: (_started(stack, job) or {}).get("JobState") == "COMPLETED" or None,
                 timeout=60)
    cost = _bill(stack, jobs[0])
    t_rep = time.monotonic()
    report = _todays_report(stack, jobs[0])
    stack.timings["today's report"] = round(time.monotonic() - t_rep, 1)
    return {"nodes": placed, "cost": cost, "report": report}


def _sbatch(stack: ComposeStack, hint: str) -> str:
    out = stack.exec("slurmctld", "sbatch", "--parsable", "--account=team-a", "-N2",
                     "--gres=gpu:8", hint, "--time=5", "--wrap=srun hostname; sleep 2")
    job = out.strip().split(";")[0]
    assert job.isdigit(), out
    return job


def _started(stack: ComposeStack, job: str) -> dict[str, str] | None:
    line = stack.exec("slurmctld", "scontrol", "show", "job", "-o", job)
    rec = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return rec if rec.get("JobState") in ("RUNNING", "COMPLETING", "COMPLETED") else None


def _bill(stack: ComposeStack, job: str) -> float:
    """A GPU-hour rate, then the API's chargeback for team-a (polled: slurmdbd records the end
    a moment late, and the daemon ingests sacct on its own schedule, issue 36 item 1); its
    cost. The report directory is the daemon's to write."""
    rg = ("railgang-daemon", "railgang")
    stack.exec(*rg, "quota", "rate", "gpu", "reserved", "2.50", user="railgang")
    stack.exec("railgang-daemon", "test", "-w", "/var/lib/railgang/reports", user="railgang")
    token = json.loads(stack.exec(*rg, "token", "create", f"compose-test-{job}", "--role",
                                  "admin", "--json", user="railgang"))["token"]
    url = f"http://127.0.0.1:{PORTS['RAILGANG_API_PORT']}/v1/chargeback?group_by=team"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    last: list[Any] = []

    def billed() -> float | None:  # no `ledger ingest` here: the daemon ingests every 15 s
        with urllib.request.urlopen(req, timeout=30) as resp:  # loopback: our API
            body = json.loads(resp.read())
        last[:] = [body]
        row = next((r for r in body["items"] if r.get("team") == "team-a"), None)
        return float(row["cost"]) if row and row.get("gpu_seconds") and row.get("cost") else None

    try:
        return wait_for(f"job {job} billed to team-a", billed, timeout=90, every=3)
    except StackError as exc:
        raise StackError(f"{exc}; last chargeback answer: {last}") from None


def _todays_report(stack: ComposeStack, job: str) -> dict[str, Any]:
    """Today's report so far in the railgang-reports volume, with the billed job's GPU-hours:
    the daemon rebuilds it every report.today_every_s (20 s in deploy/railgang.toml) from the
    ledger it fills itself; nobody types `railgang report` or `ledger ingest` (issue 36 item 1).
    """
    folder = f"/var/lib/railgang/reports/{datetime.now(UTC).date().isoformat()}"
    last: list[Any] = []

    def written() -> dict[str, Any] | None:
        rep = json.loads(stack.exec("railgang-daemon", "cat", f"{folder}/report.json",
                                    timeout=30))  # written whole (tmp, then rename)
        last[:] = [{k: rep.get(k) for k in ("date", "partial", "until", "top_jobs")}]
        row = next((r for r in rep["top_jobs"] if r["job"] == job), None)
        return rep if row and row["gpu_h"] > 0 else None

    try:
        rep = wait_for(f"today's report with job {job}", written, timeout=60, every=3)
    except StackError as exc:
        raise StackError(f"{exc}; last report.json: {last}") from None
    assert rep["partial"] is True, "today's report is not marked partial"
    html = stack.exec("railgang-daemon", "cat", f"{folder}/report.html")
    assert "so far, until" in html and f">{job}<" in html, "report.html lacks today's job"
    return rep
