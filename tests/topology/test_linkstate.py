"""Link classification, LinkHealth and quarantine, end to end through the fake fabric's sysfs trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.topology.counters import PortKey, PortRates, port_rates, read_sysfs
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.fakefabric import FakeIBFabric
from railgang.topology.linkstate import Thresholds, assess, classify, quarantine_entries

FABRIC = fabric_from_shape(8, 4, nodes_per_leaf=4)


def _rates(fake: FakeIBFabric, seconds: float = 10.0) -> list[PortRates]:
    before = {n: read_sysfs(fake.sysfs_root(n), n, fake.time) for n in FABRIC.nodes}
    fake.step(seconds)
    out = []
    for n in FABRIC.nodes:
        old = {s.key: s for s in before[n]}
        for s in read_sysfs(fake.sysfs_root(n), n, fake.time):
            r = port_rates(old[s.key], s)
            assert r is not None
            out.append(r)
    return out


def _one(status: str, **rates: float) -> PortRates:
    return PortRates(PortKey("n01", "mlx5_0", 1), 10.0, rates, 1.0, 1.0, 50.0, "ACTIVE", "LinkUp")


CASES = [
    ("healthy", {}, "healthy", 1.0),
    ("symbol-errors", {"symbol_error": 2.0}, "lame", 0.5),
    ("link-downed-once", {"link_downed": 0.1}, "lame", 0.5),
    ("below-threshold", {"symbol_error": 0.001}, "healthy", 1.0),
    ("discards", {"port_xmit_discards": 50.0}, "congested", 1.0),
    ("xmit-wait", {"port_xmit_wait": 7.5e7}, "congested", 0.5),
]


@pytest.mark.parametrize(("rates", "status", "factor"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(rates: dict[str, float], status: str, factor: float) -> None:
    state = classify(_one(status, **rates))
    assert state.status == status
    assert state.factor == pytest.approx(factor)
    assert state.effective_gbps == pytest.approx(50.0 * factor)


def test_thresholds_are_configurable() -> None:
    lenient = Thresholds(lame_errors_per_s=5.0)
    assert classify(_one("x", symbol_error=2.0), lenient).status == "healthy"


def test_fake_fabric_roundtrip_finds_the_lame_link(tmp_path: Path) -> None:
    fake = FakeIBFabric(tmp_path, FABRIC)
    fake.inject("n03", 2, symbol_error=5, port_rcv_errors=1)
    fake.degrade("n06", 1, rate_text="200 Gb/sec (4X HDR)")
    fake.degrade("n07", 0, state="1: DOWN", phys_state="2: Polling")
    result = assess(FABRIC, _rates(fake))
    health = result.health
    assert set(health.quarantined) == {"n03", "n06", "n07"}
    assert "mlx5_2" in health.quarantined["n03"] and "symbol_error" in health.quarantined["n03"]
    assert health.port_factor("n03", 2) == 0.5
    assert health.port_factor("n06", 1) == pytest.approx(0.5)  # trained at half rate
    assert health.port_factor("n07", 0) == 0.0
    assert health.port_factor("n01", 0) == 1.0
    assert [e.node for e in quarantine_entries(health)] == ["n03", "n06", "n07"]
    assert quarantine_entries(health)[0].slurm_reason.startswith("railgang: lame link")


def test_traffic_rates_are_in_bytes(tmp_path: Path) -> None:
    fake = FakeIBFabric(tmp_path, FABRIC)
    rates = _rates(fake, 2.0)
    assert rates[0].xmit_gbps == pytest.approx(10.0, rel=1e-6)


def test_wrapped_and_garbage_counters_do_not_crash(tmp_path: Path) -> None:
    fake = FakeIBFabric(tmp_path, FABRIC, data_width=32)
    fake.set_counter("n01", 0, "port_xmit_data", 2**32 - 10)
    fake.write()
    before = read_sysfs(fake.sysfs_root("n01"), "n01", 0.0, data_width=32)
    fake.corrupt("n01", 1, "symbol_error", "N/A (no PMA)")
    fake.step(1.0)
    after = read_sysfs(fake.sysfs_root("n01"), "n01", fake.time, data_width=32)
    r = port_rates(before[0], after[0])
    assert r is not None and r.xmit_gbps == pytest.approx(10.0, rel=1e-6)
    assert any("wrapped" in n for n in r.notes)
    assert any("N/A" in w for w in after[1].warnings)


def test_switch_ports_and_unknown_hosts() -> None:
    lame = PortRates(PortKey("s1", "lid4", 7), 10.0, {"symbol_error": 3.0}, 0, 0, None, None, None)
    ghost = PortRates(PortKey("ghost", "mlx5_0", 1), 10.0, {}, 0, 0, None, None, None)
    result = assess(FABRIC, [lame, ghost])
    assert result.health.switches["s1"] == 0.5
    assert set(result.health.quarantined) == {"n01", "n02", "n03", "n04"}
    assert any("ghost" in w for w in result.warnings)
