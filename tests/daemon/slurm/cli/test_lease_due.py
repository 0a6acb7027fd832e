"""Which leases a cycle renews: those ending within ``lease_renew_before_s`` (or lapsed), read
from the squeue record of each version, never the whole queue (issue 17 item 4)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from railgang.daemon.backend import ExpiringLeaseBackend
from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.records import SqueueJob, parse_squeue
from railgang.daemon.slurm.cli.snapshot import build_observation

DATA = Path(__file__).parent / "data"
NOW = 1_800_000_000.0


def waiting(version: str) -> SqueueJob:
    """The tagged waiting job of the version's recorded squeue (job 5)."""
    jobs, _ = parse_squeue((DATA / f"squeue_{version}.json").read_text())
    rec = next(j for j in jobs if j.job_id == "5")
    assert rec.pending and rec.tag is not None and rec.eligible_time > 0
    return rec


def backend_seeing(recs: list[SqueueJob], *, lease_s: int = 120, before: int = 40) -> CliBackend:
    be = CliBackend(SlurmSettings(lease_s=lease_s, lease_renew_before_s=before), read_shares=False)
    be.last = build_observation(NOW, recs, [], None, lease_s=float(lease_s))
    return be


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
@pytest.mark.parametrize(("ends_in", "due"), [
    (-5.0, True),     # lapsed: Slurm may run it natively; take it back now
    (0.0, True),
    (39.0, True),     # within lease_renew_before_s
    (40.0, False),
    (100.0, False),   # far from expiry: not touched
], ids=["lapsed", "ending-now", "ending-soon", "at-the-bound", "far"])
def test_only_leases_ending_soon_are_due(version: str, ends_in: float, due: bool) -> None:
    rec = dataclasses.replace(waiting(version), eligible_time=NOW + ends_in, reason="BeginTime")
    be = backend_seeing([rec])
    assert isinstance(be, ExpiringLeaseBackend)
    assert be.leases_due(["5"], NOW) == (["5"] if due else [])


def test_unknown_jobs_and_a_backend_that_has_not_looked_renew_everything() -> None:
    rec = dataclasses.replace(waiting("22.05"), eligible_time=NOW + 100)
    assert backend_seeing([rec]).leases_due(["5", "77"], NOW) == ["77"]
    fresh = CliBackend(SlurmSettings(), read_shares=False)
    assert fresh.leases_due(["5", "77"], NOW) == ["5", "77"]


def test_the_bound_is_capped_at_the_lease() -> None:
    rec = dataclasses.replace(waiting("24.11"), eligible_time=NOW + 11)
    assert backend_seeing([rec], lease_s=12, before=40).leases_due(["5"], NOW) == ["5"]


def test_a_later_begin_joins_once_inside_its_last_lease() -> None:
    """The jobs waiting for the user's own --begin are not in the core's queue; the backend adds
    them once now + lease reaches the begin (snapshot.build_observation), then by expiry."""
    base = waiting("22.05")
    tag = dataclasses.replace(base.tag, begin=NOW + 30)  # type: ignore[arg-type]
    rec = dataclasses.replace(base, eligible_time=NOW + 30, tag=tag, reason="BeginTime")
    assert backend_seeing([rec]).leases_due([], NOW) == ["5"]


def renewals_per_cycle(ends: dict[str, float], cycles: int, *, lease_s: int = 120,
                       before: int = 40, interval: float = 10.0) -> list[int]:
    """Run ``cycles`` cycles of one backend over waiting jobs with lease ends ``ends`` (each
    renewal sets now + lease_s, as scontrol does); checks that no lease lapses between cycles
    and none ends later than now + lease_s (the fail-open bound). Jobs renewed per cycle."""
    base = waiting("26.05")
    be = CliBackend(SlurmSettings(lease_s=lease_s, lease_renew_before_s=before), read_shares=False)
    counts = []
    for cycle in range(cycles):
        now = NOW + cycle * interval
        recs = [dataclasses.replace(base, job_id=j, eligible_time=t) for j, t in ends.items()]
        be.last = build_observation(now, recs, [], None, lease_s=float(lease_s))
        assert cycle == 0 or all(t >= now for t in ends.values()), "a lease lapsed between cycles"
        due = be.leases_due(list(ends), now)
        counts.append(len(due))
        ends.update(dict.fromkeys(due, now + lease_s))
        assert max(ends.values()) <= now + lease_s
    return counts


