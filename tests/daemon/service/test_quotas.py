"""The daemon reads the quota tree from its database into every cycle: a team's guaranteed job
reclaims borrowed GPUs end to end (daemon cycle -> core -> simulated cluster), nothing changes
without quota rows, and the hourly review records use-it-or-lose-it proposals."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from railgang.daemon.clock import SimClock
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Preempt, Start
from railgang.daemon.core.model.preemption import PreemptionBudget
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.service.quotas import QuotaStep, load_tree, measured_utilisation
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db.models import Job, UsageRecord
from railgang.db.org import QuotaEvent
from railgang.db.repositories import org
from tests.daemon.service.conftest import Recording, cluster, service

H = 3600.0
# blue fills the 64 GPUs at t=0 (16 its own, 48 borrowed); red, guaranteed 48, returns at t=60
JOBS = [*(TraceJob(f"b{i}", 0.0, 8, 10 * H, tp=8, account="blue") for i in range(8)),
        TraceJob("r1", 60.0, 16, H, tp=8, account="red")]
ROOMY = CycleConfig(budget=PreemptionBudget(churn_cap=0.25))  # 16 of 64 GPUs may churn


def _tree(engine: Engine) -> None:
    with Session(engine) as s:
        org.create_account(s, actor="t", name="lab", level="org", parent=None,
                           guaranteed_gpus=64, limit_gpus=64)
        org.create_account(s, actor="t", name="ml", level="dept", parent="lab",
                           guaranteed_gpus=64, limit_gpus=None)
        org.create_account(s, actor="t", name="red", level="team", parent="ml",
                           guaranteed_gpus=48, limit_gpus=64)
        org.create_account(s, actor="t", name="blue", level="team", parent="ml",
                           guaranteed_gpus=16, limit_gpus=64)
        s.commit()


def _run(engine: Engine, times: list[float]) -> tuple[Recording, list[object]]:
    backend = Recording(cluster(JOBS))
    clock = SimClock(0.0)
    svc = service(engine, backend, clock, config=ROOMY)
    reports = []
    for t in times:
        clock.advance_to(t)
        reports.append(svc.run_once())
    return backend, reports


def test_owner_reclaims_borrowed_gpus_through_the_daemon_cycle(engine: Engine) -> None:
    _tree(engine)
    backend, reports = _run(engine, [0.0, 60.0, 100.0, 200.0])
    preempts = [a for a in backend.accepted if isinstance(a, Preempt)]
    assert [(p.job_id, p.reason, p.for_job) for p in preempts] == [
        ("b7", Reason.RECLAIMING, "r1"), ("b6", Reason.RECLAIMING, "r1")]
    assert reports[1].reasons["reclaiming"] == 1  # type: ignore[attr-defined]
    # while the victims are in their grace time nobody else is signalled; then r1 starts and
    # blue's requeued jobs do not take red's guarantee back
    starts = [a.job_id for a in backend.accepted if isinstance(a, Start)]
    assert starts[-1] == "r1" and starts.count("b7") == 1 and starts.count("b6") == 1
    assert reports[3].reasons.get("quota_department") == 2  # ml is full (tie with the org: the lower level names it)  # type: ignore[attr-defined]


def test_without_quota_rows_nothing_is_reclaimed(engine: Engine) -> None:
    with Session(engine) as s:
        assert load_tree(s) is None
    backend, reports = _run(engine, [0.0, 60.0, 100.0, 200.0])
    assert not [a for a in backend.accepted if isinstance(a, Preempt)]
    assert reports[3].reasons["waiting_for_gpus"] == 1  # type: ignore[attr-defined]


def _segment(s: Session, jid: str, account: str, gpus: int, start: float, end: float | None,
             busy: float | None = None) -> None:
    job = Job(slurm_job_id=jid, cluster="c", account=account, user="u", gpus=gpus,
              submitted_at=datetime.fromtimestamp(start, UTC), state="RUNNING")
    s.add(job)
    s.flush()
    s.add(UsageRecord(job_id=job.id, segment=0, account=account, gpu_type="h200", gpus=gpus,
                      nodes="n1", started_at=datetime.fromtimestamp(start, UTC),
                      ended_at=None if end is None else datetime.fromtimestamp(end, UTC),
                      start_epoch=int(start), end_epoch=None if end is None else int(end),
                      compute_fraction=busy))


def test_review_proposes_idle_guarantees_once(engine: Engine) -> None:
    _tree(engine)
    now = 100 * H
    with Session(engine) as s:
        _segment(s, "1", "red", 4, now - 80 * H, None, busy=0.5)  # 4 of 48 for 80 h: idle
        _segment(s, "2", "blue", 16, now - 80 * H, None, busy=0.9)  # all of its 16
        s.commit()
        step = QuotaStep()
        tree = step.tree(s, now)
        got = step.review(s, tree, now)
        assert [p.account for p in got] == ["red"]
        assert step.review(s, tree, now + 2 * H) == []  # an open proposal is not repeated
        s.commit()
        events = s.scalars(select(QuotaEvent)).all()
        assert [(e.kind, e.state, e.gpus) for e in events] == [("lose-proposal", "proposed", 48)]
        parents = {n.name: n.parent for n in org.quota_nodes(s).values()}
        util = measured_utilisation(s, int(now - 72 * H), int(now), parents)
        assert util["red"] == 0.5 and abs(util["lab"] - (2 + 14.4) / 20) < 1e-9
        assert util["ml"] == util["lab"]


def test_review_waits_for_evidence_over_the_whole_window(engine: Engine) -> None:
    _tree(engine)
    now = 100 * H
    with Session(engine) as s:
        _segment(s, "1", "red", 1, now - 10 * H, None)  # the ledger starts 10 h ago
        s.commit()
        step = QuotaStep()
        assert step.review(s, step.tree(s, now), now) == []
