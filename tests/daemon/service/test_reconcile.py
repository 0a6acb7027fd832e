"""The pure reconciliation table: every action kind, applied / not applied / job vanished; and the
journal codec round-trips every action exactly."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.service import codec
from railgang.daemon.service.reconcile import OpenEntry, Verdict, judge, reconcile
from railgang.daemon.sim.live import LiveSim
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

A, X, R = Verdict.APPLIED, Verdict.ABANDONED, Verdict.RESEND
ON_01 = {"n01": (0, 1, 2, 3), "n02": (0, 1, 2, 3)}


def world(*, running_on: dict[str, tuple[int, ...]] | None = None, replicas: int = 2,
          signalled: bool = False, pending: bool = False, drained: bool = False,
          tagged: bool = False) -> Snapshot:
    """Job "j" (8 GPUs, tp 4, elastic 1..2 replicas) running, pending, or gone, on a simulated
    3-node cluster; node n03 drained or tagged. Built by applying actions, so every snapshot
    is one a backend really produces."""
    jobs = [TraceJob("j", 0.0, 8, 3600.0, tp=4, elastic_min=1, elastic_max=2)]
    sim = LiveSim(fabric_from_shape(3, 8, 3), jobs if running_on or pending else [], start=0.0)
    sim.snapshot(0.0)
    todo: list[Action] = []
    if running_on is not None:
        todo.append(Start("j", running_on, replicas))
    if signalled:
        todo.append(Preempt("j", grace_s=600.0))
    if drained:
        todo.append(DrainNode("n03", "lame link"))
    if tagged:
        todo.append(TagNode("n03", "lame-link"))
    assert all(r.ok for r in sim.apply(todo, 0.0))
    return sim.snapshot(1.0)


START = Start("j", ON_01, replicas=2, cost=1.0)
SHRINK = Resize("j", replicas=1, assignment={"n01": (0, 1, 2, 3)}, old_replicas=2)
PREEMPT = Preempt("j", grace_s=60.0, reason=Reason.PRIORITY, for_job="k", gpus=8)

CASES = [
    ("start-running-as-planned", START, world(running_on=ON_01), A),
    ("start-still-pending", START, world(pending=True), X),
    ("start-elsewhere", START, world(running_on={"n02": (0, 1, 2, 3), "n03": (0, 1, 2, 3)}), X),
    ("start-vanished", START, world(), X),
    ("resize-took", SHRINK, world(running_on={"n01": (0, 1, 2, 3)}, replicas=1), A),
    ("resize-not-yet", SHRINK, world(running_on=ON_01), X),
    ("resize-vanished", SHRINK, world(), X),
    ("preempt-signalled", PREEMPT, world(running_on=ON_01, signalled=True), A),
    ("preempt-requeued", PREEMPT, world(pending=True), A),
    ("preempt-vanished", PREEMPT, world(), A),
    ("preempt-not-sent", PREEMPT, world(running_on=ON_01), X),
    ("drain-took", DrainNode("n03", "lame link"), world(drained=True), A),
    ("drain-not-yet", DrainNode("n03", "lame link"), world(), X),
    ("drain-node-vanished", DrainNode("n99", "lame link"), world(), X),
    ("tag-took", TagNode("n03", "lame-link"), world(tagged=True), A),
    ("tag-not-yet", TagNode("n03", "lame-link"), world(), X),
    ("priority-pending-resend", SetPriority("j", 7), world(pending=True), R),
    ("priority-running", SetPriority("j", 7), world(running_on=ON_01), X),
    ("priority-vanished", SetPriority("j", 7), world(), X),
]


@pytest.mark.parametrize(("action", "snapshot", "verdict"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_verdicts(action: Action, snapshot: Snapshot, verdict: Verdict) -> None:
    got, detail = judge(action, snapshot)
    assert got is verdict, detail
    assert detail  # every verdict says why (it lands in the journal's detail column)


def test_reconcile_keeps_order_and_abandons_unreadable_entries() -> None:
    snap = world(running_on=ON_01)
    entries = [OpenEntry(7, START), OpenEntry(8, None, "unknown action kind 'x'"),
               OpenEntry(9, SetPriority("j", 1))]
    out = reconcile(entries, snap)
    assert [(s.entry_id, s.verdict) for s in out] == [(7, A), (8, X), (9, X)]
    assert "unknown action kind" in out[1].detail


ALL = [START, SHRINK, PREEMPT, SetPriority("j", 3), DrainNode("n1", "why"), TagNode("n1", "t")]


@pytest.mark.parametrize("action", ALL, ids=lambda a: type(a).__name__)
def test_codec_round_trip_is_exact_and_canonical(action: Action) -> None:
    payload = codec.encode(action)
    assert codec.decode(codec.kind_of(action), payload) == action
    assert " " not in payload and payload == codec.encode(codec.decode(codec.kind_of(action),
                                                                       payload))


def test_codec_is_independent_of_input_order() -> None:
    a = Start("j", {"n02": (3, 1), "n01": (2, 0)}, replicas=2)
    b = Start("j", {"n01": (0, 2), "n02": (1, 3)}, replicas=2)
    assert codec.encode(a) == codec.encode(b)


@pytest.mark.parametrize(("kind", "payload", "message"), [
    ("launch", "{}", "unknown action kind"),
    ("start", "not json", "not JSON"),
    ("start", "[1]", "not a JSON object"),
    ("start", '{"job_id":"j","colour":"red"}', "unknown field"),
    ("preempt", '{"job_id":"j","grace_s":1,"reason":"no_such_reason"}', "preempt"),
], ids=["kind", "json", "object", "field", "enum"])
def test_codec_refuses_bad_payloads(kind: str, payload: str, message: str) -> None:
    with pytest.raises(codec.PayloadError, match=message):
        codec.decode(kind, payload)


def test_every_core_action_kind_has_a_journal_kind() -> None:
    import typing

    from railgang.daemon.core.model import actions
    kinds = set(typing.get_args(actions.Action))
    assert kinds == set(codec.KINDS.values())
    assert all(dataclasses.is_dataclass(k) for k in kinds)
