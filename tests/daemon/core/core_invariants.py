"""Random snapshots and the invariants every policy's decision must satisfy (shared contract)."""

from __future__ import annotations

import random

from railgang.daemon.core import Decision, Job, Preempt, Reason, Resize, Start
from railgang.daemon.core.model.preemption import PreemptionBudget, class_may_preempt
from railgang.daemon.core.model.quota import QuotaNode, QuotaTree, borrowed_gpus
from railgang.daemon.core.model.snapshot import Account, PreemptEvent, Snapshot
from tests.daemon.core.core_builders import cluster, job


def random_snapshot(seed: int, *, max_nodes: int = 8) -> Snapshot:
    rng = random.Random(seed)
    nodes = rng.randint(1, max_nodes)
    now = 10_000.0
    c = cluster(nodes).at(now)
    capacity = nodes * 8
    used = 0
    for i in range(rng.randint(0, nodes * 2)):
        tp = rng.choice([1, 1, 2, 4, 8])
        reps = rng.randint(1, 3)
        gpus = tp * reps
        if used + gpus > capacity:
            break
        elastic = rng.random() < 0.4
        b = (job(f"r{i}").gpus(gpus).tp(tp).cls(rng.randint(0, 3)).at(rng.uniform(0, now))
             .account(rng.choice(["a", "b", "c"]))
             .service(rng.uniform(0, 500_000)).work(rng.uniform(60, 50_000)))
        if elastic:
            b = b.elastic(1, reps + rng.randint(0, 3))
        if rng.random() < 0.2:
            b = b.evicted(now - rng.uniform(0, 7200))
        c.running(b, start=rng.uniform(0, now))
        used += gpus
    for i in range(rng.randint(0, 16)):
        tp = rng.choice([1, 1, 2, 4, 8])
        reps = rng.choice([1, 1, 2, 3, 4, 8])
        b = (job(f"p{i:02d}").gpus(tp * reps).tp(tp).cls(rng.randint(0, 3)).at(rng.uniform(0, now))
             .account(rng.choice(["a", "b", "c"])).service(rng.choice([0.0, 1e3, 5e4, 1e6])))
        if rng.random() < 0.7:
            b = b.work(rng.uniform(60, 80_000))
        if rng.random() < 0.4 and reps > 1:
            b = b.elastic(1, reps + rng.randint(0, 4))
        if rng.random() < 0.15:
            b = b.evicted(now - rng.uniform(0, 7200))
        c.pending(b)
    c.accounts(Account("a", quota_gpus=rng.choice([None, 16, 64])), Account("b", share=2.0))
    if rng.random() < 0.3:
        c.preempted(PreemptEvent(now - 60, "old", rng.randint(1, 8)))
    snap = c.build()
    if rng.random() < 0.4:  # drawn last, so the draws above stay what they were for each seed
        snap = snap.replace(quotas=random_tree(rng, capacity))
    return snap


def random_tree(rng: random.Random, capacity: int) -> QuotaTree:
    """org -> dept d1 (teams a, b), team c directly under the org; sound guarantees, random
    burst limits (sometimes none)."""
    org_g = rng.randint(0, capacity)
    d1_g = rng.randint(0, org_g)
    a_g = rng.randint(0, d1_g)
    b_g = rng.randint(0, d1_g - a_g)
    c_g = rng.randint(0, org_g - d1_g)

    def lim(g: int) -> int | None:
        return rng.choice([None, g, g + rng.randint(0, capacity)])

    return QuotaTree({
        "org": QuotaNode("org", "org", None, org_g, lim(org_g)),
        "d1": QuotaNode("d1", "dept", "org", d1_g, lim(d1_g)),
        "a": QuotaNode("a", "team", "d1", a_g, lim(a_g)),
        "b": QuotaNode("b", "team", "d1", b_g, lim(b_g)),
        "c": QuotaNode("c", "team", "org", c_g, lim(c_g)),
    })


