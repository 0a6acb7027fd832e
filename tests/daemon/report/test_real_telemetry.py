"""Readers and GPU detectors on the real H200 recordings (../shared/telemetry/h200): each
labelled phase is judged on its own, and the whole recording in one piece."""

from __future__ import annotations

import pytest

from railgang.daemon.report.config import DEFAULT_GPU_MEMORY_GIB, DetectorThresholds
from railgang.daemon.report.detectors import (
    detect_overspec,
    detect_starvation,
    detect_zombie,
    fleet_drops,
    starvation,
    zombie_episodes,
)
from railgang.daemon.report.series import read_dmon, read_nvidia_smi_query, read_nvml_scenarios
from railgang.errors import InputError
from tests.daemon.report.realdata import (
    SCALED,
    h200_file,
    nvml,
    nvml_phase,
    nvml_whole,
    smi,
    smi_labels,
    smi_phase,
)

PHASES = ["idle", "healthy", "starved", "checkpoint", "zombie", "idle-end"]


def test_nvml_reader_reads_every_labelled_row() -> None:
    phases = nvml()
    assert [lab for lab, _ in phases] == PHASES
    assert sum(len(s) for _, s in phases) == 996  # README: 996 rows
    healthy = nvml_phase("healthy")
    assert healthy.mem_total_mib == 143771
    assert 95 < healthy.sm.mean() < 100 and 600 < healthy.power_w.mean() < 720  # type: ignore[union-attr]


def test_nvidia_smi_and_dmon_readers() -> None:
    s = smi()
    assert len(s) == 216 and s.mem_total_mib == 143771
    assert s.t[1] - s.t[0] == pytest.approx(0.5, abs=0.02)
    assert s.mem_mib is not None and s.mem_mib.max() == 62541
    dmon = read_dmon(h200_file("nvidia-smi-dmon.txt").read_text())[0]
    assert len(dmon) == 10 and dmon.sm.max() == 100 and dmon.power_w.max() == 693  # type: ignore[union-attr]
    labels = smi_labels(s)
    assert [lab for i, lab in enumerate(labels) if i == 0 or labels[i - 1] != lab] == PHASES


@pytest.mark.parametrize("label", PHASES)
def test_zombie_only_in_the_zombie_phase(label: str) -> None:
    for series in (nvml_phase(label), smi_phase(label)):
        found = zombie_episodes(series, SCALED)
        if label == "zombie":
            assert len(found) == 1
            assert found[0].duration_s > 15 and found[0].mem_mib > 60000
            assert detect_zombie("j", "t", [series], SCALED) is not None
        else:  # the checkpoint's 8 s pause with 5 GiB held is not a zombie
            assert found == [], label


@pytest.mark.parametrize("label", PHASES)
def test_starvation_only_in_the_starved_phase(label: str) -> None:
    series = nvml_phase(label)
    verdict = starvation(series, SCALED)
    flagged = detect_starvation("j", "t", [series], SCALED)
    if label == "starved":
        assert verdict.windows >= 1 and verdict.share == 1.0 and verdict.sd_pct > 30
        assert flagged is not None and flagged.kind == "data_starvation"
    else:  # checkpoint: std-dev 48 % but one gap, no saw-tooth
        assert flagged is None, (label, verdict)
    if label == "checkpoint":
        assert verdict.sd_pct > 30  # the std-dev alone would have flagged it


def test_starvation_in_the_nvidia_smi_capture() -> None:
    # 500 ms sampling of a 500 ms stall cycle aliases: the saw-tooth shows in the first
    # 20-s window, then SM reads 0 while power stays at 330 W (which is why it is no zombie)
    assert detect_starvation("j", "t", [smi_phase("starved")], SCALED) is not None
    assert zombie_episodes(smi_phase("starved"), SCALED) == []
    assert detect_starvation("j", "t", [smi_phase("checkpoint")], SCALED) is None


