"""A small fluent builder of ledger rows for report tests: ``led.team("a", 8).job("1", "a",
gpus=8, start=t, end=t + 3600)``; every row goes through the real models into a migrated DB."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, insert, select

from railgang.db.ledger import GpuSample, NodeState
from railgang.db.models import Account, Job, UsageRecord
from railgang.db.org import Rate
from railgang.db.session import session_scope

DAY = 86400
T0 = 1795392000  # 2026-11-23 00:00 UTC


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


class Ledger:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        with session_scope(engine) as s:
            org = Account(name="org", level="org", guaranteed_gpus=1000, created_at=at(T0))
            dept = Account(name="dept", level="dept", parent=org, guaranteed_gpus=1000,
                           created_at=at(T0))
            s.add_all([org, dept])

    def team(self, name: str, guaranteed: int) -> Ledger:
        with session_scope(self.engine) as s:
            dept = s.scalars(select(Account).where(Account.name == "dept")).one()
            s.add(Account(name=name, level="team", parent=dept, guaranteed_gpus=guaranteed,
                          created_at=at(T0)))
        return self

    def rate(self, gpu_type: str, capacity: str, price: float) -> Ledger:
        with session_scope(self.engine) as s:
            s.add(Rate(gpu_type=gpu_type, capacity=capacity, per_gpu_hour=price))
        return self

    def job(self, job: str, team: str, *, gpus: int, submit: float,
            segments: list[tuple[float, float | None, int, str]], priority_class: int = 3,
            gpu_type: str = "h100", capacity: str = "reserved",
            fractions: tuple[float, float] | None = None) -> Ledger:
        """``segments``: (start, end, gpus, nodes hostlist)."""
        with session_scope(self.engine) as s:
            row = Job(slurm_job_id=job, cluster="c", account=team, user=f"{team}-u",
                      gpus=gpus, priority_class=priority_class, hints="", submitted_at=at(submit),
                      state="COMPLETED")
            s.add(row)
            s.flush()
            for i, (st, en, g, nodes) in enumerate(segments):
                s.add(UsageRecord(job_id=row.id, segment=i, account=team, gpu_type=gpu_type,
                                  gpus=g, nodes=nodes, started_at=at(st),
                                  ended_at=None if en is None else at(en), start_epoch=int(st),
                                  end_epoch=None if en is None else int(en), user=f"{team}-u",
                                  capacity=capacity,
                                  compute_fraction=fractions[0] if fractions else None,
                                  productive_fraction=fractions[1] if fractions else None))
        return self

    def node(self, name: str, at: float, state: str = "idle", *, gpus: int = 8,
             gpu_type: str = "h100", reason: str = "") -> Ledger:
        """A node_states row: ``name`` as sinfo showed it from ``at`` on."""
        with session_scope(self.engine) as s:
            s.add(NodeState(cluster="c", node=name, at_epoch=int(at), state=state,
                            gpu_type=gpu_type, gpus=gpus, reason=reason))
        return self

    def state(self, job: str, state: str, ended: float | None = None) -> Ledger:
        from sqlalchemy import update

        with session_scope(self.engine) as s:
            s.execute(update(Job).where(Job.slurm_job_id == job).values(
                state=state, ended_epoch=None if ended is None else int(ended)))
        return self

    def samples(self, node: str, gpu: int, start: float, sm: list[float], *, step: float = 60,
                mem: float = 30000.0, power: list[float] | None = None) -> Ledger:
        watts = power if power is not None else [500.0] * len(sm)
        rows = [{"node": node, "gpu": gpu, "at_epoch_ms": int((start + i * step) * 1000),
                 "sm_util": v, "mem_used_mib": mem, "power_w": w}
                for i, (v, w) in enumerate(zip(sm, watts, strict=True))]
        with session_scope(self.engine) as s:
            s.execute(insert(GpuSample.__table__), rows)
        return self
