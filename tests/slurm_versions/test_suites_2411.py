"""The real-cluster suites written against 22.05, run unchanged against Slurm 24.11 (issue 17
item 1; marker ``slurm2411_suites``, required by CI): every test of the 22.05 session cluster
(``-m slurm``: the CLI backend, the narrow read, job_submit.lua with leases, grants and needs,
SPANK, the ledger from sacct, the devcluster, topology/tree conformance, the daemon end to end)
inside a trixie container, by ``scripts/slurm_container_tests.sh trixie`` on ports from
RAILGANG_TEST_PORT_BASE - 3000. The run starts in the background when collection selects this
test (tests/slurm_versions/suites_run.py), so its quarter of an hour overlaps the session.

They found what the scenario of test_newer_slurm.py had not: 24.11's squeue -O prints exit codes
as EXIT:SIGNAL and reasons with their description (narrow.py), and slurmdbd records a start
later than squeue shows it (test_serving_e2e.py).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.conftest import REQUIRED
from tests.slurm_versions import suites_run
from tests.slurm_versions.container import ContainerUnavailable, docker_ready
from tests.slurm_versions.in_container import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.slurm2411_suites]
# the whole run's limit, counted from its start: ~15 min measured, on a loaded 2-core machine more
RUN_LIMIT_S = 3600


def test_the_real_cluster_suites_pass_on_slurm_24_11() -> None:
    if suites_run.MARKER not in REQUIRED:
        pytest.skip(f"runs when RAILGANG_TEST_REQUIRE lists {suites_run.MARKER}, as CI does (about 20 min)")
    if os.geteuid() != 0:
        unavailable(suites_run.MARKER, "needs root (a whole Slurm cluster in a container)")
    try:
        docker_ready()
    except ContainerUnavailable as exc:
        unavailable(suites_run.MARKER, str(exc))
    run = suites_run.start()  # already running when the session started it
    rc, out = run.wait(max(60.0, RUN_LIMIT_S - (time.monotonic() - run.began)))
    summary = out[out.find("short test summary"):] if "short test summary" in out else out[-6000:]
    assert rc == 0, f"rc {rc}; log {run.log}:\n{summary[-6000:]}"
    counts = re.findall(r"(\d+) (passed|failed|error|skipped)", out[-3000:])
    assert counts and not any(kind in ("failed", "error", "skipped") for _, kind in counts), \
        out[-3000:]
