"""Measured speed per job and per (user, model) (issue 33 item 2, slurm/cli/speed.py): rates
keyed by Slurm's allocation, resize costs timed by the daemon, the prior kept across restarts,
and forged reports bounded (docs/security.md, "Speed reports")."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from railgang.daemon.core.model.job import Job, JobRequest, RunningJob
from railgang.daemon.core.model.snapshot import Node, make_snapshot
from railgang.daemon.core.model.speed_fit import DEFAULT, MEASURED, PRIOR, fitted
from railgang.daemon.slurm.cli.parse import RailgangTag
from railgang.daemon.slurm.cli.records import SqueueJob
from railgang.daemon.slurm.cli.speed import SpeedBook
from railgang.training import Progress

T0 = 1_700_000_000.0
TAG = RailgangTag(tp=8, dp=1, elastic=(1, 4))


def rec(job_id: str, nodes: int, t: int | None, sps: float = 100.0, *, user: str = "alice",
        name: str = "llama", state: str = "RUNNING", start: float = T0, resize: float = 0.0,
        restarts: int = 0, submit: float = T0 - 100) -> SqueueJob:
    alloc = tuple((f"n{i}", tuple(range(8))) for i in range(nodes)) if state == "RUNNING" else ()
    return SqueueJob(job_id=job_id, state=state, reason="None", account="a", user=user, name=name,
                     submit_time=submit, eligible_time=submit, start_time=start,
                     resize_time=resize, time_limit_s=None, priority=1, restarts=restarts,
                     nodes_requested=nodes, gpus_requested=8 * nodes, batch_host="n0",
                     required_nodes=(), allocation=alloc, admin_comment="", tag=TAG,
                     progress=None if t is None else Progress(step=1, sps=sps, t=t))


def feed(book: SpeedBook, job: str, nodes: int, rates: list[float], t0: int, now0: float,
         **kw: object) -> float:
    """One report per cycle; returns the last cycle's time."""
    now = now0
    for i, sps in enumerate(rates):
        now = now0 + i
        book.observe([rec(job, nodes, t0 + i, sps, **kw)], now)  # type: ignore[arg-type]
    return now


def test_rates_are_keyed_by_slurms_allocation_and_fit_after_two_sizes() -> None:
    book = SpeedBook()
    feed(book, "7", 1, [100.0, 101.0, 99.0], int(T0) + 1, T0 + 1)
    curve, resize, _ = book.curve("7")  # type: ignore[misc]
    assert curve.source == DEFAULT and curve(4) == 4.0 and resize is None
    # shrunk/grown in place to 2 nodes at T0+10: the report written before is not the new size's
    book.observe([rec("7", 2, int(T0) + 3, 100.0, resize=T0 + 10)], T0 + 10)
    end = feed(book, "7", 2, [150.0, 151.0, 149.0], int(T0) + 20, T0 + 20, resize=T0 + 10)
    curve, resize, restore = book.curve("7")  # type: ignore[misc]
    assert curve.source == MEASURED and curve.serial == pytest.approx(1 / 3, abs=0.01)
    assert dict((k, r) for k, r, _ in curve.rates) == {1: 100.0, 2: 150.0}
    # resize cost: last seen at 1 node (T0+10 is already the new size's cycle; T0+3) -> the
    # first report at 2 nodes (T0+20), blended with the 30 s constant
    assert resize == pytest.approx((30.0 + (T0 + 20 - (T0 + 3))) / 2) and restore is None
    assert end == T0 + 22


def test_a_report_counts_once_and_only_while_running() -> None:
    book = SpeedBook()
    for now in (T0 + 1, T0 + 2, T0 + 3):
        book.observe([rec("7", 1, int(T0) + 1),  # the same report three times
                      rec("8", 1, int(now), state="PENDING")], now)
    assert book.jobs["7"].rates == {1: [100.0]} and book.jobs["8"].rates == {}


def test_a_snapshot_gets_the_curve_and_the_cost(tmp_path: Path) -> None:
    book = SpeedBook(tmp_path / "speed.json")
    feed(book, "7", 1, [100.0] * 3, int(T0) + 1, T0 + 1)
    # grown by requeue: Slurm sets the submit time anew, the job (and what it measured) stays
    book.observe([rec("7", 2, int(T0) + 20, 100.0, restarts=1, start=T0 + 15, submit=T0 + 9)],
                 T0 + 20)
    feed(book, "7", 2, [100.0] * 3, int(T0) + 21, T0 + 21, restarts=1, start=T0 + 15,
         submit=T0 + 9)
    job = Job(JobRequest("7", 8, tp=8, elastic_min=1, elastic_max=4))
    run = RunningJob(job, {"n0": tuple(range(8)), "n1": tuple(range(8))}, T0 + 15, 2)
    snap = book.apply(make_snapshot(now=T0 + 30, fabric=None,
                                    nodes=[Node(f"n{i}", 8) for i in range(4)], running=[run]))
    got = snap.running["7"].job
    assert isinstance(got.speedup_fn, fitted) and got.speedup_fn.source == MEASURED
    assert got.speedup(4) == pytest.approx(1.0)  # measured flat: no gain from growth
    assert got.transition_cost_s == pytest.approx((30.0 + 17.0) / 2)  # T0+3 -> T0+20
    assert got.restore_cost_s == pytest.approx((120.0 + 5.0) / 2)  # start T0+15 -> T0+20
    # a job the book knows nothing of is the same object
    other = Job(JobRequest("9", 8))
    assert book.apply(make_snapshot(now=T0, fabric=None, nodes=[], pending=[other])).pending[0] is other


