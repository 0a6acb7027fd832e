"""The sweep's grid file: what it accepts, the one line it answers to everything else, and
properties over generated files (hypothesis): any document is a Grid or one InputError, never
another exception; a valid grid has the product of its axes as points, each key once."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railgang.daemon.sim.sweep import plan as plan_module
from railgang.daemon.sim.sweep.grid import MAX_POINTS, load_grid, points
from railgang.daemon.sim.sweep.plan import make_plan
from railgang.errors import InputError

TRACE = "job_id,submit_time,gpus,duration_s\nj1,0,8,3600\nj2,10,4,600\n"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def toml(doc: dict[str, dict[str, Any]]) -> str:
    return "".join(f"[{table}]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n"
                                              for k, v in body.items())
                   for table, body in doc.items())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "t.csv").write_text(TRACE)
    return tmp_path


def grid_at(folder: Path, text: str | bytes, name: str = "g.toml") -> Path:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


GOOD = """
[sweep]
goals = ["mean_jct_s", "util_allocated"]
timeout_s = 60
[fixed]
trace = "t.csv"
gpus_per_node = 8
[grid]
policy = ["fifo", "default", "tiresias"]
cycle-s = [0, 30.5]
elastic = [false, true]
[[grid.cluster]]
name = "small"
nodes = 2
leaf = 1
[[grid.cluster]]
name = "big"
nodes = 4
leaf = 2
"""


def test_a_grid_is_the_product_of_its_axes(folder: Path) -> None:
    grid = load_grid(grid_at(folder, GOOD))
    assert [a.name for a in grid.axes] == ["policy", "cycle-s", "elastic", "cluster"]
    assert grid.size == 24 and grid.goals == ("mean_jct_s", "util_allocated")
    pts = points(grid)
    assert len(pts) == 24
    last = pts[-1]
    assert last.labels == {"policy": "tiresias", "cycle-s": "30.5", "elastic": "true",
                           "cluster": "big"}
    assert last.options["trace"] == str((folder / "t.csv").resolve())
    plan = make_plan(grid)
    assert plan.points[1].argv[-4:] == ["--nodes", "4", "--leaf", "2"]
    assert "--elastic" in plan.points[-1].argv and "--elastic" not in plan.points[0].argv
    assert len({p.key for p in plan.points}) == 24


def test_keys_follow_content_not_location(folder: Path, tmp_path_factory: pytest.TempPathFactory,
                                          ) -> None:
    first = make_plan(load_grid(grid_at(folder, GOOD)))
    elsewhere = tmp_path_factory.mktemp("moved")
    shutil.copy(folder / "t.csv", elsewhere / "t.csv")
    moved = make_plan(load_grid(grid_at(elsewhere, GOOD)))
    assert [p.key for p in moved.points] == [p.key for p in first.points]
    (elsewhere / "t.csv").write_text(TRACE + "j3,20,1,60\n")
    changed = make_plan(load_grid(grid_at(elsewhere, GOOD)))
    assert not {p.key for p in changed.points} & {p.key for p in first.points}


BASE = '[fixed]\ntrace = "t.csv"\n'


@pytest.mark.parametrize(("text", "message"), [
    ("", "no trace"),
    ("[fixd]\n", "fixd: unknown table"),
    (BASE + "nodez = 3\n", "'nodez' is not an option of railgang sim"),
    (BASE + "compare = \"fifo,default\"\n", "policy = [...]"),
    (BASE + "json = true\n", "cannot be set in a sweep"),
    (BASE + "nodes = \"8\"\n", "fixed.nodes: must be an integer, not str"),
    (BASE + "nodes = 8.5\n", "must be an integer, not float"),
    (BASE + "elastic = 1\n", "fixed.elastic: must be true or false"),
    (BASE + "limit = 0\n", "Invalid value for '--limit'"),
    (BASE + "comm-share = 2.0\n", "Invalid value for '--comm-share'"),
    (BASE + "policy = \"fifoo\"\n", "'fifoo' is not one of"),
    (BASE + "degrade = \"a\\u0000b\"\n", "without control characters"),
    (BASE + "[grid]\npolicy = []\n", "grid.policy: must be a non-empty list"),
    (BASE + "[grid]\npolicy = \"fifo\"\n", "must be a non-empty list"),
    (BASE + "[grid]\nseed = [1, 1]\n", "value '1' is given twice"),
    (BASE + "[grid]\nseed = [1, {a = 1}]\n", "grid.seed[1]: must be an integer"),
    (BASE + "seed = 1\n[grid]\nseed = [1, 2]\n", "'seed' is also set by [fixed]"),
    (BASE + "[[grid.nodes]]\nleaf = 1\n", "needs a name of its own"),
    (BASE + "[[grid.c]]\nname = \"x\"\nnodes = 1\n[[grid.c]]\nname = \"x\"\nnodes = 2\n",
     "'x' is given twice"),
    (BASE + "[[grid.c]]\nname = \"x\"\n", "sets no option"),
    (BASE + "[grid]\nnodes = [1, 2]\n[[grid.c]]\nnodes = 3\n", "'nodes' is also set by grid.nodes"),
    (BASE + "[grid]\n" + "".join(f"{k} = {list(range(1, 23))}\n"
                                 for k in ("seed", "limit", "nodes")), "more than 10,000 points"),
    (BASE + "[sweep]\ngoals = [\"speed\"]\n", "unknown goal 'speed'"),
    (BASE + "[sweep]\ntimeout_s = -1\n", "sweep.timeout_s"),
    (BASE + "[sweep]\ntimeout_s = nan\n", "nan is not a finite number"),
    (BASE + "[sweep]\nwhen = 1\n", "sweep.when: unknown key"),
    ('[fixed]\ntrace = "missing.csv"\n', "file not found"),
    ("a = " + "[" * 5000 + "]" * 5000, "nested too deep"),
], ids=lambda v: v[:40] if isinstance(v, str) else None)
def test_a_bad_grid_is_one_line(folder: Path, text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        make_plan(load_grid(grid_at(folder, text)))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("content", [b"\xff\xfe[fixed]\n", b"[fixed]\n\0", b"x" * (2**20 + 1)],
                         ids=["not-utf8", "nul", "over-1MiB"])
def test_hostile_bytes(folder: Path, content: bytes) -> None:
    with pytest.raises(InputError, match=r"g\.toml"):
        load_grid(grid_at(folder, content))


def test_devices_and_directories_are_refused(folder: Path) -> None:
    for path in (Path("/dev/zero"), folder):
        with pytest.raises(InputError, match=r"regular file|directory"):
            load_grid(path)
    grid = grid_at(folder, '[fixed]\ntrace = "/dev/zero"\n')
    with pytest.raises(InputError, match="character device"):
        make_plan(load_grid(grid))


# generated documents: keys from the real options and a few wrong ones, values of every type
KEYS = st.sampled_from(["trace", "policy", "seed", "nodes", "leaf", "limit", "elastic",
                        "cycle-s", "cycle_s", "comm-share", "json", "compare", "bogus", "name"])
SCALARS = st.one_of(st.booleans(), st.integers(-5, 70), st.floats(allow_nan=False, width=32),
                    st.sampled_from(["t.csv", "fifo", "default", "", "x" * 5000, "é\u0001"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4),
                   st.lists(st.dictionaries(KEYS, SCALARS, max_size=3), min_size=1, max_size=3))
DOCS = st.dictionaries(st.sampled_from(["sweep", "fixed", "grid", "other"]),
                       st.dictionaries(KEYS, VALUES, max_size=4), max_size=3)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=DOCS)
def test_any_document_is_a_grid_or_one_line(folder: Path, doc: dict[str, Any]) -> None:
    path = grid_at(folder, toml(doc))
    try:
        grid = load_grid(path)
    except InputError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    assert len(points(grid)) == grid.size == math.prod(len(a.labels) for a in grid.axes)


AXES = st.fixed_dictionaries({}, optional={
    "policy": st.lists(st.sampled_from(["fifo", "default", "slurm", "tiresias"]), min_size=1,
                       max_size=4, unique=True),
    "seed": st.lists(st.integers(0, 2**31), min_size=1, max_size=4, unique=True),
    "cycle-s": st.lists(st.floats(0, 1e6), min_size=1, max_size=3, unique=True),
    "elastic": st.lists(st.booleans(), min_size=1, max_size=2, unique=True),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(axes=AXES)
def test_valid_grids_have_one_key_per_point(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                            axes: dict[str, list[Any]]) -> None:
    monkeypatch.setattr(plan_module, "git_revision", lambda: "abc")  # two git runs a plan
    grid = load_grid(grid_at(folder, toml({"fixed": {"trace": "t.csv"}, "grid": axes})))
    plan = make_plan(grid)
    assert len(plan.points) == math.prod(len(v) for v in axes.values())
    assert len({p.key for p in plan.points}) == len(plan.points)
    assert make_plan(load_grid(grid.path)).points == plan.points  # the same file, the same plan
    if len(plan.points) <= MAX_POINTS:
        assert {tuple(p.labels) for p in plan.points} <= {tuple(axes)}


def test_a_directory_input_is_bounded(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from railgang.daemon.sim.sweep import store

    trace_dir = folder / "philly"
    (trace_dir / "seed=0").mkdir(parents=True)
    for i in range(4):
        (trace_dir / "seed=0" / f"{i}.trace").write_text(f"{i}\n")
    grid = grid_at(folder, '[fixed]\ntrace = "philly"\n')
    first = make_plan(load_grid(grid)).points[0].inputs["trace"]
    (trace_dir / "seed=0" / "3.trace").write_text("changed\n")
    assert make_plan(load_grid(grid)).points[0].inputs["trace"] != first
    monkeypatch.setattr(store, "MAX_DIR_FILES", 3)
    with pytest.raises(InputError, match="more than 3 files"):
        make_plan(load_grid(grid))
