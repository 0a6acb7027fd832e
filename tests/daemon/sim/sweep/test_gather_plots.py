"""Gathering and charts without running anything: results written into a store by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from railgang.daemon.sim.sweep import plots
from railgang.daemon.sim.sweep.gather import rows, write_tables
from railgang.daemon.sim.sweep.grid import load_grid
from railgang.daemon.sim.sweep.plan import make_plan
from railgang.daemon.sim.sweep.store import RESULT_FORMAT, Store, code_fingerprint

GRID = """
[sweep]
goals = ["mean_jct_s", "rho_max"]
[fixed]
trace = "t.csv"
[grid]
policy = ["fifo", "default", "slurm"]
cycle-s = [0, 30, 120]
seed = [0, 1, 2, 3]
"""


@pytest.fixture
def store_and_plan(tmp_path: Path) -> tuple[Store, object]:
    (tmp_path / "t.csv").write_text("job_id,submit_time,gpus,duration_s\nj1,0,8,3600\n")
    (tmp_path / "g.toml").write_text(GRID)
    plan = make_plan(load_grid(tmp_path / "g.toml"))
    code = tmp_path / "code"  # stands for the package: what each result's replay loaded
    (code / "sim").mkdir(parents=True)
    (code / "sim" / "engine.py").write_text("A = 1\n")
    store = Store(tmp_path / "out", code_root=code)
    loaded = code_fingerprint([str(code / "sim" / "engine.py")], code)
    assert list(loaded) == ["sim/engine.py"]
    for p in plan.points:
        if p.index == 5:
            store.save_failure(p.key, {"key": p.key, "error": "error: boom"})
            continue
        if p.index == 6:
            continue  # never ran
        result = {"results": {p.options["policy"]: {
            "mean_jct_s": 100.0 + p.index, "rho_max": 1.5, "finished": 1,
            "per_account": [{"account": "a"}], "util_allocated": float("nan")}}}
        store.save_result(p.key, {"format": RESULT_FORMAT, "key": p.key, "result": result,
                                  "cpu_s": 1.0, "wall_s": 2.0, "git": "abc",
                                  "code_files": loaded if p.index != 8 else {"sim/gone.py": "0"}})
    (store.result_path(plan.points[7].key)).write_text('{"key": "someone else"}')  # not ours
    return store, plan


def test_table_has_every_point_with_its_status(store_and_plan: tuple[Store, object]) -> None:
    store, plan = store_and_plan
    table = rows(plan, store)  # type: ignore[arg-type]
    assert len(table) == 36
    assert [table[i]["status"] for i in (4, 5, 6, 7, 8)] == ["done", "failed", "missing",
                                                             "missing", "stale"]
    assert table[5]["error"] == "error: boom"
    assert table[4]["mean_jct_s"] == 104.0 and "util_allocated" not in table[4]  # NaN dropped
    assert "per_account" not in table[4]  # numbers only
    csv_path, json_path = write_tables(plan, store, table)  # type: ignore[arg-type]
    with csv_path.open() as fh:
        head = next(csv.reader(fh))
    assert head[:7] == ["point", "policy", "cycle-s", "seed", "status", "mean_jct_s", "rho_max"]
    assert head[-1] == "error"
    assert json.loads(json_path.read_text())["columns"] == head


def test_a_result_stands_while_the_code_it_loaded_is_unchanged(
        store_and_plan: tuple[Store, object]) -> None:
    store, plan = store_and_plan
    key = plan.points[0].key  # type: ignore[attr-defined]
    assert store.result(key) is not None
    assert store.code_root is not None
    (store.code_root / "sim" / "engine.py").write_text("A = 2\n")
    fresh = Store(store.root, code_root=store.code_root)  # digests are read once per command
    assert fresh.result(key) is None and fresh.lookup(key)[0] == "stale"
    row = rows(plan, fresh)[0]  # type: ignore[arg-type]
    assert row["status"] == "stale" and row["mean_jct_s"] == 100.0  # its numbers stay
    assert "changed since" in row["error"]


def test_a_chart_per_goal_and_knob(store_and_plan: tuple[Store, object], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store, plan = store_and_plan
    table = rows(plan, store)  # type: ignore[arg-type]
    drawn: list[tuple[str, int]] = []
    real = plots._chart

    def spy(table: list[dict[str, object]], knob: str, labels: list[str], goal: str,
            others: list[str], path: Path) -> bool:
        drawn.append((knob, len(plots._series(table, knob, goal, others))))
        return real(table, knob, labels, goal, others, path)

    monkeypatch.setattr(plots, "_chart", spy)
    written = plots.write_plots(table, ["policy", "cycle-s", "seed"], ["mean_jct_s"],
                                tmp_path / "plots")
    assert len(written) == 3 * 2  # one goal x three knobs x PNG and SVG
    # policy against 12 series (3 cycle-s x 4 seeds): more than MAX_SERIES, drawn as a band
    assert ("policy", 12) in drawn and ("seed", 9) in drawn
    svg = (tmp_path / "plots" / "mean_jct_s--cycle-s.svg").read_text()
    assert "<svg" in svg and "cycle-s" in svg
