"""Capacity tiers on real Slurm (issue 13 part 3 on the CLI backend): Slurm reports no tiers or
prices, so a node's tier is its ``tier_*`` feature and the prices come from ``[slurm] prices``
(the syntax of ``railgang sim --price``). The last test brings up its own small mixed cluster
(``--pools v100=2,v100:spot=2``) and reads it through the CLI backend."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.tiers import ON_DEMAND, SPOT, TierTerms
from railgang.daemon.pricing import ON_DEMAND_USD, SPOT_FACTOR
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat
from railgang.daemon.slurm.cli.facts import tier_from_features, tier_terms
from railgang.daemon.slurm.cli.records import parse_sinfo
from railgang.daemon.slurm.cli.snapshot import build_observation, core_node
from railgang.devcluster.cluster import DevCluster
from railgang.devcluster.layout import ClusterSpec, parse_pools
from railgang.errors import ConfigError
from tests.conftest import TEST_ROOT, real_cluster
from tests.support.ports import PORT_BASE

SINFO = json.dumps({"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "nodes": [
    {"name": "n01", "gres": "gpu:v100:8", "state": "idle", "active_features": "gpumem_32g,eth"},
    {"name": "n02", "gres": "gpu:v100:8", "state": "idle",
     "active_features": "gpumem_32g,eth,tier_spot"},
    {"name": "n03", "gres": "gpu:a100:8", "state": "idle",
     "active_features": "gpumem_80g,tier_ondemand"},
]})


@pytest.mark.parametrize(("features", "tier"), [
    (["gpumem_32g", "tier_spot"], "spot"), (["TIER_ONDEMAND"], "on-demand"),
    (["tier_reserved", "eth"], "reserved"), (["eth", "rg_lame"], ""), ([], ""),
    (["tier_cheap"], ""),  # not a tier: no price is ever guessed
], ids=repr)
def test_tier_from_node_features(features: list[str], tier: str) -> None:
    assert tier_from_features(features) == tier


def test_prices_default_to_the_simulators_and_follow_the_sim_price_syntax() -> None:
    terms = tier_terms({("v100", ""), ("v100", SPOT), ("a100", ON_DEMAND)}, "v100:spot=0.9",
                       spot_per_node_day=2.0, spot_notice_s=30.0)
    assert set(terms) == {ON_DEMAND, SPOT}
    assert terms[SPOT] == TierTerms({"v100": 0.9, "a100": ON_DEMAND_USD["a100"] * SPOT_FACTOR}, 2.0, 30.0)
    assert terms[ON_DEMAND].price("v100") == ON_DEMAND_USD["v100"]
    assert terms[ON_DEMAND].interruptions_per_node_day == 0.0
    assert tier_terms({("v100", "")}, "v100=9") == {}  # no node names a tier: nothing priced
    with pytest.raises(ConfigError, match="is not TYPE"):
        tier_terms({("v100", SPOT)}, "v100:spot=cheap")


def test_bad_prices_in_the_config_are_one_line() -> None:
    with pytest.raises(ValidationError, match="prices: 'v100=x' is not TYPE"):
        SlurmSettings(prices="v100=x")
    assert SlurmSettings(prices="v100:spot=0.9").prices == "v100:spot=0.9"


def test_sinfo_features_give_nodes_their_tier_and_the_snapshot_its_prices() -> None:
    nodes, problems = parse_sinfo(SINFO)
    assert problems == []
    assert [core_node(n).tier for n in nodes] == ["", SPOT, ON_DEMAND]
    obs = build_observation(0.0, [], nodes, None,
                            pricing=lambda pools: tier_terms(pools, "v100=2.0", 4.0))
    assert obs.snapshot.tiers[SPOT].price("v100") == pytest.approx(2.0 * SPOT_FACTOR)
    assert obs.snapshot.tiers[SPOT].interruptions_per_node_day == 4.0
    assert build_observation(0.0, [], nodes, None).snapshot.tiers == {}


@pytest.fixture(scope="module")
def spot_cluster() -> Iterator[DevCluster]:
    """Its own 4-node cluster (2 V100 on-demand-by-default, 2 V100 spot), no accounting."""
    spec = ClusterSpec(dir=TEST_ROOT / "devcluster-tiers", cluster_name="rgtiers", accounting=False,
                       slurmctld_port=PORT_BASE + 800, slurmd_base_port=PORT_BASE + 810,
                       nodes_per_leaf=2).with_pools(parse_pools("v100=2,v100:spot=2"))
    yield from real_cluster(spec)


@pytest.mark.slurm
@pytest.mark.slow
def test_cli_backend_snapshot_carries_the_tier_on_real_slurm(spot_cluster: DevCluster) -> None:
    spec = spot_cluster.spec
    write_heartbeat(spec.heartbeat_file, time.time(), 600)
    try:
        backend = CliBackend(SlurmSettings(conf=spec.slurm_conf, prices="v100:spot=0.8",
                                           spot_interruptions_per_node_day=3.0), read_shares=False)
        snap = backend.snapshot(time.time())
    finally:
        spec.heartbeat_file.unlink(missing_ok=True)
    tiers = {name: node.tier for name, node in snap.nodes.items()}
    assert tiers == {"n01": "", "n02": "", "n03": SPOT, "n04": SPOT}
    assert {node.facts.gpu_type for node in snap.nodes.values()} == {"v100"}
    assert snap.tiers[SPOT] == TierTerms({"v100": 0.8}, 3.0, 120.0)
    assert snap.tiers[ON_DEMAND].price("v100") == ON_DEMAND_USD["v100"]
