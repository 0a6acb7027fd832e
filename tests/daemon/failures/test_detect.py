"""Failure detectors: Slurm states, GPU telemetry (the real H200 ``nvidia-smi -q -x`` file and DCGM
text), hangs from progress reports; hostile documents are one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from railgang.daemon.failures.detect import (
    FaultKind,
    dcgm_faults,
    hung,
    job_fault,
    node_fault,
    smi_xml_faults,
)

SHARED = Path(os.environ.get("RAILGANG_TELEMETRY_DIR",
                             Path(__file__).parents[3].parent / "shared" / "telemetry" / "h200"))


def _xml() -> str:
    path = SHARED / "nvidia-smi-q.xml"
    if not path.is_file():
        pytest.fail(f"real telemetry recording not found at {path}: check out ../shared or set "
                    "RAILGANG_TELEMETRY_DIR")
    return path.read_text()


def test_slurm_states() -> None:
    assert [f.node for f in job_fault("7", "NODE_FAIL", ["n2", "n1"])] == ["n1", "n2"]
    assert job_fault("7", "COMPLETED", ["n1"]) == []
    assert node_fault("n1", "down", "Not responding").kind is FaultKind.NODE_DOWN  # type: ignore[union-attr]
    # a drain is whoever drained it's (an admin's, a health check's): not Slurm saying the node
    # failed (issue 38 row 1: a user's requeue on an admin-drained node counted as a failure)
    assert node_fault("n1", "drain", "maint: replace PSU") is None
    assert node_fault("n1", "drain", "nhc: GPU 3 missing") is None
    assert node_fault("n1", "drain", "railgang: flaky") is None  # our own drain is no news
    assert node_fault("n1", "idle", "") is None


def test_the_healthy_h200_shows_no_fault() -> None:
    assert smi_xml_faults(_xml(), "h200") == []


@pytest.mark.parametrize(("old", "new", "kind"), [
    ("<remapped_row_failure>No</", "<remapped_row_failure>Yes</", FaultKind.GPU_ROW_REMAP),
    ("<remapped_row_pending>No</", "<remapped_row_pending>Yes</", FaultKind.GPU_ROW_REMAP),
    ("<dram_uncorrectable>0</", "<dram_uncorrectable>2</", FaultKind.GPU_ECC),
    ("<unrepairable_memory>No</", "<unrepairable_memory>Yes</", FaultKind.GPU_ECC),
], ids=["remap-failure", "remap-pending", "dbe", "unrepairable"])
def test_an_h200_with_a_fault(old: str, new: str, kind: FaultKind) -> None:
    text = _xml()
    assert old in text
    faults = smi_xml_faults(text.replace(old, new, 1), "h200")
    assert [f.kind for f in faults] == [kind] and faults[0].node == "h200"


@pytest.mark.parametrize("text", ["", "not xml", "<other/>", "\x00\xff" * 10,
                                  '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]>'
                                  "<nvidia_smi_log>&a;</nvidia_smi_log>", "<a>" * 100000],
                         ids=["empty", "text", "other-root", "binary", "entities", "deep"])
def test_hostile_xml_is_one_line(text: str) -> None:
    with pytest.raises(ValueError) as info:
        smi_xml_faults(text, "n1")
    assert "\n" not in str(info.value)


DCGM = """# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",Hostname="n1"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",Hostname="n1"} 79
DCGM_FI_DEV_XID_ERRORS{gpu="2",Hostname="n1"} 13
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",Hostname="n1"} 0
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="3",Hostname="n1"} 2
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="4",Hostname="n1"} 5
"""


def test_dcgm_faults_and_counters_reported_once() -> None:
    faults, counters = dcgm_faults(DCGM)
    assert {(f.kind, f.gpu) for f in faults} == {
        (FaultKind.GPU_XID, 1), (FaultKind.GPU_ECC, 3), (FaultKind.GPU_NVLINK, 4)}
    again, _ = dcgm_faults(DCGM, counters)  # the same counters: only the XID gauge repeats
    assert [(f.kind, f.gpu) for f in again] == [(FaultKind.GPU_XID, 1)]
    grown, _ = dcgm_faults(DCGM.replace("} 5", "} 9"), counters)
    assert FaultKind.GPU_NVLINK in {f.kind for f in grown}


def test_hostile_dcgm_is_one_line() -> None:
    with pytest.raises(ValueError) as info:
        dcgm_faults("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\" 1\n")
    assert "\n" not in str(info.value)
    assert dcgm_faults("DCGM_FI_DEV_XID_ERRORS{gpu=\"x\",Hostname=\"n1\"} 79\n")[0] == []


@pytest.mark.parametrize(("reports", "now", "step_s", "expect"), [
    ([(0, 1), (60, 2), (120, 3)], 200, 30.0, False),  # moving
    ([(0, 1), (60, 2), (120, 2), (180, 2)], 60 + 400, 30.0, True),  # stuck at 2 since t=60
    ([(0, 1), (60, 2)], 60 + 299, 30.0, False),  # under the 300 s floor
    ([(0, 1), (60, 2)], 60 + 2000, None, False),  # no step time: no evidence
    ([], 1e9, 30.0, False),
    ([(0, 1), (60, float("nan")), (60, 2)], 60 + 400, 30.0, True),
], ids=["moving", "stuck", "floor", "no-step-time", "no-reports", "nan-skipped"])
def test_hang(reports: list[tuple[float, float]], now: float, step_s: float | None,
              expect: bool) -> None:
    fault = hung("j1", "n1", reports, now, step_s)
    assert (fault is not None) is expect
    if fault is not None:
        assert fault.kind is FaultKind.HANG and "step 2" in fault.render()
