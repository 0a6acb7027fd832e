"""The two FIFO disciplines on a hand-built trace: strict head-of-line (``fifo``, also what
Gavel's simulator's fifo allocation does) and greedy in arrival order (``fifo-greedy``), in the
core and through a replay."""

from __future__ import annotations

import random
from typing import Any

import pytest

from railgang.daemon.core import Start, decide
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.policies.fifo import Fifo
from railgang.daemon.core.policies.fifo_greedy import FifoGreedy
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import simulate
from tests.daemon.core.core_builders import cluster, job
from tests.daemon.core.core_builders import first_fit as core_first_fit
from tests.daemon.sim.conftest import first_fit, tj


def test_same_order_only_the_discipline_differs() -> None:
    snap = cluster(1).at(50).pending(job("late").gpus(1).at(30), job("b").gpus(2).at(10),
                                     job("a").gpus(4).at(10)).build()
    strict, greedy = Fifo().plan(snap, 50), FifoGreedy().plan(snap, 50)
    assert [w.job_id for w in greedy.order] == [w.job_id for w in strict.order] == ["a", "b", "late"]
    assert (strict.mode, greedy.mode) == ("strict", "greedy")


@pytest.mark.parametrize(("policy", "started", "small_reason"),
                         [("fifo", [], Reason.PRIORITY), ("fifo-greedy", ["small"], None)],
                         ids=["strict-blocks", "greedy-skips"])
def test_one_cycle_small_job_behind_a_blocked_big_one(policy: str, started: list[str],
                                                      small_reason: Reason | None) -> None:
    # 'r' holds 4 of 8 GPUs; 'big' (8 GPUs, first in line) cannot start; 'small' (2) fits
    snap = (cluster(1).at(100).running(job("r").gpus(4).work(3600), start=0)
            .pending(job("big").gpus(8).at(10), job("small").gpus(2).at(20)).build())
    d = decide(snap, get(policy), snap.now, random.Random(0), placer=core_first_fit)
    assert [a.job_id for a in d.actions if isinstance(a, Start)] == started
    reasons = {r.job_id: r.code for r in d.reasons}
    assert reasons["big"] is Reason.WAITING_FOR_GPUS
    assert reasons.get("small") is small_reason


def test_replay_greedy_runs_small_jobs_in_the_gap_strict_does_not(one_node: Any) -> None:
    # a: 4 GPUs until t=100; b: 8 GPUs, arrives at 1; c, d: 2 GPUs for 30 s, arrive at 2 and 3
    jobs = [tj("a", 0, 4, 100.0), tj("b", 1, 8, 10.0), tj("c", 2, 2, 30.0), tj("d", 3, 2, 30.0)]
    strict = {r.job_id: r for r in simulate(jobs, get("fifo"), one_node, placer=first_fit).records}
    greedy = {r.job_id: r
              for r in simulate(jobs, get("fifo-greedy"), one_node, placer=first_fit).records}
    # strict: b starts when a ends (100), c and d after b (110)
    assert [strict[j].start for j in "abcd"] == pytest.approx([0, 100, 110, 110])
    # 4 GPUs idle from 2 to 100 while c (then c and d) waited behind b: charged to priority
    assert strict["c"].idle_fit_gpu_s == {"priority": 2 * 98.0}
    assert strict["d"].idle_fit_gpu_s == {"priority": 2 * 97.0}
    # greedy: c and d fill a's spare 4 GPUs at once and are done long before b may start (100)
    assert [greedy[j].start for j in "abcd"] == pytest.approx([0, 100, 2, 3])
    assert all(not r.idle_fit_gpu_s for r in greedy.values())
    assert sum(r.finish or 0 for r in greedy.values()) < sum(r.finish or 0 for r in strict.values())


def test_greedy_has_no_reservation_a_big_gang_waits_while_small_ones_keep_fitting(
        one_node: Any) -> None:
    # small 4-GPU jobs overlap so 8 free GPUs never appear until they stop arriving: documented
    # price of greedy FIFO without backfill (strict FIFO starts the big one at t=50)
    jobs = [tj("s0", 0, 4, 50.0), tj("big", 1, 8, 10.0)]
    jobs += [tj(f"s{i}", 25.0 * i, 4, 50.0) for i in range(1, 6)]
    greedy = {r.job_id: r
              for r in simulate(jobs, get("fifo-greedy"), one_node, placer=first_fit).records}
    strict = {r.job_id: r for r in simulate(jobs, get("fifo"), one_node, placer=first_fit).records}
    assert strict["big"].start == pytest.approx(50.0)
    assert greedy["big"].start == pytest.approx(175.0)
