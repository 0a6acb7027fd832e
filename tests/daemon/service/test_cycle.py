"""The daemon cycle through the journal: normal cycles, crashes between "planned" and "applied"
(nothing repeated, nothing lost), idempotent resends, explanations, heartbeat and leases."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from railgang.daemon.backend import FollowUp
from railgang.daemon.clock import SimClock
from railgang.daemon.config import load_settings
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Start
from railgang.daemon.service.status import explanation, render
from railgang.daemon.sim.live import LiveSim
from railgang.daemon.sim.traces.model import TraceJob
from railgang.daemon.slurm.fake import FakeBackend
from railgang.db.models import DaemonCycle, JournalEntry
from railgang.db.repositories import journal as repo
from railgang.errors import UnknownJobError
from tests.daemon.service.conftest import (
    JOBS,
    Crash,
    Crashing,
    Recording,
    cluster,
    service,
)


def _journal(engine: Engine) -> list[JournalEntry]:
    with Session(engine) as s:
        return list(s.scalars(select(JournalEntry).order_by(JournalEntry.id)))


def _started(backend: Recording) -> Counter[str]:
    return Counter(a.job_id for a in backend.accepted if isinstance(a, Start))


def test_a_cycle_journals_every_action_as_applied(engine: Engine, tmp_path: Path) -> None:
    sim, clock = Recording(cluster()), SimClock(0.0)
    beat = tmp_path / "hb"
    report = service(engine, sim, clock, heartbeat_file=beat, lease_s=90).run_once()
    assert report.error is None and report.pending == 5 and report.actions["Start"] == 4
    rows = _journal(engine)
    assert [(e.kind, e.job_id, e.state) for e in rows] == [
        ("start", j, "applied") for j in ("a", "b", "c", "d")]
    assert len({e.idem_key for e in rows}) == 4
    assert beat.read_text() == "0 90\n"
    assert {"snapshot", "order", "place", "journal", "apply", "record", "total"} <= set(
        report.timings_ms)
    with Session(engine) as s:
        (cycle,) = s.scalars(select(DaemonCycle))
        assert (cycle.pending, cycle.actions, cycle.failed, cycle.error) == (5, 4, 0, None)


@pytest.mark.parametrize("sent", [0, 2, None], ids=["before-send", "mid-batch", "after-send"])
def test_crash_between_planned_and_applied_neither_repeats_nor_loses(engine: Engine,
                                                                     sent: int | None) -> None:
    sim, clock = cluster(), SimClock(0.0)
    crashing = Crashing(sim, sent)
    with pytest.raises(Crash):
        service(engine, crashing, clock).run_once()
    planned = _journal(engine)
    assert [e.state for e in planned] == ["planned"] * 4  # committed before anything was sent
    took = set(_started(crashing))
    assert len(took) == (4 if sent is None else sent)

    clock.advance(10.0)  # a new daemon process: fresh service, same database, same cluster
    after = Recording(sim)
    report = service(engine, after, clock).run_once()

    assert report.reconciled == Counter({"applied": len(took), "abandoned": 4 - len(took)})
    by_id = {e.id: e for e in _journal(engine)}
    assert all(by_id[e.id].state == ("applied" if e.job_id in took else "abandoned")
               for e in planned)
    assert not set(_started(after)) & took  # nothing that took effect is sent again
    assert set(_started(after)) == {"a", "b", "c", "d"} - took  # nothing is lost
    assert set(sim.sim.running) == {"a", "b", "c", "d"}
    assert report.failed == 0
    with Session(engine) as s:
        assert repo.open_entries(s) == []
        errors = [c.error for c in s.scalars(select(DaemonCycle).order_by(DaemonCycle.id))]
    assert errors[0] is not None and "Crash" in errors[0] and errors[1] is None


def test_an_idempotent_priority_is_resent_after_a_crash(engine: Engine) -> None:
    sim, clock = cluster([TraceJob("x", 0.0, 64, 3600.0, tp=8), TraceJob("y", 1.0, 8, 60.0)]), SimClock(2.0)
    cfg = CycleConfig(emit_priorities=True)
    with pytest.raises(Crash):
        service(engine, Crashing(sim, 0), clock, config=cfg).run_once()
    assert [(e.kind, e.job_id, e.state) for e in _journal(engine)] == [
        ("start", "x", "planned"), ("set_priority", "y", "planned")]
    fake = FakeBackend(sim.snapshot)  # records what is sent; the cluster itself is unchanged
    report = service(engine, fake, clock, config=cfg).run_once()
    assert report.reconciled == Counter({"abandoned": 1, "resend": 1})
    assert [type(a).__name__ for _, a in fake.applied] == ["SetPriority", "Start", "SetPriority"]
    first = {e.kind: e for e in _journal(engine) if e.cycle_id == 1}
    assert first["set_priority"].state == "applied"
    assert first["set_priority"].detail.startswith("resent")
    assert first["start"].state == "abandoned" and "pending" in first["start"].detail


def test_a_refused_action_is_journaled_failed_with_slurms_detail(engine: Engine) -> None:
    sim = cluster(JOBS[:2])
    fake = FakeBackend(sim.snapshot, refuse=lambda a: "Requested node config is not available"
                       if getattr(a, "job_id", "") == "b" else None)
    report = service(engine, fake, SimClock(0.0)).run_once()
    assert report.failed == 1
    states = {e.job_id: (e.state, e.detail) for e in _journal(engine)}
    assert states == {"a": ("applied", ""),
                      "b": ("failed", "Requested node config is not available")}


def test_explain_reads_waiting_and_running_jobs(engine: Engine, tmp_path: Path) -> None:
    svc = service(engine, cluster(), SimClock(0.0))
    svc.run_once()
    settings = load_settings(db={"url": engine.url.render_as_string(hide_password=False)})
    run = explanation(settings, "b")
    assert run["state"] == "running" and run["how"] == "started" and run["gpus"] == 16
    assert run["cost"] is not None and run["leaves"] and run["rail_aligned"] is True
    wait = explanation(settings, "zbig")
    assert wait["state"] == "waiting" and wait["reason"] == "waiting_for_gpus"
    assert (wait["position"], wait["queue_length"], wait["ahead"]) == (5, 5, 0)
    assert wait["needed"] == 64 and wait["free"] == 34  # free when it was considered
    text = render(wait)
    assert "job zbig" in text and "position 5 of 5 in the fifo policy's order (0 waiting ahead)" in text
    assert "running on n" in render(run) and "placed by railgang" in render(run)
    assert "(GPUs 0-7 on each node)" in render(run)  # b: tp 8, 2 whole nodes
    with pytest.raises(UnknownJobError, match="job 999: railgang has no record"):
        explanation(settings, "999")


def test_unchanged_jobs_are_not_rewritten_and_departed_jobs_marked_gone(engine: Engine) -> None:
    from railgang.db.models import JobExplanation

    sim, clock = cluster(), SimClock(0.0)
    svc = service(engine, sim, clock)
    svc.run_once()
    with Session(engine) as s:
        first = {e.job_id: e.cycle_id for e in s.scalars(select(JobExplanation))}
    clock.advance(5.0)
    svc.run_once()
    with Session(engine) as s:
        second = {e.job_id: e.cycle_id for e in s.scalars(select(JobExplanation))}
    # running jobs that did not move cost no writes (and keep the placement's cost); of the
    # waiting job only a drifting figure moved (fewer GPUs free): its row stands for a while
    assert second == first
    clock.advance(60.0)
    svc.run_once()
    with Session(engine) as s:
        refreshed = {e.job_id: e.cycle_id for e in s.scalars(select(JobExplanation))}
    assert {j: c for j, c in refreshed.items() if j != "zbig"} == {
        j: c for j, c in first.items() if j != "zbig"}
    assert refreshed["zbig"] == 3  # refreshed once its stored copy was explain_refresh_s old
    clock.advance(5.0)
    service(engine, sim, clock).run_once()  # a restarted daemon picks the memory up from the db
    with Session(engine) as s:
        third = {e.job_id: e.cycle_id for e in s.scalars(select(JobExplanation))}
    assert {j: c for j, c in third.items() if j != "zbig"} == {
        j: c for j, c in first.items() if j != "zbig"}
    clock.advance(4000.0)  # every job finishes
    svc.run_once()
    svc.run_once()
    with Session(engine) as s:
        states = {e.job_id: e.state for e in s.scalars(select(JobExplanation))}
    assert states["a"] == "gone"


class Leasing(Recording):
    """A backend with begin-time leases (as the Slurm CLI backend has)."""

    def __init__(self, inner: LiveSim) -> None:
        super().__init__(inner)
        self.renewed: list[tuple[list[str], float, int]] = []

    def renew_leases(self, job_ids: list[str], now: float) -> dict[str, str]:
        self.renewed.append((list(job_ids), now, len(self.accepted)))
        return {"d": "Invalid job id specified"} if "d" in job_ids else {}


def test_leases_are_renewed_after_observing_and_before_applying(engine: Engine) -> None:
    backend = Leasing(cluster())
    report = service(engine, backend, SimClock(3.0)).run_once()
    # the whole queue, before any Start was sent (a Start ends a lease; renewing after it would
    # set the lease again)
    assert backend.renewed == [(["a", "b", "c", "d", "zbig"], 3.0, 0)]
    assert report.leases_renewed == 4 and len(backend.accepted) == 4
    assert "leases" in report.timings_ms and report.timings_ms["reconcile"] >= 0


class FollowingUp(Recording):
    """A backend that, like the CLI backend, requeues due preemptions while it observes."""

    def __init__(self, sim: LiveSim, steps: list[FollowUp]) -> None:
        super().__init__(sim)
        self.steps = steps

    def followups(self) -> list[FollowUp]:
        return self.steps


def test_the_journal_records_what_the_backend_did_while_observing(engine: Engine) -> None:
    steps = [FollowUp("7", "requeue", True, "preempted, requeued"),
             FollowUp("8", "restart", False, "grow restart refused: " + "x" * 600)]
    backend = FollowingUp(cluster(), steps)
    report = service(engine, backend, SimClock(0.0)).run_once()
    assert report.error is None
    rows = _journal(engine)
    follow = [(e.kind, e.job_id, e.state, e.seq) for e in rows if e.kind in ("requeue", "restart")]
    assert follow == [("requeue", "7", "applied", -2), ("restart", "8", "failed", -1)]
    assert all(len(e.detail) <= 512 for e in rows)
    assert [e.kind for e in rows if e.kind == "start"]  # the cycle's own actions beside them
