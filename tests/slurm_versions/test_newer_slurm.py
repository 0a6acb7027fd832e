"""Slurm 24.11 and 26.05 for real (issue 17): Debian trixie's (marker ``slurm2411``, loopback
ports from RAILGANG_TEST_PORT_BASE + 1200) and sid's (``slurm2605``, + 1300) Slurm in a container
(beside the 22.05 session cluster's ports, tests/support/ports.py), driven through railgang's CLI
backend, its job_submit.lua and ``railgang daemon run`` as the non-root Slurm administrator
``railgang``, as deployments run it (docs/deploy.md). The scenario runs inside the container (scenario.py); this module asserts on what
it saw.

Run: ``.venv/bin/pytest tests/slurm_versions -m slurm2411`` (or ``slurm2605``) as root with a
Docker engine (dockerd --iptables=false --bridge=none); the image (railgang/slurm:trixie|sid) is
built by scripts/slurm_image.sh (about 4 min) when RAILGANG_TEST_REQUIRE lists the marker (then
a missing engine fails the tests; scripts/install.sh installs and starts one); otherwise a
missing engine or image skips them with the command to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.slurm_versions.in_container import scenario_seen
from tests.support.ports import PORT_BASE

pytestmark = [pytest.mark.slow]
# suite -> (marker, Slurm release, loopback port base): two sessions with two bases do not meet
SUITES = {"trixie": ("slurm2411", "24.11", PORT_BASE + 1200),
          "sid": ("slurm2605", "26.05", PORT_BASE + 1300)}


@pytest.fixture(scope="module", params=[
    pytest.param(suite, marks=getattr(pytest.mark, marker), id=release)
    for suite, (marker, release, _) in SUITES.items()])
def seen(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    suite: str = request.param
    marker, release, port_base = SUITES[suite]
    for out in scenario_seen(f"railgang-test-{marker}", suite, marker, [
            "python3", "/src/tests/slurm_versions/scenario.py", "/var/tmp/scenario", "--port-base", str(port_base)]):
        yield {**out, "release": release}


def test_the_scenario_ran_to_the_end(seen: dict[str, Any]) -> None:
    assert "error" not in seen, seen.get("traceback")
    assert f" {seen['release']}." in seen["slurm"]


def test_job_submit_lua_refuses_and_tags_as_on_22_05(seen: dict[str, Any]) -> None:
    assert seen["lua_refused"]["rc"] != 0 and "no account given" in seen["lua_refused"]["stderr"]
    assert seen["lua_tag"].startswith("railgang:tp=4,pp=1,dp=1")
    assert seen["gang_before"] == {"JobState": "PENDING", "Reason": "BeginTime",
                                   "AdminComment": "railgang:tp=8,pp=1,dp=2;class=1"}


def test_the_spank_option_reaches_job_submit_lua(seen: dict[str, Any]) -> None:
    assert seen["spank"]["rc"] == 0, seen["spank"]["stderr"]
    assert seen["spank"]["tag"].startswith("railgang:tp=2,pp=1,dp=1")


def test_the_snapshot_sees_the_jobs_and_nodes(seen: dict[str, Any]) -> None:
    snap, jobs = seen["snapshot"], seen["jobs"]
    assert snap["nodes"] == ["n01", "n02", "n03", "n04"] and snap["skipped"] == []
    assert snap["running"] == [jobs["tagged"]] and snap["pending"] == [jobs["gang"]]
    assert snap["leased"] == [jobs["gang"]]
    assert snap["free"] == {"n01": 4, "n02": 8, "n03": 8, "n04": 8}
    assert snap["time_limit_s"][jobs["gang"]] is None  # --time=UNLIMITED, not 0 s
    assert snap["json_version"] == "v0.0.42"  # pinned after the first read


def test_the_daemon_runs_as_the_non_root_slurm_administrator(seen: dict[str, Any]) -> None:
    # the heartbeat the daemon rewrote belongs to it: it ran as `railgang`, not as root
    assert seen["daemon_uid"] != 0 and seen["heartbeat_owner"] == seen["daemon_uid"]


def test_the_daemon_places_a_tp8_dp2_gang_in_one_leaf(seen: dict[str, Any]) -> None:
    c1 = seen["cycle1"]
    assert c1["rc"] == 0 and c1["cycle"]["actions"] == {"Start": 1}, c1
    assert c1["cycle"]["failed"] == 0 and c1["cycle"]["error"] is None
    assert seen["gang_after"] == {"nodes": "n[03-04]", "state": "RUNNING"}
    e = seen["explain"]
    assert (e["state"], e["how"], e["leaves"], e["rail_aligned"]) == ("running", "started",
                                                                      ["leaf2"], True)


def test_the_ledger_ingests_this_versions_sacct(seen: dict[str, Any]) -> None:
    ledger = seen["ledger"]
    assert ledger["rc"] == 0, ledger["stderr"]
    assert ledger["segments"] >= 2  # the tagged job and the placed gang, still running


def test_the_daemon_renews_the_lease_of_a_waiting_gang(seen: dict[str, Any]) -> None:
    c2 = seen["cycle2"]
    assert c2["rc"] == 0 and c2["cycle"]["leases_renewed"] == 1 and c2["cycle"]["actions"] == {}
    assert seen["renewal"]["after"] > seen["renewal"]["before"]  # ISO times compare as text
    assert seen["status"]["last_cycle"]["error"] is None
    assert seen["status"]["journal"]["applied"] == 1


def test_the_narrow_read_builds_the_json_records(seen: dict[str, Any]) -> None:
    """Between full reads the backend reads ``squeue -O`` (a 24.11 queue of 10,000 waiting jobs:
    2.0 MB in 0.2 s against 97 MB in 5.6 s of JSON, BENCHMARKS.md); every record it builds must
    equal the JSON's, user text (a newline in a job name) carried from the last full read."""
    got = seen["narrow"]
    assert got["stale"] == "" and got["problems"] == []
    assert got["differ"] == {} and got["records"] == got["json_records"], got
    # the held job, the pending array, the newline's, the killed, the hostile GRES (below)
    assert len(got["names"]) == 5 and got["hostile"]["rc"] == 0, got["hostile"]
    # issue 38 row 3: a GRES type with "|" and a newline is the user's own field, whole
    assert got["hostile"]["gres"] == ["gres/gpu:x|n02\n99999|RUNNING:8"], got["hostile"]
    assert got["signalled"] == 10  # ended by USR1: kept, to be requeued (apply.died_of_the_signal)
    assert got["full_reads"] == [1, 0, 0] and got["same_as_json"]
    # more jobs than FULL_READ_BATCH (2 here): a fresh daemon's first full read by id, in
    # batches (and so the next cycle's after a first cycle whose reads all timed out)
    batched = got["batched"]
    assert "timed out" in batched["timed_out_first"], batched
    for how in ("fresh", "timed_out"):
        assert batched[how]["full_reads"] == 1 and batched[how]["same_as_json"], batched
        assert batched[how]["ids_per_command"] == 2 and batched[how]["commands"] >= 3, batched
    assert "a|name\nwith a newline" in got["names"].values()
    # a job starts: only its JSON is read (squeue -j), not every job's, and nothing the next time
    started = got["started"]
    assert started["full"] == 0 and started["changed"] == 1 and started["same_as_json"]
    assert len(started["gpus"]) == 1 and len(started["gpus"][0]) == 1
    assert started["next"] == [0, 0]
    # a new waiting job: its name read with it by id in the cycle that first lists it
    assert started["fresh"] == [0, 1, "fresh|name\nline"]
    # every record read again by id in turn, no read of every job after the first (20 s period)
    turn = started["turn"]
    assert turn["full_reads"][0] == 1 and not any(turn["full_reads"][1:]), turn
    assert turn["jobs"] >= 4 and turn["unread"] == [] and turn["same_as_json"], turn
