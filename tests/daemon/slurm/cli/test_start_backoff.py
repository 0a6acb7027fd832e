"""A Start Slurm refuses is not repeated blindly (issue 38 row 2; docs/slurm-backend.md,
"Refused starts"): the job sits out 1, 2, 4, 8 cycles out of the core's queue, so a gang
behind it starts, and after ``slurm.start_refusals_max`` refusals its lease is released.

The CLI backend runs whole cycles against a scripted Slurm 22.05 (the captured squeue/sinfo
JSON; scontrol answers as 22.05 did for ``--gres=gpu:nope:1``). The real cluster's run is
tests/e2e/test_refused_start_e2e.py.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from railgang.daemon.clock import SimClock
from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.policies import registry
from railgang.daemon.loop import CycleOutcome, run_cycle
from railgang.daemon.slurm.cli.backend import CliBackend
from railgang.daemon.slurm.cli.backoff import BACKOFF_MAX_CYCLES, sit_out
from railgang.daemon.slurm.cli.records import topology_from_show
from railgang.daemon.slurm.cli.runner import SlurmRunner
from tests.daemon.slurm.cli.capture import DATA, NOW

SQUEUE = json.loads((DATA / "squeue_mixed.json").read_text())
PENDING = next(j for j in SQUEUE["jobs"] if j["job_id"] == 11)  # a leased railgang job
# what 22.05's scontrol printed for the Start of a job submitted with --gres=gpu:nope:1
GRES_REFUSAL = "Invalid GRES specification (with and without type identification)"


def waiting(job_id: int, shape: str, nodes: int, gpus_per_node: int, submitted: float) -> dict[str, Any]:
    tag = f"railgang:{shape};class=3"
    return {**PENDING, "job_id": job_id, "admin_comment": tag, "node_count": nodes,
            "tres_per_node": f"gres:gpu:{gpus_per_node}", "submit_time": submitted}


BAD = waiting(66, "tp=1,pp=1,dp=1", 1, 1, PENDING["submit_time"] - 60)  # first in FIFO order
# every usable GPU of the captured cluster (13 usable nodes × 8: n13, n16 drain, n14 down)
GANG = waiting(67, "tp=8,pp=1,dp=13", 13, 8, PENDING["submit_time"])


class FakeSlurm:
    """squeue and sinfo from the capture; scontrol refuses every update of the ``bad`` jobs the
    way 22.05 does (one line naming the job), or answers ``every`` to every script."""

    def __init__(self, jobs: Sequence[dict[str, Any]], bad: set[str], every: str = "") -> None:
        self.jobs, self.bad, self.every = list(jobs), bad, every
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        self.calls.append((tuple(argv), stdin))
        if argv[0] == "squeue":
            return 0, json.dumps({**SQUEUE, "jobs": self.jobs}), ""
        if argv[0] == "sinfo":
            return 0, (DATA / "sinfo_mixed.json").read_text(), ""
        if argv[0] == "scontrol" and stdin is not None:
            if self.every:
                return 1, "", self.every
            errs = [f"{GRES_REFUSAL} for job {j}" for j in sorted(self.bad) if f"jobid={j} " in stdin]
            return (1 if errs else 0), "", "\n".join(errs)
        return 0, "", ""

    def releases(self) -> list[tuple[str, ...]]:
        """``scontrol update jobid=... StartTime=...`` sent outside a Start (lease updates)."""
        return [argv for argv, stdin in self.calls if argv[0] == "scontrol" and stdin is None
                and argv[1] == "update"]


def backend(fake: FakeSlurm, tmp_path: Path, **settings: Any) -> CliBackend:
    topo = tmp_path / "topology.conf"
    topo.write_text(topology_from_show((DATA / "scontrol_topology.txt").read_text()))
    return CliBackend(SlurmSettings(topology=topo, narrow_full_read_s=0, retries=0, **settings),
                      SlurmRunner(exec_fn=fake), read_shares=False)


def cycles(be: CliBackend, n: int, interval: float = 10.0) -> list[CycleOutcome]:
    clock, rng, policy = SimClock(NOW), random.Random(0), registry.get("fifo")
    out = []
    for _ in range(n):
        out.append(run_cycle(be, policy, clock, rng))
        clock.advance(interval)
    return out


def starts(outcome: CycleOutcome) -> list[str]:
    return [a.job_id for a in outcome.actions if isinstance(a, Start)]


def test_the_sit_out_doubles_up_to_a_bound() -> None:
    assert [sit_out(k) for k in range(1, 9)] == [1, 2, 4, 8, 16, 32, 32, 32]
    assert BACKOFF_MAX_CYCLES == 32 and sit_out(10_000) == 32


def test_a_refused_job_leaves_the_queue_so_the_gang_behind_it_starts(tmp_path: Path) -> None:
    """Row 2: the bad job planned first took a GPU in every plan, and the gang needing every
    GPU waited "needs 104 GPUs, 103 free" on an idle cluster. After one refusal the bad job sits
    out the next cycle, out of the core's queue, and the gang starts on all 104."""
    fake = FakeSlurm([BAD, GANG], bad={"66"})
    be = backend(fake, tmp_path)
    first, second = cycles(be, 2)
    assert starts(first) == ["66"]
    refused = next(r for r in first.results if not r.ok)
    assert refused.detail == f"{GRES_REFUSAL} (job 66)"
    assert [j.job_id for j in second.snapshot.pending] == ["67"]  # type: ignore[union-attr]
    gang = next(a for a in second.actions if isinstance(a, Start))
    assert gang.job_id == "67" and sum(len(g) for g in gang.assignment.values()) == 104
    held = be.held_back()
    assert [(h.job_id, h.refusals, h.sits_out, h.left_to_slurm, h.held) for h in held] == [
        ("66", 1, 1, False, True)]
    assert held[0].reason == f"{GRES_REFUSAL} (job 66)"
    assert "66" in be.last.leased  # type: ignore[union-attr]  # its lease is kept meanwhile


