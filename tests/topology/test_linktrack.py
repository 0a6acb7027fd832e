"""Link verdicts over time: hysteresis against noisy samples, flapping ports, counter resets,
repairs, all through the fake fabric's sysfs trees and its node_exporter text."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.topology.counters import PortKey, parse_node_exporter, port_rates, read_sysfs
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.fakefabric import FakeIBFabric
from railgang.topology.linktrack import Hysteresis, LinkTracker

FABRIC = fabric_from_shape(8, 4, nodes_per_leaf=4)
N03_2 = PortKey("n03", "mlx5_2", 1)


class Rig:
    """A fake fabric and a tracker fed from its sysfs trees, one interval per ``tick``."""

    def __init__(self, root: Path, hysteresis: Hysteresis = Hysteresis()) -> None:
        self.fake = FakeIBFabric(root, FABRIC)
        self.tracker = LinkTracker(FABRIC, hysteresis=hysteresis)
        self.changes: list[tuple[float, str, bool]] = []
        self.read()

    def read(self) -> None:
        samples = [s for n in FABRIC.nodes for s in read_sysfs(self.fake.sysfs_root(n), n, self.fake.time)]
        for c in self.tracker.update(samples):
            self.changes.append((c.at, f"{c.key.host}/{c.key.device}", c.quarantined))

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            self.fake.step(10.0)
            self.read()

    def port(self, key: PortKey = N03_2):  # type: ignore[no-untyped-def]
        return next(p for p in self.tracker.ports() if p.key == key)

    def quarantined(self) -> set[str]:
        return set(self.tracker.health().quarantined)


def test_first_sample_has_no_verdict(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    assert {p.verdict for p in rig.tracker.ports()} == {"unknown"}
    assert rig.tracker.health().healthy and not rig.tracker.health().observed


def test_one_crc_burst_does_not_quarantine(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.tick(2)
    rig.fake.burst("n03", 2, symbol_error=5000)
    rig.tick()
    assert rig.port().verdict == "lame" and not rig.port().quarantined
    assert rig.tracker.health().port_factor("n03", 2) == 1.0  # not proven: counts as healthy
    rig.tick(6)
    assert rig.changes == [] and not rig.quarantined()


def test_sustained_errors_quarantine_after_n_intervals_and_release_after_m_clean(tmp_path: Path) -> None:
    rig = Rig(tmp_path, Hysteresis(quarantine_after=3, window=5, release_after=4))
    rig.fake.inject("n03", 2, symbol_error=5, port_rcv_errors=1)
    rig.tick(2)
    assert not rig.quarantined()
    rig.tick()
    assert rig.quarantined() == {"n03"}
    health = rig.tracker.health()
    assert "symbol_error" in health.quarantined["n03"] and health.port_factor("n03", 2) == 0.5
    assert rig.changes == [(30.0, "n03/mlx5_2", True)]
    rig.fake.repair("n03", 2)
    rig.tick(3)
    assert rig.quarantined() == {"n03"} and rig.port().clean_streak == 3
    rig.tick()
    assert not rig.quarantined()
    assert rig.changes[-1] == (70.0, "n03/mlx5_2", False)
    assert "n03" in rig.tracker.health().observed


def test_flapping_port_is_quarantined_and_stays_quarantined(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.fake.flap("n05", 1)
    rig.tick(4)
    verdicts = [p.verdict for p in rig.tracker.ports() if p.key.host == "n05" and p.key.device == "mlx5_1"]
    assert verdicts == ["healthy"]  # lame every other interval: the even ones read clean
    assert not rig.quarantined()
    rig.tick()
    assert rig.quarantined() == {"n05"}
    rig.tick(20)
    assert rig.quarantined() == {"n05"}  # never release_after clean intervals in a row
    assert [c for c in rig.changes if c[1] == "n05/mlx5_1"] == [(50.0, "n05/mlx5_1", True)]
    rig.fake.flap("n05", 1, on=False)
    rig.tick(5)
    assert not rig.quarantined()


def test_counter_reset_is_not_an_error_burst(tmp_path: Path) -> None:
    rig = Rig(tmp_path, Hysteresis(quarantine_after=1, window=1, release_after=1))
    rig.fake.inject("n02", 0, symbol_error=2)
    rig.tick(3)
    rig.fake.repair("n02", 0)
    rig.tick()
    assert not rig.quarantined()
    rig.fake.reset_counters("n02")  # a reboot: every counter of every port back to zero
    rig.tick()
    port = rig.port(PortKey("n02", "mlx5_0", 1))
    assert port.verdict == "healthy" and any("reset" in n for n in port.notes)
    assert not rig.quarantined()


def test_an_unreadable_counter_never_reads_as_a_clean_interval(tmp_path: Path) -> None:
    rig = Rig(tmp_path, Hysteresis(quarantine_after=2, window=2, release_after=1))
    rig.fake.inject("n03", 2, symbol_error=4)
    rig.tick(2)
    assert rig.quarantined() == {"n03"}
    rig.fake.corrupt("n03", 2, "symbol_error", "N/A")  # one bad read: not judged at all
    rig.tick()
    assert rig.quarantined() == {"n03"} and rig.port().intervals == 2
    rig.fake.garbage.clear()
    rig.tick()  # the next complete sample closes the 20 s interval: 80 errors / 20 s
    assert rig.port().intervals == 3 and rig.port().reasons == ("symbol_error 4/s",)
    assert rig.quarantined() == {"n03"}


def test_down_port_quarantines_at_zero_bandwidth(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.fake.degrade("n07", 3, state="1: DOWN", phys_state="2: Polling")
    rig.tick(3)
    assert rig.quarantined() == {"n07"} and rig.tracker.health().port_factor("n07", 3) == 0.0


def test_observed_needs_enough_intervals_on_every_port(tmp_path: Path) -> None:
    rig = Rig(tmp_path, Hysteresis(release_after=3))
    rig.tick(2)
    assert not rig.tracker.health().observed
    rig.tick()
    assert rig.tracker.health().observed == frozenset(FABRIC.nodes)


def test_hysteresis_is_validated() -> None:
    with pytest.raises(ValueError, match="quarantine_after"):
        Hysteresis(quarantine_after=6, window=5)
    with pytest.raises(ValueError, match="release_after"):
        Hysteresis(release_after=0)


def test_exporter_text_reads_like_sysfs(tmp_path: Path) -> None:
    fake = FakeIBFabric(tmp_path, FABRIC)
    fake.inject("n01", 1, symbol_error=3)
    a_sys, a_exp = read_sysfs(fake.sysfs_root("n01"), "n01", 0.0), parse_node_exporter(fake.exporter_text("n01"), "n01", 0.0)
    fake.step(10.0)
    b_sys = read_sysfs(fake.sysfs_root("n01"), "n01", 10.0)
    b_exp = parse_node_exporter(fake.exporter_text("n01"), "n01", 10.0)
    assert [s.key for s in b_sys] == [s.key for s in b_exp]
    for old_s, new_s, old_e, new_e in zip(a_sys, b_sys, a_exp, b_exp, strict=True):
        rs, re_ = port_rates(old_s, new_s), port_rates(old_e, new_e)
        assert rs is not None and re_ is not None
        assert re_.xmit_gbps == pytest.approx(rs.xmit_gbps)
        assert re_.rates.get("symbol_error") == rs.rates.get("symbol_error")
        assert (re_.state, re_.phys_state, re_.rate_gbps) == (rs.state, rs.phys_state, rs.rate_gbps)
