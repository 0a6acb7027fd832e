"""End to end on the real 16-node Slurm cluster (issue 39): a hinted elastic job is shrunk for a
higher class with notice. Under the real ``railgang daemon run`` the job's script hears the
checkpoint signal and reads its new size from ``TrainingContext`` while it still holds every node,
says it is ready, and only then does Slurm drop the nodes the higher-class gang starts on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from tests.e2e.conftest import Cluster, Daemon, wait_for
from tests.e2e.test_daemon_e2e import gang, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

GRACE_S = 40  # daemon.shrink_grace_s: the job says it is ready long before this runs out
SCRIPT = "#!/bin/bash\nexec {python} {dir}/noticed.py {dir}\n"
# the job's side: what it saw at the signal (the notice, the nodes it held then), then each size
NOTICED = """\
import json, os, sys, time
from railgang.training import TrainingContext

ctx = TrainingContext(report_every_s=3600)
ctx.install_signal_handlers()
log = open(f"{sys.argv[1]}/seen-{ctx.job_id}.jsonl", "a", buffering=1)
size, noticed, until = ctx.current_replicas(), False, time.time() + 120
log.write(json.dumps({"event": "start", "replicas": size}) + "\\n")
while time.time() < until:
    time.sleep(0.2)
    if ctx.stop_requested:
        notice, world = ctx.pending_resize(), ctx.world()
        log.write(json.dumps({"event": "signal", "t": time.time(), "nodes_now": list(world.nodes),
                              "rdzv": ctx.rendezvous().endpoint,
                              "new_replicas": notice and notice.replicas(ctx.shape.replica_gpus),
                              "applies_at": notice and notice.applies_at}) + "\\n")
        noticed = ctx.ready_for_resize(1)
        log.write(json.dumps({"event": "ready", "sent": noticed}) + "\\n")
    try:
        now = ctx.current_replicas()
    except RuntimeError:
        continue
    if now != size:
        size = now
        log.write(json.dumps({"event": "size", "t": time.time(), "replicas": now,
                              "rdzv": ctx.rendezvous().endpoint}) + "\\n")
    if noticed and size == 1 and os.path.exists(f"{sys.argv[1]}/stop-{ctx.job_id}"):
        break  # the test has seen what it needs: end at the new size
"""


def seen(slurm: Cluster, job: str) -> list[dict[str, object]]:
    path = slurm.dir / f"seen-{job}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_shrunk_job_gets_the_signal_and_its_new_size_before_its_nodes_go(
        slurm: Cluster, daemon: Callable[..., Daemon]) -> None:
    d = daemon(daemon__policy="fifo", daemon__resize_min_interval_s="5",
               daemon__shrink_grace_s=str(GRACE_S))
    (slurm.dir / "noticed.py").write_text(NOTICED)
    filler = slurm.sbatch("-N12", "--gres=gpu:8", args=("300",))  # plain Slurm
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    elastic = slurm.sbatch("-N4", "--gres=gpu:8", "--rg-parallel=tp8,dp4", "--rg-elastic=1:4",
                           "--rg-class=3", script=SCRIPT)
    wait_for(lambda: any(e["event"] == "start" for e in seen(slurm, elastic)), 30,
             "the elastic job to start")
    held = running_on(slurm, elastic)
    assert len(held) == 4
    asked = time.time()
    guaranteed = slurm.sbatch(*gang(3, 1), args=("5",))
    wait_for(lambda: running_on(slurm, guaranteed), 40, "the guaranteed gang to start")
    started = time.time()
    events = seen(slurm, elastic)
    signal = next(e for e in events if e["event"] == "signal")
    # the notice reached the job while it still held all four nodes: the new size, and when
    assert signal["nodes_now"] == held and signal["new_replicas"] == 1, events
    assert isinstance(signal["applies_at"], float) and signal["applies_at"] >= asked + GRACE_S - 5
    assert {"event": "ready", "sent": True} in events
    # it said it was ready: the shrink came at once, not at the end of the grace
    assert started < signal["applies_at"] - 10, (started, signal)
    kept = running_on(slurm, elastic)
    assert len(kept) == 1 and sorted(kept + running_on(slurm, guaranteed)) == sorted(held)
    assert slurm.show(elastic)["Restarts"] == "0"  # in place: the same run goes on
    wait_for(lambda: any(e["event"] == "size" for e in seen(slurm, elastic)), 20,
             "the job to see its new size")
    size = next(e for e in seen(slurm, elastic) if e["event"] == "size")
    assert size["replicas"] == 1 and size["rdzv"] == signal["rdzv"]  # the rendezvous stayed put
    (slurm.dir / f"stop-{elastic}").write_text("")
    wait_for(lambda: slurm.finished([elastic]), 20, "the elastic job to end at its new size")
    assert slurm.settled([elastic])[-1].state == "COMPLETED"
    sent = [(state, detail) for _, state, detail in d.journal("resize")]
    assert [s for s, _ in sent] == ["applied"] and sent[0][1].startswith("shrink notice"), sent
    shrunk = [(state, detail) for _, state, detail in d.journal("shrink")]
    assert [(s, det.startswith("shrunk after its notice")) for s, det in shrunk] == [("applied", True)]
