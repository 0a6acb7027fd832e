"""The churn cap holds across cycles and daemon restarts on a backend whose snapshots carry no
preemption history (Slurm's): the daemon puts the last hour of preemptions from its journal into
the snapshot the core reads (issue 33 item 3)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from railgang.daemon.clock import SimClock
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Migrate, Preempt, Start
from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.model.preemption import PreemptionBudget
from railgang.daemon.core.model.snapshot import PreemptEvent, Snapshot
from railgang.daemon.service import codec
from railgang.daemon.service.journal import preemption_history
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db.repositories import journal as repo
from tests.daemon.service.conftest import Recording, cluster, service

# 64 GPUs of batch work, then two interactive jobs that may evict it: the cap (1/8 of 64 GPUs per
# 10 minutes) allows one 8-GPU eviction per window
_BATCH = [TraceJob(f"b{i}", 0.0, 8, 36000.0, tp=8) for i in range(8)]
_HIGH = [TraceJob(f"h{i}", 5.0, 8, 3600.0, tp=8, priority_class=PriorityClass.INTERACTIVE)
         for i in (1, 2)]
_CONFIG = CycleConfig(budget=PreemptionBudget(churn_cap=0.125))


class Forgetful(Recording):
    """A backend that, like Slurm, shows no preemption history of its own."""

    def snapshot(self, now: float) -> Snapshot:
        return self.inner.snapshot(now).replace(preemptions=())


def _preempted(backend: Recording) -> list[str]:
    return [a.job_id for a in backend.accepted if isinstance(a, Preempt)]


def test_the_churn_cap_holds_across_a_daemon_restart(engine: Engine) -> None:
    sim, clock = Forgetful(cluster([*_BATCH, *_HIGH])), SimClock(0.0)
    service(engine, sim, clock, config=_CONFIG).run_once()  # the batch jobs start
    clock.advance_to(10.0)
    service(engine, sim, clock, config=_CONFIG).run_once()
    assert len(_preempted(sim)) == 1  # the cap: one 8-GPU victim for h1, h2 waits
    clock.advance_to(300.0)  # the victim is gone, h1 started; the daemon restarted meanwhile
    service(engine, sim, clock, config=_CONFIG).run_once()
    assert len(_preempted(sim)) == 1, "the journal's history did not reach the core"
    assert "h1" in {a.job_id for a in sim.accepted if isinstance(a, Start)}
    clock.advance_to(700.0)  # the window has passed: h2 may evict now
    service(engine, sim, clock, config=_CONFIG).run_once()
    assert len(_preempted(sim)) == 2


def test_history_is_the_applied_preemptions_and_migrations_of_the_window(engine: Engine) -> None:
    def at(t: float) -> datetime:
        return datetime.fromtimestamp(t, UTC)

    with Session(engine) as s:
        cycle = repo.begin_cycle(s, started_at=at(0), leader="t", policy="default")
        rows = [repo.PlannedRow(codec.kind_of(a), codec.encode(a), a.job_id, None) for a in (
            Preempt("old", 60.0, gpus=8), Preempt("p", 60.0, gpus=4),
            Migrate("m", 60.0, {"n1": (0, 1)}, 1, gpus=2),
            Preempt("refused", 60.0, gpus=16), Start("s", {"n1": (0,)}, 1))]
        (old,) = repo.add_planned(s, cycle.id, rows[:1], at(100))
        new = repo.add_planned(s, cycle.id, rows[1:], at(3000), first_seq=1)
        repo.settle(s, [old, *new], [("applied", ""), ("applied", ""), ("applied", ""),
                                     ("failed", "no such job"), ("applied", "")], at(3001))
        s.commit()
        assert preemption_history(s, 4000.0) == (PreemptEvent(3000.0, "p", 4),
                                                  PreemptEvent(3000.0, "m", 2))
        assert preemption_history(s, 3650.0, window_s=3600.0)[0] == PreemptEvent(100.0, "old", 8)