def test_steady_state_renews_a_fraction_of_the_queue() -> None:
    """800 leases spread over the lease, 10 s cycles: each cycle renews about
    interval / (lease_s - before) of the queue (100), never the whole queue."""
    n = 800
    counts = renewals_per_cycle({str(i): NOW + 120 * i / n for i in range(n)}, 30)
    assert abs(counts[0] - n * 40 / 120) <= 1  # the first: what the spread puts near expiry
    assert max(counts[1:]) <= n * 10 / 80 + 1, counts


@pytest.mark.parametrize("n", [1, 3, 7])
def test_a_few_leases_are_renewed_about_once_a_period_not_every_cycle(n: int) -> None:
    """A handful of leases (a held job, one waiting on a dependency) costs one scontrol process
    each per renewal period (lease_s - before = 80 s): the steady rate's fractions are carried
    from cycle to cycle. Rounded up each cycle, one lease was renewed in every 10 s cycle."""
    counts = renewals_per_cycle({str(i): NOW + 120 * (i + 1) / n for i in range(n)}, 48)
    assert sum(counts) <= n * 480 / 80 + n, counts  # 48 cycles x 10 s = 6 periods
    assert sum(counts) >= n * 480 / 120 - 1, counts  # and never fewer than the lease needs


@pytest.mark.parametrize(("ends_in", "first"), [(120.0, 0), (-10.0, 800)],
                         ids=["a-burst-of-submissions", "the-daemon-was-down"])
def test_leases_renewed_together_spread_out(ends_in: float, first: int) -> None:
    """800 leases that end at once (submitted in one burst, or all lapsed while the daemon was
    down and renewed in its first cycle) do not come due in one cycle again every renewal
    period: the earliest-ending are renewed a little early, at the steady rate, until spread."""
    n = 800
    counts = renewals_per_cycle({str(i): NOW + ends_in for i in range(n)}, 40)
    assert counts[0] == first and max(counts[1:]) <= n * 10 / 80 + 1, counts


def test_leases_handed_to_the_thread_are_not_due_again_before_the_read_shows_them() -> None:
    """The renewal thread may still be sending when the next cycle reads squeue: that read shows
    the old lease ends, and handing the same leases over again made the thread renew them twice
    (measured: 1,945 update RPCs a cycle against 1,264 inline at 10,000 waiting on 22.05). A
    renewal slurmctld refused comes due again."""
    base = waiting("22.05")
    recs = [dataclasses.replace(base, job_id=j, eligible_time=NOW + 10) for j in ("5", "6", "7")]
    be = backend_seeing(recs)
    sent: list[list[str]] = []

    def send(ids: list[str], now: float) -> dict[str, str]:
        sent.append(list(ids))
        return {"7": "Job has already finished for job 7"} if "7" in ids else {}

    be.renewer._send = send
    due = be.leases_due(["5", "6", "7"], NOW)
    assert due == ["5", "6", "7"]
    be.renew_leases_later(due, NOW)
    assert be.renewer.flush(10)
    # the next cycle's read was taken before the renewals reached slurmctld: same old ends
    be.last = build_observation(NOW + 10, recs, [], None, lease_s=120.0)
    done, refused = be.renew_leases_later([], NOW + 10)  # collect what the thread did
    assert (done, set(refused)) == (2, {"7"})
    assert be.leases_due(["5", "6", "7"], NOW + 10) == ["7"]
    # once the handed end is near, they are due again, as a read showing it would say
    assert be.leases_due(["5", "6", "7"], NOW + 85) == ["5", "6", "7"]
    be.close()
