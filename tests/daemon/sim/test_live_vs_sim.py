"""benchmarks/slurm/live_vs_sim.py's comparison (issue 33 item 6): Kendall's tau-b, per-job wait
difference, same-leaf agreement, Slurm's start latency, and the replay through `railgang sim`
with the daemon's cycle settings. The live half needs a real cluster and minutes: it is the
benchmark (BENCHMARKS.md "Live vs simulator fidelity"), not a test."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return importlib.import_module("benchmarks.slurm.live_vs_sim")


def runs(bench: ModuleType, rows: dict[str, tuple[float, float, float, bool | None]]) -> dict[str, object]:
    return {n: bench.Run(n, *row) for n, row in rows.items()}


def test_kendall_tau_b(bench: ModuleType) -> None:
    assert bench.kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert bench.kendall_tau([1, 2, 3], [30, 20, 10]) == -1.0
    # scipy.stats.kendalltau's values (tau-b), without and with ties on both sides
    assert bench.kendall_tau([1, 2, 3, 4, 5], [3, 4, 1, 2, 5]) == pytest.approx(0.2)
    assert bench.kendall_tau([1, 1, 2, 3, 4], [1, 2, 2, 3, 3]) == pytest.approx(0.8249579113843054)
    assert bench.kendall_tau([5, 5], [1, 1]) == 1.0  # nothing to order: no disagreement
    with pytest.raises(ValueError):
        bench.kendall_tau([1, 2], [1])


def test_wait_difference_over_the_jobs_both_ran(bench: ModuleType) -> None:
    live = runs(bench, {"a": (0, 4, 10, None), "b": (0, 2, 10, None), "c": (0, 9, 10, None)})
    sim = runs(bench, {"a": (0, 2, 10, None), "b": (0, 2, 10, None)})  # c never started in sim
    got = bench.wait_difference(live, sim)
    assert got["jobs"] == 2
    assert got["diff_mean_s"] == 1.0 and got["diff_p50_s"] == 0.0 and got["diff_p95_s"] == 0.0
    assert got["live_wait_mean_s"] == 3.0 and got["sim_wait_mean_s"] == 2.0
    assert got["wait_gap_pct"] == pytest.approx(-100 / 3)


def test_same_leaf_counts_multi_node_jobs_only(bench: ModuleType) -> None:
    live = runs(bench, {"a": (0, 1, 2, True), "b": (0, 1, 2, False), "c": (0, 1, 2, None),
                        "d": (0, 1, 2, True)})
    sim = runs(bench, {"a": (0, 1, 2, True), "b": (0, 1, 2, True), "c": (0, 1, 2, None)})
    assert bench.same_leaf(live, sim) == {"multi_node_jobs": 2, "agree_pct": 50.0,
                                          "live_one_leaf_pct": 50.0, "sim_one_leaf_pct": 100.0}
    assert bench.same_leaf({}, {})["multi_node_jobs"] == 0


def test_start_latency_from_jobs_without_a_queue(bench: ModuleType) -> None:
    live = runs(bench, {"a": (0, 3, 9, None), "b": (0, 2.5, 9, None), "q": (0, 40, 50, None)})
    sim = runs(bench, {"a": (0, 2, 9, None), "b": (0, 1, 9, None), "q": (0, 10, 20, None)})
    assert bench.start_latency(live, sim, cycle_s=2.0) == 1.25  # q queued in sim: not counted
    assert bench.start_latency(live, {}, cycle_s=2.0) == 0.0


def test_replay_takes_the_daemon_cycle_settings(bench: ModuleType, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`railgang sim` gets the daemon's settings as its --config (leaf wait 120 s by default; the
    simulator alone defaults to 0), its cycle as quantum and tick, and comm share 0 (every job is
    a sleep)."""
    trace = tmp_path / "t.csv"
    bench.write_trace(trace, [("s001", 0.5, 16, 10.0, 8), ("s000", 0.0, 1, 100.0, 1)])
    assert trace.read_text().splitlines()[1].startswith("s000,0.000,1,100.000,team-a,1,1,1")
    settings = bench.DaemonSettings(policy="fifo", cycle_interval_s=2.0)
    got = bench.simulate(trace, "fifo", settings, 4, 8, 2, tmp_path / "jobs.csv")
    assert got["s000"] == bench.Run("s000", 0.0, 0.0, 100.0, None)
    assert got["s001"].one_leaf is True and got["s001"].end_s - got["s001"].start_s == 10.0
    seen: list[list[str]] = []
    real_run = bench.subprocess.run

    def run(argv: list[str], **kw: object) -> object:
        seen.append(argv)
        return real_run(argv, **kw)

    monkeypatch.setattr(bench.subprocess, "run", run)
    bench.simulate(trace, "default", settings, 4, 8, 2, tmp_path / "jobs.csv")
    flags = dict(zip(seen[0], seen[0][1:], strict=False))
    assert flags["--cycle-s"] == flags["--tick-s"] == "2.0" and flags["--comm-share"] == "0"
    config = tomllib.loads(Path(flags["--config"]).read_text())["daemon"]
    assert config["policy"] == "default" and config["leaf_wait_s"] == 120.0
    assert config["leaf_wait_max_s"] == 600.0 and config["leaf_holds"] == 2
    assert bench.DaemonSettings(**config).model_dump() == settings.model_copy(
        update={"policy": "default"}).model_dump()  # every cycle setting the daemon ran with
