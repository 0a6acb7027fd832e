"""The real-cluster suites written against 22.05, run unchanged against Slurm 24.11 (issue 17
item 1; marker ``slurm2411_suites``, opt-in: it runs only when RAILGANG_TEST_REQUIRE lists it,
``RAILGANG_TEST_REQUIRE=slurm2411_suites pytest tests/slurm_versions/test_suites_2411.py``):
``scripts/slurm_container_tests.sh trixie`` brings up pytest's
own session cluster inside a trixie container and runs them there, on ports from
RAILGANG_TEST_PORT_BASE - 3000 (their offsets, -1385 to +1350, then stay clear of this
session's): the CLI backend, the narrow read, the daemon end to end (order, preemption with
checkpoint and requeue, elastic shrink and grow, a killed daemon, begin times and grants), about
7 minutes. Not in CI yet: of its first two runs here one failed, and its output was not kept
(the assertion below now carries pytest's summary). The rest of the set (docs/devcluster.md) by
hand.

They found what the scenario of test_newer_slurm.py had not: 24.11's squeue -O prints exit codes
as EXIT:SIGNAL and reasons with their description (narrow.py), and slurmdbd records a start
later than squeue shows it (test_serving_e2e.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REQUIRED
from tests.slurm_versions.container import ContainerUnavailable, docker_ready
from tests.slurm_versions.in_container import unavailable
from tests.support.ports import PORT_BASE

pytestmark = [pytest.mark.slow, pytest.mark.slurm2411_suites]
MARKER = "slurm2411_suites"
REPO = Path(__file__).resolve().parents[2]
SUITES = ["tests/daemon/slurm/cli/test_cli_backend_slurm.py",
          "tests/daemon/slurm/cli/test_narrow_slurm.py",
          "tests/e2e/test_daemon_e2e.py"]


def test_the_real_cluster_suites_pass_on_slurm_24_11() -> None:
    if MARKER not in REQUIRED:
        pytest.skip(f"opt-in: RAILGANG_TEST_REQUIRE={MARKER} (about 7 min)")
    if os.geteuid() != 0:
        unavailable(MARKER, "needs root (a whole Slurm cluster in a container)")
    try:
        docker_ready()
    except ContainerUnavailable as exc:
        unavailable(MARKER, str(exc))
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "slurm_container_tests.sh"), "trixie", "-q", "-rfE",
         "-m", "slurm and not slurm2411 and not slurm2605 and not compose and not postgres",
         *SUITES],
        env={**os.environ, "RAILGANG_TEST_PORT_BASE": str(PORT_BASE - 3000),
             "RAILGANG_TEST_REQUIRE": "slurm"},
        capture_output=True, text=True, timeout=1800, cwd=REPO)
    out = res.stdout + res.stderr
    summary = out[out.find("short test summary"):] if "short test summary" in out else out[-6000:]
    assert res.returncode == 0, summary[-6000:]
    assert " passed" in out[-2000:], out[-2000:]
