"""``railgang quota sync-accounts``: the plan from sacctmgr's associations, and the real thing
against the 22.05 test cluster."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.ledger.slurm_accounts import SlurmAccount, parse_assoc, plan
from railgang.devcluster.cluster import DevCluster, slurm_env

ASSOC = """root||||
ml-org|root||
research|ml-org||
team-a|research||gres/gpu=16
team-a||root|
"""


def test_parse_assoc_skips_users_and_root() -> None:
    assert parse_assoc(ASSOC) == {
        "ml-org": SlurmAccount("ml-org", None, None),
        "research": SlurmAccount("research", "ml-org", None),
        "team-a": SlurmAccount("team-a", "research", 16)}


def test_plan_adds_parents_first_moves_and_sets_limits() -> None:
    wanted = [("team-x", "research", "team", 8), ("ml-org", None, "org", None),
              ("research", "ml-org", "dept", None), ("team-a", "other", "team", None),
              ("other", "ml-org", "dept", None)]
    assert plan(wanted, parse_assoc(ASSOC)) == [
        ["sacctmgr", "-i", "add", "account", "other", "parent=ml-org",
         "Description=railgang dept"],
        ["sacctmgr", "-i", "modify", "account", "where", "name=team-a", "set", "parent=other",
         "GrpTRES=gres/gpu=-1"],
        ["sacctmgr", "-i", "add", "account", "team-x", "parent=research",
         "Description=railgang team", "GrpTRES=gres/gpu=8"],
    ]
    assert plan([("ml-org", None, "org", None)], parse_assoc(ASSOC)) == []


@pytest.mark.slurm
@pytest.mark.slow
def test_sync_accounts_on_the_real_cluster(slurm_cluster: DevCluster, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path / 'sync.sqlite'}")
    monkeypatch.setenv("RAILGANG_SLURM__CONF", str(slurm_cluster.spec.slurm_conf))
    runner = CliRunner()
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    # Slurm's accounting database outlives a test session: fresh names for what this test adds
    vision, team_v = f"vision-{uuid.uuid4().hex[:6]}", f"tv-{uuid.uuid4().hex[:6]}"
    for args in (["ml-org", "--level", "org", "--guaranteed", "128"],
                 ["research", "--level", "dept", "--parent", "ml-org", "--guaranteed", "64"],
                 ["team-a", "--level", "team", "--parent", "research", "--guaranteed", "32",
                  "--burst-limit", "48"],
                 [vision, "--level", "dept", "--parent", "ml-org", "--guaranteed", "32"],
                 [team_v, "--level", "team", "--parent", vision, "--guaranteed", "16",
                  "--burst-limit", "24"]):
        res = runner.invoke(app, ["quota", "add", *args])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["quota", "sync-accounts"])
    assert res.exit_code == 0, res.output
    assert f"add account {vision} parent=ml-org" in res.output
    assert f"add account {team_v} parent={vision}" in res.output
    show = subprocess.run(["sacctmgr", "-n", "-P", "show", "assoc",
                           "format=account,parentname,user,grptres"], capture_output=True,
                          text=True, env=slurm_env(slurm_cluster.spec), check=True, timeout=60)
    accounts = parse_assoc(show.stdout)
    assert accounts[team_v] == SlurmAccount(team_v, vision, 24)
    assert accounts["team-a"].grp_gpus == 48
    # a second sync has nothing to do
    res = runner.invoke(app, ["quota", "sync-accounts"])
    assert res.exit_code == 0 and res.output.strip().endswith("0 sacctmgr call(s)")


@pytest.mark.slurm
@pytest.mark.slow
def test_ledger_ingest_and_reconcile_against_live_sacct(slurm_cluster: DevCluster,
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import time
    from datetime import UTC, datetime, timedelta

    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path / 'live.sqlite'}")
    monkeypatch.setenv("RAILGANG_SLURM__CONF", str(slurm_cluster.spec.slurm_conf))
    env = slurm_env(slurm_cluster.spec)
    since = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
    # a heartbeat another test left would lease the job to a daemon that is not running, and it
    # would wait out the lease: this test wants plain Slurm to run it now
    slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)
    out = subprocess.run(["sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
                          "--account=team-b", "-N1", "--gres=gpu:4",
                          "--comment=rg-labels:experiment=live", "--wrap=sleep 1"],
                         capture_output=True, text=True, env=env, check=True, timeout=60)
    job = out.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while True:  # ingest only once slurmdbd has the finished job (else the test proves nothing)
        res = subprocess.run(["sacct", "--json", "-j", job], capture_output=True, text=True,
                             env=env, timeout=60)
        # 22.05 says "COMPLETED", 24.11+ ["COMPLETED"]
        if any(j["state"]["current"] in ("COMPLETED", ["COMPLETED"])
               for j in json.loads(res.stdout)["jobs"]):
            break
        assert time.monotonic() < deadline, f"job {job} not COMPLETED in sacct after 120 s"
        time.sleep(0.5)
    from sqlalchemy import select

    from railgang.db.models import Job, UsageRecord
    from railgang.db.session import make_engine, session_scope



    runner = CliRunner()
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    def ingested() -> bool:
        res = runner.invoke(app, ["ledger", "ingest", "--since", since, "--json"])
        assert res.exit_code == 0, res.output
        engine = make_engine(f"sqlite:///{tmp_path / 'live.sqlite'}")
        with session_scope(engine) as s:
            n = s.execute(select(UsageRecord.id).join(Job, Job.id == UsageRecord.job_id)
                          .where(Job.slurm_job_id == job)).first()
        engine.dispose()
        return n is not None

    # in a clean-clone CI run the first ingest after sacct said COMPLETED missed the job once:
    # ingest again (exactly once: a repeat changes nothing) until its row is there
    deadline = time.monotonic() + 60
    while not ingested():
        assert time.monotonic() < deadline, f"job {job} not in the ledger after 60 s of ingests"
        time.sleep(1)
    res = runner.invoke(app, ["ledger", "ingest", "--since", since, "--json"])
    assert res.exit_code == 0, res.output  # the same window again changes nothing
    res = runner.invoke(app, ["ledger", "reconcile", "--since", since, "--json"])
    rep = json.loads(res.output)
    assert res.exit_code == 0 and rep["clean"], res.output
    engine = make_engine(f"sqlite:///{tmp_path / 'live.sqlite'}")
    with session_scope(engine) as s:
        rows = s.execute(select(UsageRecord.account, UsageRecord.gpus, UsageRecord.end_epoch)
                         .join(Job, Job.id == UsageRecord.job_id)
                         .where(Job.slurm_job_id == job)).all()
    engine.dispose()
    assert [(a, g, e is not None) for a, g, e in rows] == [("team-b", 4, True)]
