"""The EASY shadow (``model/shadow.py``): one answer for every reader of it."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from railgang.daemon.core.model.shadow import INF, NO_ENDS, Ends


def _walk(holders: list[tuple[float, int]], free: int, need: int, now: float) -> tuple[float, int]:
    """The rule as a walk: add each holder's GPUs at its end, soonest first, until the need is met."""
    avail, t = free, now
    for end, g in sorted(holders):
        if avail >= need:
            break
        avail, t = avail + g, end
    return (t, avail - need) if avail >= need else (INF, 0)


holders = st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False) | st.just(math.inf),
                             st.integers(1, 64)), max_size=40)


@given(holders, st.lists(st.tuples(st.integers(0, 64), st.integers(0, 400)), min_size=1, max_size=6),
       st.floats(0, 1e6, allow_nan=False))
def test_when_is_the_walk_over_the_holders_soonest_end_first(hs: list[tuple[float, int]],
                                                              asks: list[tuple[int, int]], now: float) -> None:
    """Asked once or many times, in any order (each answer sums the ends as far as it needs)."""
    ends = Ends.of(hs)
    for free, need in asks:
        assert ends.when(free, need, now) == _walk(hs, free, need, now)


def test_holders_ending_together_free_the_smaller_first() -> None:
    # (end, GPUs) order: the need is met at t=5 either way; the spare GPUs then are those of
    # the smaller holder counted first
    ends = Ends.of([(5.0, 3), (5.0, 1)])
    assert ends.when(0, 2, 0.0) == (5.0, 2)
    assert ends.freed == [1, 4]


def test_enough_free_now_is_now_and_none_held_is_never() -> None:
    assert NO_ENDS.when(4, 4, 7.0) == (7.0, 0)
    assert NO_ENDS.when(3, 4, 7.0) == (INF, 0)
    assert Ends.of([(9.0, 8)]).when(3, 20, 7.0) == (INF, 0)
