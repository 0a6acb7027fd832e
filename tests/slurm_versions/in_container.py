"""A scenario script run inside a Slurm container, as the module fixtures of tests/slurm_versions
use it: root and a container (else skip, or fail when RAILGANG_TEST_REQUIRE lists the marker),
the command's last stdout line read as JSON, the container removed afterwards."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from tests.conftest import REQUIRED
from tests.slurm_versions.container import ContainerUnavailable, SlurmContainer


def unavailable(marker: str, why: str) -> NoReturn:
    if marker in REQUIRED:
        pytest.fail(f"{marker} is required (RAILGANG_TEST_REQUIRE) but unavailable: {why}")
    pytest.skip(f"{marker} unavailable: {why}")


def scenario_seen(name: str, suite: str, marker: str, command: list[str],
                  timeout: float = 600) -> Iterator[dict[str, Any]]:
    """Yield what the scenario ``command`` printed inside container ``name`` of ``suite``."""
    if os.geteuid() != 0:
        unavailable(marker, "needs root (a whole Slurm cluster in a container)")
    box = SlurmContainer(f"{name}-{os.getpid()}", suite, build=marker in REQUIRED)
    try:
        box.start()
    except ContainerUnavailable as exc:
        box.stop()
        unavailable(marker, str(exc))
    try:
        res = box.exec(command, timeout=timeout)
        lines = res.stdout.strip().splitlines()
        assert lines, f"the scenario printed nothing (rc {res.returncode}): {res.stderr[-1500:]}"
        yield json.loads(lines[-1])
    finally:
        box.stop()


__all__ = ["scenario_seen", "unavailable"]
