"""The narrow squeue read (slurm/cli/narrow.py): lines it refuses, what it takes
from the last full read, and when it asks for one. The real cluster's records, read both ways,
are compared in test_narrow_slurm.py."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.slurm.cli.narrow import (
    FIELDS,
    RESTING,
    ROTATION,
    NarrowCache,
    NarrowProblem,
    NarrowRow,
    _minutes,
    merge,
    narrow_argv,
    new_mark,
    parse_narrow,
)
from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import SqueueJob, squeue_job
from tests.support.squeue_o import squeue_o

T0 = "2026-12-01T21:39:36"
TAG = "railgang:tp=2,pp=1,dp=1;class=3"


MARK = "~0123456789abcdef~"


def fields(job_id: str = "7003", state: str = "PENDING", start: str = "N/A", nodes: str = "",
           comment: str = TAG, limit: str = "UNLIMITED", restarts: str = "0",
           gres: str = "gres:gpu:2", exit_code: str = "0", **more: str) -> dict[str, str]:
    """One job's fields as 22.05's squeue -O prints them (squeue's names; ``more`` overrides)."""
    row = {"JobID": job_id, "State": state, "Reason": "None", "Account": "team-b",
           "UserName": "root", "QOS": "normal", "SubmitTime": T0, "EligibleTime": T0,
           "StartTime": start, "TimeLimit": limit, "PriorityLong": "7508", "RestartCnt": restarts,
           "NumNodes": "1", "tres-per-job": "N/A", "tres-per-node": gres,
           "BatchHost": nodes or "n/a", "ReqNodes": "", "NodeList": nodes, "Requeue": "1",
           "exit_code": exit_code, "admin_comment": comment, "Partition": "gpu", "HetJobID": "N/A",
           "Feature": "(null)", "Dependency": "(null)", "Reservation": "(null)",
           "OverSubscribe": "OK", "ArrayTaskID": "N/A", "Tres": "cpu=1,mem=1G,node=1,billing=1",
           "mem-per-tres": "N/A", "cpus-per-tres": "N/A", "Licenses": "(null)",
           **more}
    assert set(row) == {name for name, _ in FIELDS}
    return row


def line(*args: str, **kw: str) -> str:
    """One job's line as squeue prints it for the narrow read with MARK."""
    return squeue_o(narrow_argv(MARK), [fields(*args, **kw)])


def _parse(text: str) -> list[NarrowRow]:
    return parse_narrow(text, MARK)


def test_the_argv_asks_for_every_field_whole_what_users_write_last_ended_by_the_mark() -> None:
    argv = narrow_argv(MARK)
    assert argv[:4] == ["squeue", "-h", "-t", "all"] and argv[4] == "-O"
    spec = argv[5].split(",")
    assert [s.split(":")[0] for s in spec] == [name for name, _ in FIELDS]
    assert [s.split(":")[0] for s in spec[-11:]] == ["ReqNodes", "Feature", "Tres", "mem-per-tres",
                                                    "cpus-per-tres", "Licenses", "Dependency",
                                                    "Reservation", "admin_comment", "tres-per-job",
                                                    "tres-per-node"]
    assert all(s.endswith(":0|") for s in spec[:-12]) and all(s.endswith(f":0{MARK}")
                                                             for s in spec[-12:])
    assert new_mark() != new_mark() and len(new_mark()) == 18


@pytest.mark.parametrize("text", [
    "7003|PENDING" + MARK + "\n",                    # too few fields
    line(job_id="x7003"),                             # not a job id
    line(state="WAITING"),                            # not a job state
    line() + line(),                                  # the same job twice
    line().removesuffix(MARK + "\n"),                # cut short
    line() + "not a line",                            # something after the last line
    "",                                               # fine: no jobs (checked below)
], ids=["short", "id", "state", "twice", "cut", "trailing", "empty"])
def test_a_line_it_cannot_trust_refuses_the_whole_read(text: str) -> None:
    if not text:
        assert _parse(text) == []
        return
    with pytest.raises(NarrowProblem):
        _parse(text)


def test_what_users_and_administrators_write_may_hold_the_separator_and_newlines() -> None:
    (row,) = _parse(line(comment="railgang:tp=2|odd", gres="gres:gpu:x|n02\n99|PENDING:8"))
    assert row.fields[-3:-1] == ("railgang:tp=2|odd", "N/A") and row.pending
    assert row.fields[-1] == "gres:gpu:x|n02\n99|PENDING:8"


@pytest.mark.parametrize(("text", "minutes"), [
    ("UNLIMITED", None), ("N/A", None), ("30:00", 30), ("1:00:00", 60), ("1-02:03:00", 1563),
    ("45", 45)])
def test_time_limits(text: str, minutes: int | None) -> None:
    assert _minutes(text) == minutes


@pytest.mark.parametrize("text", ["1:xx:00", "1:2:3:4", "a-01:00:00"])
def test_a_time_limit_it_cannot_read_is_a_parse_problem(text: str) -> None:
    with pytest.raises(ParseProblem):
        _minutes(text)


def test_a_new_pending_job_is_read_from_its_line_without_user_text() -> None:
    (job,), problems = merge(_parse(line()), {}, {})
    assert problems == [] and job.job_id == "7003" and job.pending
    assert job.tag is not None and job.tag.tp == 2 and job.gpus_requested == 2
    assert job.eligible_time == datetime.fromisoformat(T0).timestamp()
    assert job.time_limit_s is None and job.name == "" and job.progress is None


def _full(job_id: str, nodes: str) -> SqueueJob:
    """A running job as the full (JSON) read saw it: name, GPU indices."""
    return squeue_job({"job_id": int(job_id), "job_state": "RUNNING", "name": "llama",
                       "nodes": nodes, "gres_detail": ["gpu:2(IDX:4-5)"],
                       "job_resources": {"allocated_nodes": [{"nodename": nodes}]},
                       "tres_per_node": "gres:gpu:2", "admin_comment": TAG})


def test_an_active_job_takes_its_gpu_indices_and_name_from_the_full_read() -> None:
    full = {"9": _full("9", "n03")}
    (job,), _ = merge(_parse(line("9", "RUNNING", T0, "n03")), {}, full)
    assert job.allocation == (("n03", (4, 5)),) and job.name == "llama"
    assert job.start_time == datetime.fromisoformat(T0).timestamp()


def test_an_ended_job_the_full_read_left_out_stays_out() -> None:
    assert merge(_parse(line("9", "COMPLETED", T0, "n03")), {}, {}) == ([], [])


@pytest.mark.parametrize(("state", "code", "kept"), [
    ("CANCELLED", "15", True),    # its batch script died of SIGTERM (a wait status of 15)
    ("COMPLETED", "0", False),    # history: the daemon has nothing to do with it
    ("FAILED", "256", False),     # exited 1: not a signal
    ("NODE_FAIL", "0", True),     # the failure responder requeues it
])
def test_a_job_that_ended_since_the_full_read_is_kept_as_the_json_read_keeps_it(
        state: str, code: str, kept: bool) -> None:
    got, _ = merge(_parse(line("9", state, T0, "n03", exit_code=code)), {},
                   {"9": _full("9", "n03")})
    assert bool(got) == kept
    if kept:
        assert got[0].state == state and got[0].exit_signal == int(code) & 0x7F
        assert got[0].name == "llama"


@pytest.mark.parametrize(("code", "signal"), [
    ("0", 0), ("15", 15), ("256", 0), ("N/A", 0),   # 22.05: a wait status
    ("0:0", 0), ("0:10", 10), ("1:0", 0), ("2:9", 9),  # 24.11+: EXIT:SIGNAL, as sacct prints it
])
def test_the_exit_code_is_read_as_a_wait_status_in_either_form(code: str, signal: int) -> None:
    got, _ = merge(_parse(line("9", "CANCELLED", T0, "n03", exit_code=code)), {},
                   {"9": _full("9", "n03")})
    assert (got[0].exit_signal if got else 0) == signal and bool(got) == bool(signal)


@pytest.mark.parametrize("code", ["x", "0:x", "-1", "1:2:3", "0:"])
def test_an_exit_code_it_cannot_read_sends_the_cycle_to_the_json(code: str) -> None:
    with pytest.raises(NarrowProblem, match="job 9: exit code"):
        merge(_parse(line("9", "CANCELLED", T0, "n03", exit_code=code)), {},
              {"9": _full("9", "n03")})


@pytest.mark.parametrize("start", ["INVALID", "yesterday"])
def test_a_value_the_plain_form_cannot_carry_sends_the_cycle_to_the_json(start: str) -> None:
    with pytest.raises(NarrowProblem, match="job 9: time"):
        merge(_parse(line("9", "RUNNING", start, "n03")), {}, {"9": _full("9", "n03")})


def test_an_unchanged_line_keeps_its_record() -> None:
    rows = _parse(line())
    kept = dataclasses.replace(merge(rows, {}, {})[0][0], name="from before")
    (job,), _ = merge(rows, {"7003": (rows[0].line, kept)}, {})
    assert job is kept


def _cache(rows: list[NarrowRow], jobs: list[SqueueJob]) -> NarrowCache:
    return NarrowCache.after_full_read(0.0, rows, jobs)


def test_the_cache_asks_for_a_full_read_when_a_job_starts_ends_or_comes_back() -> None:
    pending, running = _parse(line()), _parse(line("9", "RUNNING", T0, "n03"))
    full = [merge(pending, {}, {})[0][0], _full("9", "n03")]
    cache = _cache(pending + running, full)
    assert cache.stale(pending + running) == ""
    # the pending job's lease moved: its own line changed, still no full read
    renewed = _parse(line(EligibleTime="2026-12-01T21:41:36"))
    assert cache.stale(renewed + running) == ""
    assert "job 7003 is new or changed" in cache.stale(
        _parse(line("7003", "RUNNING", T0, "n01")) + running)
    # an end is read from the line; a job that ran and ended unseen needs the JSON (its name)
    assert cache.stale(pending + _parse(line("9", "COMPLETED", T0, "n03"))) == ""
    assert "job 11 ended unseen" in cache.stale(pending + running + _parse(
        line("11", "FAILED", T0, "n05")))
    # pending at the full read but not read whole (new since), then ran and ended within a
    # cycle: its name (a burn-in's) is only in the JSON
    new = NarrowCache.after_full_read(0.0, pending + running, full[1:])
    assert "job 7003 ended unseen" in new.stale(_parse(line("7003", "COMPLETED", T0, "n01"))
                                                + running)
    assert "job 10 is new" in cache.stale(pending + running + _parse(
        line("10", "RUNNING", T0, "n04")))
    # running -> completing keeps its GPU indices: no full read
    assert cache.stale(pending + _parse(line("9", "COMPLETING", T0, "n03"))) == ""
    # shrunk in place: the same node, fewer GPUs (its GPU indices must be read again)
    assert "job 9 is new or changed" in cache.stale(pending + _parse(
        line("9", "RUNNING", T0, "n03", gres="gres:gpu:1")))
    assert "job 9 is pending again" in cache.stale(pending + _parse(
        line("9", "PENDING", restarts="1")))


def test_a_read_of_only_the_changed_jobs_makes_the_cache_whole_again() -> None:
    """24.11+ (squeue honours -j): the JSON of the jobs that made the read stale stands in for a
    full read of every job: their records and fingerprints are taken, the others kept."""
    pending, running = _parse(line()), _parse(line("9", "RUNNING", T0, "n03"))
    cache = _cache(pending + running, [merge(pending, {}, {})[0][0], _full("9", "n03")])
    cache.read(pending + running)
    now = (_parse(line("7003", "RUNNING", T0, "n01")) + _parse(line("10", "RUNNING", T0, "n04"))
           + _parse(line("9", "COMPLETED", T0, "n03")) + _parse(line("11", "FAILED", T0, "n05")))
    stale = cache.stale_jobs(now)
    assert list(stale) == ["7003", "10", "11"]  # 9's end is read from its line
    assert cache.stale(now) == stale["7003"]
    # the JSON of 7003, 10 and 11: 11 ended of no signal, so the JSON read leaves it out
    cache.absorb(now, list(stale), [_full("7003", "n01"), _full("10", "n04")], 1.0)
    assert cache.stale(now) == ""
    jobs, _ = cache.read(now)
    assert [(j.job_id, j.allocation) for j in jobs] == [("7003", (("n01", (4, 5)),)),
                                                         ("10", (("n04", (4, 5)),))]
    assert all(j.name == "llama" for j in jobs)
    # a job that changes again after that read is stale again
    assert "job 10 is new or changed" in cache.stale(now[:1] + _parse(
        line("10", "RUNNING", T0, "n04", gres="gres:gpu:1")))


def test_the_cache_reads_and_remembers_the_lines() -> None:
    rows = _parse(line() + line("9", "RUNNING", T0, "n03"))
    cache = _cache(rows, [_full("9", "n03")])
    jobs, _ = cache.read(rows)
    assert [j.job_id for j in jobs] == ["7003", "9"] and jobs[1].name == "llama"
    again, _ = cache.read(rows)
    assert all(a is b for a, b in zip(again, jobs, strict=True))


def test_running_jobs_comments_are_read_and_a_forged_line_refused() -> None:
    from railgang.daemon.slurm.cli.narrow import comments_argv, parse_comments, with_progress

    assert comments_argv(["9", "10"], MARK) == ["squeue", "-h", "-j", "9,10", "-O",
                                                f"JobID:0{MARK},Comment:0{MARK}"]

    def out(*rows: tuple[str, str]) -> str:
        return squeue_o(comments_argv(["9", "10"], MARK),
                        [{"JobID": j, "Comment": c} for j, c in rows])

    assert parse_comments(out(("9", "rg-progress:step=1"), ("10", "")), ["9", "10"], MARK) == {
        "9": "rg-progress:step=1", "10": ""}
    # a Comment is the user's: a newline and "|" in it are its own, and forge no line
    assert parse_comments(out(("9", "x\n10|y\n10|z"), ("10", "")), ["9", "10"], MARK) == {
        "9": "x\n10|y\n10|z", "10": ""}
    for wrong in (out(("9", "x"), ("10", "y"), ("10", "z")),  # a job twice
                  out(("9", "x"), ("11", "y")),                # a job not asked for
                  out(("9", "x")) + "9"):                      # cut short
        with pytest.raises(NarrowProblem):
            parse_comments(wrong, ["9", "10"], MARK)
    job = _full("9", "n03")
    (bad,) = with_progress([job], {"9": "rg:progress total_steps=x"})
    assert bad.progress is None
    (same,) = with_progress([job], {})
    assert same is job


@pytest.mark.parametrize(("text", "word"), [
    ("BeginTime", "BeginTime"), ("RaisedSignal:10(User defined signal 1)", "RaisedSignal"),
    ("ReqNodeNotAvail, UnavailableNodes:n01", "ReqNodeNotAvail"), ("", "None"), ("N/A", "None"),
])
def test_a_reason_is_its_name_whatever_description_the_output_appends(text: str, word: str) -> None:
    """squeue -O prints a reason's description, 24.11's JSON only its name: the record keeps the
    name, so both reads build the same record (and snapshot.QUEUE_REASONS reads names)."""
    got = _parse(line("9", "CANCELLED", T0, "n03", exit_code="0:10", Reason=text))
    (job,), _ = merge(got, {}, {"9": _full("9", "n03")})
    assert job.reason == word


def test_new_waiting_jobs_are_unseen_until_read_by_id() -> None:
    """24.11+: a job submitted since the full read is not stale (nothing decided on is missing)
    but has no name in the narrow form; the backend reads it by id with the changed jobs, after
    which it is seen and keeps its name."""
    pending, running = _parse(line()), _parse(line("9", "RUNNING", T0, "n03"))
    cache = _cache(pending + running, [merge(pending, {}, {})[0][0], _full("9", "n03")])
    new = _parse(line("12"))
    assert cache.stale(pending + running + new) == ""
    assert cache.unseen_pending(pending + running + new) == ["12"]
    fresh = squeue_job({"job_id": 12, "job_state": "PENDING", "name": "fresh",
                        "tres_per_node": "gres:gpu:2", "admin_comment": TAG})
    cache.absorb(pending + running + new, ["12"], [fresh], 1.0)
    assert cache.unseen_pending(pending + running + new) == []
    jobs, _ = cache.read(pending + running + new)
    assert {j.job_id: j.name for j in jobs}["12"] == "fresh"


@given(st.integers(1, 300), st.sampled_from((60.0, 600.0, 3600.0)),
       st.lists(st.floats(0.5, 1.0), min_size=1, max_size=200), st.integers(1, 5000))
@settings(max_examples=200, deadline=None)
def test_records_read_in_turn_never_outgrow_the_period_while_cycles_keep_up(
        jobs: int, every: float, gaps: list[float], most: int) -> None:
    """``NarrowCache.due`` after a full read at 0: cycles at any gaps up to a twentieth of the
    period, each reading the records it names at once; no record is ever older than the period
    (so no full read is needed for age), none is read again younger than ``RESTING`` of it,
    and a cycle names at most ``most``."""
    rows = [NarrowRow(str(i), "", ()) for i in range(jobs)]  # (due reads the ids alone)
    cache = NarrowCache(0.0, {}, {}, {}, dict.fromkeys((r.job_id for r in rows), 0.0))
    now = 0.0
    for share in gaps * (1 + int(3 * 20 / len(gaps))):  # three periods at least
        now += share * every / 20
        due = cache.due(rows, now, every, most)
        assert len(due) <= most and len(set(due)) == len(due)
        assert all(now - cache.read_at[j] >= RESTING * every for j in due)
        cache.read_at.update(dict.fromkeys(due, now))
        assert now - cache.oldest(rows) < every or most < jobs * (every / 20) / (ROTATION * every)
