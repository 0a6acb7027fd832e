"""A shorter SlurmdTimeout for the tests that wait for Slurm to declare a killed slurmd's node
DOWN: with the dev cluster's 60 s that wait is 60-80 s (a ping every timeout / 3), and what those
tests prove (what railgang does once the node is DOWN) does not depend on its length."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tests.support.slurm import sl

if TYPE_CHECKING:
    from railgang.devcluster.cluster import DevCluster

_TIMEOUT = re.compile(r"^SlurmdTimeout=(\d+)$", re.M)


@contextlib.contextmanager
def slurmd_timeout(cluster: DevCluster, seconds: int) -> Iterator[int]:
    """SlurmdTimeout=``seconds`` inside the block (slurm.conf and ``scontrol reconfigure``), the
    cluster's own after it; yields the timeout in force. Only on Slurm 22.05: from 24.05 on a
    reconfigure restarts slurmctld, which the dev cluster runs in the foreground with ``-c`` (a
    clean state), so there the block keeps the configured timeout."""
    conf = cluster.spec.slurm_conf
    text = conf.read_text()
    m = _TIMEOUT.search(text)
    assert m is not None, f"no SlurmdTimeout line in {conf}"
    configured = int(m.group(1))
    version = sl(cluster, "scontrol", "--version").stdout.split()[-1]  # "slurm 22.05.8"
    if not version.startswith("22.05.") or seconds >= configured:
        yield configured
        return
    conf.write_text(_TIMEOUT.sub(f"SlurmdTimeout={seconds}", text))
    try:
        sl(cluster, "scontrol", "reconfigure")
        yield seconds
    finally:
        conf.write_text(text)
        sl(cluster, "scontrol", "reconfigure")
