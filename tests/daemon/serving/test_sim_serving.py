"""``railgang sim --serving FILE``: the command end to end on a small trace and demand file."""

from __future__ import annotations

import json
import random
from pathlib import Path

from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.serving.synth import DemandShape, demand_series, write_csv

runner = CliRunner()


def files(tmp_path: Path) -> tuple[Path, Path]:
    demand = tmp_path / "demand.csv"
    write_csv(demand, [("chat", 8, 900.0,
                        demand_series(DemandShape(low=1, peak=6, noise=0.03), 9, 1800.0, seed=2))],
              1800.0)
    rng = random.Random(4)
    trace = tmp_path / "trace.csv"
    rows = ["job_id,submit_time,gpus,duration_s"]
    rows += [f"j{i},{i * 600},{rng.choice([1, 2, 4, 8])},{rng.uniform(1800, 14400):.0f}"
             for i in range(100)]
    rows.append("late,999999999,1,60")  # after the serving window: left out with a note
    trace.write_text("\n".join(rows) + "\n")
    return trace, demand


def test_sim_serving_json(tmp_path: Path) -> None:
    """The daemon's serving step lends the pool by forecast; these rigid jobs carry no time
    limit, so under the core's rule they borrow only with ``--serving-lend-rigid``."""
    trace, demand = files(tmp_path)
    base = ["sim", "--trace", str(trace), "--serving", str(demand), "--serving-history-days", "7",
            "--nodes", "4", "--policy", "fifo", "--json", "--quiet"]
    res = runner.invoke(app, [*base, "--serving-lend-rigid"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    static, ahead = got["results"]["static"], got["results"]["forecast"]
    assert got["meta"]["serving_nodes"] == 6 and got["meta"]["jobs"] == 100
    assert static["lent_gpu_h"] == 0 and ahead["lent_gpu_h"] > 0
    assert static["reclaims_with_jobs"] == 0 and ahead["reclaims_with_jobs"] > 0
    assert ahead["training_mean_jct_h"] < 0.7 * static["training_mean_jct_h"]
    assert static["serving_unmet_replica_min"] == 0
    assert ahead["serving_unmet_share"] < 0.01
    assert ahead["buffer_replicas"]["chat"] >= 0
    assert "left out" in res.stderr
    strict = json.loads(runner.invoke(app, base).stdout)["results"]
    assert strict["forecast"]["lent_gpu_h"] > 0  # lent, but no rigid job may borrow it
    assert strict["forecast"]["reclaims_with_jobs"] == 0
    assert strict["forecast"]["training_mean_jct_h"] == static["training_mean_jct_h"]


def test_sim_serving_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    trace, demand = files(tmp_path)
    base = ["sim", "--trace", str(trace), "--serving", str(demand), "--quiet"]
    for extra, word in ((["--compare", "fifo,default"], "--compare"),
                        (["--serving-modes", "magic"], "unknown"),
                        (["--serving-history-days", "9"], "nothing is left")):
        res = runner.invoke(app, [*base, *extra])
        assert res.exit_code != 0 and word in str(res.exception or res.output), (extra, res.output)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\x00\xff" * 100)
    res = runner.invoke(app, ["sim", "--trace", str(trace), "--serving", str(bad), "--quiet"])
    assert res.exit_code != 0
