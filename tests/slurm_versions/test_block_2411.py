"""The daemon end to end on a Slurm 24.11 topology/block cluster (issue 21 item 3; marker
``slurm2411``, like test_newer_slurm.py, ports from RAILGANG_TEST_PORT_BASE + 1250).

Inside the trixie container (block_scenario.py): two NVL-style blocks of 4 nodes × 4 GPUs, every
node busy with a batch job, and a production gang of TP 16 (one TP group over a whole block)
under the daemon's lease. With ``slurm.blocks_nvlink`` and ``daemon.whole_domain_evict`` the
daemon signals the batch jobs of exactly one block, requeues them after their grace and starts
the gang on that block. About 2.5 min (a 60 s checkpoint grace inside).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.slurm_versions.in_container import scenario_seen
from tests.support.ports import PORT_BASE

pytestmark = [pytest.mark.slow, pytest.mark.slurm2411]
MARKER = "slurm2411"


@pytest.fixture(scope="module")
def seen() -> Iterator[dict[str, Any]]:
    yield from scenario_seen("railgang-test-block", "trixie", MARKER, [
        "python3", "/src/tests/slurm_versions/block_scenario.py", "/var/tmp/block-scenario",
        "--port-base", str(PORT_BASE + 1250)])


def _block(node: str, seen: dict[str, Any]) -> int:
    return sorted(seen["fillers"]).index(node) // 4  # n01-n04: block b1, n05-n08: b2


def test_the_scenario_ran_on_a_block_cluster(seen: dict[str, Any]) -> None:
    assert "error" not in seen, seen.get("traceback", seen.get("error"))
    assert "24.11" in seen["slurm"], seen["slurm"]
    assert any("BlockName=b1" in line for line in seen["topology"]), seen["topology"]
    assert seen["cycle1"]["rc"] == 0 and not seen["cycle1"]["errors"], seen["cycle1"]


def test_the_daemon_signals_the_batch_jobs_of_exactly_one_block(seen: dict[str, Any]) -> None:
    signalled = seen["signalled"]
    assert len(signalled) == 4 and len({_block(n, seen) for n in signalled}) == 1, signalled


def test_the_whole_block_gang_gets_that_block(seen: dict[str, Any]) -> None:
    gang = seen["block_gang"]
    assert gang["state"] == "RUNNING", seen.get("cycles", [])[-1:]
    assert sorted(gang["nodes"]) == seen["signalled"]
    assert seen["requeued"] == seen["signalled"]  # requeued, not killed; the other block untouched