def test_a_job_slurm_keeps_refusing_is_tried_1_2_4_8_cycles_apart_then_left_to_slurm(
        tmp_path: Path) -> None:
    fake = FakeSlurm([BAD], bad={"66"})
    be = backend(fake, tmp_path)
    out = cycles(be, 2)
    assert [h.held for h in be.held_back()] == [True]  # cycle 2: sits out
    out += cycles(be, 1)
    assert [(h.held, h.refusals) for h in be.held_back()] == [(False, 1)]  # back in the queue
    out += cycles(be, 37)
    tried = [i + 1 for i, o in enumerate(out) if "66" in starts(o)]
    assert tried == [1, 3, 6, 11, 20]  # sits out 1, 2, 4, 8 cycles; the 5th refusal is the last
    assert sum(not r.ok for o in out for r in o.results) == 5
    releases = fake.releases()
    assert len(releases) == 1 and releases[0][2] == "jobid=66"
    assert releases[0][3].startswith("StartTime=")
    held = be.held_back()
    assert [(h.job_id, h.refusals, h.left_to_slurm) for h in held] == [("66", 5, True)]
    # no longer railgang's: out of the queue and out of the leases to renew
    assert be.last is not None and "66" not in be.last.leased
    assert be.leases_due([], NOW + 400) == []


def test_the_bound_is_a_setting(tmp_path: Path) -> None:
    fake = FakeSlurm([BAD], bad={"66"})
    out = cycles(backend(fake, tmp_path, start_refusals_max=2), 10)
    assert [i + 1 for i, o in enumerate(out) if "66" in starts(o)] == [1, 3]
    assert len(fake.releases()) == 1


def test_an_accepted_start_clears_the_refusals_and_a_gone_job_is_forgotten(tmp_path: Path) -> None:
    fake = FakeSlurm([BAD], bad={"66"})
    be = backend(fake, tmp_path)
    cycles(be, 3)  # refused in cycles 1 and 3
    assert be.backoff.get("66") is not None and be.backoff.get("66").count == 2  # type: ignore[union-attr]
    fake.bad = set()
    out = cycles(be, 8)
    assert "66" in starts(out[-1])  # back in the queue, and accepted
    assert be.backoff.get("66") is None
    fake.bad = {"66"}
    cycles(be, 1)
    fake.jobs = []  # cancelled
    cycles(be, 1)
    assert be.backoff.get("66") is None and be.held_back() == []


def test_slurmctld_busy_or_unreachable_counts_for_no_job(tmp_path: Path) -> None:
    fake = FakeSlurm([BAD], bad=set(), every="Unable to contact slurm controller (connect failure)")
    out = cycles(backend(fake, tmp_path), 6)
    assert all("66" in starts(o) for o in out)  # tried every cycle: not the job's fault
    assert fake.releases() == []


@pytest.mark.parametrize("max_refusals", [0, 101])
def test_the_setting_is_bounded(max_refusals: int) -> None:
    from pydantic import ValidationError

    assert SlurmSettings().start_refusals_max == 5
    assert SlurmSettings(start_refusals_max=1).start_refusals_max == 1
    with pytest.raises(ValidationError, match="start_refusals_max"):
        SlurmSettings(start_refusals_max=max_refusals)
