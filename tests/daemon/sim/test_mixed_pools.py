"""Mixed clusters in the simulator (issue 13): pools by GPU type and tier, per-type speed,
upgrades onto idle fast GPUs, spot reclaims (seeded), cost per pool, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.core.policies.registry import get
from railgang.daemon.pricing import parse_prices
from railgang.daemon.sim.backend import SimConfig
from railgang.daemon.sim.capacity import Capacity, pool_report
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
from railgang.daemon.sim.pools import MixedCluster, mixed_cluster, parse_pools
from railgang.daemon.sim.traces.model import TraceJob
from railgang.errors import ConfigError

RESNET = {"v100": 1.0, "k80": 0.25}
HOUR = 3600.0


def tj(job_id: str, submit: float, duration: float, gpus: int = 1,
       rates: dict[str, float] | None = None) -> TraceJob:
    return TraceJob(job_id=job_id, submit_time=submit, gpus=gpus, duration_s=duration,
                    type_rates=rates or RESNET)


def replay(cluster: MixedCluster, jobs: list[TraceJob], policy: str = "default", seed: int = 0,
           **params: Any) -> RunResult:
    config = EngineConfig(sim=SimConfig(node_tier=cluster.node_tier, tiers=cluster.tiers,
                                        spot_seed=seed), seed=seed)
    return simulate(jobs, get(policy, **params), cluster.fabric, config=config)


def by_id(run: RunResult) -> dict[str, Any]:
    return {r.job_id: r for r in run.records}


@pytest.mark.parametrize(("text", "problem"), [
    ("v100", "is not TYPE[:TIER]=GPUS"),
    ("v100:cheap=8", "unknown tier 'cheap'"),
    ("v100=6", "multiple of --gpus-per-node (4)"),
    ("v100=8,v100=8", "given twice"),
    ("v100=800000000", "at most 100,000"),  # refused before 200 M nodes exhaust memory
], ids=["no-count", "tier", "multiple", "twice", "huge"])
def test_bad_pool_specs_are_one_line_errors(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        parse_pools(text, 4)


def test_pools_get_their_own_nodes_leaves_and_prices() -> None:
    pools = parse_pools("v100=8,k80=4,v100:spot=8", 4)
    cluster = mixed_cluster(pools, 4, 1, prices=parse_prices("v100=3"), spot_per_node_day=2.0)
    fabric = cluster.fabric
    assert len(fabric.nodes) == 5
    for leaf in fabric.leaves:  # a leaf never mixes pools
        members = fabric.leaf_nodes(leaf) if hasattr(fabric, "leaf_nodes") else \
            [n for n in fabric.nodes if fabric.leaf_of(n) == leaf]
        assert len({(fabric.facts(n).gpu_type, cluster.node_tier[n]) for n in members}) == 1
    assert cluster.tiers["on-demand"].price("v100") == 3.0
    assert cluster.tiers["spot"].price("v100") == pytest.approx(3.0 * 0.35)
    assert cluster.tiers["on-demand"].price("k80") == 0.45
    assert cluster.tiers["spot"].interruptions_per_node_day == 2.0
    assert cluster.tiers["on-demand"].interruptions_per_node_day == 0.0


def test_a_job_runs_at_its_measured_speed_on_the_type_it_gets() -> None:
    cluster = mixed_cluster(parse_pools("v100=4,k80=8", 4), 4, 1)
    jobs = [tj("a", 0, HOUR)]
    aware, blind = by_id(replay(cluster, jobs)), by_id(replay(cluster, jobs, hetero=False))
    assert aware["a"].finish == pytest.approx(HOUR)  # on a V100
    assert blind["a"].finish == pytest.approx(4 * HOUR)  # type-blind: the K80s have more free
    assert set(aware["a"].pool_gpu_s) == {"v100:on-demand"}
    assert set(blind["a"].pool_gpu_s) == {"k80:on-demand"}
    # effective cost: 1 GPU-hour at $2.48 vs 4 GPU-hours at $0.45
    assert aware["a"].cost_usd == pytest.approx(2.48)
    assert blind["a"].cost_usd == pytest.approx(4 * 0.45)


def test_a_long_job_on_the_slow_pool_moves_up_when_the_fast_one_frees() -> None:
    cluster = mixed_cluster(parse_pools("v100=4,k80=4", 4), 4, 1)
    # four 4-hour jobs fill the V100s; the long job starts on a K80 (an hour of K80 work beats
    # the cost of moving later) and moves to a V100 once they finish
    jobs = [tj(f"s{i}", 0, 4 * HOUR) for i in range(4)] + [tj("long", 1, 100 * HOUR)]
    rec = by_id(replay(cluster, jobs))
    assert rec["long"].preemptions == 1  # the move (checkpoint, restore on the V100)
    assert set(rec["long"].pool_gpu_s) == {"k80:on-demand", "v100:on-demand"}
    assert rec["long"].finish < 100 * HOUR + 4 * HOUR  # 1 V100-hour done on the K80s
    blind = by_id(replay(cluster, jobs, hetero=False))
    assert blind["long"].preemptions == 0  # type-blind never moves it


def spot_cluster(rate: float) -> MixedCluster:
    return mixed_cluster(parse_pools("v100:spot=8", 4), 4, 1, spot_per_node_day=rate,
                         spot_notice_s=120.0)


def test_spot_reclaims_are_seeded_and_charged() -> None:
    jobs = [tj(f"j{i}", i * 60.0, 20 * HOUR) for i in range(6)]
    first, again = replay(spot_cluster(6.0), jobs, seed=3), replay(spot_cluster(6.0), jobs, seed=3)
    other = replay(spot_cluster(6.0), jobs, seed=4)
    rows = [(r.job_id, r.finish, r.interruptions) for r in first.records]
    assert rows == [(r.job_id, r.finish, r.interruptions) for r in again.records]
    assert rows != [(r.job_id, r.finish, r.interruptions) for r in other.records]
    interrupted = sum(r.interruptions for r in first.records)
    assert interrupted > 0
    calm = replay(spot_cluster(0.0), jobs)
    assert sum(r.interruptions for r in calm.records) == 0
    assert max(r.finish or 0 for r in first.records) > max(r.finish or 0 for r in calm.records)
    report = pool_report(first.records, Capacity(spot_cluster(6.0).fabric,
                                                 spot_cluster(6.0).node_tier,
                                                 spot_cluster(6.0).tiers),
                         first.metrics.makespan_s)
    assert report["interruptions"] == interrupted
    held_h = sum(r.allocated_gpu_s for r in first.records) / HOUR
    assert report["by_tier"]["spot"]["gpu_h"] == pytest.approx(held_h, rel=1e-6)
    assert report["cost_usd"] == pytest.approx(held_h * 2.48 * 0.35, abs=0.01)


def test_a_job_predicted_above_the_cap_goes_on_demand() -> None:
    cluster = mixed_cluster(parse_pools("v100=16,v100:spot=16", 4), 4, 1, spot_per_node_day=2.0)
    jobs = [tj("small", 0, HOUR), tj("big", 0, HOUR, gpus=12)]  # 1 node: 2/day; 3 nodes: 6/day
    rec = by_id(replay(cluster, jobs))
    assert set(rec["small"].pool_gpu_s) == {"v100:spot"}
    assert set(rec["big"].pool_gpu_s) == {"v100:on-demand"}
    blind = by_id(replay(cluster, jobs, spot=__import__(
        "railgang.daemon.core.model.tiers", fromlist=["SpotRules"]).SpotRules(cost_aware=False)))
    assert set(blind["big"].pool_gpu_s) == {"v100:spot"}


def test_cli_mixed_cluster_reports_pools_and_cost(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s,account\na,0,4,3600,red\nb,0,4,3600,red\n")
    result = CliRunner().invoke(app, ["sim", "--trace", str(trace), "--gpu-pools",
                                      "v100=4,k80:spot=4", "--gpus-per-node", "4", "--leaf", "1",
                                      "--spot-rate", "1", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["results"]["default"]
    assert set(data["pools"]) == {"v100:on-demand", "k80:spot"}
    assert data["by_tier"]["on-demand"]["gpu_h"] > 0 and data["cost_usd"] > 0
    blind = CliRunner().invoke(app, ["sim", "--trace", str(trace), "--gpu-pools", "v100=4",
                                     "--gpus-per-node", "4", "--policy", "slurm",
                                     "--type-blind", "--quiet"])
    assert blind.exit_code != 0 and "type-blind already" in str(blind.exception)
    bad = CliRunner().invoke(app, ["sim", "--trace", str(trace), "--gpu-pools", "v100=5",
                                   "--gpus-per-node", "4", "--quiet"])
    assert bad.exit_code != 0 and "multiple of --gpus-per-node" in str(bad.exception)


def test_old_gpus_flag_still_works_with_a_warning(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s,account\na,0,4,3600,red\n")
    args = ["sim", "--trace", str(trace), "--gpus-per-node", "4", "--leaf", "1", "--json", "--quiet"]
    new = CliRunner().invoke(app, [*args, "--gpu-pools", "v100=4"])
    old = CliRunner().invoke(app, [*args, "--gpus", "v100=4"])
    assert old.exit_code == 0 and "--gpus is deprecated" in old.stderr
    got, want = (json.loads(r.stdout)["results"]["default"] for r in (old, new))
    assert (got["pools"], got["cost_usd"]) == (want["pools"], want["cost_usd"])
    both = CliRunner().invoke(app, [*args, "--gpus", "v100=4", "--gpu-pools", "v100=4"])
    assert both.exit_code == 2
