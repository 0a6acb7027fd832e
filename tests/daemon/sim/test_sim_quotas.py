"""``railgang sim --quotas``: the file, borrowing and reclaim end to end through the daemon's
``run_cycle``, guarantee attainment in the report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.quotas import QuotaUse, attainment, load_quotas
from railgang.errors import InputError
from railgang.topology.fabric import fabric_from_shape

runner = CliRunner()
REPO = Path(__file__).resolve().parents[3]

# 20 nodes x 8 = 160 GPUs: the default churn budget (5 %) allows one 8-GPU job per 10 minutes
TREE = """
[org]
name = "lab"
guaranteed = 160
limit = 160

[[team]]
name = "red"
guaranteed = 152
limit = 160

[[team]]
name = "blue"
guaranteed = 8
limit = 160
"""
BLUE_FILLS_THE_CLUSTER = "job_id,submit_time,gpus,duration_s,account\n" + "".join(
    f"b{i:02d},0,8,36000,blue\n" for i in range(20)) + "r1,100,8,100,red\n"


def write(tmp_path: Path, text: str, name: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_owner_reclaims_borrowed_gpus_end_to_end_in_json(tmp_path: Path) -> None:
    trace = write(tmp_path, BLUE_FILLS_THE_CLUSTER, "t.csv")
    quotas = write(tmp_path, TREE, "q.toml")
    res = runner.invoke(app, ["sim", "--trace", str(trace), "--nodes", "20", "--leaf", "4",
                              "--policy", "fifo", "--quotas", str(quotas), "--json", "-q"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    q = data["results"]["fifo"]["quotas"]
    teams = {t["team"]: t for t in q["teams"]}
    assert q["reclaims"] == 1 and teams["blue"]["reclaimed"] == 1
    # red asked for 8 of its 152: it waited for one grace period (120 s), not for blue's 10 h
    assert teams["red"]["jobs_within_guarantee"] == 1 and teams["red"]["started"] == 1
    assert teams["red"]["mean_wait_s"] == pytest.approx(120.0, abs=1.0)
    assert teams["blue"]["borrowed_gpu_h"] > 100  # 152 borrowed GPUs for ~10 h, less the reclaim
    assert data["results"]["fifo"]["preemptions"] == 1


def test_without_quotas_the_owner_waits_for_the_borrower(tmp_path: Path) -> None:
    trace = write(tmp_path, BLUE_FILLS_THE_CLUSTER, "t.csv")
    res = runner.invoke(app, ["sim", "--trace", str(trace), "--nodes", "20", "--leaf", "4",
                              "--policy", "fifo", "--json", "-q"])
    data = json.loads(res.stdout)
    assert "quotas" not in data["results"]["fifo"]
    assert data["results"]["fifo"]["preemptions"] == 0


def test_table_output_shows_attainment(tmp_path: Path) -> None:
    trace = write(tmp_path, BLUE_FILLS_THE_CLUSTER, "t.csv")
    quotas = write(tmp_path, TREE, "q.toml")
    res = runner.invoke(app, ["sim", "--trace", str(trace), "--nodes", "20", "--leaf", "4",
                              "--policy", "fifo", "--quotas", str(quotas), "-q"])
    assert res.exit_code == 0, res.output
    assert "guarantee attainment" in res.stdout and "1 reclaims" in res.stdout


def test_engine_counts_borrowing_and_the_example_file_loads() -> None:
    tree = load_quotas(REPO / "benchmarks" / "philly_quotas.toml")
    assert tree.nodes["6c71a0"].parent == "research" and tree.guaranteed("research") == 8
    from railgang.daemon.sim.traces.model import TraceJob

    jobs = [TraceJob(job_id=f"j{i}", submit_time=0.0, gpus=8, duration_s=3600.0, account="b436b2")
            for i in range(3)]
    run = simulate(jobs, get("fifo"), fabric_from_shape(4, 8, 4),
                   config=EngineConfig(sim=__import__("railgang.daemon.sim.backend",
                                                      fromlist=["SimConfig"]).SimConfig(quotas=tree)))
    use = run.quota_use
    assert isinstance(use, QuotaUse)
    assert use.borrowed_gpu_s == {}  # 24 GPUs inside b436b2's 72
    (b436,) = [t for t in attainment(run.records, use) if t.team == "b436b2"]
    assert b436.jobs == 3 and b436.mean_wait_s == 0.0


@pytest.mark.parametrize(("text", "message"), [
    ("[[team]]\nname = 'a'\n", "team[0]: 'guaranteed' is missing"),
    ("[[team]]\nname = 'a'\nguaranteed = -1\n", "team[0]: 'guaranteed' must be a whole number"),
    ("[[team]]\nname = 'a'\nguaranteed = 1\ncolour = 2\n", "team[0]: unknown key 'colour'"),
    ("[[team]]\nname = 'a'\nguaranteed = 1\ndepartment = 'x'\n", "department 'x' is not defined"),
    ("[[team]]\nname = 'a'\nguaranteed = 4\nlimit = 2\n", "over its own burst limit 2"),
    ("[org]\nname = 'o'\nguaranteed = 4\n[[team]]\nname = 'a'\nguaranteed = 8\n",
     "more than org o's 4"),
    ("[[team]]\nname = 'a'\nguaranteed = 1\n[[team]]\nname = 'a'\nguaranteed = 1\n", "used twice"),
    ("[teams]\n", "unknown table 'teams'"),
    ("[org]\nname = 'o'\nguaranteed = 4\n", "no [[team]] tables"),
    ("team = [", "not valid TOML"),
])
def test_bad_quota_files_say_what_and_where(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text, "q.toml")
    with pytest.raises(InputError, match=None) as err:
        load_quotas(path)
    assert message in str(err.value) and "q.toml" in err.value.render()


def test_cli_reports_a_bad_file_in_one_line(tmp_path: Path) -> None:
    trace = write(tmp_path, BLUE_FILLS_THE_CLUSTER, "t.csv")
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "railgang"), "sim", "--trace", str(trace),
                           "--quotas", str(tmp_path / "nope.toml"), "-q"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope.toml" in lines[0] and "cannot read quotas file" in lines[0]


def test_review_proposes_a_team_idle_for_72h_once_per_idle_spell(tmp_path: Path) -> None:
    tree = load_quotas(write(tmp_path, TREE, "q.toml"))
    use = QuotaUse(tree)
    h = 3600.0
    for hour in range(0, 400):
        red = 4 if hour < 100 or hour >= 250 else 150  # 4 of 152 = 2.6 %: idle, busy, idle
        use.observe(hour * h, {"red": red, "blue": 8})
    spells = [(p.account, round(p.until / h)) for p in use.proposed]
    # the mean over the last 72 h drops under 20 % of 152 (30.4) 59 h after the busy spell:
    # (150 × (322 − t) + 4 × (t − 250)) / 72 < 30.4 from t = 309; blue uses its 8: never
    assert spells == [("red", 72), ("red", 309)]
    assert use.proposed[0].mean_gpus == pytest.approx(4.0)
    assert use.borrowed_gpu_s == {}  # red inside 152, blue inside 8


def test_measure_only_reports_attainment_without_enforcing(tmp_path: Path) -> None:
    trace = write(tmp_path, BLUE_FILLS_THE_CLUSTER, "t.csv")
    quotas = write(tmp_path, TREE, "q.toml")
    res = runner.invoke(app, ["sim", "--trace", str(trace), "--nodes", "20", "--leaf", "4",
                              "--policy", "fifo", "--quotas", str(quotas), "--quotas-measure-only",
                              "--json", "-q"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["quotas_enforced"] is False
    q = data["results"]["fifo"]["quotas"]
    teams = {t["team"]: t for t in q["teams"]}
    assert q["reclaims"] == 0 and data["results"]["fifo"]["preemptions"] == 0
    assert teams["red"]["mean_wait_s"] == pytest.approx(36000.0 - 100.0)  # waits for blue's end
