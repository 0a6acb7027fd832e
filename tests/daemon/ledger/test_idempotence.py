"""The ledger is exactly once: any set of windows that covers the jobs — repeated, overlapping,
in any order, with a crash in the middle — leaves the same rows as one ingest of everything."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, select

from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.ingest import ingest_window, source_name
from railgang.db.ledger import JobLabel, LedgerWatermark
from railgang.db.models import Job, UsageRecord
from railgang.db.repositories import ledger as repo
from railgang.db.session import session_scope
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.ledger.builders import T0, Piece, SJob, window_view

CFG = LedgerSettings()
HORIZON = 300  # every synthetic job lives in [T0, T0 + HORIZON)


@st.composite
def jobs(draw: st.DrawFn) -> list[SJob]:
    out = []
    for job_id in range(1, draw(st.integers(1, 6)) + 1):
        t = draw(st.integers(0, 100))
        pieces = []
        kind = draw(st.sampled_from(["resize", "requeue"]))
        for _ in range(draw(st.integers(1, 3))):
            length = draw(st.integers(1, 40))
            pieces.append(Piece(T0 + t, T0 + t + length, draw(st.sampled_from([1, 2, 8, 32]))))
            t += length + (draw(st.integers(1, 10)) if kind == "requeue" else 0)
        if draw(st.booleans()):  # still running
            pieces[-1] = Piece(pieces[-1].start, None, pieces[-1].gpus)
        labels = draw(st.sampled_from([None, "rg-labels:experiment=e1", "rg-labels:model=v2"]))
        out.append(SJob(job_id, draw(st.sampled_from(["team-a", "team-b"])), kind,
                        tuple(pieces), labels))
    return out


windows = st.lists(st.tuples(st.integers(-10, HORIZON), st.integers(1, 120)),
                   min_size=1, max_size=8)


def _ts(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def ledger_state(engine: Engine) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with session_scope(engine) as s:
        segs = s.execute(select(Job.cluster, Job.slurm_job_id, UsageRecord.segment,
                                UsageRecord.start_epoch, UsageRecord.end_epoch,
                                UsageRecord.gpus, UsageRecord.account, UsageRecord.nodes,
                                UsageRecord.started_at, UsageRecord.ended_at)
                         .join(Job, Job.id == UsageRecord.job_id)
                         .order_by(Job.slurm_job_id, UsageRecord.start_epoch)).all()
        labels = s.execute(select(Job.slurm_job_id, JobLabel.key, JobLabel.value)
                           .join(Job, Job.id == JobLabel.job_id).order_by(Job.slurm_job_id)).all()
    return [tuple(r) for r in segs], [tuple(r) for r in labels]


def clear(engine: Engine) -> None:
    with session_scope(engine) as s:
        for table in (JobLabel, UsageRecord, Job, LedgerWatermark):
            s.execute(delete(table))


def ingest(engine: Engine, truth: list[SJob], since: int, until: int) -> None:
    ingest_window(engine, lambda a, b: window_view(truth, int(a.timestamp()),
                                                   int(b.timestamp())),
                  _ts(since), _ts(until), settings=CFG, cluster="railgang")


def expected(engine: Engine, truth: list[SJob]) -> object:
    clear(engine)
    ingest(engine, truth, T0 - 10, T0 + HORIZON)
    return ledger_state(engine)


@pytest.fixture(scope="module", params=["sqlite",
                                        pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Engine]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with fresh_engine(request.param, Path(tmp_path_factory.mktemp("ledger")), pg) as eng:
        yield eng


PROPS = settings(max_examples=40, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


@PROPS
@given(truth=jobs(), extra=windows, cut=st.lists(st.integers(1, HORIZON - 1), max_size=5),
       order=st.randoms(use_true_random=False))
def test_covering_windows_in_any_order_give_one_ledger(engine: Engine, truth: list[SJob],
                                                        extra: list[tuple[int, int]],
                                                        cut: list[int], order: object) -> None:
    want = expected(engine, truth)
    clear(engine)
    # a partition of the whole span, plus random extra windows (repeats and overlaps)
    bounds = sorted({-10, HORIZON, *cut})
    plan = [(T0 + a, T0 + b) for a, b in itertools.pairwise(bounds)]
    plan += [(T0 + a, T0 + a + n) for a, n in extra]
    plan += plan[: len(plan) // 2]  # and some windows twice
    order.shuffle(plan)  # type: ignore[attr-defined]
    for since, until in plan:
        ingest(engine, truth, since, until)
    assert ledger_state(engine) == want
    with session_scope(engine) as s:  # the watermark is the furthest end ingested
        assert repo.watermark(s, source_name("railgang")) == _ts(max(u for _, u in plan))


@PROPS
@given(truth=jobs(), crash_at=st.integers(0, 5), cut=st.lists(st.integers(1, HORIZON - 1),
                                                               min_size=1, max_size=5))
def test_crash_between_windows_changes_nothing(engine: Engine, truth: list[SJob], crash_at: int,
                                               cut: list[int]) -> None:
    want = expected(engine, truth)
    clear(engine)
    bounds = sorted({-10, HORIZON, *cut})
    plan = [(T0 + a, T0 + b) for a, b in itertools.pairwise(bounds)]
    crash = min(crash_at, len(plan) - 1)

    def crashing(a: datetime, b: datetime) -> str:
        raise RuntimeError("daemon killed while reading sacct")

    done = []
    for i, (since, until) in enumerate(plan):
        if i == crash:
            with pytest.raises(RuntimeError):
                ingest_window(engine, crashing, _ts(since), _ts(until), settings=CFG,
                              cluster="railgang")
            break
        ingest(engine, truth, since, until)
        done.append(until)
    with session_scope(engine) as s:  # the watermark says where to resume
        mark = repo.watermark(s, source_name("railgang"))
    assert mark == (_ts(done[-1]) if done else None)
    resume = int(mark.timestamp()) if mark else T0 - 10
    ingest(engine, truth, resume - CFG.overlap_s, T0 + HORIZON)
    assert ledger_state(engine) == want


@PROPS
@given(truth=jobs(), cut=st.lists(st.integers(1, HORIZON - 1), min_size=1, max_size=8),
       back=st.lists(st.integers(0, 60), min_size=8, max_size=8),
       again=st.lists(st.integers(0, 7), max_size=4))
def test_evolving_jobs_ingested_as_time_passes(engine: Engine, truth: list[SJob],
                                               cut: list[int], back: list[int],
                                               again: list[int]) -> None:
    """Windows read while jobs run (open segments, resizes not yet made), each one reaching back
    a random overlap, some re-read later: the ledger ends as one late full read makes it."""
    end = T0 + HORIZON
    clear(engine)
    ingest_at(engine, truth, T0 - 10, end, now=end)
    want = ledger_state(engine)
    clear(engine)
    bounds = [T0 + b for b in sorted({-10, HORIZON, *cut})]
    plan = [(max(bounds[0], a - back[i % len(back)]), b)
            for i, (a, b) in enumerate(itertools.pairwise(bounds))]
    for i, (since, until) in enumerate(plan):
        ingest_at(engine, truth, since, until, now=until)
        for k in again:  # an old window read again now
            if k < i:
                ingest_at(engine, truth, *plan[k], now=until)
    assert ledger_state(engine) == want


def ingest_at(engine: Engine, truth: list[SJob], since: int, until: int, *, now: int) -> None:
    ingest_window(engine, lambda a, b: window_view(truth, int(a.timestamp()),
                                                   int(b.timestamp()), now=now),
                  _ts(since), _ts(until), settings=CFG, cluster="railgang")


def test_crash_inside_a_window_rolls_the_window_back(engine: Engine,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    clear(engine)
    truth = [SJob(1, "team-a", "resize", (Piece(T0, T0 + 5, 8), Piece(T0 + 5, T0 + 9, 4)))]

    def die(*_a: object, **_k: object) -> None:
        raise RuntimeError("killed between the segments and the watermark")

    monkeypatch.setattr(repo, "advance_watermark", die)
    with pytest.raises(RuntimeError):
        ingest(engine, truth, T0, T0 + 20)
    assert ledger_state(engine) == ([], [])  # neither segments nor watermark
    monkeypatch.undo()
    ingest(engine, truth, T0, T0 + 20)
    assert [r[3:6] for r in ledger_state(engine)[0]] == [(T0, T0 + 5, 8), (T0 + 5, T0 + 9, 4)]


def test_a_running_job_closes_and_a_resize_splits_in_place(engine: Engine) -> None:
    clear(engine)
    running = [SJob(7, "team-b", "resize", (Piece(T0, None, 32),))]
    later = [SJob(7, "team-b", "resize", (Piece(T0, T0 + 10, 32), Piece(T0 + 10, T0 + 30, 16),
                                          Piece(T0 + 30, T0 + 31, 8)))]
    ingest(engine, running, T0, T0 + 5)
    assert [r[2:6] for r in ledger_state(engine)[0]] == [(0, T0, None, 32)]
    ingest(engine, later, T0, T0 + 100)
    assert [r[2:6] for r in ledger_state(engine)[0]] == [
        (0, T0, T0 + 10, 32), (1, T0 + 10, T0 + 30, 16), (2, T0 + 30, T0 + 31, 8)]
