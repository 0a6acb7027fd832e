"""Leases renewed off the cycle's path (issue 37 item 3, slurm/cli/renewer.py): batches on a
thread of its own; a Start (or a release) waits out the batch in flight and drops its job from
the queue, so no renewal of a job reaches slurmctld after its Start; the lease end is the
cycle's clock at hand-over plus the time since."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from railgang.daemon.backend import ActionResult
from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.actions import Action, Start
from railgang.daemon.slurm.cli import backend as backend_mod
from railgang.daemon.slurm.cli.backend import CliBackend
from railgang.daemon.slurm.cli.renewer import LeaseRenewer
from railgang.daemon.slurm.cli.runner import CommandResult
from railgang.daemon.slurm.cli.snapshot import build_observation


class Sent:
    """A renewal sink that records (ids, now) and can be held mid-batch."""

    def __init__(self, refuse: Sequence[str] = ()) -> None:
        self.batches: list[tuple[list[str], float]] = []
        self.entered = threading.Event()
        self.go = threading.Event()
        self.go.set()
        self.refuse = set(refuse)

    def __call__(self, ids: list[str], now: float) -> dict[str, str]:
        self.batches.append((list(ids), now))
        self.entered.set()
        assert self.go.wait(10)
        if "boom" in ids:
            raise RuntimeError("slurmctld went away")
        return {j: "Invalid job id specified" for j in ids if j in self.refuse}


def test_renewals_go_in_batches_and_are_counted() -> None:
    sent = Sent(refuse=["7"])
    r = LeaseRenewer(sent, batch=100)
    r.submit([str(i) for i in range(250)], 50.0)
    assert r.flush(10)
    assert [len(ids) for ids, _ in sent.batches] == [100, 100, 50]
    assert r.take() == (249, {"7": "Invalid job id specified"}) and r.take() == (0, {})
    r.close()


def test_an_id_handed_over_twice_is_renewed_once_in_its_first_place() -> None:
    sent = Sent()
    sent.go.clear()
    r = LeaseRenewer(sent, batch=2)
    r.submit(["1"], 0.0)
    assert sent.entered.wait(5)  # "1" in flight
    r.submit(["2", "3", "4"], 0.0)
    r.submit(["4", "2", "5"], 0.0)
    sent.go.set()
    assert r.flush(10)
    assert [ids for ids, _ in sent.batches] == [["1"], ["2", "3"], ["4", "5"]]
    r.close()


def test_the_lease_end_is_taken_when_the_batch_is_sent() -> None:
    clock = [100.0]
    sent = Sent()
    r = LeaseRenewer(sent, monotonic=lambda: clock[0])
    sent.go.clear()
    r.submit(["1"], 5000.0)  # the cycle's clock: 5000 at monotonic 100
    assert sent.entered.wait(5)
    clock[0] = 130.0  # the next batch goes out 30 s later
    r.submit(["2"], 5000.0 - 10)  # handed over at 4990, monotonic 130 (a clock that lags)
    sent.go.set()
    assert r.flush(10)
    assert sent.batches == [(["1"], 5000.0), (["2"], 4990.0)]
    r.close()


def test_a_failing_batch_is_refused_and_the_thread_goes_on() -> None:
    sent = Sent()
    r = LeaseRenewer(sent, batch=1)
    r.submit(["boom", "2"], 0.0)
    assert r.flush(10)
    done, refused = r.take()
    assert done == 1 and list(refused) == ["boom"] and "slurmctld went away" in refused["boom"]
    r.close()


def test_withhold_waits_out_the_batch_in_flight_and_drops_the_ids() -> None:
    sent = Sent()
    sent.go.clear()
    r = LeaseRenewer(sent, batch=2)
    r.submit(["1", "2", "3", "4"], 0.0)
    assert sent.entered.wait(5)  # ["1", "2"] in flight
    r.withhold(["4"])  # not in flight: dropped at once, no wait for the batch
    done = threading.Event()

    def start() -> None:
        r.withhold(["2", "3"])
        done.set()

    t = threading.Thread(target=start)
    t.start()
    assert not done.wait(0.3)  # a Start of "2" now could be overtaken by its renewal
    sent.go.set()
    assert done.wait(5)
    t.join()
    assert r.flush(10)
    assert [ids for ids, _ in sent.batches] == [["1", "2"]]  # "3" and "4" were never sent
    r.close()


def test_close_stops_the_thread_and_drops_the_queue() -> None:
    sent = Sent()
    r = LeaseRenewer(sent)
    r.submit(["1"], 0.0)
    assert r.flush(10)
    r.close()
    thread = r._thread
    assert thread is not None and not thread.is_alive()
    r.submit(["2"], 0.0)  # after close: nothing is sent
    assert [ids for ids, _ in sent.batches] == [["1"]]


class BlockingRunner:
    """Records every argv; a lease update waits until ``go`` is set."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.calls = 0
        self.entered = threading.Event()
        self.go = threading.Event()

    def attempt(self, argv: Sequence[str], stdin: str | None = None) -> CommandResult:
        self.calls += 1
        if "update" in argv and any(a.startswith("StartTime=") for a in argv):
            self.entered.set()
            assert self.go.wait(10)
            self.log.append("renew " + argv[2].removeprefix("jobid="))
        return CommandResult(argv=tuple(argv), rc=0, stdout="", stderr="", attempts=1, seconds=0.0)


def test_a_start_never_races_a_renewal_of_its_job(monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    runner = BlockingRunner()
    be = CliBackend(SlurmSettings(lease_s=120), runner=runner,  # type: ignore[arg-type]
                    read_shares=False)
    be.last = build_observation(1000.0, [], [], None, lease_s=120.0)

    def started(_runner: Any, _obs: Any, actions: Sequence[Action], _now: float,
                _config: Any, **_kw: Any) -> list[ActionResult]:
        runner.log.append("start " + ",".join(a.job_id for a in actions if isinstance(a, Start)))
        return [ActionResult(a, True, "") for a in actions]

    monkeypatch.setattr(backend_mod, "apply_actions", started)
    assert be.renew_leases_later(["1", "2"], 1000.0) == (0, {})
    assert runner.entered.wait(5)  # "1,2" in flight
    with caplog.at_level(logging.WARNING, "railgang.daemon.slurm"):
        be.renew_leases_later([], 1000.0)  # the next cycle: the last one's are still going out
    assert "2 lease renewals still queued from the last cycle" in caplog.text
    applied = threading.Thread(target=be.apply, args=([Start("2", {"n1": (0, 1)}, 1)], 1000.0))
    applied.start()
    time.sleep(0.3)
    assert runner.log == []  # the Start waits for the renewal in flight
    runner.go.set()
    applied.join(5)
    assert runner.log == ["renew 1,2", "start 2"]
    # the next cycle still lists "2" as due (its squeue row lags): no renewal for it
    be.renew_leases_later(["2", "3"], 1010.0)
    assert be.renewer.flush(10)
    assert runner.log[2:] == ["renew 3"]
    assert be.renew_leases_later([], 1020.0) == (1, {})
    be.close()
