"""``--degrade``: a spine degraded mid-trace slows the gangs crossing it, and the core migrates
them when the payback rule says so (R-T8); without migration they crawl to the end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.phases.migrate import MigrationRules
from railgang.daemon.core.policies import registry
from railgang.daemon.sim.backend import SimConfig
from railgang.daemon.sim.degrade import LinkEvent, parse_degrade
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape, render_topology

# 16 nodes: leaves s1..s4 (4 nodes each), spine1 over s1+s2, spine2 over s3+s4
FABRIC = fabric_from_shape(16, 8, 4, 2)
# f3/f4 fill two leaves for 11 h, f1/f2 three nodes of the others: b (16 GPUs, 10 h) only fits
# across s1 and s2, through spine1; f1 ends after an hour and frees room in one leaf
JOBS = [TraceJob("f3", 0.0, 32, 40000.0, tp=8, dp=4), TraceJob("f4", 0.0, 32, 40000.0, tp=8, dp=4),
        TraceJob("f1", 0.0, 24, 3600.0, tp=8, dp=3), TraceJob("f2", 0.0, 24, 30000.0, tp=8, dp=3),
        TraceJob("b", 1.0, 16, 36000.0, tp=8, dp=2)]


@pytest.mark.parametrize(("spec", "events"), [
    ("spine1@3h:0.3", [LinkEvent(10800.0, "spine1", 0.3)]),
    ("s2@90m-6h:0.5", [LinkEvent(5400.0, "s2", 0.5), LinkEvent(21600.0, "s2", 1.0)]),
    ("spine2@100:1, spine1@1d:0.25", [LinkEvent(100.0, "spine2", 1.0), LinkEvent(86400.0, "spine1", 0.25)]),
], ids=["spine", "leaf-with-repair", "two"])
def test_parse(spec: str, events: list[LinkEvent]) -> None:
    assert list(parse_degrade(spec, FABRIC.switches)) == events


@pytest.mark.parametrize(("spec", "message"), [
    ("spine9@3h:0.3", "no switch 'spine9'"),
    ("spine1@3h", "expected SWITCH@START"),
    ("spine1@3h:0", "factor must be in (0, 1]"),
    ("spine1@3h:1.5", "factor must be in (0, 1]"),
    ("spine1@6h-3h:0.5", "end must come after"),
    ("spine1@3x:0.5", "expected SWITCH@START"),
], ids=["unknown-switch", "no-factor", "zero", "above-one", "backwards", "unit"])
def test_parse_refuses(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("]", r"\]")):
        parse_degrade(spec, FABRIC.switches)


def _run(spec: str | None, migrate: bool) -> RunResult:
    events = parse_degrade(spec, FABRIC.switches) if spec else ()
    config = EngineConfig(sim=SimConfig(degrade=events, comm_share=0.5),
                          cycle=CycleConfig(migration=MigrationRules(enabled=migrate)))
    return simulate(JOBS, registry.get("fifo"), FABRIC, config=config, comm=TopologyComm(FABRIC))


def _finish(run: RunResult, job_id: str) -> float:
    rec = next(r for r in run.records if r.job_id == job_id)
    assert rec.finish is not None
    return rec.finish


def test_degraded_spine_slows_the_gang_and_migration_wins_it_back() -> None:
    healthy, stuck, moved = _run(None, True), _run("spine1@30m:0.3", False), _run("spine1@30m:0.3", True)
    assert healthy.migrations == stuck.migrations == 0
    assert moved.migrations == 1
    assert _finish(healthy, "b") < 36100  # across leaves, a little slower than one leaf
    assert _finish(stuck, "b") > 1.9 * 36000  # half speed through the degraded spine, to the end
    # moved when f1 left (1 h): checkpoint grace, restore, and the rest at full speed
    assert 36000 < _finish(moved, "b") < 36000 + 3600
    rec = next(r for r in moved.records if r.job_id == "b")
    assert rec.preemptions == 1 and rec.lost_gpu_s > 16 * 120  # the restore (+ work since checkpoint)
    for run in (healthy, stuck, moved):  # nobody else is touched
        assert [_finish(run, j) for j in ("f1", "f2", "f3", "f4")] == [3600.0, 30000.0, 40000.0, 40000.0]


def test_repair_restores_the_speed_without_migration() -> None:
    repaired = _run("spine1@30m-2h:0.3", False)
    stuck = _run("spine1@30m:0.3", False)
    assert 36000 < _finish(repaired, "b") < _finish(stuck, "b")


def test_cli_degrade_and_no_migrate(tmp_path: Path) -> None:
    trace, topo = tmp_path / "t.csv", tmp_path / "topology.conf"
    topo.write_text(render_topology(FABRIC))
    with trace.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("job_id", "submit_time", "gpus", "duration_s", "tp", "dp"))
        for j in JOBS:
            w.writerow((j.job_id, j.submit_time, j.gpus, j.duration_s, j.tp, j.dp))
    base = ["sim", "--trace", str(trace), "--topology", str(topo), "--policy", "fifo", "--comm-share",
            "0.5", "--json", "-q", "--degrade", "spine1@30m:0.3"]
    out = {}
    for name, extra in (("moved", []), ("stuck", ["--no-migrate"])):
        res = CliRunner().invoke(app, base + extra)
        assert res.exit_code == 0, res.output
        out[name] = json.loads(res.stdout)
    assert out["moved"]["results"]["fifo"]["migrations"] == 1
    assert out["stuck"]["results"]["fifo"]["migrations"] == 0 and out["stuck"]["migrate"] is False
    assert out["moved"]["results"]["fifo"]["mean_jct_s"] < out["stuck"]["results"]["fifo"]["mean_jct_s"]
    bad = CliRunner().invoke(app, [*base[:-1], "spine7@1h:0.5"])
    assert bad.exit_code != 0 and "no switch 'spine7'" in str(bad.exception)
    lonely = CliRunner().invoke(app, [*base[:-2], "--no-migrate"])
    assert lonely.exit_code != 0 and "--no-migrate needs --degrade" in str(lonely.exception)
