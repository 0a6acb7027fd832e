"""The ibnetdiscover parser on real captures (both forms) and on malformed input."""

from __future__ import annotations

import pytest

from railgang.topology.discover.ibnetdiscover import link_gbps, normal_guid, parse_ibnetdiscover
from railgang.topology.inputs import InputProblem, iter_lines

from .conftest import DATA


def _parse(name: str):  # type: ignore[no-untyped-def]
    return parse_ibnetdiscover(iter_lines(DATA / name, "capture"), name)


def test_plain_form_real_capture_x5() -> None:
    found = _parse("x5.topofile")
    kinds = [d.kind for d in found.devices.values()]
    assert found.form == "topology"
    assert kinds.count("switch") == 11 and kinds.count("ca") == 89
    assert found.skipped_count == 0
    # every cable once: 89 host cables plus the inter-switch ones, none twice
    ends = {((lk.a, lk.a_port), (lk.b, lk.b_port)) for lk in found.links}
    assert len(ends) == len(found.links)
    host_links = [lk for lk in found.links if "ca" in (found.devices[lk.a].kind, found.devices[lk.b].kind)]
    assert len(host_links) == 89
    assert {lk.speed for lk in host_links} == {"QDR", "DDR"}


def test_ports_form_real_capture_with_unconnected_ports() -> None:
    found = _parse("infiniband_exporter-test.ports")
    assert found.form == "ports"
    assert found.devices["7cfe9003009ce5b0"].description == "ib-i1l1s01"
    assert found.devices["08c0eb0300add20e"].kind == "switch"  # a port with nothing attached still names its switch
    assert len(found.links) == 4  # 6 connected port lines, 2 of them the far ends of the same cables
    assert {lk.gbps for lk in found.links} == {100.0}


def test_ports_form_old_unquoted_description() -> None:
    found = _parse("infiniband_exporter-test3.ports")
    (dev,) = found.devices.values()
    assert dev.kind == "switch" and dev.description == "Infiniscale-IV Mellanox Technologies" and not found.links


def test_man_page_example_keeps_the_slower_end_of_a_cable() -> None:
    found = _parse("rdma-core-man-example.topo")
    widths = sorted(lk.width for lk in found.links if {found.devices[lk.a].kind, found.devices[lk.b].kind} == {"switch"})
    assert widths == ["1x", "4x"]  # port 10 <-> 1 is printed 4xSDR on one end, 1xSDR on the other


def test_mapped_form_takes_names_from_link_lines() -> None:
    text = ('Switch\t2 "S-00000000000000e1"\t\t# "leaf1" enhanced port 0 lid 1 lmc 0\n'
            '[1]\t"H-00000000000000a1"[1](a1) \t\t# "gpu001 mlx5_0" lid 2 4xHDR\n'
            'Ca\t1 "H-00000000000000a1"\t\t# "MT4129 ConnectX-7 Mellanox Technologies"\n'
            '[1](a1) \t"S-00000000000000e1"[1]\t\t# lid 2 lmc 0 "leaf1" lid 1 4xHDR\n')
    found = parse_ibnetdiscover(enumerate(text.splitlines(), 1))
    assert found.devices["00000000000000a1"].description == "gpu001 mlx5_0"
    assert found.links[0].gbps == 200.0


def test_lines_not_understood_are_counted_and_capped() -> None:
    text = 'Switch\t2 "S-00000000000000e1"\t\t# "leaf1" enhanced port 0 lid 1 lmc 0\n' + "garbage\n" * 500
    found = parse_ibnetdiscover(enumerate(text.splitlines(), 1))
    assert found.skipped_count == 500 and len(found.skipped) == 100 and found.skipped[0] == 2


@pytest.mark.parametrize(("text", "needle"), [
    ("", "empty"),
    ("# just a comment\n\n", "empty"),
    ("hello world\nthis is not ibnetdiscover\n", "no InfiniBand device found"),
], ids=["empty", "comments-only", "prose"])
def test_unusable_input_is_one_located_error(text: str, needle: str) -> None:
    with pytest.raises(InputProblem) as info:
        parse_ibnetdiscover(enumerate(text.splitlines(), 1), "cap.txt")
    assert needle in str(info.value) and str(info.value).startswith("cap.txt")


@pytest.mark.parametrize(("width", "speed", "gbps"), [
    ("4x", "EDR", 100.0), ("4x", "HDR", 200.0), ("4x", "NDR", 400.0), ("2x", "NDR", 200.0),
    ("1x", "SDR", 2.5), ("4x", "FDR10", 40.0), ("4x", "???", None), ("??", "EDR", None),
])
def test_link_rates(width: str, speed: str, gbps: float | None) -> None:
    assert link_gbps(width, speed) == gbps


def test_guids_are_normalised() -> None:
    assert normal_guid("0x8f10400411a08") == normal_guid("0008F10400411A08") == "0008f10400411a08"


def test_endless_text_gives_up_early() -> None:
    """`yes | railgang topology discover -`: refused after 10,000 lines, not after 256 MiB."""
    def endless():  # type: ignore[no-untyped-def]
        yield 1, 'Switch\t2 "S-00000000000000e1"\t\t# "leaf1" enhanced port 0 lid 1 lmc 0'
        n = 1
        while True:
            n += 1
            yield n, "y"

    with pytest.raises(InputProblem, match="10,000 lines are not ibnetdiscover output") as info:
        parse_ibnetdiscover(endless(), "stdin")
    assert info.value.line == 10_001
