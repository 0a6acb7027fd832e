"""failures/respond.py rule 4: a running railgang job whose progress reports stopped is hung,
requeued once and ordered first in its class; no evidence, no action."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.detect import FaultKind
from railgang.daemon.failures.flaky import FlakyRules
from railgang.daemon.failures.respond import HangRules, JobView, Memory, NodeView, respond

RULES = FlakyRules(count=3, window_s=3600.0, retry_s=600.0)
HANGS = HangRules(steps=10.0, floor_s=300.0)
UP = {n: NodeView(n, "alloc", busy=True) for n in ("a", "b")}
# started at 1000, last report at 2000 at step 500, 2 s per step
SILENT = JobView("7", "RUNNING", 0, ("a", "b"), ours=True, progress=(2000.0, 500.0, 2.0),
                 started_at=1000.0)


def test_silent_past_the_floor_is_requeued_once_and_first_in_class() -> None:
    m, r = respond(Memory(), [SILENT], UP, {}, 2299.0, RULES, HANGS)  # 299 s < floor
    assert r.requeue == () and r.faults == ()
    m, r = respond(m, [SILENT], UP, {}, 2300.0, RULES, HANGS)
    assert r.requeue == ("7",) and r.after_fault == {"7"}
    assert [(f.kind, f.node, f.job_id) for f in r.faults] == [(FaultKind.HANG, None, "7")]
    m, r = respond(m, [SILENT], UP, {}, 2310.0, RULES, HANGS)  # Slurm has not acted yet
    assert r.requeue == () and r.after_fault == {"7"}
    m, r = respond(m, [dataclasses.replace(SILENT, state="PENDING", restarts=1)], UP, {},
                   2320.0, RULES, HANGS)
    assert r.requeue == () and r.after_fault == {"7"} and r.faults == ()
    assert not m.flaky.nodes  # a hang names no node: no node is counted against
    restarted = dataclasses.replace(SILENT, restarts=1, started_at=2330.0)
    m, r = respond(m, [restarted], UP, {}, 2330.0, RULES, HANGS)  # runs again: an ordinary job
    assert r.after_fault == frozenset() and r.requeue == () and not m.hung


def test_steps_times_step_time_beyond_the_floor() -> None:
    slow = dataclasses.replace(SILENT, progress=(2000.0, 500.0, 60.0))  # 10 x 60 s = 600 s
    _, r = respond(Memory(), [slow], UP, {}, 2500.0, RULES, HANGS)
    assert r.requeue == ()
    _, r = respond(Memory(), [slow], UP, {}, 2600.0, RULES, HANGS)
    assert r.requeue == ("7",)


@pytest.mark.parametrize(("job", "why"), [
    (dataclasses.replace(SILENT, progress=None), "no report at all"),
    (dataclasses.replace(SILENT, progress=(2000.0, 500.0, None)), "no step time"),
    (dataclasses.replace(SILENT, started_at=2100.0), "the report is from before this run"),
    (dataclasses.replace(SILENT, ours=False), "not a railgang job"),
    (dataclasses.replace(SILENT, may_requeue=False), "the user said --no-requeue"),
    (dataclasses.replace(SILENT, state="PENDING"), "not running"),
    (dataclasses.replace(SILENT, progress=(9e12, 500.0, 2.0)), "a report from the future"),
], ids=["none", "no-step-time", "stale-run", "not-ours", "no-requeue", "pending", "future"])
def test_no_evidence_no_action(job: JobView, why: str) -> None:
    _, r = respond(Memory(), [job], UP, {}, 1e5, RULES, HANGS)
    assert r.requeue == () and r.faults == (), why


def test_off_by_setting_or_rules() -> None:
    assert FailureSettings(requeue_hung=False).hangs() is None
    _, r = respond(Memory(), [SILENT], UP, {}, 1e5, RULES, None)
    assert r.requeue == ()
    _, r = respond(Memory(), [SILENT], UP, {}, 1e5, RULES, HangRules(enabled=False))
    assert r.requeue == ()
    assert FailureSettings().hangs() == HangRules(steps=10.0, floor_s=1800.0)
