"""Classification on real captures (checked against the site's own topology.conf where there is
one) and on generated fabrics with known faults."""

from __future__ import annotations

from railgang.topology.conf import check_topology, expand_hosts
from railgang.topology.discover import (
    Shape,
    classify,
    generate_ibnetdiscover,
    parse_ibnetdiscover,
    parse_rail_map,
    render_conf,
)
from railgang.topology.discover.classify import host_and_hca, switch_name

from .conftest import DATA, discover_file, discover_text


def test_x5_leaves_match_the_sites_own_topology_conf() -> None:
    facts = discover_file("x5.topofile", "x5.map")
    site_text = (DATA / "x5.ibmap2slurm.topology.conf").read_text()
    # The site names switches S-<guid> and leaves unnamed HCAs as H-<guid>; compare the named hosts.
    theirs = {}
    for line in site_text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "Nodes" in fields:
            theirs[fields["SwitchName"][2:].lower()] = {n for n in expand_hosts(fields["Nodes"]) if not n.startswith("H-")}
    ours = {guid: set(info.hosts) for guid, info in facts.switches.items() if info.level == 1}
    assert ours == theirs
    # ... but the site's file lists spines as each other's children, which slurmctld refuses; ours is a tree
    assert any("cycle" in p.message for p in check_topology(site_text, "site"))
    assert not check_topology(render_conf(facts), "ours")
    assert len(facts.hosts) == 86 and facts.levels == 3 and not facts.rail_optimised
    assert len(facts.problem("unknown devices")) == 3  # the HCAs the site's map does not name either
    # 21 hosts train at 4x DDR on a QDR fabric: the capture's real slow links
    assert len(facts.problem("links slower than the rest")) == 21
    assert dict(facts.link_rates["host"]) == {20.0: 21, 40.0: 65}


def test_x5_without_a_map_finds_no_host() -> None:
    facts = discover_file("x5.topofile")
    assert not facts.hosts and len(facts.problem("unknown devices")) == 89
    assert len(facts.problem("switches with no hosts")) == 11


def test_exporter_ports_captures() -> None:
    facts = discover_file("infiniband_exporter-test.ports")
    by_name = {s.name: s for s in facts.switches.values()}
    assert by_name["ib-i1l1s01"].hosts == ("o0001", "o0002") and by_name["ib-i1l1s01"].level == 1
    assert by_name["ib-i1l2s01"].level == 2 and by_name["ib-i7l2s01"].level is None
    assert facts.problem("switches with no hosts") == ("ib-i7l2s01 'ib-i7l2s01'",)
    hdr = discover_file("infiniband_exporter-test2.ports")
    assert list(hdr.hosts) == ["worker20"] and hdr.hosts["worker20"][0].name == "mlx5_3"
    assert hdr.hosts["worker20"][0].gbps == 200.0
    assert "Aggregation Node" in hdr.problem("unknown devices")[0]  # SHARP's CA is not a host
    assert "5FB0405-leaf-IB01" in {s.name for s in hdr.switches.values()}  # trailing blank trimmed


def test_man_page_example_with_a_name_map() -> None:
    facts = discover_file("rdma-core-man-example.topo", "rdma-core-man-example.map")
    assert [h.name for h in facts.hosts["node2"]] == ["mthca0/1", "mthca0/2"]  # both ports of one HCA cabled
    assert facts.problem("hosts with an unusual HCA count") == ("node2: 2 HCA(s), most hosts have 1",)
    slow = facts.problem("links slower than the rest")
    assert len(slow) == 1 and "1x SDR = 2.5 Gb/s" in slow[0]


def test_rail_optimised_fabric_rails_and_levels() -> None:
    gen = generate_ibnetdiscover(Shape(nodes=64, rails=8, nodes_per_leaf=16, spines=2))
    facts = discover_text(gen.text)
    assert facts.rail_optimised and facts.rails == 8 and facts.levels == 2 and not facts.problems
    leaves = [s for s in facts.switches.values() if s.level == 1]
    assert len(leaves) == 32 and {s.rail for s in leaves} == set(range(8))
    assert all(s.name.endswith(f"-r{s.rail}") for s in leaves)  # the generator names leaf-su<u>-r<rail>


def test_a_swapped_cable_is_reported_off_rail() -> None:
    gen = generate_ibnetdiscover(Shape(nodes=16, rails=4, nodes_per_leaf=8, spines=1))
    # gpu003's mlx5_1 and mlx5_2 swap leaves: the classic miscabling in a rail-optimised rack
    a, b = "gpu003 mlx5_1", "gpu003 mlx5_2"
    text = gen.text.replace(a, "@@").replace(b, a).replace("@@", b)
    facts = discover_text(text)
    off = facts.problem("hosts with an HCA off-rail")
    assert len(off) == 1 and off[0].startswith("gpu003: mlx5_1 (rail 1) on a rail-2 leaf")


def test_a_rail_map_overrides_hca_order() -> None:
    gen = generate_ibnetdiscover(Shape(nodes=8, rails=2, nodes_per_leaf=8, spines=1))
    found = parse_ibnetdiscover(enumerate(gen.text.splitlines(), 1))
    rails = parse_rail_map('{"*": {"mlx5_0": 1, "mlx5_1": 0}}', "rails.json")
    facts = classify(found, rail_map=rails)
    assert {h.name: h.rail for h in facts.hosts["gpu001"]} == {"mlx5_0": 1, "mlx5_1": 0}
    assert not facts.problem("hosts with an HCA off-rail")


def test_names() -> None:
    assert host_and_hca("gpu001 mlx5_0") == ("gpu001", "mlx5_0")
    assert host_and_hca("node018 HCA-1") == ("node018", "HCA-1")
    assert host_and_hca("login01") == ("login01", None)
    assert host_and_hca("MT25408 ConnectX Mellanox Technologies") is None
    assert host_and_hca("Mellanox Technologies Aggregation Node") is None
    assert host_and_hca("two words") is None
    assert switch_name("MF0;LAB-IBLEAF-01:MQM9701/U1", "g") == "LAB-IBLEAF-01"
    assert switch_name("SwitchIB Mellanox Technologies", "g") is None
