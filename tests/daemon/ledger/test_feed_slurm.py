"""The ledger fills itself on the real cluster (issue 36 item 1): a running ``daemon run`` ingests
sacct on its schedule, so a job that finishes while it runs appears in the ledger without
anyone running ``railgang ledger ingest``, and the watermark metric moves."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from railgang.daemon.config import Settings
from railgang.daemon.service import runner
from railgang.daemon.service.metrics import DaemonMetrics
from railgang.db.models import Job, UsageRecord
from railgang.db.session import make_engine, session_scope
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.errors import ExitCode

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_daemon_ingests_finished_jobs_by_itself(slurm_cluster: DevCluster, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec = slurm_cluster.spec
    monkeypatch.setenv("RAILGANG_CONFIG", "")
    url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
    settings = Settings.model_validate({
        "db": {"url": url}, "slurm": {"backend": "cli", "conf": str(spec.slurm_conf)},
        # its own heartbeat file: job_submit.lua must not lease the job to this daemon; one
        # cycle at start is all the scheduling this test wants
        "daemon": {"policy": "fifo", "cycle_interval_s": 3600, "metrics_port": 0,
                   "heartbeat_file": str(tmp_path / "heartbeat")},
        "ledger": {"ingest_every_s": 1, "first_lookback_s": 600}})
    metrics: list[DaemonMetrics] = []
    made = DaemonMetrics

    def keep() -> DaemonMetrics:
        metrics.append(made())
        return metrics[-1]

    monkeypatch.setattr(runner, "DaemonMetrics", keep)
    stop = threading.Event()
    result: list[ExitCode] = []
    daemon = threading.Thread(target=lambda: result.append(runner.run_daemon(settings, stop=stop)))
    spec.heartbeat_file.unlink(missing_ok=True)  # plain Slurm runs the job now
    daemon.start()
    engine = make_engine(url)
    job = ""
    try:
        job = subprocess.run(["sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
                              "--account=team-a", "-N1", "--gres=gpu:2", "--wrap=sleep 1"],
                             capture_output=True, text=True, env=slurm_env(spec), check=True,
                             timeout=60).stdout.strip().split(";")[0]
        deadline = time.monotonic() + 60
        rows: list[tuple[str, int, int | None]] = []
        while not rows or rows[0][2] is None:  # the finished record, not only the running one
            assert time.monotonic() < deadline, f"job {job} not in the ledger as ended: {rows}"
            assert daemon.is_alive(), result
            time.sleep(0.5)
            try:
                with session_scope(engine) as s:
                    rows = [tuple(r) for r in s.execute(  # type: ignore[misc]
                        select(UsageRecord.account, UsageRecord.gpus, UsageRecord.end_epoch)
                        .join(Job, Job.id == UsageRecord.job_id)
                        .where(Job.slurm_job_id == job))]
            except Exception:  # the daemon is still migrating a fresh database
                rows = []
        assert [(a, g) for a, g, _ in rows] == [("team-a", 2)]
        ok = metrics[0].ledger_reads.labels("sacct", "ok")._value.get()
        assert ok >= 1 and metrics[0].ledger_mark.labels("sacct")._value.get() > time.time() - 60
    finally:
        stop.set()
        daemon.join(timeout=60)
        engine.dispose()
        if job:
            subprocess.run(["scancel", job], env=slurm_env(spec), timeout=60, check=False)
    assert result == [ExitCode.OK]
