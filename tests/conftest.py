"""Session-wide fixtures: the real Slurm test cluster and a real PostgreSQL server.

Both are brought up once per test session, only if a selected test needs them. Where they cannot
run (not root, packages missing) their tests are skipped with the reason — unless
RAILGANG_TEST_REQUIRE lists them (CI sets ``slurm,postgres``), in which case that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.ports import PORT_BASE, POSTGRES_PORT
from tests.support.postgres import PrivatePostgres

if TYPE_CHECKING:  # the Slurm parts import only when a test needs a cluster
    from railgang.devcluster.cluster import DevCluster
    from railgang.devcluster.layout import ClusterSpec

REQUIRED = {s.strip() for s in os.environ.get("RAILGANG_TEST_REQUIRE", "").split(",") if s.strip()}
TEST_ROOT = Path(os.environ.get("RAILGANG_TEST_ROOT", f"/tmp/railgang-pytest-{os.getuid()}"))


def _unavailable(service: str, why: str) -> None:
    if service in REQUIRED:
        pytest.fail(f"{service} is required (RAILGANG_TEST_REQUIRE) but unavailable: {why}")
    pytest.skip(f"{service} unavailable: {why}")


def real_cluster(spec: ClusterSpec) -> Iterator[DevCluster]:
    """Bring up a real Slurm cluster of ``spec`` (a devcluster ClusterSpec) for a fixture to
    yield, and take it down after: the session cluster, and the small mixed-pool ones."""
    from railgang.devcluster.cluster import DevCluster, preflight
    from railgang.errors import DevClusterError

    cluster = DevCluster(spec)
    cluster.down()  # leftovers of an interrupted earlier session (recorded PIDs only)
    try:
        preflight(spec)
    except DevClusterError as exc:  # not root, packages missing
        _unavailable("slurm", str(exc))
    cluster.up()
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[object]:
    """A real 16-node × 8-GPU Slurm 22.05 cluster with accounting, on its own ports."""
    from railgang.devcluster.layout import ClusterSpec

    yield from real_cluster(ClusterSpec(dir=TEST_ROOT / "devcluster", slurmctld_port=PORT_BASE,
                                        slurmdbd_port=PORT_BASE + 2, mariadb_port=PORT_BASE - 511,
                                        slurmd_base_port=PORT_BASE + 83))


@pytest.fixture(scope="session")
def site_cluster() -> Iterator[object]:
    """The site-like 6-node cluster (railgang/devcluster/site.py: three partitions, three GPU
    types, CPUs and memory that run out first, a QOS, a reservation, a license), on its own ports
    (BASE+900 on); a second cluster, so its tests are few (tests/e2e/test_site_e2e.py)."""
    from railgang.devcluster.layout import ClusterSpec, site_spec

    yield from real_cluster(site_spec(ClusterSpec(
        dir=TEST_ROOT / "devcluster-site", cluster_name="rgsite", slurmctld_port=PORT_BASE + 900,
        slurmdbd_port=PORT_BASE + 902, mariadb_port=PORT_BASE - 300,
        slurmd_base_port=PORT_BASE + 910, nodes_per_leaf=2)))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL: RAILGANG_TEST_PG_URL, or a private server started for this session."""
    given = os.environ.get("RAILGANG_TEST_PG_URL")
    if given:
        yield given
        return
    server = PrivatePostgres(TEST_ROOT / "postgres", port=POSTGRES_PORT)
    try:
        server.start()
    except Exception as exc:
        _unavailable("postgres", str(getattr(exc, "stderr", "") or exc))
    try:
        yield server.url
    finally:
        server.stop()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the Slurm 24.11 suites' container run now when CI requires it and it was selected:
    a quarter of an hour spent mostly waiting on Slurm, beside the rest of the session
    (tests/slurm_versions/suites_run.py)."""
    if ("slurm2411_suites" not in REQUIRED or os.geteuid() != 0
            or session.config.option.collectonly
            or not any(i.get_closest_marker("slurm2411_suites") for i in session.items)):
        return
    from tests.slurm_versions import suites_run
    from tests.slurm_versions.container import ContainerUnavailable, docker_ready

    try:
        docker_ready()
    except ContainerUnavailable:
        return  # the test itself says why
    suites_run.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    import sys

    if "tests.slurm_versions.suites_run" in sys.modules:
        sys.modules["tests.slurm_versions.suites_run"].stop()