def check_decision(snap: Snapshot, d: Decision, budget: PreemptionBudget = PreemptionBudget()) -> None:
    """The shared contract: no double booking, never over free, all-or-nothing gangs, a reason for
    every waiting job, class rules and budgets on every preemption."""
    free = {(n, g) for n, gs in snap.free.items() for g in gs}
    pending = {j.job_id: j for j in snap.pending}
    held = {r.job_id: {(n, g) for n, gs in r.assignment.items() for g in gs}
            for r in snap.running.values()}
    touched: set[str] = set()
    borrowed = borrowed_gpus(snap.quotas, snap.running.values())
    own = snap.account_running_gpus()
    own = {**{j.account: 0 for j in snap.pending}, **own}
    for a in d.actions:
        if isinstance(a, Resize):
            run = snap.running[a.job_id]
            assert a.job_id not in touched, f"{a.job_id} resized twice"
            touched.add(a.job_id)
            assert run.job.min_replicas <= a.replicas <= run.job.max_replicas
            new = {(n, g) for n, gs in a.assignment.items() for g in gs}
            assert len(new) == a.replicas * run.job.replica_gpus, "resize by whole replicas"
            if a.replicas < run.replicas:
                assert new <= held[a.job_id]
                free |= held[a.job_id] - new
                # a reclaim's shrink gives its account's GPUs back at once (Draft.shrink
                # release_quota), and shrinks come first in a decision: that team may then be
                # inside its guarantee and reclaim for itself (a plain eviction's shrink does not
                # release, so counting every shrink is the lenient side of the core's rule)
                own[run.job.account] -= len(held[a.job_id] - new)
            else:
                assert held[a.job_id] <= new
                extra = new - held[a.job_id]
                assert extra <= free, f"grow of {a.job_id} takes GPUs that are not free"
                free -= extra
            held[a.job_id] = new
        elif isinstance(a, Start):
            j = pending.pop(a.job_id)
            got = {(n, g) for n, gs in a.assignment.items() for g in gs}
            assert got <= free, f"{a.job_id} double-booked or over free GPUs"
            free -= got
            assert len(got) == a.replicas * j.replica_gpus, "all or nothing"
            assert j.min_replicas <= a.replicas <= j.max_replicas
        elif isinstance(a, Preempt):
            v = snap.running[a.job_id]
            assert a.job_id not in touched, f"{a.job_id} resized and preempted in one cycle"
            touched.add(a.job_id)
            assert a.grace_s > 0
            assert v.priority_class != 0, "serving is never preempted"
            assert v.preempt_deadline is None
            req = snap.pending[[j.job_id for j in snap.pending].index(a.for_job)] if a.for_job else None
            assert req is not None
            if a.reason is Reason.RECLAIMING:  # borrowed work, reclaimed for guaranteed work
                assert snap.quotas is not None and a.job_id in borrowed
                assert v.priority_class >= req.priority_class
                assert v.job.account != req.account
                assert own[req.account] + req.min_gpus <= snap.quotas.guaranteed(req.account)
            else:
                assert class_may_preempt(req.priority_class, v.priority_class) or (
                    req.priority_class == v.priority_class >= 2)
            last = v.job.last_preempted_at
            assert last is None or snap.now - last >= budget.job_min_interval_s
            last_req = req.last_preempted_at
            assert last_req is None or snap.now - last_req >= budget.cascade_window_s
    churn = sum(a.gpus for a in d.actions if isinstance(a, Preempt))
    if churn and all(_class(snap, a.for_job) > 0 for a in d.actions if isinstance(a, Preempt)):
        before = sum(e.gpus for e in snap.preemptions if snap.now - e.time < budget.churn_window_s)
        assert before + churn <= int(budget.churn_cap * snap.total_gpus)
    used = snap.account_running_gpus()
    for a in d.actions:
        if isinstance(a, Start | Resize):
            if isinstance(a, Start):
                acct, before = next(j for j in snap.pending if j.job_id == a.job_id).account, 0
            else:
                acct, before = snap.running[a.job_id].job.account, snap.running[a.job_id].gpus
            used[acct] = used.get(acct, 0) + a.gpus - before
            quota = snap.account(acct).quota_gpus
            if a.gpus > before:
                assert quota is None or used[acct] <= quota, f"{a.job_id} breaks {acct}'s quota"
                _check_tree(snap.quotas, used, acct, a.job_id)
    reasons = [r.job_id for r in d.reasons]
    assert len(reasons) == len(set(reasons)), "one reason per job"
    assert set(reasons) == set(pending), "every waiting job has a reason, started jobs none"
    for r in d.reasons:
        assert isinstance(r.code, Reason)


def _check_tree(tree: QuotaTree | None, used: dict[str, int], acct: str, job_id: str) -> None:
    """A start or grow leaves every level of the tree above ``acct`` at or under its Q."""
    if tree is None or acct not in tree.effective:
        return
    for level in (acct, *tree.ancestors[acct]):
        cap = tree.effective[level].cap
        under = sum(g for x, g in used.items() if tree.under(x, level))
        if level == acct:
            under = used[acct]
        assert cap is None or under <= cap, f"{job_id} puts {level} at {under} over its Q {cap}"


def _class(snap: Snapshot, job_id: str | None) -> int:
    by: dict[str, Job] = {j.job_id: j for j in snap.pending}
    return by[job_id].priority_class if job_id in by else 3
