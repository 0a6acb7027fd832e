"""Attained service from Slurm (issue 33 item 1, ``slurm/cli/attained.py``): the current run from
squeue, earlier runs from ``sacct --duplicates``, cached per job id and (restarts, resize time);
hostile sacct output costs one record with a warning naming its job; the user's Comment never
counts (docs/security.md, "Attained service")."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli.attained import (
    CHAIN_SLACK_S,
    MAX_SACCT_BYTES,
    AttainedService,
    Interval,
    earlier_gpu_s,
    parse_intervals,
)
from railgang.daemon.slurm.cli.backend import CliBackend
from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import SqueueJob, parse_squeue, topology_from_show
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.daemon.slurm.cli.snapshot import JobMemo, build_observation
from railgang.errors import SlurmCommandError
from tests.daemon.slurm.cli.capture import DATA, NOW

SQUEUE = json.loads((DATA / "squeue_mixed.json").read_text())
RUNNING = next(j for j in SQUEUE["jobs"] if j["job_id"] == 9)  # railgang, 16 GPUs on n[01-02]
PENDING = next(j for j in SQUEUE["jobs"] if j["job_id"] == 11)  # a leased railgang job
META_2205 = {"plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"}}


def rec(job_id: int, state: str, start: Any, end: Any, submission: Any, gpus: Any = 8,
        comment: str = "") -> dict[str, Any]:
    """One 22.05 ``sacct --json`` record, as a requeue leaves it (the shapes of a real capture)."""
    return {"job_id": job_id, "state": {"current": state, "reason": "None"},
            "time": {"elapsed": 0, "eligible": submission, "end": end, "start": start,
                     "submission": submission, "suspended": 0, "limit": None},
            "tres": {"allocated": [{"type": "cpu", "name": None, "id": 1, "count": 2},
                                   {"type": "gres", "name": "gpu", "id": 1001, "count": gpus}]},
            "comment": {"job": comment}, "cluster": "rg"}


def sacct(*records: Any) -> str:
    return json.dumps({"meta": META_2205, "errors": [], "jobs": list(records)})


def squeue_job(**fields: Any) -> SqueueJob:
    jobs, notes = parse_squeue(json.dumps({**SQUEUE, "jobs": [{**RUNNING, **fields}]}))
    assert not notes, notes
    return jobs[0]


# job 9 ran 100 s on 8 GPUs, was requeued at NOW-300 and has run 16 GPUs since NOW-200
REQUEUED = rec(9, "REQUEUED", NOW - 400, NOW - 300, NOW - 410)
CURRENT = rec(9, "RUNNING", NOW - 200, 0, NOW - 300, gpus=16)


def test_current_run_plus_earlier_runs() -> None:
    runs: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> str:
        runs.append(argv)
        return sacct(REQUEUED, CURRENT)

    svc = AttainedService(run)
    job = squeue_job(restart_cnt=1, start_time=NOW - 200, submit_time=NOW - 300)
    attained, notes = svc.attained([job], NOW)
    assert attained == {"9": 8 * 100 + 16 * 200} and not notes
    assert runs == [["sacct", "--json", "--duplicates", "--allusers", "--jobs=9"]]


def test_a_job_never_requeued_or_resized_costs_no_sacct_call() -> None:
    svc = AttainedService(lambda argv: pytest.fail("sacct asked"))
    attained, _ = svc.attained([squeue_job(start_time=NOW - 10)], NOW)
    assert attained == {"9": 16 * 10}


def test_history_is_cached_per_restart_count_and_read_again_after_a_requeue() -> None:
    answers = [sacct(REQUEUED, CURRENT),
               sacct(REQUEUED, {**CURRENT, "state": {"current": "REQUEUED"},
                                "time": {**CURRENT["time"], "end": NOW - 50}})]
    svc = AttainedService(lambda argv: answers.pop(0))
    job = squeue_job(restart_cnt=1, start_time=NOW - 200, submit_time=NOW - 300)
    for t in (NOW, NOW + 10, NOW + 20):  # one read, then the cache
        svc.attained([job], t)
    assert svc.calls == 1
    waiting = squeue_job(restart_cnt=2, job_state="PENDING", state_reason="BeginTime",
                         submit_time=NOW - 50, gres_detail=[], job_resources=None)
    attained, notes = svc.attained([waiting], NOW + 30)
    assert svc.calls == 2 and not notes
    assert attained == {"9": 8 * 100 + 16 * 150}  # both ended runs, nothing current


def test_a_cached_service_gives_what_a_fresh_one_gives() -> None:
    """STYLE 20: the per-job memory is only speed; a service that read sacct cycles ago and a
    fresh one (a restarted daemon) give the same attained service."""
    answer = sacct(REQUEUED, CURRENT, rec(7, "REQUEUED", NOW - 900, NOW - 850, NOW - 901, gpus=2),
                   rec(7, "RUNNING", NOW - 840, 0, NOW - 850, gpus=2))
    jobs = [squeue_job(restart_cnt=1, start_time=NOW - 200, submit_time=NOW - 300),
            squeue_job(job_id=7, restart_cnt=1, start_time=NOW - 840, submit_time=NOW - 850)]
    cached = AttainedService(lambda argv: answer)
    for t in (NOW - 100, NOW - 50, NOW):
        kept, _ = cached.attained(jobs, t)
    fresh, _ = AttainedService(lambda argv: answer).attained(jobs, NOW)
    assert kept == fresh == {"9": 800 + 16 * 200, "7": 2 * 50 + 16 * 840}
    assert cached.calls == 1


def test_an_unfinished_earlier_run_ends_at_the_requeue_and_is_asked_again() -> None:
    """sacct may lag a requeue: the earlier run still shows open. It counts as ended when squeue
    says the job was submitted again (a requeue resets the submit time), and is asked again."""
    answers = [sacct({**REQUEUED, "time": {**REQUEUED["time"], "end": 0}}, CURRENT),
               sacct(REQUEUED, CURRENT)]
    svc = AttainedService(lambda argv: answers.pop(0))
    job = squeue_job(restart_cnt=1, start_time=NOW - 200, submit_time=NOW - 300)
    first, notes = svc.attained([job], NOW)
    assert first == {"9": 8 * 100 + 16 * 200} and any("job 9" in n for n in notes)
    second, _ = svc.attained([job], NOW)
    assert second == {"9": 8 * 100 + 16 * 200} and svc.calls == 2


def test_a_reused_job_id_is_another_jobs_history() -> None:
    old = rec(9, "COMPLETED", NOW - 90000, NOW - 80000, NOW - 90001, gpus=64)
    total, complete = earlier_gpu_s(parse_intervals(sacct(old, REQUEUED, CURRENT), NOW)[0]["9"],
                                    NOW - 300, active=True)
    assert (total, complete) == (800.0, True)
    # within the slack it is the same job's (a requeue stamps the next submit at the old end)
    near = Interval("9", NOW - 900, NOW - 800, NOW - 410 - CHAIN_SLACK_S + 1, 1)
    assert earlier_gpu_s([near, *parse_intervals(sacct(REQUEUED), NOW)[0]["9"]],
                         NOW - 300, active=False)[0] == 800 + near.end - near.start


def test_a_resized_job_on_24_11_counts_its_earlier_size() -> None:
    """The recorded 24.11 capture: job 2 held 16 GPUs for 1 s, then shrank to 8 (RESIZING)."""
    found, notes = parse_intervals((DATA / "sacct_24.11.json").read_text(), 1796142700)
    assert not notes
    total, complete = earlier_gpu_s(found["2"], 1796142593, active=True)
    assert (total, complete) == (16.0, True)


def test_sacct_failure_keeps_the_last_known_sum_and_waits_before_asking_again() -> None:
    calls: list[int] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(1)
        if len(calls) == 1:
            return sacct(REQUEUED, CURRENT)
        raise SlurmCommandError(list(argv), 1, "slurmdbd unreachable")

    svc = AttainedService(run)
    job = squeue_job(restart_cnt=1, start_time=NOW - 200, submit_time=NOW - 300)
    svc.attained([job], NOW)
    again = squeue_job(restart_cnt=2, start_time=NOW - 10, submit_time=NOW - 20)
    attained, notes = svc.attained([again], NOW)
    assert attained == {"9": 800 + 16 * 10}  # the last sum Slurm gave: a lower bound
    assert any("sacct failed" in n for n in notes)
    svc.attained([again], NOW + 100)
    assert len(calls) == 2  # not every cycle


HOSTILE = {
    "start-nan": rec(9, "REQUEUED", math.nan, NOW - 300, NOW - 410),
    "end-infinity": rec(9, "REQUEUED", NOW - 400, math.inf, NOW - 410),
    "start-negative": rec(9, "REQUEUED", -5, NOW - 300, NOW - 410),
    "end-future": rec(9, "REQUEUED", NOW - 400, NOW + 86400 * 365, NOW - 410),
    "start-text": rec(9, "REQUEUED", "yesterday", NOW - 300, NOW - 410),
    "gpus-bool": rec(9, "REQUEUED", NOW - 400, NOW - 300, NOW - 410, gpus=True),
    "gpus-huge": rec(9, "REQUEUED", NOW - 400, NOW - 300, NOW - 410, gpus=10**30),
    "gpus-negative": rec(9, "REQUEUED", NOW - 400, NOW - 300, NOW - 410, gpus=-8),
    "ends-before-start": rec(9, "REQUEUED", NOW - 300, NOW - 400, NOW - 410),
    "time-list": {**REQUEUED, "time": [1]},
    "job-id-list": {**REQUEUED, "job_id": [9]},
}


@pytest.mark.parametrize("bad", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_record_is_skipped_with_a_warning_naming_its_job(bad: dict[str, Any]) -> None:
    found, notes = parse_intervals(sacct(bad, rec(7, "REQUEUED", NOW - 400, NOW - 300, NOW - 410)), NOW)
    assert list(found) == ["7"] and len(notes) == 1 and "attained service" in notes[0]
    assert notes[0].startswith("job 9") or ("job_id" in str(bad) and notes[0].startswith("job "))


@pytest.mark.parametrize("text", ["", "not json", "[]", json.dumps({"meta": META_2205}),
                                  json.dumps({"jobs": []}), " " * (MAX_SACCT_BYTES + 1)],
                         ids=["empty", "text", "list", "no-jobs", "no-meta", "huge"])
def test_an_unreadable_document_is_one_parse_problem(text: str) -> None:
    with pytest.raises(ParseProblem):
        parse_intervals(text, NOW)


def test_the_comment_never_counts() -> None:
    """Attained service comes from Slurm, never from the user: a Comment claiming progress or
    service (sacct's comment.job, squeue's comment) changes nothing."""
    lie = f"rg-progress:step=99999,sps=1e9,t={NOW:.0f},total=100000,step_s=0.1"
    svc = AttainedService(lambda argv: sacct({**REQUEUED, "comment": {"job": lie}}, CURRENT))
    job = squeue_job(restart_cnt=1, start_time=NOW - 200, submit_time=NOW - 300, comment=lie)
    assert svc.attained([job], NOW)[0] == {"9": 8 * 100 + 16 * 200}


def test_a_future_start_counts_nothing_for_the_run_and_names_the_job() -> None:
    svc = AttainedService(lambda argv: pytest.fail("sacct asked"))
    attained, notes = svc.attained([squeue_job(start_time=NOW + 86400)], NOW)
    assert attained == {"9": 0.0} and notes and notes[0].startswith("job 9")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.sampled_from(["job_id", "time", "start", "end", "submission", "tres", "allocated",
                         "type", "name", "count", "state", "current", "set", "number"]),
        kids, max_size=5), max_leaves=20), max_size=6))
def test_any_records_give_sane_intervals_or_named_warnings(records: list[Any]) -> None:
    """Whatever sacct's records hold, the parser returns intervals in [0, now + slack] with a
    GPU count in range (or skips the record with a note), and the sum is finite, never negative."""
    good = rec(7, "REQUEUED", NOW - 400, NOW - 300, NOW - 410)
    found, notes = parse_intervals(sacct(*records, good), NOW)
    assert found["7"][-1] == Interval("7", NOW - 410, NOW - 400, NOW - 300, 8)
    for ivs in found.values():
        for iv in ivs:
            assert 0 < iv.start <= NOW + 60 and (iv.end == 0 or iv.start <= iv.end <= NOW + 60)
            assert 0 <= iv.gpus <= 1 << 20
        total, _ = earlier_gpu_s(ivs, NOW, active=False)
        assert math.isfinite(total) and total >= 0
    assert all(n.startswith("job ") for n in notes)


def test_the_snapshot_carries_attained_and_a_memo_sees_it_change() -> None:
    """The core's JobState.attained_gpu_s, for running and waiting jobs; a waiting job's memo
    entry is not reused once its attained service changed (it did before: stale 0)."""
    run = squeue_job()
    wait = parse_squeue(json.dumps({**SQUEUE, "jobs": [PENDING]}))[0][0]
    memo = JobMemo()
    obs = build_observation(NOW, [run, wait], [], None, memo=memo, attained={"9": 5.0, "11": 7.0})
    assert obs.snapshot.running["9"].job.attained_gpu_s == 5.0
    assert [j.attained_gpu_s for j in obs.snapshot.pending] == [7.0]
    obs = build_observation(NOW, [run, wait], [], None, memo=memo, attained={"11": 9.0})
    assert [j.attained_gpu_s for j in obs.snapshot.pending] == [9.0]


def test_the_cli_backend_puts_sacct_history_into_the_snapshot(tmp_path: Path) -> None:
    """Through the backend as the daemon runs it: a requeued running job's JobState holds its
    earlier run (sacct) and its current one (squeue); a second cycle asks sacct no more."""
    topo = tmp_path / "topology.conf"
    topo.write_text(topology_from_show((DATA / "scontrol_topology.txt").read_text()))
    squeue = json.dumps({**SQUEUE, "jobs": [{**RUNNING, "restart_cnt": 1, "start_time": NOW - 200,
                                             "submit_time": NOW - 300}]})
    out = {"squeue": squeue, "sinfo": (DATA / "sinfo_mixed.json").read_text(),
           "sacct": sacct(REQUEUED, CURRENT)}
    argvs: list[Sequence[str]] = []

    def exec_fn(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                stdin: str | None) -> tuple[int, str, str]:
        argvs.append(argv)
        return 0, out[argv[0]], ""

    backend = CliBackend(SlurmSettings(topology=topo, narrow_full_read_s=0),
                         SlurmRunner(exec_fn=exec_fn), read_shares=False)
    snap = backend.observe(NOW).snapshot
    assert snap.running["9"].attained_at(NOW) == 8 * 100 + 16 * 200
    backend.observe(NOW + 10)
    assert [a[0] for a in argvs].count("sacct") == 1
