"""deploy/docker-compose.host.yml without an engine: the loopback rendering it asks for, and the
variables it hands railgang. The stack itself is started by test_compose_stack.py (marker compose).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from railgang.daemon.config import Settings
from tests.deploy.conftest import DEPLOY, DUMMY_SECRETS, ROOT

OVERRIDE = DEPLOY / "docker-compose.host.yml"
PORTS = {"RAILGANG_DEVCLUSTER__SLURMCTLD_PORT": "24117", "RAILGANG_DEVCLUSTER__SLURMDBD_PORT": "24119",
         "RAILGANG_DEVCLUSTER__MARIADB_PORT": "24120", "RAILGANG_DEVCLUSTER__SLURMD_BASE_PORT": "24127"}


class _Tagged(yaml.SafeLoader):
    """Reads compose's `!reset` tag as a plain value."""


_Tagged.add_constructor("!reset", lambda loader, node: None)


@pytest.fixture(scope="module")
def override() -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(OVERRIDE.read_text(), Loader=_Tagged)  # a SafeLoader
    return data


def _render(tmp_path: Path, *flags: str, password: str = "x") -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "RAILGANG_CONFIG": str(DEPLOY / "railgang.toml"),
           "RAILGANG_API__SECRET_KEY": DUMMY_SECRETS["RAILGANG_API__SECRET_KEY"],
           "SLURM_DB_PASSWORD": password, **PORTS}
    return subprocess.run([str(ROOT / ".venv" / "bin" / "railgang"), "devcluster", "render",
                           "--dir", str(tmp_path), *flags], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_host_network_rendering_is_loopback_with_the_given_ports(tmp_path: Path) -> None:
    res = _render(tmp_path, "--host-network", password="s3cret")
    assert res.returncode == 0, res.stderr
    conf = (tmp_path / "etc" / "slurm.conf").read_text()
    dbd = (tmp_path / "etc" / "slurmdbd.conf").read_text()
    assert "SlurmctldHost=localhost(127.0.0.1)\n" in conf and "SlurmctldPort=24117\n" in conf
    nodes = re.findall(r"NodeName=(n\d+) NodeAddr=(\S+) NodeHostname=\S+ Port=(\d+)", conf)
    assert nodes == [(f"n0{i}", "127.0.0.1", str(24127 + i)) for i in range(1, 5)]
    assert "StorageHost=127.0.0.1\n" in dbd and "StoragePort=24120\n" in dbd
    assert "StoragePass=s3cret\n" in dbd and "DbdPort=24119\n" in dbd


@pytest.mark.parametrize("flags", [("--host-network",), ("--containers", "--host-network")],
                         ids=["no password", "both modes"])
def test_host_network_rendering_refuses(tmp_path: Path, flags: tuple[str, ...]) -> None:
    res = _render(tmp_path, *flags, password="" if len(flags) == 1 else "x")
    assert res.returncode != 0 and not (tmp_path / "etc" / "slurm.conf").exists()
    assert ("SLURM_DB_PASSWORD" if len(flags) == 1 else "exclude each other") in res.stderr + res.stdout


def test_every_railgang_service_is_on_the_host_network(override: dict[str, Any]) -> None:
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    services = override["services"]
    assert set(services) == set(base)
    for name, svc in services.items():
        assert svc.get("network_mode") == "host", name
        if "hostname" in base[name]:
            assert "hostname" in svc and svc["hostname"] is None, f"{name}: hostname not reset"
        if "ports" in base[name]:
            assert svc.get("ports", "missing") is None, f"{name}: published ports not reset"
    for name in ("prometheus", "grafana"):  # no registry, no image: opt-in
        assert services[name]["profiles"] == ["monitoring"]
    nodes = [s["environment"]["RAILGANG_NODE"] for n, s in sorted(services.items())
             if n.startswith("slurmd-")]
    assert nodes == ["n01", "n02", "n03", "n04"]


def test_the_override_variables_are_settings_keys(override: dict[str, Any]) -> None:
    env = override["x-host-env"]
    keys = [k for k in env if k.startswith("RAILGANG_") and "__" in k]
    assert keys
    for key in keys:
        group, field = key.removeprefix("RAILGANG_").lower().split("__", 1)
        model = Settings.model_fields[group].annotation
        assert field in model.model_fields, key  # type: ignore[union-attr]
    assert env["RAILGANG_API__HOST"] == env["RAILGANG_DAEMON__METRICS_HOST"] == "127.0.0.1"
