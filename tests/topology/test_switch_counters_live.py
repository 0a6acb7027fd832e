"""The daemon's link collector reads switch ports live (``daemon.links.switch_perfquery_dir``):
recorded ``perfquery -x`` text per switch, refreshed between rounds, parsed with the same counters
code as snapshots; CRC errors on a leaf port make it lame and quarantine the leaf's nodes, an
unchanged file adds no interval, a broken file is one error, never an exception."""

from __future__ import annotations

import os
from pathlib import Path

from railgang.daemon.config import LinkSettings
from railgang.daemon.service.links import LinkCollector
from railgang.topology.fabric import fabric_from_shape

# perfquery -x output of a Quantum switch port (the shape of `perfquery -x <lid> <port>`)
RECORDED = """\
# Port extended counters: Lid 12 port 3 (CapMask: 0x5A00)
PortSelect:......................3
CounterSelect:...................0x0000
PortXmitData:....................{data}
PortRcvData:.....................{data}
PortXmitPkts:....................{pkts}
PortRcvPkts:.....................{pkts}
# Port counters: Lid 12 port 3 (CapMask: 0x5A00)
PortSelect:......................3
CounterSelect:...................0x0000
SymbolErrorCounter:..............{errors}
LinkErrorRecoveryCounter:........0
LinkDownedCounter:...............0
PortRcvErrors:...................{errors}
PortXmitDiscards:................0
"""


def _write(path: Path, mtime: float, errors: int, data: int) -> None:
    path.write_text(RECORDED.format(errors=errors, data=data, pkts=data // 64))
    os.utime(path, (mtime, mtime))


def test_switch_ports_polled_live(tmp_path: Path) -> None:
    fabric = fabric_from_shape(8, 8, 4)
    leaf = fabric.leaves[0]
    settings = LinkSettings(switch_perfquery_dir=tmp_path, quarantine_after=1, window=1, release_after=1,
                            state_file=tmp_path / "state" / "links.json", workers=1)
    collector = LinkCollector(settings, fabric)
    try:
        pq = tmp_path / f"{leaf}.perfquery"
        _write(pq, 1_000_000.0, errors=0, data=10**9)
        first = collector.collect()
        assert first is not None and first.samples == 1 and not first.errors  # both blocks: one port
        unchanged = collector.collect()
        assert unchanged is not None and unchanged.samples == 0  # same mtime: not read again
        _write(pq, 1_000_010.0, errors=500, data=2 * 10**9)  # 50 errors/s over 10 s: lame
        second = collector.collect()
        assert second is not None
        health = collector.health()
        assert health is not None
        assert health.switches.get(leaf, 1.0) < 1.0
        assert set(fabric.nodes_under(leaf)) <= set(health.quarantined), health.quarantined
        # a garbage file is one error for that switch, the round goes on
        (tmp_path / "spine1.perfquery").write_bytes(b"\0" * 100)
        _write(pq, 1_000_020.0, errors=500, data=3 * 10**9)
        third = collector.collect()
        assert third is not None and any("spine1" in e and "NUL" in e for e in third.errors), third.errors
    finally:
        collector.close()
