"""The slurmctld oracle, once per session: a failure (not a skip) where CI requires Slurm."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.topology.conformance.run_conformance import oracle_port
from tests.topology.conformance.slurmctld_oracle import SlurmctldOracle, oracle_unavailable

_REQUIRED = {s.strip() for s in os.environ.get("RAILGANG_TEST_REQUIRE", "").split(",") if s.strip()}
_ROOT = Path(os.environ.get("RAILGANG_TEST_ROOT", f"/tmp/railgang-pytest-{os.getuid()}")) / "conformance"


@pytest.fixture(scope="session")
def slurmctld_oracle() -> Iterator[SlurmctldOracle]:
    from railgang.devcluster.processes import port_in_use

    why = oracle_unavailable()
    if why is None and port_in_use(oracle_port()):
        why = f"port {oracle_port()} (RAILGANG_TEST_PORT_BASE + 1100) is taken"
    if why is not None:
        if "slurm" in _REQUIRED:
            pytest.fail(f"slurm is required (RAILGANG_TEST_REQUIRE) but the slurmctld oracle cannot run: {why}")
        pytest.skip(f"slurmctld oracle unavailable: {why}")
    yield SlurmctldOracle(_ROOT / "oracle", oracle_port())
