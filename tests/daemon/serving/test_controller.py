"""The daemon's serving step (serving/controller.py) through run_cycle over a compressed day."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.backend import ActionResult
from railgang.daemon.clock import SimClock
from railgang.daemon.core import (
    CycleConfig,
    GangRequest,
    Job,
    Node,
    Placed,
    Preempt,
    Resize,
    Start,
    Unplaceable,
    make_snapshot,
)
from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.registry import get
from railgang.daemon.loop import run_cycle
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.controller import Declared, Outlook, serving_step, target
from railgang.daemon.serving.live import LiveServing
from railgang.daemon.serving.model import Deployment
from railgang.errors import ConfigError
from tests.daemon.core.core_builders import first_fit, job

CHAT = Deployment("chat", tp=8, min_replicas=0, max_replicas=2, switch_in_s=600.0)
POOL = ("n002", "n003")
RAMP, DROP = 3600.0, 7200.0  # demand is 2 replicas from RAMP to DROP, 0 otherwise


def on_nodes(fabric: Any, free: Mapping[str, frozenset[int]], request: GangRequest, *,
             health: Any = None, seed: int = 0) -> Placed | Unplaceable:
    allowed = (free if request.nodes is None
               else {n: g for n, g in free.items() if n in request.nodes})
    return first_fit(fabric, allowed, request, health=health, seed=seed)


class Cluster:
    """Four 8-GPU nodes that carry out starts, resizes and preemptions (requeued at the
    deadline), as the Slurm backend does; a replica is ready ``switch_in_s`` after its start."""

    def __init__(self, pending: Sequence[Job]) -> None:
        self.nodes = [Node(f"n{i:03d}", 8) for i in range(4)]
        self.pending = list(pending)
        self.running: dict[str, RunningJob] = {}
        self.log: list[tuple[float, str, str]] = []  # (time, kind, job)

    def snapshot(self, now: float) -> Snapshot:
        for jid, r in list(self.running.items()):
            if r.preempt_deadline is not None and now >= r.preempt_deadline:
                del self.running[jid]
                self.pending.append(r.job)
                self.log.append((now, "requeued", jid))
        return make_snapshot(now=now, fabric=None, nodes=self.nodes,
                             running=self.running.values(), pending=self.pending)

    def apply(self, actions: Sequence[Any], now: float) -> list[ActionResult]:
        for a in actions:
            if isinstance(a, Start):
                j = next(j for j in self.pending if j.job_id == a.job_id)
                self.pending.remove(j)
                self.running[a.job_id] = RunningJob(j, a.assignment, now, a.replicas)
            elif isinstance(a, Resize):
                r = self.running[a.job_id]
                self.running[a.job_id] = dataclasses.replace(
                    r, assignment=a.assignment, replicas=a.replicas, last_resize_time=now)
            elif isinstance(a, Preempt):
                self.running[a.job_id] = dataclasses.replace(
                    self.running[a.job_id], preempt_deadline=now + a.grace_s)
            self.log.append((now, type(a).__name__, a.job_id))
        return [ActionResult(a, True, "") for a in actions]


def demand_csv(tmp_path: Path, surge_at: float | None = None) -> Path:
    rows = ["time_s,deployment,replicas,tp,max_replicas,switch_in_s",
            "0,chat,0,8,2,600", f"{RAMP:.0f},chat,2,8,2,600", f"{DROP:.0f},chat,0,8,2,600"]
    path = tmp_path / "demand.csv"
    path.write_text("\n".join(rows) + "\n")
    if surge_at is None:
        return path
    seen = tmp_path / "seen.csv"
    seen.write_text("\n".join([*rows, f"{surge_at:.0f},chat,1,8,2,600",
                               f"{surge_at + 600:.0f},chat,0,8,2,600"]) + "\n")
    return seen


def day(tmp_path: Path, surge_at: float | None = None,
        training: Sequence[Any] = ()) -> tuple[Cluster, LiveServing]:
    replicas = [job(f"r{i}").gpus(8).tp(8).cls(0).with_(serving="chat").at(0).build()
                for i in range(2)]
    cluster = Cluster([*replicas, *(t.build() for t in training)])
    forecast = demand_csv(tmp_path)
    seen = demand_csv(tmp_path, surge_at) if surge_at is not None else forecast
    live = LiveServing(ServingSettings(enabled=True, demand_file=seen, forecast_file=forecast,
                                       pools={"chat": "n[002-003]"}, margin_s=300.0,
                                       drain_grace_s=60.0), 0.0)
    clock = SimClock(0.0)
    config = CycleConfig()
    steps = live.pipeline()  # the serving step before the core, as the daemon runs it
    for _ in range(160):  # a cycle a minute for 160 minutes
        run_cycle(cluster, get("fifo"), clock, random.Random(0), config=config,
                  placer=on_nodes, steps=steps)
        live.record(steps.memory["serving"], clock.now())
        clock.advance(60.0)
    return cluster, live


def events(cluster: Cluster, kind: str, job_id: str | None = None) -> list[float]:
    return [t for t, k, j in cluster.log if k == kind and (job_id is None or j == job_id)]


def test_replicas_start_ahead_of_the_ramp_and_drain_after_the_drop(tmp_path: Path) -> None:
    cluster, live = day(tmp_path)
    starts = sorted(events(cluster, "Start", "r0") + events(cluster, "Start", "r1"))
    assert len(starts) == 2
    # warm by the ramp: started at least a switch-in before it, within switch-in + margin
    assert all(RAMP - 600 - 300 <= t <= RAMP - 600 for t in starts)
    drains = sorted(events(cluster, "Preempt", "r0") + events(cluster, "Preempt", "r1"))
    assert len(drains) == 2 and all(DROP <= t <= DROP + 60 for t in drains)
    assert live.unforecast_started == 0


def test_borrowers_shrink_before_rigid_ones_are_preempted(tmp_path: Path) -> None:
    """An elastic borrower takes the lent pool overnight; the take-back shrinks it (never a
    preemption), a rigid batch job without a time limit never borrows, and the borrower grows
    back onto the pool after the evening drop."""
    el = job("el").gpus(32).tp(8).elastic(1, 4).cls(3).at(1)
    rg = job("rg").gpus(8).tp(8).cls(3).at(2)
    cluster, _ = day(tmp_path, training=[el, rg])
    grows = events(cluster, "Resize", "el")
    assert not events(cluster, "Preempt", "el")
    assert any(RAMP - 900 <= t <= RAMP - 600 for t in grows)  # the take-back: a shrink
    assert any(t > DROP for t in grows)  # lent again after the drop: grown back
    rg_start = events(cluster, "Start", "rg")
    assert rg_start and rg_start[0] >= RAMP - 900  # it got a training node once el shrank
    assert not {"n002", "n003"} & set(cluster.running["rg"].assignment)


def test_an_unforecast_surge_goes_through_the_reactive_path_and_is_counted(
        tmp_path: Path) -> None:
    cluster, live = day(tmp_path, surge_at=1200.0)
    starts = sorted(events(cluster, "Start"))
    assert starts[0] == pytest.approx(1200.0)  # at once, not a switch-in early
    assert live.unforecast_started == 1


def test_take_back_times_follow_the_forecast() -> None:
    snap = make_snapshot(now=0.0, fabric=None, nodes=[Node(f"n{i:03d}", 8) for i in range(4)])
    upper = [0.0] * 60 + [1.0] * 30 + [2.0] * 30  # 1 replica from minute 60, 2 from minute 90
    step = serving_step(snap, [Declared(CHAT, POOL)], {"chat": Outlook(0, upper, 60.0)})
    # a replica needed at minute 60 is taken back 15 minutes (switch-in + margin) earlier
    assert sorted(t or 0.0 for t in step.status[0].lent.values()) == [45 * 60.0, 75 * 60.0]
    assert step.snapshot.serving is not None
    assert dict(step.snapshot.serving.lent) == dict(step.status[0].lent)


@pytest.mark.parametrize(("upper", "want"), [
    ([0.0] * 30, 0), ([0.0] * 10 + [1.2] * 20, 2), ([5.0], 2), ([], 0),
], ids=["idle", "ramp-in-window", "capped", "no-forecast"])
def test_target_is_the_window_maximum_within_the_range(upper: list[float], want: int) -> None:
    assert target(CHAT, upper, 60.0, 300.0) == want


def test_unknown_pool_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not in"):
        LiveServing(ServingSettings(enabled=True, demand_file=demand_csv(tmp_path),
                                    pools={"nope": "n001"}), 0.0)


def test_a_bad_demand_file_later_keeps_the_last_reading(tmp_path: Path) -> None:
    path = demand_csv(tmp_path)
    live = LiveServing(ServingSettings(enabled=True, demand_file=path,
                                       pools={"chat": "n[002-003]"}), 0.0)
    path.write_bytes(b"\x00\xff" * 100)
    assert live.outlooks(RAMP)["chat"].demand_now == 2


def test_pending_replicas_beyond_the_target_are_out_of_the_cores_sight() -> None:
    reps = [job(f"r{i}").gpus(8).tp(8).cls(0).with_(serving="chat").build() for i in range(2)]
    snap = make_snapshot(now=0.0, fabric=None, nodes=[Node(f"n{i:03d}", 8) for i in range(4)],
                         pending=reps)
    step = serving_step(snap, [Declared(CHAT, POOL)], {"chat": Outlook(1, [1.0], 60.0)})
    assert [j.job_id for j in step.snapshot.pending] == ["r0"]
    assert step.status[0].queued == 1 and step.status[0].released == 1
    assert MappingProxyType(dict(step.snapshot.serving.lent)) == step.status[0].lent  # type: ignore[union-attr]


def test_a_node_in_two_pools_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    path.write_text("time_s,deployment,replicas,tp\n0,chat,1,8\n0,code,1,2\n")
    with pytest.raises(ConfigError, match="n002 is in the pools of both chat and code"):
        LiveServing(ServingSettings(enabled=True, demand_file=path,
                                    pools={"chat": "n[001-002]", "code": "n[002-003]"}), 0.0)


def test_serving_status_command_shows_the_last_step(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from railgang.daemon.cli.main import app

    status = tmp_path / "serving.json"
    live = LiveServing(ServingSettings(enabled=True, demand_file=demand_csv(tmp_path),
                                       pools={"chat": "n[002-003]"}, status_file=status), 0.0)
    live.step(make_snapshot(now=60.0, fabric=None, nodes=[Node(f"n{i:03d}", 8) for i in range(4)]))
    env = {"RAILGANG_CONFIG": "", "RAILGANG_SERVING__STATUS_FILE": str(status)}
    res = CliRunner().invoke(app, ["serving", "status"], env=env)
    assert res.exit_code == 0, res.output
    assert "chat: tp 8, replicas 0 running, target 0" in res.output
    # two replicas at the ramp: both nodes back a switch-in and the margin before it
    assert "lent n002 until 1970-01-01 00:45 UTC" in res.output
    assert "lent n003 until 1970-01-01 00:45 UTC" in res.output
    status.unlink()
    res = CliRunner().invoke(app, ["serving", "status", "--json"], env=env)
    assert res.exit_code != 0 and "no serving status" in str(res.exception)


@pytest.mark.parametrize("expr", ["", "n[", "n[1-99999999]", "n/002", "a b"],
                         ids=["empty", "open", "huge", "slash", "space"])
def test_a_bad_pool_is_one_config_error(tmp_path: Path, expr: str) -> None:
    with pytest.raises(ConfigError, match=r"serving\.pools\.chat"):
        LiveServing(ServingSettings(enabled=True, demand_file=demand_csv(tmp_path),
                                    pools={"chat": expr}), 0.0)


def test_the_surge_metric_counts_replicas_the_reactive_path_added() -> None:
    from prometheus_client import CollectorRegistry

    from railgang.daemon.service.metrics import DaemonMetrics
    from railgang.daemon.serving.controller import Status

    reg = CollectorRegistry()
    m = DaemonMetrics(reg)

    def st(target: int, want: int) -> Status:
        return Status("chat", target, want, want, 0, 0, (), (), MappingProxyType({}))

    m.observe_serving((), (st(2, 2),))
    m.observe_serving((st(2, 2),), (st(2, 3),))  # demand now one above the forecast's target
    m.observe_serving((st(2, 3),), (st(2, 3),))  # the same surge: counted once
    m.observe_serving((st(2, 3),), (st(3, 3),))  # the forecast caught up
    got = reg.get_sample_value("railgang_serving_unforecast_replicas_total",
                               {"deployment": "chat"})
    assert got == 1.0
    assert reg.get_sample_value("railgang_serving_replicas", {"deployment": "chat",
                                                              "kind": "want"}) == 3.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=40, allow_nan=False), max_size=60),
       st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=30),
       st.sampled_from([0.0, 60.0, 900.0, 3600.0]), st.sampled_from([0.0, 300.0]))
def test_targets_in_one_pass_are_target_at_every_step(upper: list[float], low: int, high: int,
                                                      switch_in_s: float, margin_s: float) -> None:
    """The sliding maximum gives what ``target(.., k)`` gives at every step (the take-back
    times and the next rise read it instead of one window per step)."""
    from railgang.daemon.serving.controller import target, targets
    from railgang.daemon.serving.model import Deployment

    dep = Deployment("d", tp=1, min_replicas=low, max_replicas=high, switch_in_s=switch_in_s)
    assert targets(dep, upper, 60.0, margin_s) == [target(dep, upper, 60.0, margin_s, k)
                                                   for k in range(len(upper))]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=40, allow_nan=False), max_size=60),
       st.integers(min_value=0, max_value=6), st.integers(min_value=0, max_value=5),
       st.sampled_from([1, 2, 8, 16]))
def test_take_back_times_are_the_first_step_each_node_is_needed(
        upper: list[float], lent: int, held: int, tp: int) -> None:
    """Node ``i`` of the lent order goes back at the first step whose target takes more than
    ``held + i`` nodes (the step-by-step walk it replaced, kept here as the reference)."""
    from railgang.daemon.serving.controller import (
        Declared,
        _ahead,
        _take_back_times,
        nodes_for,
        target,
    )
    from railgang.daemon.serving.model import Deployment

    dep = Deployment("d", tp=tp, min_replicas=0, max_replicas=30, switch_in_s=300.0)
    decl = Declared(dep, ())
    order = [f"n{i}" for i in range(lent)]
    want: dict[str, float | None] = dict.fromkeys(order)
    left = list(order)
    for k in range(len(upper)):
        need = nodes_for(dep, target(dep, upper, 60.0, 300.0, k), 8)
        while left and need > held + (len(order) - len(left)):
            want[left.pop(0)] = 1000.0 + k * 60.0
    got = _take_back_times(decl, _ahead(dep, upper, 60.0, 300.0), order, held, 8, 1000.0, 60.0)
    assert got == want
