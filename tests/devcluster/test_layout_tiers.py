"""Capacity tiers in devcluster pools (``--pools v100=4,v100:spot=4``, the syntax of
``railgang sim --gpus``): the tier becomes a ``tier_*`` node feature the CLI backend reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.daemon.slurm.cli.facts import tier_from_features
from railgang.devcluster.layout import (
    TIER_FEATURES,
    ClusterSpec,
    Pool,
    parse_pools,
    render_gres_conf,
    render_slurm_conf,
)


def test_a_pool_may_name_its_tier() -> None:
    got = parse_pools("v100=2,v100:spot=2,a100:reserved=1:gpumem_40g+nvlink")
    assert got == (Pool("v100", 2, ("gpumem_32g", "eth")),
                   Pool("v100", 2, ("gpumem_32g", "eth", "tier_spot"), "spot"),
                   Pool("a100", 1, ("gpumem_40g", "nvlink", "tier_reserved"), "reserved"))
    assert [p.name for p in got] == ["v100", "v100:spot", "a100:reserved"]


@pytest.mark.parametrize(("text", "says"), [
    ("v100:cheap=2", "unknown tier 'cheap'"), ("v100:spot=1,v100:spot=2", "'v100:spot' is given twice"),
    ("v100:spot", "is not TYPE=NODES"),
], ids=repr)
def test_bad_tiers_say_what_to_write(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_pools(text)


def test_spot_nodes_carry_the_tier_feature_and_share_the_typed_gres(tmp_path: Path) -> None:
    spec = ClusterSpec(dir=tmp_path).with_pools(parse_pools("v100=2,v100:spot=2"))
    conf = render_slurm_conf(spec)
    assert "NodeName=n03 " in conf and "Feature=gpumem_32g,eth,tier_spot" in conf
    assert conf.count("Gres=gpu:v100:8") == 4 and conf.count("tier_spot") == 2
    assert render_gres_conf(spec).count("Type=v100") == 1  # one gres.conf line for all V100 nodes


@pytest.mark.parametrize("tier", sorted(TIER_FEATURES))
def test_every_tier_feature_reads_back_as_its_tier(tier: str) -> None:
    assert tier_from_features(["gpumem_32g", TIER_FEATURES[tier], "eth"]) == tier
