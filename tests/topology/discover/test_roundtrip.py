"""Property: generate ibnetdiscover text for a fat tree or a rail-optimised fabric, discover it,
parse the topology.conf with topology/conf.py: the same nodes, the same leaf groups, the same
number of levels, a single root, nothing unclassified, in every output form."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from railgang.topology.conf import parse_topology
from railgang.topology.discover import Shape, generate_ibnetdiscover, render_conf, slurm_tree
from railgang.topology.discover.emit import slurm_hostlist
from railgang.topology.fabric import fabric_from_conf

from .conftest import discover_text

FORMS = st.sampled_from(["topology", "mapped", "vendor", "ports"])

RAIL_OPTIMISED = st.builds(
    Shape, nodes=st.integers(1, 80), rails=st.sampled_from([2, 4, 8]), rail_optimised=st.just(True),
    nodes_per_leaf=st.integers(1, 24), spines=st.integers(1, 4), speed=st.sampled_from(["HDR", "NDR"]))
FAT_TREE = st.builds(
    Shape, nodes=st.integers(1, 120), rails=st.integers(1, 2), rail_optimised=st.just(False),
    nodes_per_leaf=st.integers(1, 20), spines=st.integers(1, 3),
    leaves_per_pod=st.none() | st.integers(1, 4), cores=st.integers(1, 2), speed=st.sampled_from(["EDR", "HDR"]))


def _round_trip(shape: Shape, form: str) -> None:
    gen = generate_ibnetdiscover(shape, form)  # type: ignore[arg-type]
    facts = discover_text(gen.text, gen.name_map if form == "vendor" else None)
    conf = parse_topology(render_conf(facts), "<discovered>")
    assert set(conf.nodes) == set(gen.nodes)
    assert tuple(sw.nodes for sw in conf.switches if sw.nodes) == gen.groups
    assert len(conf.roots) == 1
    assert fabric_from_conf(conf).depth == gen.levels
    assert facts.problems == ()
    assert facts.rails == (shape.rails if shape.rail_optimised and shape.rails > 1 else 1)
    assert len(facts.switches) == gen.switches
    rate = {"EDR": 100.0, "HDR": 200.0, "NDR": 400.0}[shape.speed]
    assert set(facts.link_rates["host"]) == {rate}
    assert all(g.members for g in slurm_tree(facts))  # no made-up root on a connected fabric


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=RAIL_OPTIMISED, form=FORMS)
def test_rail_optimised_round_trip(shape: Shape, form: str) -> None:
    _round_trip(shape, form)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=FAT_TREE, form=FORMS)
def test_fat_tree_round_trip(shape: Shape, form: str) -> None:
    _round_trip(shape, form)


def test_the_issue_shape_8_rails() -> None:
    """The shape the issue names: 8 rails, leaves per rail per scalable unit, spines per rail."""
    _round_trip(Shape(nodes=128, rails=8, nodes_per_leaf=32, spines=4), "topology")


def test_host_lists_are_ones_slurm_reads() -> None:
    """Ranges only on the trailing number: slurmctld 22.05 refuses text after ']'."""
    assert slurm_hostlist(["spine-p1-1", "spine-p2-1", "spine-p1-2"]) == "spine-p1-[1-2],spine-p2-1"
    assert slurm_hostlist(["gpu001", "gpu002", "gpu010", "login1"]) == "gpu[001-002,010],login1"
    assert slurm_hostlist(["ib-0008f10500108098", "ib-0008f10500108530"]) == "ib-0008f10500108098,ib-0008f10500108530"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(shape=st.one_of(RAIL_OPTIMISED, FAT_TREE), io=st.integers(1, 2))
def test_hosts_on_a_spine_join_the_leaves_below_it(shape: Shape, io: int) -> None:
    """A storage or login node cabled to a spine: its group hangs under the spine group, the
    tree keeps its depth and one root, and the host is reported."""
    assume(shape.first_spine_leaves >= 2 and shape.nodes_per_leaf > io)
    shape = replace(shape, spine_hosts=io)
    gen = generate_ibnetdiscover(shape)
    facts = discover_text(gen.text)
    conf = parse_topology(render_conf(facts), "<discovered>")
    assert set(conf.nodes) == set(gen.nodes) and len(conf.roots) == 1
    assert tuple(sw.nodes for sw in conf.switches if sw.nodes) == gen.groups
    assert fabric_from_conf(conf).depth == gen.levels
    assert {p.kind for p in facts.problems} <= {"hosts cabled to an upper-level switch",
                                                "hosts with an unusual HCA count"}  # 1 HCA among 8
    assert len(facts.problem("hosts cabled to an upper-level switch")) == io