def test_whole_recording_flags_zombie_at_the_right_time() -> None:
    whole = nvml_whole()
    zombie = nvml_phase("zombie")
    [ep] = zombie_episodes(whole, SCALED)
    assert zombie.t[0] <= ep.start <= zombie.t[0] + 1.0 and ep.end <= zombie.t[-1]
    # with DESIGN's 10 minutes, 20 s of zombie is not enough
    assert zombie_episodes(whole, DetectorThresholds()) == []


def test_over_specified_from_real_memory_peaks() -> None:
    cat = DEFAULT_GPU_MEMORY_GIB
    healthy = nvml_phase("healthy")  # 1.6 GiB peak on a 141 GiB H200: a T4 would do
    found = detect_overspec("j", "t", 0.0, "h200", float(healthy.mem_mib.max()), cat, SCALED)  # type: ignore[union-attr]
    assert found is not None and "t4" in found.suggestion
    zombie = nvml_phase("zombie")  # 61.7 GiB x 1.2 = 74 GiB: an 80 GB part
    found = detect_overspec("j", "t", 0.0, "h200", float(zombie.mem_mib.max()), cat, SCALED)  # type: ignore[union-attr]
    assert found is not None and ("h100" in found.suggestion or "a100-80" in found.suggestion)
    # the same peak on an 80 GB GPU is not over-specified (77 % full)
    assert detect_overspec("j", "t", 0.0, "h100", float(zombie.mem_mib.max()), cat, SCALED) is None  # type: ignore[union-attr]


def test_power_drop_when_the_healthy_phase_ends() -> None:
    whole = nvml_whole()
    th = DetectorThresholds(fleet_bin_s=1, fleet_baseline_s=5, fleet_min_drop_s=3)
    from railgang.daemon.report.detectors import bin_series

    t, p = bin_series(whole.t, whole.power_w, 1)  # type: ignore[arg-type]
    drops = fleet_drops(t, p, th, what="power", unit="W")
    starts = [d.at for d in drops]
    healthy_end = float(nvml_phase("healthy").t[-1])
    assert any(abs(a - healthy_end) <= 2 for a in starts if a is not None)
    steady = nvml_phase("healthy")
    t, p = bin_series(steady.t[10:], steady.power_w[10:], 1)  # type: ignore[index]
    assert fleet_drops(t, p, th, what="power") == []


@pytest.mark.parametrize(("text", "where"), [
    ("", "empty file"),
    ("t_s,scenario,sm_util_pct\n", "header lacks"),
    ("t_s,scenario,sm_util_pct,mem_used_mib,mem_total_mib,power_w\n1,a,x,1,2,3\n",
     ":2: sm_util_pct"),
    ("t_s,scenario,sm_util_pct,mem_used_mib,mem_total_mib,power_w\n1,a,150,1,2,3\n",
     "not a percentage"),
    ("t_s,scenario,sm_util_pct,mem_used_mib,mem_total_mib,power_w\n2,a,1,1,2,3\n1,a,1,1,2,3\n",
     "time goes backwards"),
    ("t_s,scenario,sm_util_pct,mem_used_mib,mem_total_mib,power_w\n1,a,1,1\n", "4 fields"),
], ids=["empty", "header", "number", "percent", "backwards", "short-row"])
def test_nvml_reader_refuses_bad_input(text: str, where: str) -> None:
    with pytest.raises(InputError, match=where):
        read_nvml_scenarios(text, source="x.csv")


def test_smi_and_dmon_readers_refuse_bad_input() -> None:
    real = h200_file("nvidia-smi-query-500ms.csv").read_text().splitlines()
    broken = "\n".join([real[0], real[1].replace("0 %", "lots %", 1)])
    with pytest.raises(InputError, match=r"smi.csv:2: utilization.gpu"):
        read_nvidia_smi_query(broken, source="smi.csv")
    with pytest.raises(InputError, match="header"):
        read_dmon("    0 121 38\n", source="d.txt")
    with pytest.raises(InputError, match=r"d.txt:3: .*columns"):
        read_dmon("# gpu pwr sm\n# Idx W %\n 0 1\n", source="d.txt")
