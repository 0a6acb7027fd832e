"""NVLink domains from ``nvidia-smi -q`` joined with ibnetdiscover -> topology/block lines
(railgang/topology/discover/nvlink.py, ``railgang topology discover --nvidia-smi``)."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import InputError
from railgang.topology.conf import parse_topology
from railgang.topology.discover import Shape, generate_ibnetdiscover
from railgang.topology.discover.nvlink import parse_nvidia_smi

runner = CliRunner()


def nvidia_smi_q(domains: dict[str, list[str]], gpus: int = 4, seed: int = 0) -> str:
    """What ``pdsh -w NODES nvidia-smi -q`` prints for nodes in the given domains (key
    ``uuid.clique``), the fabric section as GB200 trays report it; hosts interleaved as pdsh does."""
    rng = random.Random(seed)
    per_host: list[list[str]] = []
    for key, hosts in domains.items():
        cluster, clique = key.split(".")
        for host in hosts:
            out = ["==============NVSMI LOG==============", "", f"Attached GPUs                         : {gpus}"]
            for g in range(gpus):
                out += [f"GPU 00000009:0{g}:00.0", "    Product Name                          : NVIDIA GB200",
                        "    Fabric", "        State                             : Completed",
                        "        Status                            : Success",
                        f"        CliqueId                          : {clique}",
                        f"        ClusterUUID                       : {cluster}",
                        "        Health", "            Bandwidth                     : Full"]
            per_host.append([f"{host}: {line}" for line in out])
    lines: list[str] = []
    while per_host:
        h = rng.randrange(len(per_host))
        lines.append(per_host[h].pop(0))
        if not per_host[h]:
            per_host.pop(h)
    return "\n".join(lines) + "\n"


def racks(names: list[str], per: int, seed: int = 1) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {f"{uuid.UUID(int=rng.getrandbits(128))}.{rng.randrange(2**32)}": names[i:i + per]
            for i in range(0, len(names), per)}


def test_topograph_vectors_pdsh_grep_form() -> None:
    text = """node-10:         CliqueId                          : 4000000004
