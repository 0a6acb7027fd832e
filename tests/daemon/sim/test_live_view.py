"""The simulator's running views: state computed when read, equal to the eager arithmetic, kept
while the job does not change, and fixed at the snapshot that handed them out (issue 12, speed)."""

from __future__ import annotations

import pytest

from railgang.daemon.core.model.job import Job, JobState, RunningJob
from railgang.daemon.sim.accounting import Now, SimJob
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
def test_the_view_reads_what_progress_at_computes(now: float, restore: bool) -> None:
    sj = _running(restore=restore)
    view = sj.running_view(Now(now), oracle=True)
    assert (view.job.attained_gpu_s, view.job.work_remaining_s) == sj.progress_at(now)
    assert sj.attained_at(now) == view.job.attained_gpu_s
    assert isinstance(view, RunningJob) and isinstance(view.job, Job)
    assert view.job.request is sj.request and view.gpus == 8 and view.replicas == 8


def test_without_the_oracle_the_work_left_is_unknown() -> None:
    view = _running(oracle=False).running_view(Now(100.0), oracle=False)
    assert view.job.work_remaining_s is None and view.job.remaining_at(8) is None
    assert view.job.attained_gpu_s == 8 * 90.0


def test_a_view_handed_out_never_moves_with_the_job() -> None:
    sj = _running()
    before = sj.running_view(Now(100.0), oracle=True)
    sj.advance(300.0)  # the backend carries on after the cycle: a kill rolls the job back
    sj.signal(300.0, 0.0, panic_checkpoint=False)
    sj.roll_back(300.0)
    sj.requeued(300.0, oracle=True)
    assert before.job.state == JobState(8 * 90.0, 1000.0 - 0.5 * 90.0)
    assert before.job.preemptions == 0 and before.preempt_deadline is None


def test_a_stopped_job_makes_no_progress_in_its_view() -> None:
    sj = _running()
    sj.signal(100.0, 600.0, panic_checkpoint=True)  # saves, then waits for the kill
    view = sj.running_view(Now(130.0), oracle=True)
    assert view.job.work_remaining_s == pytest.approx(1000.0 - 0.5 * 90.0)
    assert view.preempt_deadline == 100.0 + sj.request.checkpoint_cost_s


def test_a_view_is_kept_while_the_job_does_not_change_and_reads_the_new_time() -> None:
    sj, clock = _running(), Now(100.0)
    view = sj.running_view(clock, oracle=True)
    assert view.job.attained_gpu_s == 8 * 90.0
    clock.t = 200.0  # the backend's next snapshot
    assert sj.running_view(clock, oracle=True) is view
    assert (view.job.attained_gpu_s, view.job.work_remaining_s) == sj.progress_at(200.0)
    assert sj.running_view(Now(200.0), oracle=True) is not view  # another clock: its own view
    sj.resized(200.0)
    assert sj.running_view(clock, oracle=True) is not view  # the job changed
