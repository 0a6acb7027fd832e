"""estimate_profile.py: the GPU-count profile that places the jobs the estimate's simulation did
not reach: queue order, backfill into holes that delay no job ahead, never over capacity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.service.estimate_profile import profile_starts


def test_queue_order_with_backfill_into_holes() -> None:
    got = profile_starts(8, [(0.0, 100.0, 4)], [("a", 8, 50.0), ("b", 4, 50.0), ("c", 4, 200.0)],
                         after=0.0, horizon=1e6)
    # a waits for the whole node; b fits beside the running job before a; c does not fit there
    assert got == {"a": 100.0, "b": 0.0, "c": 150.0}


def test_nothing_before_where_the_simulation_stopped() -> None:
    assert profile_starts(8, [], [("a", 1, 10.0)], after=500.0, horizon=1e6) == {"a": 500.0}


def test_too_big_and_too_late_have_no_start() -> None:
    got = profile_starts(8, [(0.0, 1000.0, 8)], [("big", 9, 10.0), ("late", 8, 10.0)],
                         after=0.0, horizon=900.0)
    assert got == {"big": None, "late": None}


jobs = st.lists(st.tuples(st.integers(1, 8), st.floats(1.0, 500.0)), max_size=30)
held = st.lists(st.tuples(st.floats(0.0, 300.0), st.floats(1.0, 300.0), st.integers(1, 8)),
                max_size=10)


@settings(max_examples=150, deadline=None)
@given(jobs=jobs, held=held, after=st.floats(0.0, 200.0))
def test_never_over_capacity_and_never_before_after(jobs: list[tuple[int, float]],
                                                     held: list[tuple[float, float, int]],
                                                     after: float) -> None:
    capacity = 16
    # what is held fits by construction: greedily keep the intervals that do
    kept: list[tuple[float, float, int]] = []
    for s, d, g in held:
        if all(sum(kg for ks, ke, kg in [*kept, (s, s + d, g)] if ks <= t < ke) <= capacity
               for t in {s, *(k[0] for k in kept)}):
            kept.append((s, s + d, g))
    queue = [(f"j{i}", g, d) for i, (g, d) in enumerate(jobs)]
    got = profile_starts(capacity, kept, queue, after=after, horizon=1e9)
    placed = [(got[j], got[j] + d, g) for j, g, d in queue if got[j] is not None]
    assert all(got[j] is not None for j, _, _ in queue)  # all fit the capacity: all start
    assert all(s >= after for s, _, _ in placed)
    every = [*kept, *placed]
    for t in {s for s, _, _ in every}:
        assert sum(g for s, e, g in every if s <= t < e) <= capacity
