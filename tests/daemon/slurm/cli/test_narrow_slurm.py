"""The narrow squeue read against the real Slurm cluster (22.05 here; 24.11 and 26.05 through
scripts/slurm_container_tests.sh): every record it builds equals the
one ``squeue --json`` gives (pending, held, running on GPUs, a time limit, a pending array), and
the backend reads the JSON only when a job that is not pending is new or changed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat
from railgang.daemon.slurm.cli.narrow import (
    NarrowCache,
    NarrowRow,
    narrow_argv,
    parse_narrow,
    raw_record,
)
from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import parse_squeue, squeue_job
from railgang.devcluster.cluster import DevCluster
from tests.support.slurm import sl

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture
def jobs(slurm_cluster: DevCluster, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A leased hinted gang, a held job, a running GPU job with a time limit, a pending array."""
    made: dict[str, str] = {}

    def sbatch(key: str, *opts: str) -> None:
        res = sl(slurm_cluster, "sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
                 "--account=team-a", *opts, "--wrap=sleep 300")
        made[key] = res.stdout.strip().split(";")[0]

    try:
        # no heartbeat yet: the hinted job runs natively (fail-open) and keeps its tag
        slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)
        sbatch("running", "-N1", "--gres=gpu:3", "--time=1-02:03:00", "--nodelist=n16",
               "--comment=rg:parallel=tp1,dp3")
        write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
        sbatch("leased", "-N2", "--gres=gpu:8", "--comment=rg:parallel=tp8,dp2;class=1",
               "--job-name=a|name\nwith a newline")
        sbatch("held", "-N1", "--gres=gpu:1", "--hold", "--comment=rg:parallel=tp1")
        sbatch("array", "-N1", "--gres=gpu:8", "--array=0-3", "--begin=now+1hour")
        deadline = time.monotonic() + 30
        while "RUNNING" not in sl(slurm_cluster, "squeue", "-h", "-j", made["running"], "-o",
                                  "%T").stdout:
            assert time.monotonic() < deadline, "the GPU job did not start"
            time.sleep(0.5)
        yield made
    finally:
        slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)
        if made:
            sl(slurm_cluster, "scancel", *made.values(), check=False)


def test_every_narrow_record_equals_the_json_record(slurm_cluster: DevCluster,
                                                    jobs: dict[str, str]) -> None:
    for _ in range(5):  # other tests' jobs may end meanwhile: a read with no change in between
        rows = parse_narrow(sl(slurm_cluster, *narrow_argv()).stdout)
        full, said = parse_squeue(sl(slurm_cluster, "squeue", "--json").stdout, keep_signalled=True)
        if [r.line for r in parse_narrow(sl(slurm_cluster, *narrow_argv()).stdout)] == [
                r.line for r in rows]:
            break
    # a value the plain form cannot carry sends the backend to the JSON; none is expected (the
    # resize time, which 22.05 prints as INVALID once a job was resized, is not read)
    readable = [r for r in rows if _readable(r)]
    assert readable == rows, [r.line for r in rows if r not in readable]
    cache = NarrowCache.after_full_read(0.0, readable, full)
    assert cache.stale(readable) == ""
    narrow, _ = cache.read(readable)
    # read again from the lines alone (nothing kept from the last read but the carried fields)
    cache.lines = {}
    again, problems = cache.read(readable)
    assert set(problems) <= set(said)  # nothing the JSON read could read is skipped
    ids = {r.job_id for r in readable}
    by_id = {j.job_id: j for j in full if j.job_id in ids}
    assert set(jobs.values()) <= set(by_id)
    for got in (narrow, again):
        assert {j.job_id: j for j in got} == by_id
    running = by_id[jobs["running"]]
    assert running.allocation[0][0] == "n16" and len(running.allocation[0][1]) == 3
    assert running.time_limit_s == (26 * 60 + 3) * 60
    assert by_id[jobs["leased"]].name == "a|name\nwith a newline"  # carried from the JSON


def _readable(row: NarrowRow) -> bool:
    try:
        squeue_job(raw_record(row))
    except ParseProblem:
        return False
    return True


def test_the_backend_reads_the_json_only_when_it_must(slurm_cluster: DevCluster,
                                                      jobs: dict[str, str]) -> None:
    backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                       narrow_full_read_s=60))
    reads = []
    for _ in range(3):
        obs = backend.observe(time.time())
        reads.append(backend.full_reads)
    # 1: the schema is not known yet; 2: the first narrow read has no full read to stand on
    assert reads == [1, 1, 0]
    assert jobs["leased"] in obs.leased and jobs["running"] in obs.jobs
    plain = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                     narrow_full_read_s=0))
    now = time.time()
    mine, theirs = backend.observe(now), plain.observe(now)
    assert backend.full_reads == 0 and mine.jobs == theirs.jobs
    assert (mine.snapshot.pending, mine.snapshot.running, mine.snapshot.free) == (
        theirs.snapshot.pending, theirs.snapshot.running, theirs.snapshot.free)
    # a job starts: the next observe reads the JSON for its GPU indices
    sl(slurm_cluster, "scontrol", "release", jobs["held"])
    sl(slurm_cluster, "scontrol", "update", f"jobid={jobs['held']}", "StartTime=now")  # its lease
    deadline = time.monotonic() + 30
    while "RUNNING" not in sl(slurm_cluster, "squeue", "-h", "-j", jobs["held"], "-o", "%T").stdout:
        assert time.monotonic() < deadline, "the released job did not start"
        time.sleep(0.5)
    obs = backend.observe(time.time())
    # 22.05 reads every job again; 24.11+ (a pinned schema: squeue honours -j) only that one
    by_id = backend.json_version is not None
    assert (backend.full_reads, backend.changed_reads) == ((0, 1) if by_id else (1, 0))
    assert obs.jobs[jobs["held"]].allocation[0][1] != ()
    backend.observe(time.time())
    assert (backend.full_reads, backend.changed_reads) == (0, 0)
    # a job ends of a signal: read from its line, no JSON, kept or left out as the JSON read
    # does (which ends it keeps: test_narrow.py)
    sl(slurm_cluster, "scancel", "--signal=USR1", "--full", jobs["running"])
    deadline = time.monotonic() + 30
    while "RUNNING" in sl(slurm_cluster, "squeue", "-h", "-t", "all", "-j", jobs["running"],
                          "-o", "%T").stdout:
        assert time.monotonic() < deadline, "the cancelled job did not end"
        time.sleep(0.5)
    now = time.time()
    mine, theirs = backend.observe(now), plain.observe(now)
    assert backend.full_reads == 0 and mine.jobs == theirs.jobs
    assert jobs["running"] not in mine.jobs or not mine.jobs[jobs["running"]].active
