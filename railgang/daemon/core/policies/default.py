"""default: Tiresias queues × Themis fairness × Pollux sizing, with starvation reservations.

How the pieces combine, and why:

1. **Order by Tiresias queue** (attained GPU-hours <1, 1–10, 10–100, >100). It needs no duration
   estimates and puts the many short jobs in front of the few long ones — the bulk of the mean-JCT
   gain over FIFO (R-S2) — and degrades gracefully to fair sharing when its guess is wrong.
2. **Inside a queue, order by Themis ρ** (highest finish-time unfairness first) instead of FIFO: a
   job that has already waited long relative to its independent-share run time, or is close to
   completion, goes first. This caps max ρ and the p99 without giving up the queue structure.
3. **Size with Pollux** for elastic jobs: start sizes and running targets come from the goodput
   allocation (throughput × statistical efficiency, fairness knob p), so free GPUs go where they
   buy the most progress; rigid jobs are sized as requested. Steady-state jobs are locked.
4. **Starvation guard as a reservation**: a job that waited ``promote_after_s`` is promoted to
   queue 0 and, if it still cannot start, holds an EASY backfill reservation, so large jobs are
   not starved by a stream of small ones (protects p99 JCT versus FIFO). Optional ρ guard
   (``promote_rho``, off by default): a job may also hold the reservation once its ρ at the time
   a reservation made now could start it (now + the drain of whole nodes, ``_Drain``) reaches
   ``promote_rho``; a short gang's fair run time is far below 4 h (issue 12 part 5).
5. **Preemption inside a class** follows the Tiresias levels (evict jobs in a strictly higher
   service queue), always within the cycle's budgets, shrink-before-preempt and cascade damping.
   Inside a queue the job preempted least often is the first victim (before least work lost):
   otherwise the cheapest victim is the job that just resumed (it has lost the least since its
   restart), and the same long jobs were evicted 50–80 times each on Philly (issue 12 part 5).
6. **Heterogeneous pools** (several GPU types or tiers): each job's pools are filled in by
   ``hetero.aware`` — the free fast GPUs go to the jobs with the largest speed ratio, a slower
   type only when starting there ends sooner than waiting, spot only while it is cheaper in
   effective cost (``spot.SpotRules``). ``hetero=False`` is the type-blind baseline.

7. **Fair share with a half-life** (``fair_share``, off by default; issue 33): inside a Tiresias
   queue, the job of the account that used fewer GPU-hours lately (``Account.recent_gpu_s``,
   decayed with Slurm's ``PriorityDecayHalfLife``, per unit of share, in whole GPU-hours:
   ``fairshare.usage_rank``) goes first, before ρ: a team that used little lately goes first, as
   under Slurm's fair-share factor, KAI Scheduler and Kueue. After the queue, not before it: the
   queue is where ``default``'s mean-JCT gain over FIFO comes from, and nearly every waiting job
   is in queue 0 (it has not run yet), so the term orders most of the queue. Neutral without
   use (every rank 0). The cycle still puts classes first, quota guarantees and quotas still
   bound who may start. Off by default: it changes every pinned simulator schedule with more
   than one account; the daemon turns it on with ``daemon.fair_share``, the simulator with
   ``railgang sim --fair-share`` (both feed the same input, ``core/model/fairshare.py``).

Ordering key: 1. Tiresias queue after promotion, 2. the account's decayed use per share (less
first; with ``fair_share``), 3. ρ (higher first), 4. job id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.elastic import (
    lowest_start,
    running_ends,
    short_classes,
    wait_for,
)
from railgang.daemon.core.model.fairshare import usage_rank
from railgang.daemon.core.model.plan import Plan, regrow_targets, want
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.tiers import SpotRules
from railgang.daemon.core.policies.pollux import Pollux, node_gpus
from railgang.daemon.core.policies.themis import contenders, rho
from railgang.daemon.core.policies.tiresias import Levels, Tiresias, queued_since


class _Drain:
    """Seconds until a gang of whole nodes could start if it held the reservation from now: until
    the k-th node empties (k = nodes it needs; a node empties at the last expected end of what
    runs on it), since GPUs freed here and there do not make a node. 0 for a gang smaller than a
    node (GPUs free up for it all the time) and when the ends are unknown (no work estimates, no
    time limits). Built on first use."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self._snapshot, self._now = snapshot, now
        self._node_gpus = node_gpus(snapshot)
        self._empty_at: list[float] | None = None

    def wait_s(self, gpus: int) -> float:
        if self._node_gpus <= 0 or gpus < self._node_gpus:
            return 0.0
        snap, now = self._snapshot, self._now
        if self._empty_at is None:
            last = {n: now for n, node in snap.nodes.items() if node.state.usable}
            for r in snap.running.values():
                end = r.expected_end(now)
                for n in r.assignment:
                    if n in last and end > last[n]:
                        last[n] = end
            self._empty_at = sorted(last.values())
        k = -(-gpus // self._node_gpus)
        wait = self._empty_at[k - 1] - now if k <= len(self._empty_at) else math.inf
        return wait if math.isfinite(wait) else 0.0


@dataclass(frozen=True)
class Default:
    name = "default"
    tiresias: Tiresias = field(default_factory=Tiresias)
    pollux: Pollux = field(default_factory=lambda: Pollux(whole_multinode=True))
    reserve_starving: bool = True  # starving jobs hold an EASY reservation (False: pure greedy)
    evict_within_class: bool = True  # Tiresias-level eviction inside a class (under budgets)
    sizing: str = "pollux"  # "pollux": goodput allocation; "requested": start at the requested size
    # (smaller only when waiting costs more), regrow shrunk jobs to it
    hetero: bool = True  # on a cluster of several GPU pools: place by per-type throughput and
    # effective cost (hetero.aware); False = type-blind (the pool with the most free GPUs)
    spot: SpotRules = field(default_factory=SpotRules)  # when a job leaves spot for on-demand
    promote_rho: float = math.inf  # the ρ guard (module docstring, point 4): a waiting job whose
    # ρ at the earliest start a reservation could give it reaches this may hold the reservation;
    # inf = off (the default: measured, 1.5 meets the full-Philly ρ goals but on an overloaded
    # VC, 6214e9 on 64 GPUs, it raised the share of ρ > 2 from 2.5 % to 45 %; BENCHMARKS.md)
    fair_share: bool = False  # point 7: order by the account's decayed recent use inside a queue

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        total = snapshot.total_gpus
        n = contenders(snapshot)
        by_pollux = self.sizing == "pollux"
        # Pollux sizes elastic work: with none waiting or running, every job is planned at its
        # asked size and running jobs regrow to their request (what its plan would say)
        waits_elastic = any(j.elastic for j in snapshot.pending)
        elastic = bool(snapshot.elastic_running) or waits_elastic
        sizing = self.pollux.plan(snapshot, now) if by_pollux and elastic else None
        sized = {w.job_id: w for w in sizing.order} if sizing is not None else {}
        rhos = {j.job_id: rho(j, now, j.replicas, n[j.priority_class], total) for j in snapshot.pending}
        drain = _Drain(snapshot, now)
        behind = frozenset(  # ρ-starving: its ρ reaches promote_rho by the time a reservation
            j.job_id for j in snapshot.pending  # made now could start it
            if rhos[j.job_id] >= self.promote_rho
            or ((wait := drain.wait_s(j.gpus)) > 0
                and rho(j, now + wait, j.replicas, n[j.priority_class], total) >= self.promote_rho)
        ) if math.isfinite(self.promote_rho) else frozenset()
        use: dict[str, int] = {}  # the account's rank, once per account
        if self.fair_share:
            for j in snapshot.pending:
                acc = j.request.account
                if acc not in use:
                    use[acc] = usage_rank(snapshot.account(acc))
        keyed = sorted(
            (self.tiresias.queue(j, now), use.get(j.request.account, 0), -rhos[j.job_id], j.job_id, j)
            for j in snapshot.pending
        )
        order = []
        ends: Ends | None = None  # what runs, soonest end first (built on first use)
        short = short_classes(snapshot.elastic_running)
        node = node_gpus(snapshot) if self.pollux.whole_multinode and waits_elastic else 0
        starving: set[str] = set()  # who may hold the reservation (plan.reserve_for)
        reserving, promote_after = self.reserve_starving, self.tiresias.promote_after_s
        for q, _, _, _, j in keyed:
            if reserving and (j.job_id in behind or now - queued_since(j) >= promote_after):
                starving.add(j.job_id)
            s = sized.get(j.job_id)
            replicas = s.replicas if s is not None and j.elastic else j.replicas
            # never below the size where the curve turns super-linear (a shrunk start wastes GPUs),
            # and at the asked size while a job of the class runs short of its own
            # and only if the run at the small size alone beats waiting (growth is not promised)
            if j.priority_class in short or not j.elastic:
                low = replicas
            else:
                ends = running_ends(snapshot.running.values(), now) if ends is None else ends
                wait = wait_for(ends, snapshot.free_gpus, replicas * j.replica_gpus, now)
                low = lowest_start(j, replicas, wait, node_gpus=node)
            order.append(want(j.job_id, replicas, low, level=q))
        plan = Plan(
            order=tuple(order),
            mode="backfill",
            reserve_for=frozenset(starving),
            targets=sizing.targets if sizing is not None else regrow_targets(snapshot),
            sized=by_pollux,
            levels=Levels(snapshot, self.tiresias.thresholds_gpu_h, by_preemptions=True),
            preempt_within_class=self.evict_within_class,
        )
        return hetero.aware(plan, snapshot, self.spot) if self.hetero else plan


POLICY = Default
