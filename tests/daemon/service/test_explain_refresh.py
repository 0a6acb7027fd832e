"""The explanation tracker writes a waiting job's decision at once and its drifting figures
(position, jobs ahead, free GPUs, fair share, estimate) only every ``refresh_s``, a sixth of the
queue a cycle at most, the stalest first (docs/daemon.md, ``daemon.explain_refresh_s``)."""

from __future__ import annotations

import json
from typing import Any

from railgang.daemon.service.explain import Tracker, _json, _steady
from railgang.db.repositories.explanations import ExplanationRow


def _row(job: str, *, reason: str = "waiting_for_gpus", position: int = 1, free: int = 0,
         blocked_by: tuple[str, ...] = (), estimate: dict[str, Any] | None = None) -> ExplanationRow:
    data: dict[str, Any] = {"needed": 8, "free": free, "ahead": position - 1, "blocked_by": list(blocked_by),
                            "policy": "fifo", "fair_share": {"gpu_h": 1.5 + free, "rank": 0}}
    if estimate is not None:
        data["estimate"] = estimate
    return ExplanationRow(job, "waiting", "team-a", 3, 8, reason=reason, position=position,
                          queue_length=12, data=_json(data), steady=_steady(data, reason, ""))


def _ids(rows: list[ExplanationRow]) -> list[str]:
    return [r.job_id for r in rows]


def test_a_reason_is_written_at_once_and_a_position_only_once_the_row_is_refresh_s_old() -> None:
    t = Tracker(refresh_s=60.0)
    jobs = [f"j{i}" for i in range(12)]
    write, _ = t.changes([_row(j, position=i + 1) for i, j in enumerate(jobs)], jobs, 0.0)
    assert _ids(write) == jobs  # all new
    # a start ahead moved every position; j5's reason changed
    moved = [_row(j, position=i, reason="priority" if j == "j5" else "waiting_for_gpus")
             for i, j in enumerate(jobs)]
    write, gone = t.changes(moved, jobs, 10.0)
    assert _ids(write) == ["j5"] and gone == []
    assert json.loads(write[0].data)["ahead"] == 4  # a row written is written whole, as it is now
    write, _ = t.changes(moved, jobs, 59.0)
    assert write == []  # the others' stored rows are not 60 s old yet
    write, _ = t.changes(moved, jobs, 61.0)
    assert len(write) == 2 and "j5" not in _ids(write)  # a sixth of 12 waiting, stalest first
    write, _ = t.changes(moved, jobs, 62.0)
    assert len(write) == 2
    for now in (63.0, 64.0, 65.0, 66.0):
        t.changes(moved, jobs, now)
    assert t.changes(moved, jobs, 67.0)[0] == []  # every row written as it is now
    assert t.changes(moved, jobs, 200.0)[0] == []  # and nothing moved since


def test_a_change_beside_the_drift_is_written_at_once() -> None:
    t = Tracker(refresh_s=60.0)
    t.changes([_row("a", free=0)], ["a"], 0.0)
    assert t.changes([_row("a", free=8)], ["a"], 1.0)[0] == []  # free GPUs drift
    write, _ = t.changes([_row("a", free=8, blocked_by=("b",))], ["a"], 2.0)
    assert _ids(write) == ["a"]  # what blocks it is the decision


def test_refresh_zero_writes_every_change_and_gone_jobs_are_forgotten() -> None:
    t = Tracker(refresh_s=0.0)
    t.changes([_row("a"), _row("b", position=2)], ["a", "b"], 0.0)
    write, _ = t.changes([_row("b", position=1)], ["b"], 1.0)
    assert _ids(write) == ["b"]
    t = Tracker(refresh_s=60.0)
    t.changes([_row("a"), _row("b", position=2)], ["a", "b"], 0.0)
    write, gone = t.changes([_row("b", position=1)], ["b"], 1.0)
    assert write == [] and gone == ["a"] and "a" not in t.written
    write, _ = t.changes([_row("a", position=2), _row("b", position=1)], ["a", "b"], 2.0)
    assert _ids(write) == ["a"]  # back: a row the table marked gone is written again


def test_a_row_that_stands_is_not_built_until_it_is_due() -> None:
    t = Tracker(refresh_s=60.0)
    row = _row("a", position=3)
    t.changes([row], ["a"], 0.0)
    assert t.stands("a", row.steady, 59.0)  # build_rows skips it: the stored row stands
    assert not t.stands("a", _row("a", reason="priority").steady, 1.0)  # its decision changed
    assert not t.stands("a", row.steady, 60.0)  # due: built, and written if a figure moved
    assert not t.stands("b", row.steady, 1.0)  # never written
    assert not Tracker(refresh_s=0.0).stands("a", row.steady, 1.0)


def test_a_first_estimate_is_written_at_once_and_a_moved_one_on_refresh() -> None:
    t = Tracker(refresh_s=60.0)
    t.changes([_row("a")], ["a"], 0.0)
    first = {"status": "estimated", "start": 500.0}
    assert _ids(t.changes([_row("a", estimate=first)], ["a"], 2.0)[0]) == ["a"]
    moved = {"status": "estimated", "start": 530.0}
    assert t.changes([_row("a", estimate=moved)], ["a"], 4.0)[0] == []  # its time drifts
    assert _ids(t.changes([_row("a", estimate={"status": "never"})], ["a"], 6.0)[0]) == ["a"]
