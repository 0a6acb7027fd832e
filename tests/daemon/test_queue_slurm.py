"""``railgang queue`` on the real local Slurm cluster: the daemon's waiting explanation of a
pending job joined with squeue's user and partition, filtered as squeue's -u/-p (issue 36
item 5). A held job stands in for a waiting one; the explanation is written as the daemon's
cycle writes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster, slurm_env

pytestmark = [pytest.mark.slurm]
RAILGANG = str(Path(sys.executable).with_name("railgang"))


def test_queue_joins_squeue_users_and_partitions(slurm_cluster: DevCluster,
                                                 tmp_path: Path) -> None:
    from railgang.db import migrate
    from railgang.db.repositories.explanations import ExplanationRow, upsert
    from railgang.db.session import make_engine, session_scope

    spec = slurm_cluster.spec
    senv = slurm_env(spec)
    job = subprocess.run(["sbatch", "--parsable", "--hold", f"--chdir={tmp_path}",
                          "--output=/dev/null", "--account=team-a", "--gres=gpu:1",
                          "--wrap", "sleep 1"], capture_output=True, text=True, env=senv,
                         timeout=60, check=True).stdout.strip().split(";")[0]
    try:
        url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
        migrate.upgrade(url)
        engine = make_engine(url)
        with session_scope(engine) as s:
            upsert(s, [ExplanationRow(job, "waiting", "team-a", 3, 1, reason="quota", position=1,
                                      queue_length=1),
                       ExplanationRow("999999", "waiting", "team-a", 3, 1, reason="quota")],
                   cycle_id=1, at=datetime.now(UTC))
        engine.dispose()
        env = {**os.environ, **senv, "RAILGANG_CONFIG": "", "RAILGANG_DB__URL": url,
               "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf)}

        def queue(*args: str) -> list[dict[str, object]]:
            res = subprocess.run([RAILGANG, "queue", "--json", *args], env=env,
                                 capture_output=True, text=True, timeout=60, check=False)
            assert res.returncode == 0, res.stderr
            return json.loads(res.stdout)  # type: ignore[no-any-return]

        [row] = queue()  # 999999 is no pending job of squeue's: left since the cycle
        assert (row["job_id"], row["reason"], row["user"]) == (job, "quota", "root")
        part = str(row["partition"]).split(",")[0]
        assert part, row
        assert [r["job_id"] for r in queue("-u", "root", "-p", part, "-A", "team-a")] == [job]
        assert queue("-u", "nobody") == [] and queue("-p", "no-such-partition") == []
        text = subprocess.run([RAILGANG, "queue"], env=env, capture_output=True, text=True,
                              timeout=60, check=True).stdout.splitlines()
        assert text[0].split()[:3] == ["JOBID", "PARTITION", "USER"]
        assert text[1].split()[:3] == [job, str(row["partition"]), "root"]
    finally:
        subprocess.run(["scancel", job], env=senv, timeout=60, check=False)
