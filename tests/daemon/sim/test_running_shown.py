"""The running mapping a replay's snapshots share (``views.RunningShown``): patched from the last
one as jobs enter, leave and change, it must equal a mapping built from scratch every time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.sim.views import RunningShown


class _Job:
    """What ``RunningShown`` reads of a ``SimJob``: its id, its view (a fresh object per
    build), ``changed``."""

    def __init__(self, job_id: str) -> None:
        self.tj = SimpleNamespace(job_id=job_id)
        self.view: Any = None
        self.stale: set[str] | None = None
        self.builds = 0

    def running_view(self, oracle: bool) -> Any:
        if self.view is None:
            self.builds += 1
            self.view = (self.tj.job_id, self.builds)
        return self.view

    def changed(self) -> None:
        self.view = None
        if self.stale is not None:
            self.stale.add(self.tj.job_id)


_steps = st.lists(st.tuples(st.sampled_from(["enter", "leave", "change", "show"]),
                            st.integers(0, 40)), max_size=120)


@given(_steps)
@settings(max_examples=200, deadline=None)
def test_patched_mapping_equals_a_fresh_one(steps: list[tuple[str, int]]) -> None:
    shown, running = RunningShown(), {}
    jobs: dict[str, _Job] = {}
    for op, k in steps:
        jid = f"j{k:03d}" if k % 7 else f"a{k}"  # some ids sort before the rest: a rebuild
        if op == "enter" and jid not in running:
            job = jobs[jid] = jobs.get(jid) or _Job(jid)
            job.changed()  # a new run: its view is built when next shown
            running[jid] = job
            shown.entered(job)
        elif op == "leave" and jid in running:
            del running[jid]
            shown.left(jid)
        elif op == "change" and jid in running:
            running[jid].changed()
        mapping, _ = shown.mapping(running, oracle=False)
        assert list(mapping) == sorted(running)
        assert all(mapping[j] is running[j].view is not None for j in running)


def test_nothing_changed_gives_the_same_mapping() -> None:
    shown, job = RunningShown(), _Job("j1")
    shown.entered(job)
    first, renewed = shown.mapping({"j1": job}, oracle=False)
    again, renewed_again = shown.mapping({"j1": job}, oracle=False)
    assert renewed and not renewed_again and again is first
    job.changed()
    third, renewed = shown.mapping({"j1": job}, oracle=False)
    assert renewed and third is not first and third["j1"] is job.view
