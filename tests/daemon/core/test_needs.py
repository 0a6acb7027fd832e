"""Needs, not SKUs: the grammar (tables and properties), matching, and the core honouring needs."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railgang.daemon.core import Node, Preempt, Reason, RunningJob, Start, decide, make_snapshot
from railgang.daemon.core.model.needs import (
    NETWORKS,
    NO_NEEDS,
    GpuFacts,
    Needs,
    NeedsError,
    describe,
    eligible_nodes,
    fleet_summary,
    parse_needs,
)
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import job

A100 = GpuFacts("a100", 80.0, True, "ib", (8, 0))
A100_40 = GpuFacts("a100", 40.0, True, "roce", (8, 0))
V100 = GpuFacts("v100", 32.0, False, "eth", (7, 0))


@pytest.mark.parametrize(("text", "needs"), [
    ("", NO_NEEDS),
    ("  ", NO_NEEDS),
    ("gpumem>=40G", Needs(min_gpu_mem_gb=40.0)),
    ("gpumem>=40", Needs(min_gpu_mem_gb=40.0)),
    ("GPUMEM >= 80gb", Needs(min_gpu_mem_gb=80.0)),
    ("gpumem>=40.5G", Needs(min_gpu_mem_gb=40.5)),
    ("nvlink", Needs(nvlink=True)),
    ("type=A100/h100", Needs(gpu_types=frozenset({"a100", "h100"}))),
    ("type=a100-40", Needs(gpu_types=frozenset({"a100-40"}))),
    ("net=ib/roce", Needs(interconnects=frozenset({"ib", "roce"}))),
    ("cc>=8", Needs(min_compute_capability=(8, 0))),
    ("cc>=8.6", Needs(min_compute_capability=(8, 6))),
    ("nvlink,gpumem>=40G", Needs(min_gpu_mem_gb=40.0, nvlink=True)),
    ("type=a100,gpumem>=40G,nvlink,net=ib,cc>=8.0",
     Needs(frozenset({"a100"}), 40.0, True, frozenset({"ib"}), (8, 0))),
], ids=repr)
def test_needs_parse(text: str, needs: Needs) -> None:
    assert parse_needs(text) == needs


@pytest.mark.parametrize(("text", "says"), [
    ("gpumem>40G", "is not a need"),
    ("gpumem>=", "number of GB"),
    ("gpumem>=0", "number of GB"),
    ("gpumem>=40M", "number of GB"),
    ("gpumem>=99999", "number of GB"),
    ("nvlink,,gpumem>=4", "empty need"),
    ("nvlink,", "empty need"),
    ("type=", "not a GPU type name"),
    ("type=a100//h100", "not a GPU type name"),
    ("type=a1;00", "not a GPU type name"),
    ("net=opa", "unknown interconnect 'opa'"),
    ("cc>=eight", "MAJOR.MINOR"),
    ("cc>=0.5", "MAJOR.MINOR"),
    ("cc>=8.10", "MAJOR.MINOR"),
    ("nvlink,nvlink", "nvlink is given twice"),
    ("gpumem>=4,gpumem>=8", "gpumem is given twice"),
    ("sku=a100", "is not a need"),
], ids=repr)
def test_bad_needs_say_what_is_wrong_in_one_line(text: str, says: str) -> None:
    with pytest.raises(NeedsError) as exc:
        parse_needs(text)
    assert says in str(exc.value) and "\n" not in str(exc.value)


_names = st.from_regex(r"[a-z0-9][a-z0-9_.\-]{0,8}", fullmatch=True)
needs_st = st.builds(
    Needs,
    gpu_types=st.frozensets(_names, max_size=3),
    min_gpu_mem_gb=st.one_of(st.just(0.0), st.integers(1, 4096).map(float),
                             st.integers(1, 40950).map(lambda x: x / 10)),
    nvlink=st.booleans(),
    interconnects=st.frozensets(st.sampled_from(NETWORKS), max_size=3),
    min_compute_capability=st.one_of(st.none(), st.tuples(st.integers(1, 99), st.integers(0, 9))),
)
facts_st = st.builds(GpuFacts, gpu_type=st.one_of(st.just(""), _names),
                     gpu_mem_gb=st.floats(0, 300, allow_nan=False),
                     nvlink=st.booleans(), interconnect=st.sampled_from(("", *NETWORKS)),
                     compute_capability=st.one_of(st.none(), st.tuples(st.integers(1, 12),
                                                                        st.integers(0, 9))))


@given(needs_st)
def test_render_then_parse_is_the_identity(needs: Needs) -> None:
    text = needs.render()
    assert parse_needs(text) == needs
    assert parse_needs(text.upper().replace(",", " , ")) == needs  # case and blanks do not matter


@given(st.lists(st.sampled_from(["nvlink", "type=a100/h100", "gpumem>=40G", "net=ib", "cc>=8.0"]),
                min_size=1, max_size=5, unique=True))
def test_order_of_needs_does_not_matter(items: list[str]) -> None:
    assert parse_needs(",".join(items)) == parse_needs(",".join(reversed(items)))


@given(st.text(max_size=40))
def test_any_text_parses_or_fails_with_needs_error(text: str) -> None:
    try:
        needs = parse_needs(text)
    except NeedsError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert parse_needs(needs.render()) == needs


@given(needs_st, facts_st)
def test_met_by_is_exactly_no_unmet_need(needs: Needs, facts: GpuFacts) -> None:
    unmet = needs.unmet(facts)
    assert needs.met_by(facts) == (unmet == ())
    assert all(parse_needs(u) for u in unmet)  # each unmet need is itself a need
    assert NO_NEEDS.met_by(facts)


@given(needs_st, st.dictionaries(_names, facts_st, max_size=6))
def test_a_stricter_need_never_widens_the_eligible_nodes(needs: Needs, fleet: dict[str, GpuFacts]) -> None:
    base = eligible_nodes(needs, fleet)
    assert base <= set(fleet) and eligible_nodes(NO_NEEDS, fleet) == set(fleet)
    stricter = [dataclasses.replace(needs, nvlink=True),
                dataclasses.replace(needs, min_gpu_mem_gb=needs.min_gpu_mem_gb + 8)]
    for s in stricter:
        assert eligible_nodes(s, fleet) <= base


@pytest.mark.parametrize(("needs", "facts", "unmet"), [
    ("gpumem>=40G,nvlink", A100, ()),
    ("gpumem>=40G,nvlink", A100_40, ()),
    ("gpumem>=40G,nvlink", V100, ("gpumem>=40G", "nvlink")),
    ("gpumem>=41G", A100_40, ("gpumem>=41G",)),
    ("type=v100/k80", A100, ("type=k80/v100",)),
    ("net=ib", A100_40, ("net=ib",)),
    ("cc>=8.0", V100, ("cc>=8.0",)),
    ("cc>=7.0", GpuFacts(), ("cc>=7.0",)),  # unknown facts never meet a need about them
    ("type=a100", GpuFacts(), ("type=a100",)),
], ids=repr)
def test_unmet_names_each_failing_need(needs: str, facts: GpuFacts, unmet: tuple[str, ...]) -> None:
    assert parse_needs(needs).unmet(facts) == unmet


def test_fleet_summary_lists_each_kind_once() -> None:
    text = fleet_summary([(8, A100)] * 4 + [(8, V100)] * 2 + [(4, GpuFacts())])
    assert text == ("4 nodes x 8 GPUs a100 80G nvlink ib cc8.0; 2 nodes x 8 GPUs v100 32G eth "
                    "cc7.0; 1 node x 4 GPUs untyped mem?")
    assert describe(A100_40) == "a100 40G nvlink roce cc8.0"


# ---- the decision core honours needs -----------------------------------------------------

def _mixed(*pending: object, busy_a100: int = 0, old: GpuFacts = V100):  # type: ignore[no-untyped-def]
    """4 nodes x 8 GPUs on 2 leaves: n1-n2 A100 80 GB, n3-n4 ``old`` (V100 32 GB)."""
    fabric = fabric_from_shape(4, 8, 2)
    names = list(fabric.nodes)
    nodes = [Node(n, 8, facts=A100 if i < 2 else old) for i, n in enumerate(names)]
    free = {n: frozenset(range(8)) for n in names}
    for n in names[:busy_a100]:
        free[n] = frozenset()
    return names, make_snapshot(now=0.0, fabric=fabric, nodes=nodes, free=free,
                                pending=[p.build() for p in pending])  # type: ignore[attr-defined]


def _starts(d: object) -> dict[str, set[str]]:
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("policy", ["fifo", "default"])
def test_a_big_memory_gang_lands_only_on_nodes_that_meet_it(policy: str) -> None:
    # the V100 nodes are first-fit and best-fit for 8 GPUs; the need must steer the gang away
    names, snap = _mixed(job("big").gpus(16).with_(needs=parse_needs("gpumem>=40G")),
                         job("small").gpus(8).at(1))
    d = decide(snap, get(policy), 0.0, random.Random(0))
    starts = _starts(d)
    assert starts["big"] == set(names[:2])
    assert starts["small"] <= set(names[2:])


def test_a_need_no_node_meets_waits_as_needs_unmet_and_lists_the_fleet() -> None:
    _, snap = _mixed(job("h100").gpus(8).with_(needs=parse_needs("type=h100")), job("v").gpus(8).at(1))
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    reason = d.reason("h100")
    assert reason is not None and reason.code is Reason.NEEDS_UNMET
    assert "0 GPUs meet type=h100" in reason.detail and "2 nodes x 8 GPUs a100 80G" in reason.detail
    assert "v" in _starts(d)  # a request no node meets blocks nobody


def test_needs_larger_than_the_eligible_pool_are_unmet() -> None:
    _, snap = _mixed(job("big").gpus(24).with_(needs=parse_needs("nvlink")))
    reason = decide(snap, get("fifo"), 0.0, random.Random(0)).reason("big")
    assert reason is not None and reason.code is Reason.NEEDS_UNMET and "16 GPUs meet nvlink" in reason.detail


def test_busy_eligible_nodes_wait_as_no_eligible_capacity_and_small_work_backfills() -> None:
    # one GPU type, two interconnects: a need on a fact that is not the type
    names, snap = _mixed(job("big").gpus(8).with_(needs=parse_needs("net=ib")),
                         job("other").gpus(8).at(1), busy_a100=2, old=A100_40)
    d = decide(snap, get("default"), 0.0, random.Random(0))
    reason = d.reason("big")
    assert reason is not None and reason.code is Reason.NO_ELIGIBLE_CAPACITY
    assert reason.detail == "too few free GPUs on the nodes that meet net=ib"
    assert _starts(d)["other"] <= set(names[2:])


def test_busy_big_memory_pool_waits_while_small_work_backfills_the_older_pool() -> None:
    # (strict FIFO would hold "old" behind "big": backfill is the default policy's)
    names, snap = _mixed(job("big").gpus(8).with_(needs=parse_needs("gpumem>=40G,nvlink")),
                         job("old").gpus(8).at(1), busy_a100=2)
    d = decide(snap, get("default"), 0.0, random.Random(0))
    reason = d.reason("big")
    assert "big" not in _starts(d) and reason is not None
    assert reason.code in (Reason.NO_ELIGIBLE_CAPACITY, Reason.WAITING_FOR_GPUS, Reason.RESERVED)
    assert _starts(d)["old"] <= set(names[2:])  # the idle older pool is used meanwhile


def test_a_drained_node_is_not_eligible() -> None:
    names, snap = _mixed(job("big").gpus(16).with_(needs=parse_needs("gpumem>=40G")))
    nodes = [n.with_state(n.state.__class__("drain")) if n.name == names[0] else n
             for n in snap.nodes.values()]
    snap = snap.replace(nodes={n.name: n for n in nodes})
    reason = decide(snap, get("fifo"), 0.0, random.Random(0)).reason("big")
    assert reason is not None and reason.code is Reason.NEEDS_UNMET and "8 GPUs meet" in reason.detail


@pytest.mark.parametrize("other", [A100_40, V100], ids=["one-type", "mixed-types"])
def test_a_needs_job_evicts_only_work_on_nodes_that_meet_its_needs(other: GpuFacts) -> None:
    # 40 busy nodes; the 4 meeting net=ib hold the oldest (costliest) work, so a rank-order victim
    # search that ignored the needs would spend the churn budget on nodes the job cannot use
    fabric = fabric_from_shape(40, 8, 4)
    names = list(fabric.nodes)
    nodes = [Node(n, 8, facts=A100 if i < 4 else other) for i, n in enumerate(names)]
    running = [RunningJob(job(f"r{i}").gpus(8).build(), {n: tuple(range(8))}, 0.0 if i < 4 else 100.0, 1)
               for i, n in enumerate(names)]
    snap = make_snapshot(now=200.0, fabric=fabric, nodes=nodes, running=running, pending=[
        job("ib").gpus(8).cls(1).at(150).with_(needs=parse_needs("net=ib")).build()])
    d = decide(snap, get("default"), 200.0, random.Random(0))
    victims = [a.job_id for a in d.actions if isinstance(a, Preempt)]
    assert len(victims) == 1 and int(victims[0][1:]) < 4
    reason = d.reason("ib")
    assert reason is not None and reason.code is Reason.PREEMPTING
