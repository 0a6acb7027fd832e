"""``--segment`` from ``--rg-parallel`` on a real Slurm 26.05 topology/block cluster (issue 21
item 2; marker ``slurm2605``, ports from RAILGANG_TEST_PORT_BASE + 1350). Inside the sid
container (segment_scenario.py): each of two 4-node blocks has 3 free nodes; a tp4,pp2,dp2 gang
of 4 whole nodes (a replica = 2 nodes) is placed by Slurm itself, once without RAILGANG_SEGMENT_BASE
and once with it. Without it the gang waits for a whole block (26.05 keeps a job of a base
block's size inside one); with it job_submit.lua sets ``segment_size`` 2 and the gang starts at
once, each replica inside one block (2 + 2 nodes); with the daemon alive, the daemon places it
(as the non-root daemon user) and Slurm starts it there. About 2 min.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.slurm_versions.in_container import scenario_seen
from tests.support.ports import PORT_BASE

pytestmark = [pytest.mark.slow, pytest.mark.slurm2605]
MARKER = "slurm2605"


@pytest.fixture(scope="module")
def seen() -> Iterator[dict[str, Any]]:
    yield from scenario_seen("railgang-test-segment", "sid", MARKER, [
        "sh", "-c", "cd /src && python3 -m tests.slurm_versions.segment_scenario "
        f"/var/tmp/segment-scenario --port-base {PORT_BASE + 1350}"])


def _per_block(run: dict[str, Any]) -> list[int]:
    nodes = set(run["gang"]["nodes"])
    return sorted(len(nodes & set(block)) for block in run["blocks"])


def test_every_run_reached_the_gang_on_26_05(seen: dict[str, Any]) -> None:
    for label in ("without", "with", "daemon"):
        assert "error" not in seen[label], seen[label].get("traceback", seen[label].get("error"))
        assert "26.05" in seen[label]["slurm"], seen[label]["slurm"]


def test_with_the_base_the_gang_starts_at_once_one_replica_per_block(seen: dict[str, Any]) -> None:
    run = seen["with"]
    assert "--segment=2" in run["gang"]["said"] and run["gang"]["segment"] == {"SegmentSize": "2"}, run["gang"]
    assert run["gang"]["state"] == "RUNNING", run["gang"]
    assert _per_block(run) == [2, 2], run["gang"]


def test_the_daemon_places_a_segmented_gang_and_slurm_accepts_it(seen: dict[str, Any]) -> None:
    run = seen["daemon"]
    assert run["lease"] == "BeginTime" and run["cycle"]["rc"] == 0 and not run["cycle"]["errors"], run
    assert run["gang"]["segment"] == {"SegmentSize": "2"} and run["gang"]["state"] == "RUNNING", run["gang"]
    assert _per_block(run) == [2, 2], run["gang"]  # the daemon's own placement: a replica per block


def test_without_the_base_it_waits_for_a_whole_block(seen: dict[str, Any]) -> None:
    # the same gang, no segment: Slurm keeps a job of a base block's size inside one block
    run = seen["without"]
    assert "--segment" not in run["gang"]["said"], run["gang"]
    assert run["gang"]["state"] == "PENDING" and run["gang"]["reason"] == "No_suitable_topology_unit_found", run["gang"]
