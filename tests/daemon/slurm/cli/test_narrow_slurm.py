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
from railgang.daemon.slurm.cli import backend as backend_module
from railgang.daemon.slurm.cli.narrow import (
    NarrowCache,
    NarrowRow,
    narrow_argv,
    new_mark,
    parse_narrow,
    raw_record,
)
from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import parse_squeue, squeue_job
from railgang.devcluster.cluster import DevCluster
from railgang.errors import SlurmCommandError
from tests.support.slurm import sl, tenant

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
        # Slurm's own rules (rules.py): an --exclude list and a dependency in both reads
        sbatch("ruled", "-N1", "--gres=gpu:1", "--exclude=n[01-03]", "--comment=rg:parallel=tp1",
               f"--dependency=afterok:{made['running']}")
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
        rows = _narrow(slurm_cluster)
        full, said = parse_squeue(sl(slurm_cluster, "squeue", "--json").stdout, keep_signalled=True)
        if [r.line for r in _narrow(slurm_cluster)] == [r.line for r in rows]:
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
    ruled = by_id[jobs["ruled"]]
    assert ruled.excluded_nodes == ("n01", "n02", "n03") and ruled.partition == "gpu"
    assert ruled.dependency == f"afterok:{jobs['running']}(unfulfilled)"


def _narrow(cluster: DevCluster) -> list[NarrowRow]:
    mark = new_mark()
    return parse_narrow(sl(cluster, *narrow_argv(mark)).stdout, mark)


def _readable(row: NarrowRow) -> bool:
    try:
        squeue_job(raw_record(row))
    except ParseProblem:
        return False
    return True


