"""Failure rates: the Llama 3 calibration reproduces the paper's counts; the spec is hostile input."""

from __future__ import annotations

import math

import pytest

from railgang.daemon.failures.rates import LLAMA3, FailureRates, parse_duration, parse_failures


def test_llama3_rates_give_419_interruptions_in_54_days_on_16384_gpus() -> None:
    per_h = LLAMA3.fleet_per_h(2048, 8, 32)
    assert per_h * 54 * 24 == pytest.approx(419)
    gpu_share = LLAMA3.per_gpu_h * 16_384 / per_h
    assert gpu_share == pytest.approx(0.587)
    assert LLAMA3.per_leaf_h * 64 / per_h == pytest.approx(35 / 419)


def test_mtbf_of_a_16000_gpu_job_is_about_three_hours() -> None:
    mtbf = LLAMA3.mtbf_s(2000, 8, 63)
    assert 3.0 * 3600 < mtbf < 3.3 * 3600
    assert FailureRates(0, 0, 0).mtbf_s(10, 8, 1) == math.inf


@pytest.mark.parametrize(("spec", "field", "value"), [
    ("llama3", "per_gpu_h", LLAMA3.per_gpu_h),
    ("llama3,repair=2h", "repair_s", 7200.0),
    ("llama3,leaf-repair=90m", "leaf_repair_s", 5400.0),
    ("gpu=1e-5", "per_gpu_h", 1e-5),
    ("gpu=1e-5", "per_node_h", 0.0),
    ("llama3,scale=2", "per_node_h", 2 * LLAMA3.per_node_h),
    ("llama3, leaf=0", "per_leaf_h", 0.0),
], ids=["default", "repair", "leaf-repair", "only-gpu", "only-gpu-no-node", "scale", "no-leaf"])
def test_spec(spec: str, field: str, value: float) -> None:
    assert getattr(parse_failures(spec), field) == pytest.approx(value)


@pytest.mark.parametrize("spec", [
    "", ",", "llama4", "gpu=nan", "gpu=-1", "gpu=inf", "gpu=2", "node=x", "repair=0",
    "repair=-1h", "repair=1e300", "repair=4y", "scale=nan", "scale=-1", "wat=1", "llama3,llama3",
    "\x00", "gpu=1e-5" * 1000,
], ids=lambda s: repr(s[:20]))
def test_bad_spec_is_one_line_value_error(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_failures(spec)
    assert "\n" not in str(info.value)
    assert "--failures" in str(info.value)


def test_duration() -> None:
    assert parse_duration("90", "x") == 90
    assert parse_duration("2d", "x") == 172800
    with pytest.raises(ValueError, match="x"):
        parse_duration("soon", "x")
