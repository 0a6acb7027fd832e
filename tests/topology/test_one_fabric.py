"""One topology.conf, one fabric (issue 34 item 5): the daemon (from the file or from ``scontrol show
topology``), ``railgang topology show`` and ``railgang top`` all build it with
``fabric.fabric_from_text``, so they agree on every switch, leaf and node. Before, ``top`` grouped
nodes by the ``SwitchName=`` lines it parsed itself and saw no leaf at all on topology/block."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.cli.top import leaves_of
from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.records import SinfoNode, topology_from_show
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.errors import InputError, SlurmError
from railgang.topology import hostnames
from railgang.topology.conf import NO_NODES, TopologyError
from railgang.topology.fabric import Fabric, fabric_from_text, load_fabric

TREE = ("SwitchName=leaf1 Nodes=n[01-04]\nSwitchName=leaf2 Nodes=n[05-08]\n"
        "SwitchName=spine Switches=leaf[1-2]\n")
# what `scontrol show topology` prints for TREE: levels, and every node again on the spine
TREE_SHOWN = ("SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[01-04]\n"
              "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[05-08]\n"
              "SwitchName=spine Level=1 LinkSpeed=1 Nodes=n[01-08] Switches=leaf[1-2]\n")
BLOCKS = "BlockName=rack1 Nodes=n[01-04]\nBlockName=rack2 Nodes=n[05-08]\nBlockSizes=4,8\n"
NODES = [SinfoNode(f"n{i:02d}", 4, NodeState("idle"), "", frozenset()) for i in range(1, 9)]


def _shape(fabric: Fabric) -> dict[str, tuple[str | None, tuple[str, ...], tuple[str, ...]]]:
    """Switch -> (parent, children, nodes attached directly): the whole tree."""
    return {sw: (fabric.parent(sw), fabric.children(sw), fabric.direct_nodes(sw)) for sw in fabric.switches}


def _daemon_from_file(tmp_path: Path, text: str) -> Fabric:
    topo = tmp_path / "topology.conf"
    topo.write_text(text)
    fabric: Fabric = CliBackend(SlurmSettings(topology=topo), SlurmRunner(), read_shares=False)._fabric_for(NODES)
    return fabric


def _daemon_from_show(tmp_path: Path, shown: str) -> Fabric:
    def scontrol(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        assert list(argv)[-2:] == ["show", "topology"]
        return 0, shown, ""

    # a slurm.conf with no topology.conf beside it: the daemon asks scontrol
    settings = SlurmSettings(conf=tmp_path / "etc" / "slurm.conf")
    backend = CliBackend(settings, SlurmRunner(exec_fn=scontrol), read_shares=False)
    assert backend.topology_path() is None
    fabric: Fabric = backend._fabric_for(NODES)
    return fabric


def _cli_show(tmp_path: Path, text: str) -> dict[str, tuple[str | None, tuple[str, ...], tuple[str, ...]]]:
    topo = tmp_path / "cli.conf"
    topo.write_text(text)
    res = CliRunner().invoke(app, ["topology", "show", "--json", str(topo)])
    assert res.exit_code == 0, res.output
    return {s["name"]: (s["parent"], tuple(s["children"]), hostnames.expand(s["nodes"]) if s["nodes"] else ())
            for s in json.loads(res.stdout)["switches"]}


@pytest.mark.parametrize(("text", "shown"), [(TREE, TREE_SHOWN), (BLOCKS, BLOCKS)], ids=["tree", "block"])
def test_the_daemon_railgang_topology_and_railgang_top_build_the_same_fabric(
        tmp_path: Path, text: str, shown: str) -> None:
    daemon = _daemon_from_file(tmp_path, text)
    assert _daemon_from_show(tmp_path, shown).nodes == daemon.nodes
    assert _shape(_daemon_from_show(tmp_path, shown)) == _shape(daemon)
    assert _cli_show(tmp_path, text) == _shape(daemon)
    assert leaves_of(topology_from_show(shown)) == {leaf: list(daemon.direct_nodes(leaf)) for leaf in daemon.leaves}
    assert _shape(load_fabric(tmp_path / "topology.conf")) == _shape(daemon)  # report, sim replay


def test_an_invalid_text_is_one_line_naming_its_source_in_every_reader(tmp_path: Path) -> None:
    bad = "SwitchName=leaf1 Nodes=n[01-04]\nSwitchName=spine Switches=leaf9\n"
    with pytest.raises(TopologyError) as caught:
        fabric_from_text(bad, "site.conf")
    assert str(caught.value).startswith("site.conf:2:") and "\n" not in str(caught.value)
    with pytest.raises(SlurmError) as daemon:
        _daemon_from_file(tmp_path, bad)
    assert str(daemon.value) == f"{tmp_path / 'topology.conf'}:2: Switches: unknown switch 'leaf9' (listed by switch 'spine')"
    res = CliRunner().invoke(app, ["topology", "show", str(tmp_path / "topology.conf")])
    assert isinstance(res.exception, InputError) and "topology.conf:2: Switches:" in str(res.exception)


def test_no_nodes_is_refused_offline_and_scheduled_without_locality_by_the_daemon(tmp_path: Path) -> None:
    with pytest.raises(TopologyError) as caught:
        fabric_from_text("# nothing yet\n", "empty.conf")
    assert str(caught.value) == f"empty.conf: {NO_NODES}"
    assert fabric_from_text("# nothing yet\n", "scontrol show topology", empty_ok=True).nodes == ()
    assert _daemon_from_show(tmp_path, "").nodes == ()
    assert leaves_of("\n") == {}
