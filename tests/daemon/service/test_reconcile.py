"""The pure reconciliation table: every action kind, applied / not applied / job vanished; and the
journal codec round-trips every action exactly."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.core.actions import (
    Action,
    DrainNode,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.core.reasons import Reason
from railgang.daemon.core.snapshot import Node, Snapshot
from railgang.daemon.service import codec
from railgang.daemon.service.reconcile import OpenEntry, Verdict, judge, reconcile
from tests.daemon.core.core_builders import cluster, job

A, X, R = Verdict.APPLIED, Verdict.ABANDONED, Verdict.RESEND
ON_01 = {"n000": (0, 1, 2, 3), "n001": (0, 1, 2, 3)}


def world(*, running_on: dict[str, tuple[int, ...]] | None = None, replicas: int = 2,
          signalled: bool = False, pending: bool = False, drained: bool = False,
          tagged: bool = False) -> Snapshot:
    """Job "j" (8 GPUs, tp 4, elastic 1..2 replicas) running, pending, or gone; node n002."""
    c = cluster(3)
    j = job("j").gpus(8).tp(4).elastic(1, 2)
    if running_on is not None:
        c.running(j, on=running_on, replicas=replicas,
                  preempt_deadline=100.0 if signalled else None)
    if pending:
        c.pending(j)
    snap = c.build()
    n2 = Node("n002", 8, "drain" if drained else "idle",
              frozenset({"lame-link"}) if tagged else frozenset())
    return snap.replace(nodes={**snap.nodes, "n002": n2})


START = Start("j", ON_01, replicas=2, cost=1.0)
SHRINK = Resize("j", replicas=1, assignment={"n000": (0, 1, 2, 3)}, old_replicas=2)
PREEMPT = Preempt("j", grace_s=60.0, reason=Reason.PRIORITY, for_job="k", gpus=8)

CASES = [
    ("start-running-as-planned", START, world(running_on=ON_01), A),
    ("start-still-pending", START, world(pending=True), X),
    ("start-elsewhere", START, world(running_on={"n001": (0, 1, 2, 3), "n002": (0, 1, 2, 3)}), X),
    ("start-vanished", START, world(), X),
    ("resize-took", SHRINK, world(running_on={"n000": (0, 1, 2, 3)}, replicas=1), A),
    ("resize-not-yet", SHRINK, world(running_on=ON_01), X),
    ("resize-vanished", SHRINK, world(), X),
    ("preempt-signalled", PREEMPT, world(running_on=ON_01, signalled=True), A),
    ("preempt-requeued", PREEMPT, world(pending=True), A),
    ("preempt-vanished", PREEMPT, world(), A),
    ("preempt-not-sent", PREEMPT, world(running_on=ON_01), X),
    ("drain-took", DrainNode("n002", "lame link"), world(drained=True), A),
    ("drain-not-yet", DrainNode("n002", "lame link"), world(), X),
    ("drain-node-vanished", DrainNode("n999", "lame link"), world(), X),
    ("tag-took", TagNode("n002", "lame-link"), world(tagged=True), A),
    ("tag-not-yet", TagNode("n002", "lame-link"), world(), X),
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
    a = Start("j", {"n001": (3, 1), "n000": (2, 0)}, replicas=2)
    b = Start("j", {"n000": (0, 2), "n001": (1, 3)}, replicas=2)
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

    from railgang.daemon.core import actions

    kinds = set(typing.get_args(actions.Action))
    assert kinds == set(codec.KINDS.values())
    assert all(dataclasses.is_dataclass(k) for k in kinds)