node-10:         ClusterUUID                       : 50000000-0000-0000-0000-000000000005
node-07:         CliqueId                          : 4000000005
node-07:         ClusterUUID                       : 50000000-0000-0000-0000-000000000004
node-11:         CliqueId                          : N/A
node-11:         ClusterUUID                       : N/A
node-08:         CliqueId                          : 4000000005
node-08:         ClusterUUID                       : 50000000-0000-0000-0000-000000000004
node-09:         CliqueId                          : 4000000005
node-09:         ClusterUUID                       : 50000000-0000-0000-0000-000000000005
"""
    found = parse_nvidia_smi(enumerate(text.splitlines(), 1))
    assert dict(found.domains) == {
        "50000000-0000-0000-0000-000000000004.4000000005": ("node-07", "node-08"),
        "50000000-0000-0000-0000-000000000005.4000000004": ("node-10",),
        "50000000-0000-0000-0000-000000000005.4000000005": ("node-09",)}
    assert [(p.kind, p.items) for p in found.problems] == [("nodes in no NVLink domain (N/A)", ("node-11",))]


def test_a_node_whose_gpus_disagree_or_lack_a_field_is_left_out_and_named() -> None:
    good = "50000000-0000-0000-0000-000000000001"
    text = "\n".join(["a: GPU 0000:01:00.0", "a:  CliqueId : 1", f"a:  ClusterUUID : {good}",
                      "a: GPU 0000:02:00.0", "a:  CliqueId : 2", f"a:  ClusterUUID : {good}",
                      "b:  CliqueId : 1", f"c:  ClusterUUID : {good}", "garbage without a host",
                      "d:  CliqueId : 1x", f"d:  ClusterUUID : {good}", "e$:  CliqueId : 1",
                      "f:  CliqueId : 1", f"f:  ClusterUUID : {good}"])
    found = parse_nvidia_smi(enumerate(text.splitlines(), 1))
    assert dict(found.domains) == {f"{good}.1": ("f",)}
    kinds = {p.kind: p.items for p in found.problems}
    assert kinds["nodes whose GPUs are in different NVLink domains"] == ("a",)
    assert set(kinds["nodes with a GPU missing ClusterUUID or CliqueId"]) == {"b", "c"}
    assert kinds["nodes with a malformed ClusterUUID or CliqueId"][0].startswith("d:")
    assert kinds["lines not 'host: text'"] == ("line 9",)
    assert kinds["host names Slurm cannot use"] == ("line 12: 'e$'",)


def test_discover_writes_one_block_per_nvlink_domain_in_infiniband_order(tmp_path: Path) -> None:
    """16 NVL72 racks (288 nodes x 4 GPUs): the IB fabric has one leaf per rack and pods of 2
    racks; the domains come in random order with random ids; the blocks follow the IB tree."""
    fab = generate_ibnetdiscover(Shape(nodes=288, rails=4, rail_optimised=False, nodes_per_leaf=18,
                                       spines=2, leaves_per_pod=2, prefix="gb"))
    (tmp_path / "ib.txt").write_text(fab.text)
    (tmp_path / "map.txt").write_text(fab.name_map)
    domains = racks(list(fab.nodes), 18)
    shuffled = dict(random.Random(3).sample(sorted(domains.items()), len(domains)))
    (tmp_path / "nv.txt").write_text(nvidia_smi_q(shuffled))
    res = runner.invoke(app, ["topology", "discover", str(tmp_path / "ib.txt"), "--node-name-map",
                              str(tmp_path / "map.txt"), "--nvidia-smi", str(tmp_path / "nv.txt"),
                              "-o", str(tmp_path / "topology.conf"), "--strict"])
    assert res.exit_code == 0, res.output
    conf = parse_topology((tmp_path / "topology.conf").read_text())
    assert conf.kind == "block" and conf.block_sizes == (18, 36, 72, 144, 288)
    assert [b.nodes for b in conf.blocks] == [tuple(g) for g in fab.groups]  # racks in IB leaf order


def test_nodes_the_two_sources_disagree_on_are_warnings(tmp_path: Path) -> None:
    fab = generate_ibnetdiscover(Shape(nodes=36, rails=1, rail_optimised=False, nodes_per_leaf=18, spines=1))
    (tmp_path / "ib.txt").write_text(fab.text)
    (tmp_path / "map.txt").write_text(fab.name_map)
    nodes = list(fab.nodes)
    domains = racks([*nodes[:17], "ghost01"], 18) | racks(nodes[18:35], 17, seed=2)
    (tmp_path / "nv.txt").write_text(nvidia_smi_q(domains, gpus=2))
    res = runner.invoke(app, ["topology", "discover", str(tmp_path / "ib.txt"), "--node-name-map",
                              str(tmp_path / "map.txt"), "--nvidia-smi", str(tmp_path / "nv.txt"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    notes = " ".join(out["notes"])
    assert "in no NVLink domain" in notes and nodes[17] in notes and "ghost01" in notes and "differ in size" in notes
    conf = parse_topology(out["topology_conf"])
    assert conf.block_sizes == (17, 34) and len(conf.blocks) == 2


def test_hostile_nvidia_smi_files_are_one_line_errors(tmp_path: Path) -> None:
    fab = generate_ibnetdiscover(Shape(nodes=4, rails=1, rail_optimised=False, nodes_per_leaf=2, spines=1))
    (tmp_path / "ib.txt").write_text(fab.text)
    (tmp_path / "map.txt").write_text(fab.name_map)
    (tmp_path / "bin").write_bytes(b"\x00\xff" * 100)
    (tmp_path / "empty").write_text("")
    (tmp_path / "latin1").write_bytes(b"gb01: CliqueId : \xe9\n")
    for source in ("/dev/zero", str(tmp_path / "bin"), str(tmp_path / "empty"), str(tmp_path / "latin1"),
                   str(tmp_path / "missing"), str(tmp_path)):
        res = runner.invoke(app, ["topology", "discover", str(tmp_path / "ib.txt"), "--node-name-map",
                                  str(tmp_path / "map.txt"), "--nvidia-smi", source])
        # the CLI's handler prints an InputError as one line and exits 1 (tests/daemon/test_cli*)
        assert isinstance(res.exception, InputError), (source, res.output, res.exception)
        assert "\n" not in str(res.exception) and str(res.exception), source


_piece = st.sampled_from(["CliqueId", "ClusterUUID", " : ", ":", "N/A", "7", "4294967296", "GPU 0000:01:00.0",
                          "50000000-0000-0000-0000-000000000004", "n1", "n2", "é", "\t", " ", "x" * 300, "-1"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3", "", "a b", "n1:"]), st.lists(_piece, max_size=6)),
                max_size=40))
def test_any_lines_give_domains_or_named_problems_never_an_exception(rows: list[tuple[str, list[str]]]) -> None:
    lines = [f"{h}: {''.join(parts)}" if h else "".join(parts) for h, parts in rows]
    found = parse_nvidia_smi(enumerate(lines, 1))
    members = [n for v in found.domains.values() for n in v]
    assert len(members) == len(set(members))  # a node is in at most one domain
    for key in found.domains:
        cluster, clique = key.rsplit(".", 1)
        assert len(cluster) == 36 and 0 <= int(clique) < 2**32
    assert all(p.count >= len(p.items) > 0 for p in found.problems)
