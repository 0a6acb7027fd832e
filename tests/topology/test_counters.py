"""Counter readers (sysfs, perfquery, node_exporter) and rates with wraps, resets and garbage."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.topology.counters import (
    PortKey,
    PortSample,
    parse_node_exporter,
    parse_perfquery,
    port_rates,
    read_sysfs,
)

PERFQUERY = """\
# Port counters: Lid 12 port 3 (CapMask: 0x1600)
PortSelect:......................3
CounterSelect:...................0x0000
SymbolErrorCounter:..............7
LinkErrorRecoveryCounter:........1
LinkDownedCounter:...............0
PortRcvErrors:...................2
PortXmitDiscards:................0
PortXmitData:....................4294967295
PortRcvData:.....................1000
PortXmitWait:....................oops
"""

PERFQUERY_X = """\
# Port extended counters: Lid 12 port 3 (CapMask: 0x5A00)
PortSelect:......................3
CounterSelect:...................0x0000
PortXmitData:....................123456789012
PortRcvData:.....................42
PortXmitPkts:....................10
PortRcvPkts:.....................11
"""

EXPORTER = """\
# HELP node_infiniband_port_data_transmitted_bytes_total Number of data octets transmitted on all links
# TYPE node_infiniband_port_data_transmitted_bytes_total counter
node_infiniband_port_data_transmitted_bytes_total{device="mlx5_0",port="1"} 2.2031403016e+10
node_infiniband_symbol_error_total{device="mlx5_0",port="1"} 3
node_infiniband_rate_bytes_per_second{device="mlx5_0",port="1"} 5e+10
node_infiniband_state_id{device="mlx5_0",port="1"} 4
node_infiniband_physical_state_id{device="mlx5_0",port="1"} 5
node_infiniband_link_downed_total{device="mlx5_1",port="1"} NaN
node_infiniband_info{board_id="MT_0000000838",device="mlx5_0",firmware_version="28.39",hca_type="MT4129"} 1
node_infiniband_broken{device=
"""


def test_perfquery_text() -> None:
    [s] = parse_perfquery(PERFQUERY, "leaf1", 0.0)
    assert s.key == PortKey("leaf1", "lid12", 3)
    assert s.counters["symbol_error"] == 7 and s.counters["port_xmit_data"] == 2**32 - 1
    assert s.widths["port_xmit_data"] == 32 and s.widths["symbol_error"] == 16
    assert "port_xmit_wait" not in s.counters
    assert any("oops" in w for w in s.warnings)


def test_perfquery_extended_text() -> None:
    [s] = parse_perfquery(PERFQUERY_X, "leaf1", 0.0)
    assert s.counters["port_xmit_data"] == 123456789012 and s.widths["port_xmit_data"] == 64


def test_node_exporter_text() -> None:
    samples = parse_node_exporter(EXPORTER, "n01", 0.0)
    by_dev = {s.key.device: s for s in samples}
    s = by_dev["mlx5_0"]
    assert s.counters["port_xmit_data"] == 22031403016 and s.data_scale == 1
    assert s.rate_gbps == 50.0 and s.state == "ACTIVE" and s.phys_state == "LinkUp"
    assert "link_downed" not in by_dev["mlx5_1"].counters
    assert any("not a counter" in w for w in s.warnings)
    assert any("unreadable" in w for w in s.warnings)


def _write(root: Path, dev: str, files: dict[str, str]) -> None:
    port = root / dev / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    for name, text in files.items():
        target = port / name if name in ("rate", "state", "phys_state") else port / "counters" / name
        target.write_text(text)


def test_sysfs_tree(tmp_path: Path) -> None:
    _write(tmp_path, "mlx5_0", {"port_xmit_data": "100\n", "port_xmit_data_64": "5000000000\n",
                                "symbol_error": "-3\n", "link_downed": "garbage",
                                "rate": "400 Gb/sec (4X NDR)\n", "state": "4: ACTIVE\n",
                                "phys_state": "5: LinkUp\n"})
    [s] = read_sysfs(tmp_path, "n01", 1.0)
    assert s.key == PortKey("n01", "mlx5_0", 1)
    assert s.counters["port_xmit_data"] == 5_000_000_000
    assert s.rate_gbps == 50.0 and s.state == "ACTIVE" and s.phys_state == "LinkUp"
    assert "symbol_error" not in s.counters and "link_downed" not in s.counters
    assert len(s.warnings) == 2


def test_sysfs_missing_root_is_empty(tmp_path: Path) -> None:
    assert read_sysfs(tmp_path / "nope", "n01", 0.0) == []


def _sample(t: float, widths: dict[str, int] | None = None, scale: int = 4, **counters: int) -> PortSample:
    return PortSample(PortKey("n01", "mlx5_0", 1), t, counters, widths or {}, scale)


RATES = [
    ("plain", 100, 500, 64, 40.0, ""),
    ("wrap-32", 2**32 - 100, 300, 32, 40.0, "wrapped at 32"),
    ("wrap-64", 2**64 - 100, 300, 64, 40.0, "wrapped at 64"),
    ("reset", 10_000, 50, 64, 5.0, "reset"),
]


@pytest.mark.parametrize(("old", "new", "width", "per_s", "note"), [r[1:] for r in RATES], ids=[r[0] for r in RATES])
def test_rates_handle_wrap_and_reset(old: int, new: int, width: int, per_s: float, note: str) -> None:
    r = port_rates(_sample(0.0, {"port_xmit_data": width}, port_xmit_data=old),
                   _sample(10.0, {"port_xmit_data": width}, port_xmit_data=new))
    assert r is not None
    assert r.rates["port_xmit_data"] == pytest.approx(per_s)
    assert r.xmit_gbps == pytest.approx(per_s * 4 / 1e9)  # 4-byte words
    assert (note in " ".join(r.notes)) if note else not r.notes


def test_saturated_error_counter_is_noted() -> None:
    r = port_rates(_sample(0.0, {"symbol_error": 16}, symbol_error=65535),
                   _sample(1.0, {"symbol_error": 16}, symbol_error=65535))
    assert r is not None and any("saturated" in n for n in r.notes)


def test_rates_need_the_same_port_and_forward_time() -> None:
    a = _sample(5.0, port_xmit_data=1)
    assert port_rates(a, _sample(5.0, port_xmit_data=2)) is None
    other = PortSample(PortKey("n02", "mlx5_0", 1), 6.0, {"port_xmit_data": 3})
    assert port_rates(a, other) is None


def test_bytes_scale_for_exporter_samples() -> None:
    r = port_rates(_sample(0.0, scale=1, port_xmit_data=0), _sample(1.0, scale=1, port_xmit_data=50 * 10**9))
    assert r is not None and r.xmit_gbps == pytest.approx(50.0)


_JUNK = st.sampled_from([
    "# Port counters: Lid 3 port 1\n", "# Port extended counters: Lid 9 port 2\n", "SymbolErrorCounter:....",
    "PortXmitData:.......", "42\n", "-7\n", "0xffff\n", "N/A\n", "node_infiniband_symbol_error_total",
    '{device="mlx5_0",port="1"} ', '{device="mlx5_0",port="x"} ', "1e400\n", "NaN\n", "\n", ":", "{", "}",
])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.lists(_JUNK, max_size=30).map("".join), st.text(max_size=300)))
def test_fuzz_text_readers_never_crash(text: str) -> None:
    for sample in parse_perfquery(text, "sw", 0.0) + parse_node_exporter(text, "n01", 0.0):
        assert all(v >= 0 for v in sample.counters.values())
