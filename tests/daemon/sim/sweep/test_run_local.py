"""``railgang sim sweep --local N``: the real command in a subprocess on a small synthetic trace;
the table and plots it gathers, and what a rerun computes: nothing when nothing changed, only the
point whose result is missing (deleted, or lost to a kill), only the point that failed."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from railgang.daemon.sim.sweep import run_local
from railgang.daemon.sim.sweep.gather import rows
from railgang.daemon.sim.sweep.grid import load_grid
from railgang.daemon.sim.sweep.plan import make_plan
from railgang.daemon.sim.sweep.store import Store

pytestmark = pytest.mark.slow

RAILGANG = (sys.executable, "-c", "from railgang.daemon.cli.main import main; main()")


def synthetic_trace(path: Path, jobs: int = 40) -> None:
    """Jobs of 1-16 GPUs every ~5 minutes, 10 min to 2 h: enough to queue on 4 nodes."""
    lines = ["job_id,submit_time,gpus,duration_s,account"]
    for i in range(jobs):
        lines.append(f"j{i},{i * 307 % 12000},{[1, 2, 4, 8, 16][i % 5]},{600 + i * 997 % 6600},"
                     f"{'ab'[i % 2]}")
    path.write_text("\n".join(lines) + "\n")


GRID = """
[sweep]
goals = ["mean_jct_s", "util_allocated"]
[fixed]
trace = "trace.csv"
nodes = 4
gpus-per-node = 8
leaf = 2
[grid]
policy = ["fifo", "default"]
seed = [0, 1]
"""


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    synthetic_trace(tmp_path / "trace.csv")
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    return path


def sweep(grid: Path, *args: str) -> tuple[int, dict[str, object], str]:
    res = subprocess.run([*RAILGANG, "sim", "sweep", str(grid), "--json", *args],
                         capture_output=True, text=True, timeout=600, check=False)
    try:
        return res.returncode, json.loads(res.stdout), res.stderr
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON summary: {res.stdout[-2000:]}\n{res.stderr[-2000:]}") from None


def mtimes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")}


def test_local_sweep_gathers_a_table_and_plots_and_reruns_only_what_is_missing(grid: Path,
                                                                             ) -> None:
    rc, summary, err = sweep(grid, "--local", "2")
    assert rc == 0, err
    assert summary["done"] == 4 and summary["computed_now"] == 4
    out = grid.with_suffix(".sweep")
    with (out / "results.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert [(r["policy"], r["seed"], r["status"]) for r in table] == [
        ("fifo", "0", "done"), ("fifo", "1", "done"), ("default", "0", "done"),
        ("default", "1", "done")]
    for row in table:
        assert float(row["mean_jct_s"]) > 0 and 0 < float(row["util_allocated"]) <= 1
        assert float(row["cpu_s"]) > 0 and row["inputs"].startswith("trace=sha256:")
        assert row["code"] and row["git"] and len(row["key"]) == 64
    fifo, default = float(table[0]["mean_jct_s"]), float(table[2]["mean_jct_s"])
    assert fifo != default  # the policy reached the replay
    data = json.loads((out / "results.json").read_text())
    assert len(data["points"]) == 4 and data["axes"] == ["policy", "seed"]
    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert plots == sorted(f"{g}--{k}.{ext}" for g in ("mean_jct_s", "util_allocated")
                           for k in ("policy", "seed") for ext in ("png", "svg"))
    assert (out / "plots" / "mean_jct_s--policy.png").read_bytes()[:4] == b"\x89PNG"
    before = mtimes(out)
    rc, summary, err = sweep(grid, "--local", "2")
    assert rc == 0 and summary["computed_now"] == 0 and "0 to run" in err
    assert mtimes(out) == before
    # a missing result (deleted by hand, a node's disk lost) reruns alone
    lost = sorted(before)[1]
    (out / "points" / lost).unlink()
    rc, summary, _ = sweep(grid, "--local", "2")
    assert rc == 0 and summary["computed_now"] == 1
    after = mtimes(out)
    assert {k for k in after if after[k] != before[k]} == {lost}


def test_a_killed_sweep_resumes_where_it_stopped(grid: Path) -> None:
    out = grid.with_suffix(".sweep")
    proc = subprocess.Popen([*RAILGANG, "sim", "sweep", str(grid), "--local", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not list((out / "points").glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and the point it was running
        proc.wait()
    kept = mtimes(out)
    assert 1 <= len(kept) < 4
    rc, summary, _ = sweep(grid, "--local", "2")
    assert rc == 0 and summary["done"] == 4 and summary["computed_now"] == 4 - len(kept)
    assert {k: v for k, v in mtimes(out).items() if k in kept} == kept


def test_a_failed_point_is_recorded_and_reruns_alone(grid: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A point whose process fails (here: a wrapper fails seed 1 while a marker file exists, as
    a node crash would) is recorded with its last error line; the next run runs only it."""
    marker = tmp_path / "broken"
    marker.touch()
    wrapper = tmp_path / "flaky.py"
    wrapper.write_text(
        "import os, sys\n"
        f"if os.path.exists({str(marker)!r}) and '--seed' in sys.argv"
        " and sys.argv[sys.argv.index('--seed') + 1] == '1':\n"
        "    sys.exit('error: node lost')\n"
        "sys.argv = ['railgang', *sys.argv[1:]]\n" + run_local._MAIN)
    monkeypatch.setattr(run_local, "SIM_COMMAND", (sys.executable, str(wrapper), "sim"))
    plan = make_plan(load_grid(grid))
    store = Store(tmp_path / "out")
    first = run_local.run_local(plan, store, 2, range(4))
    assert [o.status for o in first] == ["done", "failed", "done", "failed"]
    assert first[1].error == "error: node lost"
    table = rows(plan, store)
    assert [r["status"] for r in table] == ["done", "failed", "done", "failed"]
    assert table[1]["error"] == "error: node lost"
    marker.unlink()
    second = run_local.run_local(plan, store, 2, range(4))
    assert [o.status for o in second] == ["reused", "done", "reused", "done"]
    assert not list((store.root / "failed").glob("*.json"))


def test_a_point_past_its_timeout_is_killed(grid: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(run_local, "SIM_COMMAND", (sys.executable, str(slow)))
    grid.write_text(GRID.replace("[sweep]\n", "[sweep]\ntimeout_s = 0.5\n"))
    plan = make_plan(load_grid(grid))
    t0 = time.monotonic()
    (outcome,) = run_local.run_local(plan, Store(tmp_path / "out"), 1, [0])
    assert outcome.status == "failed" and "timeout_s = 0.5" in outcome.error
    assert time.monotonic() - t0 < 30


def test_an_unwritable_out_is_one_line(grid: Path, tmp_path: Path) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("x")
    res = subprocess.run([*RAILGANG, "sim", "sweep", str(grid), "--local", "1", "--out",
                          str(taken)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "cannot write the sweep's results" in res.stderr and str(taken) in res.stderr
