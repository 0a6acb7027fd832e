"""Slurm 24.11 for real (issue 17): Debian trixie's Slurm in a container on loopback ports
13917+ (the 22.05 session cluster uses others), driven through railgang's CLI backend, its
job_submit.lua and ``railgang daemon run``. The scenario runs inside the container
(scenario.py); this module asserts on what it saw.

Run: ``.venv/bin/pytest tests/slurm_versions -m slurm2411`` as root with a Docker engine
(dockerd --iptables=false --bridge=none); the image (railgang/slurm:trixie) is built on first use
by scripts/slurm_image.sh (about 4 min) when RAILGANG_TEST_REQUIRE lists slurm2411 (then a
missing engine fails the tests; scripts/install.sh installs and starts one); otherwise a missing
engine or image skips them with the command to run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REQUIRED
from tests.slurm_versions.container import ContainerUnavailable, SlurmContainer

pytestmark = [pytest.mark.slurm2411, pytest.mark.slow]
PORT_BASE = int(os.environ.get("RAILGANG_TEST_2411_PORT_BASE", "13917"))


@pytest.fixture(scope="module")
def seen() -> Iterator[dict[str, Any]]:
    if os.geteuid() != 0:
        _unavailable("needs root (a whole Slurm cluster in a container)")
    box = SlurmContainer(f"railgang-test-slurm2411-{os.getpid()}", "trixie",
                         build="slurm2411" in REQUIRED)
    try:
        box.start()
    except ContainerUnavailable as exc:
        box.stop()
        _unavailable(str(exc))
    try:
        res = box.exec(["python3", "/src/tests/slurm_versions/scenario.py", "/var/tmp/scenario",
                        "--port-base", str(PORT_BASE)], timeout=600)
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
        yield out
    finally:
        box.stop()


def _unavailable(why: str) -> None:
    if "slurm2411" in REQUIRED:
        pytest.fail(f"slurm2411 is required (RAILGANG_TEST_REQUIRE) but unavailable: {why}")
    pytest.skip(f"slurm2411 unavailable: {why}")


def test_the_scenario_ran_to_the_end(seen: dict[str, Any]) -> None:
    assert "error" not in seen, seen.get("traceback")
    assert seen["slurm"].endswith("24.11.5") or "24.11" in seen["slurm"]


def test_job_submit_lua_refuses_and_tags_as_on_22_05(seen: dict[str, Any]) -> None:
    assert seen["lua_refused"]["rc"] != 0 and "no account given" in seen["lua_refused"]["stderr"]
    assert seen["lua_tag"].startswith("railgang:tp=4,pp=1,dp=1")
    assert seen["gang_before"] == {"JobState": "PENDING", "Reason": "BeginTime",
                                   "AdminComment": "railgang:tp=8,pp=1,dp=2;class=1"}


def test_the_snapshot_sees_the_jobs_and_nodes(seen: dict[str, Any]) -> None:
    snap, jobs = seen["snapshot"], seen["jobs"]
    assert snap["nodes"] == ["n01", "n02", "n03", "n04"] and snap["skipped"] == []
    assert snap["running"] == [jobs["tagged"]] and snap["pending"] == [jobs["gang"]]
    assert snap["leased"] == [jobs["gang"]]
    assert snap["free"] == {"n01": 4, "n02": 8, "n03": 8, "n04": 8}
    assert snap["time_limit_s"][jobs["gang"]] is None  # --time=UNLIMITED, not 0 s
    assert snap["json_version"] == "v0.0.42"  # pinned after the first read


def test_the_daemon_places_a_tp8_dp2_gang_in_one_leaf(seen: dict[str, Any]) -> None:
    c1 = seen["cycle1"]
    assert c1["rc"] == 0 and c1["cycle"]["actions"] == {"Start": 1}, c1
    assert c1["cycle"]["failed"] == 0 and c1["cycle"]["error"] is None
    assert seen["gang_after"] == {"nodes": "n[03-04]", "state": "RUNNING"}
    e = seen["explain"]
    assert (e["state"], e["how"], e["leaves"], e["rail_aligned"]) == ("running", "started",
                                                                      ["leaf2"], True)


def test_the_daemon_renews_the_lease_of_a_waiting_gang(seen: dict[str, Any]) -> None:
    c2 = seen["cycle2"]
    assert c2["rc"] == 0 and c2["cycle"]["leases_renewed"] == 1 and c2["cycle"]["actions"] == {}
    assert seen["renewal"]["after"] > seen["renewal"]["before"]  # ISO times compare as text
    assert seen["status"]["last_cycle"]["error"] is None
    assert seen["status"]["journal"]["applied"] == 1
