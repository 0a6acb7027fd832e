"""The simulator's running views: progress computed for the time asked, equal to the eager
arithmetic, kept while the job does not change, and never moved by the backend carrying on
(issue 12, speed; issue 22: no clock inside the value, the core asks ``attained_at(now)``)."""

from __future__ import annotations

import pytest

from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.sim.accounting import SimJob
from railgang.daemon.sim.progress import job_request
from railgang.daemon.sim.recorder import Recorder
from railgang.daemon.sim.traces.model import TraceJob


def _running(oracle: bool = True, restore: bool = False) -> SimJob:
    tj = TraceJob("a", 0.0, 8, 1000.0, account="x")
    sj = SimJob(tj, job_request(tj), Recorder().record(tj), oracle=oracle, integral=0.0)
    sj.restore_needed = restore
    sj.allocate({"n1": tuple(range(8))}, 8, 0.5)
    sj.begin_run(10.0)
    return sj


@pytest.mark.parametrize("now", [10.0, 50.0, 130.0, 400.0, 5000.0], ids=lambda t: f"t{t:g}")
@pytest.mark.parametrize("restore", [False, True], ids=["fresh", "restored"])
def test_the_view_answers_what_progress_at_computes(now: float, restore: bool) -> None:
    sj = _running(restore=restore)
    view = sj.running_view(oracle=True)
    assert (view.attained_at(now), view.work_left_at(now)) == sj.progress_at(now)
    assert sj.attained_at(now) == view.attained_at(now)
    assert isinstance(view, RunningJob) and isinstance(view.job, Job)
    assert view.job.request is sj.request and view.gpus == 8 and view.replicas == 8
    left = view.work_left_at(now)
    assert left is not None and view.remaining_at(now) == left / sj.request.rate(8)


def test_without_the_oracle_the_work_left_is_unknown() -> None:
    view = _running(oracle=False).running_view(oracle=False)
    assert view.work_left_at(100.0) is None and view.remaining_at(100.0) is None
    assert view.attained_at(100.0) == 8 * 90.0


def test_a_view_handed_out_never_moves_with_the_job() -> None:
    sj = _running()
    before = sj.running_view(oracle=True)
    sj.advance(300.0)  # the backend carries on after the cycle: a kill rolls the job back
    sj.signal(300.0, 0.0, panic_checkpoint=False)
    sj.roll_back(300.0)
    sj.requeued(300.0, oracle=True)
    assert (before.attained_at(100.0), before.work_left_at(100.0)) == (8 * 90.0, 1000.0 - 0.5 * 90.0)
    assert before.job.preemptions == 0 and before.job.last_preempted_at is None
    assert before.preempt_deadline is None


def test_a_stopped_job_makes_no_progress_in_its_view() -> None:
    sj = _running()
    sj.signal(100.0, 600.0, panic_checkpoint=True)  # saves, then waits for the kill
    view = sj.running_view(oracle=True)
    assert view.work_left_at(130.0) == pytest.approx(1000.0 - 0.5 * 90.0)
    assert view.work_left_at(400.0) == view.work_left_at(130.0)
    assert view.preempt_deadline == 100.0 + sj.request.checkpoint_cost_s


def test_a_view_is_kept_while_the_job_does_not_change_and_answers_for_any_time() -> None:
    sj = _running()
    view = sj.running_view(oracle=True)
    assert view.attained_at(100.0) == 8 * 90.0
    assert sj.running_view(oracle=True) is view  # the backend's next snapshot keeps it
    assert (view.attained_at(200.0), view.work_left_at(200.0)) == sj.progress_at(200.0)
    assert view.attained_at(100.0) == 8 * 90.0  # an older snapshot asks for its own time
    sj.resized(200.0)
    assert sj.running_view(oracle=True) is not view  # the job changed
