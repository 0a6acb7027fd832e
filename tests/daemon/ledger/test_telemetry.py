"""Telemetry intake on the real H200 recordings (../shared/telemetry/h200): nvidia-smi CSV and
DCGM exporter text, attributed to ledger segments by node, GPU and time."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from railgang.daemon.ledger import telemetry as tm
from railgang.daemon.ledger.sacct import Segment
from railgang.db.models import Job, UsageRecord
from railgang.db.repositories import ledger
from railgang.db.session import session_scope
from railgang.errors import InputError
from tests.daemon.api.dbs import fresh_engine

SHARED = Path(os.environ.get("RAILGANG_TELEMETRY_DIR",
                             Path(__file__).parents[3].parent / "shared" / "telemetry" / "h200"))


def _read(name: str) -> str:
    path = SHARED / name
    if not path.is_file():
        pytest.fail(f"real telemetry recording not found at {path}: check out ../shared or set "
                    "RAILGANG_TELEMETRY_DIR (this test must not be skipped)")
    return path.read_text()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine("sqlite", tmp_path) as eng:
        yield eng


def _segment(engine: Engine, job: str, start: float, end: float | None, node: str = "n01",
             gpu_ids: str = "") -> None:
    seg = Segment("c", job, "team-a", "u", "gpu", "RUNNING", node, 1, "h200", int(start),
                  None if end is None else int(end))
    with session_scope(engine) as s:
        ledger.upsert_segments(s, [seg], capacity_of=lambda g: "reserved")
        if gpu_ids:
            s.execute(update(UsageRecord).values(gpu_ids=gpu_ids))


def _fractions(engine: Engine) -> list[tuple[float | None, float | None]]:
    with session_scope(engine) as s:
        return [tuple(r) for r in s.execute(  # type: ignore[misc]
            select(UsageRecord.compute_fraction, UsageRecord.productive_fraction)
            .order_by(UsageRecord.start_epoch))]


def test_nvidia_smi_csv_attributed_by_time(engine: Engine) -> None:
    text = _read("nvidia-smi-query-500ms.csv")
    samples = tm.parse_nvidia_smi_csv(text, node="n01")
    rows = list(csv.reader(text.splitlines()[1:], skipinitialspace=True))
    assert len(samples) == len(rows) == 216
    util = [float(r[7].split()[0]) for r in rows]
    assert [s.sm_util for s in samples] == util
    assert samples[0].mem_used_mib == 0 and samples[-1].power_w == float(rows[-1][9].split()[0])
    # one job on n01 for the whole recording, resized at the middle sample: two segments
    t = [s.at_ms for s in samples]
    mid = len(t) // 2
    cut = t[mid] // 1000  # whole seconds, as the ledger keeps them
    _segment(engine, "1", t[0] // 1000, cut)
    with session_scope(engine) as s:
        ledger.upsert_segments(s, [Segment("c", "1", "team-a", "u", "gpu", "COMPLETED", "n01",
                                           1, "h200", cut, t[-1] // 1000 + 1)],
                               capacity_of=lambda g: "reserved")
        tm.store_samples(s, samples)
        tm.store_samples(s, samples)  # the same scrape twice is stored once
        assert tm.attribute(s, since_ms=t[0], until_ms=t[-1] + 1) == 2
    first = [u for ms, u in zip(t, util, strict=True) if ms < cut * 1000]
    second = [u for ms, u in zip(t, util, strict=True) if ms >= cut * 1000]
    got = _fractions(engine)
    assert got[0][0] == pytest.approx(sum(first) / len(first) / 100, abs=1e-6)
    assert got[1][0] == pytest.approx(sum(second) / len(second) / 100, abs=1e-6)
    assert got[0][1] is None  # no progress reports: productive unknown, not guessed


def _dcgm_from_nvml(text: str, start_ms: int) -> tuple[str, list[dict[str, str]]]:
    """The NVML recording re-expressed as DCGM exporter samples (same values, same times)."""
    rows = list(csv.DictReader(text.splitlines()))
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
             "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    labels = 'gpu="0",UUID="GPU-0",device="nvidia0",modelName="NVIDIA H200",Hostname="n02"'
    for r in rows:
        ms = start_ms + int(float(r["t_s"]) * 1000)
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {r['sm_util_pct']} {ms}")
    lines += ["# TYPE DCGM_FI_DEV_FB_USED gauge"]
    lines += [f"DCGM_FI_DEV_FB_USED{{{labels}}} {r['mem_used_mib']} "
              f"{start_ms + int(float(r['t_s']) * 1000)}" for r in rows]
    return "\n".join(lines) + "\n", rows


def test_dcgm_scenarios_give_the_recorded_utilisation(engine: Engine) -> None:
    start_ms = 1796000000000
    text, rows = _dcgm_from_nvml(_read("nvml-100ms-scenarios.csv"), start_ms)
    samples = tm.parse_dcgm(text, scraped_at=datetime.now(UTC))
    assert len(samples) == len(rows) == 996
    assert all(s.node == "n02" and s.gpu == 0 for s in samples)
    assert samples[0].mem_used_mib == float(rows[0]["mem_used_mib"])
    spans: dict[str, list[float]] = {}
    for r in rows:
        spans.setdefault(r["scenario"], []).append(float(r["t_s"]))
    # one job per scenario, whole seconds inside the scenario's span
    for i, name in enumerate(("healthy", "starved", "zombie")):
        lo, hi = min(spans[name]), max(spans[name])
        _segment(engine, str(i + 1), start_ms // 1000 + int(lo) + 1, start_ms // 1000 + int(hi),
                 node="n02")
    with session_scope(engine) as s:
        tm.store_samples(s, samples)
        assert tm.attribute(s, since_ms=samples[0].at_ms, until_ms=samples[-1].at_ms + 1) == 3
        by_job = dict(s.execute(select(Job.slurm_job_id, UsageRecord.compute_fraction)
                                .join(Job, Job.id == UsageRecord.job_id)).all())
    # the README's measured means: healthy 97.7 %, starved 30.6 %, zombie 0.9 %
    assert by_job["1"] > 0.95
    assert 0.2 < by_job["2"] < 0.45
    assert by_job["3"] < 0.05


def test_productive_tier_from_training_progress(engine: Engine) -> None:
    samples = tm.parse_nvidia_smi_csv(_read("nvidia-smi-query-500ms.csv"), node="n01")
    t0, t1 = samples[0].at_ms // 1000, samples[-1].at_ms // 1000 + 1
    _segment(engine, "9", t0, t1)
    with session_scope(engine) as s:
        pk = tm.job_pk(s, "c", "9")
        assert pk is not None
        for i, sps in enumerate((100.0, 50.0, 50.0, 200.0)):  # 200 is the job's best
            assert tm.store_progress(s, pk, f"rg-progress:step={i},sps={sps},t={t0 + i}")
        assert not tm.store_progress(s, pk, "not a progress comment")
        tm.store_samples(s, samples)
        tm.attribute(s, since_ms=samples[0].at_ms, until_ms=samples[-1].at_ms + 1)
    compute, productive = _fractions(engine)[0]
    assert compute is not None and productive == pytest.approx(compute * 100 / 200, abs=1e-6)


def test_samples_of_other_gpus_are_not_attributed(engine: Engine) -> None:
    samples = tm.parse_nvidia_smi_csv(_read("nvidia-smi-query-500ms.csv"), node="n01")
    _segment(engine, "1", samples[0].at_ms // 1000, None, gpu_ids="n01:1-3")
    with session_scope(engine) as s:
        tm.store_samples(s, samples)  # all of them are GPU 0
        assert tm.attribute(s, since_ms=samples[0].at_ms, until_ms=samples[-1].at_ms + 1) == 0
    assert _fractions(engine) == [(None, None)]


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file"),
    ("timestamp, index\n", r"x.csv:1: header lacks utilization.gpu"),
    ("timestamp, index, utilization.gpu [%]\n2026/11/30 16:13:51.662, 0, lots %\n",
     r"x.csv:2: utilization.gpu: cannot read"),
    ("timestamp, index, utilization.gpu [%]\n2026/11/30 16:13:51.662, 0, 140 %\n",
     r"x.csv:2: utilization.gpu: 140.0 is not a percentage"),
    ("timestamp, index, utilization.gpu [%]\nyesterday, 0, 1 %\n", r"x.csv:2: timestamp"),
], ids=["empty", "header", "value", "range", "time"])
def test_bad_nvidia_smi_csv_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        tm.parse_nvidia_smi_csv(text, node="n01", source="x.csv")


def test_bad_dcgm_text_is_one_clear_line() -> None:
    with pytest.raises(InputError, match="lacks the gpu or Hostname label"):
        tm.parse_dcgm('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5\n', scraped_at=datetime.now(UTC))
    with pytest.raises(InputError, match="not Prometheus exposition"):
        tm.parse_dcgm("DCGM_FI_DEV_GPU_UTIL{gpu=0 5 5 5\n", scraped_at=datetime.now(UTC))