def test_a_fresh_daemon_reads_a_long_queue_in_batches_where_squeue_takes_ids(
        slurm_cluster: DevCluster, jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The first cycle reads the ids first (narrow): a queue longer than a batch is read as JSON
    by id, in batches, where squeue honours -j (24.11+, here in the suites' container run, and
    tests/slurm_versions), once sinfo has told the schema; 22.05's squeue ignores -j, which its
    schema says, so it reads every job at once. The same after a first cycle that timed out."""
    monkeypatch.setattr(backend_module, "FULL_READ_BATCH", 2)
    plain = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                     narrow_full_read_s=0))
    for timed_out in (False, True):
        backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                           narrow_full_read_s=60))
        if timed_out:
            backend.runner.timeout_s = 0.001
            with pytest.raises(SlurmCommandError, match="timed out"):
                backend.observe(time.time())
            backend.runner.timeout_s, backend.runner.read_timeouts = 30.0, {}
        obs = backend.observe(time.time())
        by_id = [a for r in backend.runner.history if r.argv[0] == "squeue" and r.ok
                 for a in r.argv if a.startswith("--jobs=")]
        assert backend.full_reads == 1
        if backend.json_version is None:  # 22.05
            assert by_id == []
        else:
            assert len(by_id) >= 3 and max(len(a.split(",")) for a in by_id) == 2, by_id
        assert obs.jobs == plain.observe(time.time()).jobs and jobs["running"] in obs.jobs
    # a later full read knows the schema from the read that came back: no sinfo of its own
    def sinfos() -> int:
        return sum(r.argv[0] == "sinfo" for r in backend.runner.history)
    before = sinfos()
    backend._narrow = None  # (what makes the next cycle read every job)
    backend.observe(time.time())
    assert backend.full_reads == 1 and sinfos() == before + 1  # the cycle's own node read


def test_the_backend_reads_the_json_only_when_it_must(slurm_cluster: DevCluster,
                                                      jobs: dict[str, str]) -> None:
    backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                       narrow_full_read_s=60))
    reads = []
    for _ in range(3):
        obs = backend.observe(time.time())
        reads.append(backend.full_reads)
    # 1: the first cycle reads the ids, then every job's JSON; then the narrow read stands on it
    assert reads == [1, 0, 0]
    assert jobs["leased"] in obs.leased and jobs["running"] in obs.jobs
    plain = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                     narrow_full_read_s=0))
    now = time.time()
    mine, theirs = backend.observe(now), plain.observe(now)
    assert backend.full_reads == 0 and mine.jobs == theirs.jobs
    assert (mine.snapshot.pending, mine.snapshot.running, mine.snapshot.free) == (
        theirs.snapshot.pending, theirs.snapshot.running, theirs.snapshot.free)
    # a job submitted between full reads: 22.05's -O has no --exclude field, -o %x reads it
    late = sl(slurm_cluster, "sbatch", "--parsable", "--output=/dev/null", "--account=team-a",
              "-N1", "--gres=gpu:1", "--exclude=n[02-04]", "--comment=rg:parallel=tp1",
              "--wrap=sleep 300").stdout.strip().split(";")[0]
    jobs["late"] = late  # cancelled with the others
    now = time.time()
    mine, theirs = backend.observe(now), plain.observe(now)
    assert backend.full_reads == 0
    assert mine.jobs[late].excluded_nodes == theirs.jobs[late].excluded_nodes == ("n02", "n03", "n04")
    # (its name, read only by the JSON, differs until the next full read)
    assert {j.job_id: j.needs for j in mine.snapshot.pending} == {
        j.job_id: j.needs for j in theirs.snapshot.pending}
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


def test_a_users_hostile_jobs_steer_nothing(slurm_cluster: DevCluster, jobs: dict[str, str],
                                            tmp_path: Path) -> None:
    """Issue 38 row 3, as a plain user: held jobs whose GRES types hold "|" (which shifted the
    columns of the old "|" form) and a newline with a forged line, and a running railgang job
    whose Comment holds a newline and "|". Every record the narrow read builds equals the
    JSON's, and the backend keeps to the narrow read."""
    user = tenant(slurm_cluster)
    tmp_path.chmod(0o777)
    mine = []

    def sbatch(*opts: str) -> str:
        res = sl(slurm_cluster, "sbatch", "--parsable", f"--chdir={tmp_path}",
                 "--output=/dev/null", "--account=team-a", *opts, "--wrap=sleep 300", user=user)
        mine.append(res.stdout.strip().split(";")[0])
        return mine[-1]

    try:
        for gres in ("gpu:x|n02|n03:8", "gpu:a|b|c|d|e|zz:1",
                     "gpu:x\n99999|RUNNING|None|team-a|root|normal|n01:1"):
            sbatch("--hold", f"--gres={gres}")
        # no heartbeat: the railgang job runs natively (fail-open), as the fixture's
        slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)
        running = sbatch("-N1", "--gres=gpu:1", "--nodelist=n15", "--comment=rg:parallel=tp1")
        write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
        deadline = time.monotonic() + 30
        while "RUNNING" not in sl(slurm_cluster, "squeue", "-h", "-j", running, "-o", "%T").stdout:
            assert time.monotonic() < deadline, "the railgang job did not start"
            time.sleep(0.5)
        sl(slurm_cluster, "scontrol", "update", f"jobid={running}",
           f"comment=step 1\n{running}|x|y", user=user)
        backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                           narrow_full_read_s=600))
        plain = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                         narrow_full_read_s=0))
        reads = []
        for _ in range(4):
            now = time.time()
            obs, theirs = backend.observe(now), plain.observe(now)
            reads.append(backend.full_reads)
        assert reads == [1, 0, 0, 0]
        assert obs.jobs == theirs.jobs and set(mine) | set(jobs.values()) <= set(obs.jobs)
        assert "99999" not in obs.jobs
        assert all(obs.jobs[j].batch_host == "" and obs.jobs[j].tag is None for j in mine[:3])
        assert obs.jobs[running].tag is not None and obs.jobs[running].active
        rows = {r.job_id: r for r in _narrow(slurm_cluster)}
        # 22.05 prints gres:gpu:..., 24.11 gres/gpu:...: either way read whole, '|' and newline kept
        tres = {j: rows[j].fields[-1].replace("gres/", "gres:", 1) for j in (mine[0], mine[2])}
        assert tres[mine[0]] == "gres:gpu:x|n02|n03:8"
        assert tres[mine[2]].startswith("gres:gpu:x\n99999|RUNNING|")
    finally:
        if mine:
            sl(slurm_cluster, "scancel", *mine, check=False)
