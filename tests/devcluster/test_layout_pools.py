"""Mixed GPU pools in the rendered cluster: typed GRES, features, gres.conf types, the CLI flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.devcluster.layout import (
    ClusterSpec,
    Pool,
    parse_pools,
    render_gres_conf,
    render_slurm_conf,
)
from railgang.errors import DevClusterError


def test_pools_parse_with_default_or_given_features() -> None:
    assert parse_pools("a100=4, v100=2") == (Pool("a100", 4, ("gpumem_80g", "nvlink", "ib")),
                                             Pool("v100", 2, ("gpumem_32g", "eth")))
    assert parse_pools("a100=2:gpumem_40g+nvlink+roce") == (Pool("a100", 2, ("gpumem_40g", "nvlink", "roce")),)
    assert parse_pools("") == ()


@pytest.mark.parametrize(("text", "says"), [
    ("a100", "is not TYPE=NODES"), ("a100=0", "is not TYPE=NODES"), ("A100=2", "is not TYPE=NODES"),
    ("mystery=2", "no default features for 'mystery'"), ("a100=1,a100=2", "'a100' is given twice"),
    ("a100=99999999", "at most 256"),  # refused before 100 M nodes exhaust memory
], ids=repr)
def test_bad_pools_say_what_to_write(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_pools(text)


def test_pooled_nodes_get_typed_gres_features_and_typed_gres_conf(tmp_path: Path) -> None:
    spec = ClusterSpec(dir=tmp_path).with_pools(parse_pools("a100=2,v100=3"))
    assert spec.nodes == 5 and spec.pool_of()["n03"].gpu_type == "v100"
    conf = render_slurm_conf(spec)
    assert "NodeName=n02 NodeAddr=127.0.0.1 NodeHostname=n02 Port=16902 Gres=gpu:a100:8 " \
           "Feature=gpumem_80g,nvlink,ib" in conf
    assert "Port=16905 Gres=gpu:v100:8 Feature=gpumem_32g,eth" in conf
    gres = render_gres_conf(spec)
    assert f"NodeName=n[01-02] Name=gpu Type=a100 File={tmp_path}/dev/nvidia[0-7]" in gres
    assert f"NodeName=n[03-05] Name=gpu Type=v100 File={tmp_path}/dev/nvidia[0-7]" in gres


def test_without_pools_nothing_is_typed(tmp_path: Path) -> None:
    spec = ClusterSpec(dir=tmp_path)
    assert spec.with_pools(()) is spec and spec.pool_of() == {}
    assert "Type=" not in render_gres_conf(spec) and "Feature=" not in render_slurm_conf(spec)
    assert spec.gpu_fleet_file == tmp_path / "run" / "railgang" / "fleet"


def test_a_spec_whose_pools_disagree_with_its_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pools hold 4 nodes, the cluster 16"):
        ClusterSpec(dir=tmp_path, pools=parse_pools("a100=4"))


def test_render_with_pools_flag_writes_typed_configs(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["devcluster", "render", "--dir", str(tmp_path), "--pools",
                                   "a100=2,v100=2", "--json"], env={"RAILGANG_CONFIG": ""})
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["etc"] == str(tmp_path / "etc")
    assert "Type=v100" in (tmp_path / "etc" / "gres.conf").read_text()
    # the one-line errors `railgang` prints (main() turns a RailgangError into a message)
    bad = CliRunner().invoke(app, ["devcluster", "render", "--dir", str(tmp_path), "--pools", "a100"])
    assert isinstance(bad.exception, DevClusterError) and "is not TYPE=NODES" in str(bad.exception)
    both = CliRunner().invoke(app, ["devcluster", "render", "--dir", str(tmp_path), "--pools",
                                    "a100=2", "--nodes", "4"])
    assert isinstance(both.exception, DevClusterError) and "give one" in str(both.exception)