def test_the_model_prior_outlives_a_restart_and_stays_with_its_user(tmp_path: Path) -> None:
    path = tmp_path / "speed.json"
    book = SpeedBook(path)
    feed(book, "7", 1, [100.0] * 3, int(T0) + 1, T0 + 1)
    feed(book, "8", 2, [110.0] * 3, int(T0) + 1, T0 + 1)
    book.observe([rec("7", 1, int(T0) + 3), rec("8", 2, int(T0) + 3)], T0 + 5)
    book.save()
    again = SpeedBook(path)  # the daemon restarted
    again.observe([rec("9", 1, None, state="PENDING"),
                   rec("10", 1, None, state="PENDING", user="bob")], T0 + 50)
    mine, _, _ = again.curve("9")  # type: ignore[misc]
    assert mine.source == PRIOR and mine.serial > 0.8
    assert again.curve("10") is None  # the same model name, another user: nothing known
    again.save()
    assert json.loads(path.read_text())["jobs"] == {}  # ended jobs are forgotten (and waiting
    # ones, which have nothing measured, are not written)


def test_an_unreadable_state_file_is_a_warning_and_an_empty_book(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "speed.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        book = SpeedBook(path)
    assert book.models == {} and "unreadable" in caplog.text


# -- hostile reports (docs/security.md, "Speed reports") -------------------------------------
def test_a_rate_that_is_no_rate_is_skipped_with_a_warning_naming_the_job() -> None:
    book = SpeedBook()
    notes = book.observe([rec("66", 1, int(T0) + 1, float("nan"))], T0 + 1)
    notes += book.observe([rec("66", 1, int(T0) + 2, -5.0)], T0 + 2)  # one warning per kind
    assert notes == ["job 66: progress sps=nan at 1 replica(s) is not a rate; not counted"]
    assert book.jobs["66"].rates == {}


def test_a_forged_speedup_is_clamped_and_moves_no_other_users_job() -> None:
    book = SpeedBook()
    feed(book, "7", 1, [100.0] * 3, int(T0) + 1, T0 + 1)  # alice's honest job
    feed(book, "66", 1, [10.0] * 3, int(T0) + 1, T0 + 1, user="mallory")
    before = book.curve("7")
    # mallory claims 1000x at 2 replicas: counted as at most 2x her own 1-replica rate
    book.observe([rec("7", 1, int(T0) + 4), rec("66", 2, int(T0) + 30, 1e7, user="mallory",
                                                 resize=T0 + 20)], T0 + 30)
    notes = book.observe([rec("66", 2, int(T0) + 31, 1e7, user="mallory", resize=T0 + 20)], T0 + 31)
    assert book.jobs["66"].rates[2] == [20.0, 20.0]
    assert notes == []  # warned once already, on the first clamp
    assert book.curve("7") == before  # alice's curve: her own reports only
    curve, _, _ = book.curve("66")  # type: ignore[misc]
    assert all(curve(k) <= k for k in range(1, 9))  # a liar's best is a straight line


def test_a_job_without_a_tag_is_not_measured() -> None:
    book = SpeedBook()
    book.observe([dataclasses.replace(rec("5", 1, int(T0)), tag=None)], T0)
    assert book.jobs == {}


def test_explain_shows_the_measured_speed_the_curve_and_the_costs() -> None:
    from railgang.daemon.loop import CycleOutcome
    from railgang.daemon.service import explain
    from railgang.daemon.service.status import render_speed

    book = SpeedBook()
    feed(book, "7", 1, [100.0] * 3, int(T0) + 1, T0 + 1)
    job = Job(JobRequest("7", 8, tp=8, elastic_min=1, elastic_max=4))
    run = RunningJob(job, {"n0": tuple(range(8))}, T0, 1)
    snap = book.apply(make_snapshot(now=T0 + 9, fabric=None, nodes=[Node("n0", 8)], running=[run]))
    out = CycleOutcome(T0 + 9, (), (), (), snap)
    tracker = explain.Tracker()
    write, _ = tracker.changes(explain.build_rows(out, None, "pollux", keep=tracker.keep), ["7"])
    speed = json.loads(write[0].data)["speed"]
    assert speed["source"] == DEFAULT and speed["rates"] == [[1, 100.0, 3]]
    text = "\n".join(render_speed(speed))
    assert "1 replica(s) 100 samples/s (3 reports)" in text and "(default" in text
    assert "resize 30 s (default)" in text and "speedup 1: 1, 4: 4" in text
    # the same measurement: the running row is kept; a second size measured: rewritten
    assert explain.build_rows(out, None, "pollux", keep=tracker.keep) == []
    book.observe([rec("7", 2, int(T0) + 30, 100.0, resize=T0 + 20)], T0 + 30)
    feed(book, "7", 2, [100.0] * 2, int(T0) + 31, T0 + 31, resize=T0 + 20)
    snap = book.apply(snap)
    rows = explain.build_rows(CycleOutcome(T0 + 40, (), (), (), snap), None, "pollux",
                              keep=tracker.keep)
    speed = json.loads(rows[0].data)["speed"]
    assert speed["source"] == MEASURED and speed["resize_s"] == [28.5, MEASURED]  # T0+3 -> T0+30
