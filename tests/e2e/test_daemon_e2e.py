"""End to end on the real 16-node × 8-GPU Slurm 22.05 cluster: hinted jobs go in with ``sbatch``,
the real ``railgang daemon run`` process schedules them, and the results are read back the way a
user reads them (squeue, scontrol, sacct, the job's own output). See docs/testing.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime

import hostlist
import pytest

from tests.e2e.conftest import CYCLE_S, Cluster, Daemon, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

Start = Callable[..., Daemon]


def gang(nodes: int, priority_class: int, extra: str = "") -> tuple[str, ...]:
    """sbatch options of a whole-node tp8 gang of ``nodes`` nodes in priority class ``priority_class``."""
    return (f"-N{nodes}", "--gres=gpu:8", f"--comment=rg:parallel=tp8,dp{nodes};class={priority_class}{extra}")


def running_on(slurm: Cluster, job: str) -> list[str]:
    fields = slurm.show(job)
    if fields.get("JobState") != "RUNNING":
        return []
    return list(hostlist.expand_hostlist(fields["NodeList"]))


def test_lame_node_gets_no_new_gang_but_single_node_jobs(slurm: Cluster, daemon: Start) -> None:
    """A node tagged lame-link in Slurm (feature rg_lame-link, nothing in the daemon's memory)
    is kept out of every new multi-node gang; a one-node job may still run there."""
    d = daemon(daemon__policy="fifo")
    leaves = slurm.leaves()
    leaf = sorted(n for n, sw in leaves.items() if sw == leaves["n05"])
    lame, healthy = leaf[0], leaf[1:]
    others = sorted(set(leaves) - set(leaf))
    filler = slurm.sbatch(f"-N{len(others)}", f"--nodelist={hostlist.collect_hostlist(others)}",
                          "--gres=gpu:8", args=("300",))  # plain Slurm: only one leaf stays free
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    slurm.sl("scontrol", "update", f"nodename={lame}", "AvailableFeatures=rg_lame-link",
             "ActiveFeatures=rg_lame-link")
    try:
        four = slurm.sbatch(*gang(4, 3), args=("60",))  # fits the free leaf only with the lame node
        wait_for(lambda: d.explain(four).get("reason") == "quarantined", 20,
                 "the 4-node gang to wait as quarantined")
        time.sleep(3 * CYCLE_S)
        assert slurm.show(four)["JobState"] == "PENDING"
        slurm.sl("scancel", four)
        three = slurm.sbatch(*gang(3, 3), args=("60",))
        wait_for(lambda: running_on(slurm, three), 30, "the 3-node gang to start")
        assert running_on(slurm, three) == healthy
        one = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=3", args=("60",))
        wait_for(lambda: running_on(slurm, one), 30, "the one-node job to start")
        assert running_on(slurm, one) == [lame]  # the only free node: single-node work may use it
        failed = [c for c in d.cycles() if c["failed"]]
        assert failed == [], failed
    finally:
        slurm.sl("scontrol", "update", f"nodename={lame}", "AvailableFeatures=", "ActiveFeatures=",
                 check=False)
    assert "rg_lame-link" not in slurm.sl("sinfo", "-h", "-n", lame, "-o", "%f").stdout


def test_fifo_starts_waiting_jobs_in_submit_order(slurm: Cluster, daemon: Start) -> None:
    """With daemon.policy=fifo and a full cluster, the waiting jobs start in submit order, even
    where a later, smaller job would fit sooner (strict FIFO blocks behind the head)."""
    daemon(daemon__policy="fifo", daemon__preempt="false")
    full = slurm.sbatch("-N16", "--gres=gpu:8", args=("5",))  # plain Slurm fills the cluster
    wait_for(lambda: running_on(slurm, full), 30, "the filler to run")
    sizes = [12, 8, 1, 16, 2, 4]  # nodes; 1 would fit beside 12 but must wait for 8
    waiting = []
    for n in sizes:
        waiting.append(slurm.sbatch(*gang(n, 3), args=("3",)))
        time.sleep(1.1)  # distinct submit seconds: FIFO's key is the submit time, then the id
    wait_for(lambda: slurm.finished(waiting), 150, "every waiting job to finish")
    runs = {r.job_id: r for r in slurm.settled(waiting)}
    assert all(runs[j].state == "COMPLETED" for j in waiting), {j: runs[j].state for j in waiting}
    starts = [runs[j].start for j in waiting]
    assert all(s is not None for s in starts)
    assert starts == sorted(starts), list(zip(sizes, starts, strict=True))  # type: ignore[arg-type]
    first = runs[waiting[0]]
    assert first.start is not None and first.start >= (slurm.settled([full])[0].end or 0)


def test_class0_preempts_class3_which_checkpoints_requeues_and_finishes(slurm: Cluster,
                                                                         daemon: Start) -> None:
    """The example trainer (class 3) holds the only GPUs a serving job (class 0) can use: it gets
    SIGUSR1, writes its checkpoint, is requeued after the grace (restart 1) and, once there is
    room again, finishes from its checkpoint step."""
    daemon(daemon__policy="fifo", daemon__preempt_grace_s="5")
    victim = slurm.example("-N1", "--gres=gpu:8", "--rg-parallel=tp8", "--rg-class=3",
                           steps=40, step_s=0.5)
    wait_for(lambda: running_on(slurm, victim), 30, "the victim to start")
    [node] = running_on(slurm, victim)
    filler = slurm.sbatch("-N15", f"--exclude={node}", "--gres=gpu:8", args=("300",))  # plain
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    serving = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=0", args=("5",))
    wait_for(lambda: "(preempted)" in slurm.output(victim), 30, "the victim's last checkpoint")
    signalled = time.time()
    ckpt = slurm.dir / f"job-{victim}.json"
    step = json.loads(ckpt.read_text())["step"]
    assert 0 < step < 40
    wait_for(lambda: slurm.show(victim).get("Restarts") == "1", 120, "the requeue")
    requeued = time.time()
    # the core's grace is max(daemon.preempt_grace_s, the job's checkpoint cost): 60 s here,
    # since the CLI backend knows no checkpoint cost of its own for a job
    assert requeued - signalled >= 55, requeued - signalled
    wait_for(lambda: running_on(slurm, serving), 30, "the serving job to start")
    assert running_on(slurm, serving) == [node]
    assert slurm.show(victim)["JobState"] == "PENDING"  # back in railgang's queue, not running
    slurm.sl("scancel", filler)  # room again: the victim restarts and finishes
    wait_for(lambda: slurm.finished([victim, serving]), 90, "the victim to finish")
    out = slurm.output(victim)
    assert f"start at step {step} (restart 1)" in out and "finished 40 steps" in out, out
    assert json.loads(ckpt.read_text())["step"] == 40
    runs = slurm.settled([victim])
    assert [r.state for r in runs] == ["REQUEUED", "COMPLETED"], runs
    serving_run = slurm.settled([serving])[0]
    assert serving_run.start is not None and runs[0].end is not None
    assert serving_run.start >= runs[0].end  # it took the GPUs the victim gave back


STEPS = 240  # the elastic trainer's: 1 s a step at one replica, 0.25 s at four


def test_elastic_job_shrinks_in_place_for_guaranteed_work_then_grows_back(slurm: Cluster,
                                                                          daemon: Start) -> None:
    """An elastic class-3 trainer on four nodes shrinks in place to one when a class-1 gang
    arrives on a full cluster (no restart; the job sees its new size through Slurm); when the
    gang finishes it grows back by checkpoint + requeue, and the restarted job sees four nodes."""
    # the shrink's notice (daemon.shrink_grace_s, else the preemption's 120 s) must end before
    # the job would: a job that ends first is not shrunk (elastic.outlasts_notice)
    d = daemon(daemon__policy="fifo", daemon__resize_min_interval_s="5", slurm__resize_grace_s="3",
               daemon__shrink_grace_s="20")
    filler = slurm.sbatch("-N12", "--gres=gpu:8", args=("300",))  # plain Slurm
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    free = sorted(set(slurm.leaves()) - set(running_on(slurm, filler)))
    elastic = slurm.example("-N4", "--gres=gpu:8", "--rg-parallel=tp8,dp4", "--rg-elastic=1:4",
                            "--rg-class=3", steps=STEPS, step_s=1.0, check_every=2)
    # STEPS: the work left after the shrink (it reports its total) must repay the grow's requeue
    # (ElasticRules.amortise x the transition cost: 3 x 30 s, some 120 steps left at one
    # replica); with 80 it would not, and the core rightly keeps the job small
    wait_for(lambda: running_on(slurm, elastic), 30, "the elastic job to start")
    assert running_on(slurm, elastic) == free
    guaranteed = slurm.sbatch(*gang(3, 1), args=("8",))
    wait_for(lambda: "resized: 4 -> 1" in slurm.output(elastic), 30, "the shrink to reach the job")
    wait_for(lambda: running_on(slurm, guaranteed), 30, "the guaranteed gang to start")
    kept = running_on(slurm, elastic)
    assert len(kept) == 1 and sorted(kept + running_on(slurm, guaranteed)) == free
    assert slurm.show(elastic)["Restarts"] == "0"  # in place: the same run goes on
    wait_for(lambda: "(restart 1)" in slurm.output(elastic), 60, "the grow's restart")
    out = slurm.output(elastic)
    assert "\nrun 1 4 " in out  # the restarted job sees four nodes
    saved = int(out.split(" (preempted)")[0].split("checkpoint at step ")[-1])
    assert saved > 0 and f"start at step {saved} (restart 1)" in out, out  # from its checkpoint
    wait_for(lambda: slurm.finished([elastic]), 180, "the elastic job to finish")
    assert slurm.settled([elastic])[-1].state == "COMPLETED"
    assert f"finished {STEPS} steps" in slurm.output(elastic)
    sent = [(state, detail) for _, state, detail in d.journal("resize")
            if not detail.startswith("already growing")]  # asked again until the requeue
    assert [s for s, _ in sent] == ["applied", "applied"], sent  # one shrink, one grow: no churn
    assert "grow by requeue" in sent[1][1]


def test_killed_daemon_strands_no_waiting_job(slurm: Cluster, daemon: Start) -> None:
    """SIGKILL of the daemon: the jobs it held under its lease run under plain Slurm within the
    lease plus one scheduling pass, with no railgang process alive."""
    from tests.e2e.conftest import SCHEDULING_PASS_S

    LEASE_S = 10  # the daemon's slurm.lease_s here: renewed every 1 s cycle, waited out once
    d = daemon(daemon__policy="fifo", slurm__lease_s=str(LEASE_S))
    full = slurm.sbatch("-N16", "--gres=gpu:8", args=("15",))  # plain: nothing fits meanwhile
    wait_for(lambda: running_on(slurm, full), 30, "the filler to run")
    waiting = [slurm.sbatch(*gang(n, 3), args=("3",)) for n in (1, 2, 4)]
    seen = len(d.cycles())
    wait_for(lambda: sum(bool(c["leases_renewed"]) for c in d.cycles()[seen:]) >= 3, 30,
             "a few renewals")
    for job in waiting:  # held by a lease the daemon keeps renewing (Reason shows None or
        fields = slurm.show(job)  # BeginTime right after an update; EligibleTime tells)
        eligible = datetime.fromisoformat(fields["EligibleTime"]).timestamp()
        assert fields["JobState"] == "PENDING" and eligible > time.time() + LEASE_S / 2, fields
    d.proc.kill()  # SIGKILL: no cleanup of any kind
    d.proc.wait(10)
    killed = time.time()
    wait_for(lambda: all(slurm.show(j)["JobState"] != "PENDING" for j in waiting),
             LEASE_S + SCHEDULING_PASS_S, "plain Slurm to start the leased jobs")
    wait_for(lambda: slurm.finished(waiting), 60, "the jobs to finish")
    starts = [r.start for r in slurm.settled(waiting)]
    assert all(s is not None and s >= killed + LEASE_S - 2 * CYCLE_S - 2 for s in starts), \
        (killed, starts)  # they waited out the lease the daemon had renewed until its death
    assert not any(c["actions"].get("Start") for c in d.cycles())  # type: ignore[attr-defined]


# (nodes, GPUs per node, tp, pp, elastic min:max or "", class, seconds at full size)
MIXED = [
    (4, 8, 8, 2, "", 1, 10), (2, 8, 8, 1, "1:2", 3, 12), (2, 8, 4, 2, "", 2, 8),
    (3, 8, 8, 1, "", 3, 10), (2, 8, 8, 1, "", 0, 6), (4, 8, 8, 1, "2:4", 3, 10),
    (2, 8, 8, 1, "", 3, 8), (1, 1, 1, 1, "", 3, 6), (1, 2, 2, 1, "", 2, 6), (1, 4, 2, 1, "", 3, 8),
    (1, 8, 8, 1, "", 1, 6), (1, 8, 8, 1, "", 3, 10), (1, 4, 4, 1, "", 3, 6), (1, 2, 1, 1, "", 3, 6),
    (1, 8, 4, 2, "", 3, 8), (4, 8, 4, 2, "", 3, 8),
]
# a run's GPUs count as busy from its start until SLACK_S after its end: the daemon saw the end
# only on its next snapshot (cycle interval + a cycle), and Slurm starts a placed job a moment
# after the decision. Erring on "busy" never blames the daemon for a leaf it could not see free.
SLACK_S = 2 * CYCLE_S + 3


def test_mixed_hinted_jobs_finish_and_gangs_stay_in_one_leaf(slurm: Cluster, daemon: Start) -> None:
    """1-32 GPUs, tp/pp/dp shapes, elastic, classes 0-3, about 1.5× the cluster: all finish, and
    every multi-node run lies inside one leaf whenever one leaf had room for it when it started
    (judged from sacct: leaves from ``scontrol show topology``, others' runs at that moment)."""
    daemon(daemon__preempt="false")  # default policy; preemption has its own test
    jobs = []
    for nodes, per_node, tp, pp, el, priority_class, secs in MIXED:
        dp = nodes * per_node // (tp * pp)
        opts = [f"-N{nodes}", f"--gres=gpu:{per_node}", f"--rg-parallel=tp{tp},pp{pp},dp{dp}",
                f"--rg-class={priority_class}"] + ([f"--rg-elastic={el}"] if el else [])
        jobs.append(slurm.example(*opts, steps=secs * dp * 3, step_s=0.25))  # 0.75 × secs
    assert sum(n * g for n, g, *_ in MIXED) > 1.5 * 128
    wait_for(lambda: slurm.finished(jobs), 150, "every job to finish", every_s=2)
    runs = slurm.settled(jobs)
    assert sorted(r.job_id for r in runs if r.state == "COMPLETED") == sorted(jobs), runs
    leaf_of = slurm.leaves()
    leaves = {sw: [n for n in leaf_of if leaf_of[n] == sw] for sw in set(leaf_of.values())}
    gangs = checked = 0
    for r in runs:
        if len(r.nodes) < 2 or r.start is None:
            continue
        gangs += 1
        busy: dict[str, int] = {}
        for o in runs:
            if o is not r and o.start is not None and o.start <= r.start + 2 and (
                    o.end is None or o.end > r.start - SLACK_S):
                for n in o.nodes:
                    busy[n] = busy.get(n, 0) + o.gpus // len(o.nodes)
        per_node = r.gpus // len(r.nodes)
        room = any(sum(1 for n in members if 8 - busy.get(n, 0) >= per_node) >= len(r.nodes)
                   for members in leaves.values())
        if room:
            checked += 1
            assert len({leaf_of[n] for n in r.nodes}) == 1, (r, busy)
    assert gangs >= 7 and checked >= 3, (gangs, checked)  # the check did bite


def test_a_users_begin_holds_the_job_back_and_a_revoked_grant_reorders_the_queue(
        slurm: Cluster, daemon: Start) -> None:
    """Issue 18 rows 5 and 8 through the daemon, running as its non-root operator user: a hinted
    job with ``--begin`` 30 s out stays pending (BeginTime) on an empty cluster until then, then
    the daemon starts it; a class-0 job whose grant the daemon no longer finds waits as class 3."""
    d = daemon(daemon__policy="fifo")
    t0 = time.time()
    later = slurm.sbatch("-N1", "--gres=gpu:8", "--begin=now+30",
                         "--comment=rg:parallel=tp8;class=3", args=("2",))
    now_job = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=3", args=("2",))
    wait_for(lambda: slurm.states([now_job]).get(now_job) in ("RUNNING", "COMPLETED"), 30,
             "the job without --begin to start")
    assert slurm.show(later)["JobState"] == "PENDING" and time.time() - t0 < 30
    wait_for(lambda: slurm.states([later]).get(later) in ("RUNNING", "COMPLETING", "COMPLETED"), 60,
             "the --begin job to start after its begin time")
    run = slurm.settled([later])[-1]
    assert run.start is not None and run.start >= t0 + 29, (run.start, t0)
    # the daemon's grants are by QOS "normal"; a job in another QOS keeps its tag, not its class
    slurm.sl("sacctmgr", "-i", "add", "qos", "rg-e2e-other", check=False)
    slurm.sl("sacctmgr", "-i", "modify", "user", "root", "set", "qos+=rg-e2e-other", check=False)
    try:
        full = slurm.sbatch("-N16", "--gres=gpu:8", args=("20",))
        wait_for(lambda: running_on(slurm, full), 30, "the filler to run")
        moved = slurm.sbatch("-N1", "--gres=gpu:8", "--qos=rg-e2e-other",
                             "--comment=rg:parallel=tp8;class=0", args=("2",))
        wait_for(lambda: any(w.startswith(f"job {moved}: class 0 is not granted") for w in warnings(d)),
                 30, "the daemon to name the ungranted job")
    finally:
        slurm.sl("scancel", *slurm.jobs, check=False)


def warnings(d: Daemon) -> list[str]:
    out = []
    for line in d.log.read_text().splitlines():
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = str(rec.get("msg") or rec.get("message") or "")
            out.append(msg.removeprefix("slurm: "))
    return out
