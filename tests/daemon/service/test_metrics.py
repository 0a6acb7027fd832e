"""The daemon's /metrics: per-account GPUs, waits and quotas, the cycle total apart from the
phases, heartbeat and leases, the newest report, build info; and promtool accepts the page."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from railgang.daemon import __version__
from railgang.daemon.service.metrics import DaemonMetrics, newest_report
from tests.daemon.core.core_builders import cluster, job


def value(m: DaemonMetrics, name: str, **labels: str) -> float | None:
    got = m.registry.get_sample_value(name, labels)
    return got


def observed() -> DaemonMetrics:
    snap = (cluster(2, 8).at(1000.0)
            .running(job("r1").gpus(8).account("vision"), job("r2").gpus(2).account("nlp"))
            .pending(job("p1").gpus(4).account("nlp").at(400.0),
                     job("p2").gpus(1).account("nlp").at(900.0))
            .build())
    m = DaemonMetrics()
    m.observe_cycle({"snapshot": 2.0, "place": 3.0, "total": 7.0}, Counter(), 2, Counter(),
                    snap, finished_at=1000.5)
    return m


def test_accounts_gpus_pending_and_oldest_wait() -> None:
    m = observed()
    assert value(m, "railgang_account_gpus", account="vision") == 8
    assert value(m, "railgang_account_gpus", account="nlp") == 2
    assert value(m, "railgang_account_pending_jobs", account="nlp") == 2
    assert value(m, "railgang_account_oldest_wait_seconds", account="nlp") == 600.0
    assert value(m, "railgang_account_oldest_wait_seconds", account="vision") == 0.0



def test_nodes_by_state_count_allocated_gpus() -> None:
    """It read idle=2 with r1 holding one node's 8 GPUs and r2 two of the other's (issue 36):
    Slurm (and the simulator) call a node idle or mixed by its CPUs; the metric goes by GPUs."""
    m = observed()
    assert value(m, "railgang_nodes", state="alloc") == 1
    assert value(m, "railgang_nodes", state="mixed") == 1
    assert value(m, "railgang_nodes", state="idle") is None


def test_total_is_its_own_metric_not_a_phase() -> None:
    m = observed()
    assert value(m, "railgang_cycle_seconds_count") == 1
    assert value(m, "railgang_cycle_seconds_sum") == pytest.approx(0.007)
    assert value(m, "railgang_cycle_phase_seconds_count", phase="total") is None
    assert value(m, "railgang_cycle_phase_seconds_count", phase="place") == 1


def test_beat_and_build_info() -> None:
    m = DaemonMetrics()
    m.beat(1234.0, 120, renewed=5, refused=1)
    assert value(m, "railgang_heartbeat_timestamp_seconds") == 1234.0
    assert value(m, "railgang_lease_seconds") == 120
    assert value(m, "railgang_lease_renewals_total", result="refused") == 1
    assert value(m, "railgang_build_info", version=__version__, component="daemon",
                 python=__import__("platform").python_version()) == 1


def test_newest_report(tmp_path: Path) -> None:
    assert newest_report(None) == 0.0 and newest_report(tmp_path / "nothing") == 0.0
    for day in ("2026-11-29", "2026-11-30", "2026-12-31"):  # each written after its day ended
        (tmp_path / day).mkdir()
        (tmp_path / day / "report.json").write_text("{}")
    os.utime(tmp_path / "2026-12-31", (6000.0, 6000.0))
    os.utime(tmp_path / "2026-12-31" / "report.json", (6000.0, 6000.0))  # before its day ended: so far
    os.utime(tmp_path / "2026-11-30", (5000.0, 5000.0))
    os.utime(tmp_path / "2026-11-29", (4000.0, 4000.0))
    assert newest_report(tmp_path) == 5000.0
    m = DaemonMetrics()
    m.watch_reports(tmp_path)
    assert value(m, "railgang_report_last_timestamp_seconds") == 5000.0


def test_promtool_accepts_the_page() -> None:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not found: apt-get install prometheus (scripts/install.sh installs it)")
    page = generate_latest(observed().registry)
    res = subprocess.run([exe, "check", "metrics"], input=page, capture_output=True, timeout=60,
                         check=False)
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
