from __future__ import annotations

import json
from pathlib import Path

import pytest

from railgang.daemon.sim.traces import read_trace
from railgang.daemon.sim.traces.philly import default_dir, read_philly, throughput
from railgang.errors import InputError

THR = {"v100": {
    "('ResNet-18 (batch size 32)', 1)": {"null": 10.0, "('A3C', 1)": [1.0, 2.0]},
    "('ResNet-18 (batch size 32)', 2)": {"null": 18.0},
    "('ResNet-18 (batch size 32)', 8)": {"null": 60.0},
    "(('A3C', 1), ('ResNet-18 (batch size 32)', 1))": {"null": 1.0},
    "('A3C', 1)": {"null": 4.0},
}}


def line(job_type: str, steps: str, arrival: str, gpus: str) -> str:
    return "\t".join([job_type, "python3 x.py", "-n", "1", steps, arrival, gpus])


def make(tmp_path: Path, vcs: dict[str, list[str]]) -> Path:
    (tmp_path / "simulation_throughputs.json").write_text(json.dumps(THR))
    (tmp_path / "seed=0").mkdir()
    for vc, lines in vcs.items():
        (tmp_path / "seed=0" / f"{vc}.trace").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_merges_vcs_as_accounts_and_derives_durations(tmp_path: Path) -> None:
    root = make(tmp_path, {
        "vc1": [line("ResNet-18 (batch size 32)", "3600", "10.0", "2"),
                line("A3C", "400", "0.0", "4")],
        "vc2": [line("ResNet-18 (batch size 32)", "1000", "5.0", "1")],
    })
    trace = read_trace(root)
    assert [(j.job_id, j.account, j.gpus) for j in trace.jobs] == [
        ("vc1-2", "vc1", 4), ("vc2-1", "vc2", 1), ("vc1-1", "vc1", 2)]
    a3c, r1, r2 = trace.jobs
    assert r2.duration_s == pytest.approx(3600 / 18.0)
    assert r1.duration_s == pytest.approx(100.0)
    # A3C measured at 1 GPU only: 4 GPUs derived linearly = 16 steps/s
    assert a3c.duration_s == pytest.approx(400 / 16.0)
    assert a3c.throughput_by_gpus[4] == pytest.approx(16.0)
    assert "1 of 3 jobs" in trace.notes[0]


def test_nearest_measured_size() -> None:
    measured = {1: 10.0, 2: 18.0, 8: 60.0}
    assert throughput(measured, 2) == (18.0, False)
    assert throughput(measured, 16) == (120.0, True)  # from 8
    assert throughput(measured, 4) == (pytest.approx(30.0), True)  # tie 2|8 -> larger: 60*4/8
    assert throughput(measured, 3) == (pytest.approx(27.0), True)  # log2 3 is nearer to 2


def test_malformed_lines(tmp_path: Path) -> None:
    root = make(tmp_path, {"vc": [
        line("ResNet-18 (batch size 32)", "100", "0", "1"),
        line("ResNet-18 (batch size 32)", "x", "0", "1"),
        "too\tfew",
        line("Unknown", "100", "0", "1"),
        line("ResNet-18 (batch size 32)", "100", "-3", "1"),
    ]})
    trace = read_philly(root)
    assert len(trace.jobs) == 1
    assert [(p.line, p.field) for p in trace.problems] == [
        (2, "total_steps"), (3, None), (4, "job_type"), (5, "arrival_time_s")]
    with pytest.raises(InputError) as err:
        read_philly(root, strict=True)
    assert err.value.line == 2 and err.value.field == "total_steps"


def test_missing_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        read_philly(tmp_path / "nope")
    with pytest.raises(InputError, match=r"no \*\.trace"):
        read_philly(tmp_path)


def test_env_var_selects_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_PHILLY_DIR", str(tmp_path))
    assert default_dir() == tmp_path


@pytest.fixture
def philly_dir() -> Path:
    path = default_dir()
    if not (path / "simulation_throughputs.json").is_file():
        pytest.fail(f"Philly-derived trace not found at {path}: check out ../shared or set "
                    "RAILGANG_PHILLY_DIR (this test must not be skipped)")
    return path


def test_real_trace_counts(philly_dir: Path) -> None:
    trace = read_philly(philly_dir)
    assert len(trace.jobs) == 15264 and trace.problems == ()
    assert len({j.account for j in trace.jobs}) == 15
    by_size: dict[int, int] = {}
    for job in trace.jobs:
        by_size[job.gpus] = by_size.get(job.gpus, 0) + 1
    assert (by_size[1], by_size[2], by_size[4], by_size[8], by_size[16], by_size[32],
            by_size[64]) == (10480, 463, 2044, 1916, 255, 91, 1)
