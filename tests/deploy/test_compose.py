"""docker-compose.yml against railgang's Settings, the rendered Slurm configs and the entrypoint."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy.engine import make_url

from railgang.daemon.config import Settings, load_settings
from railgang.devcluster.cli import CONTAINER_HOSTS
from railgang.devcluster.layout import ClusterSpec
from tests.deploy.conftest import (
    COMPOSE_FILE,
    DEPLOY,
    DUMMY_SECRETS,
    ROOT,
    compose_env,
    run_compose_config,
)

TOML_PATH = DEPLOY / "railgang.toml"
CONFIG_MOUNT = "/etc/railgang/railgang.toml"
ENTRYPOINT = DEPLOY / "entrypoint.sh"
# RAILGANG_* variables that are not Settings keys, and who reads them
NON_SETTINGS_VARS = {"RAILGANG_CONFIG": "daemon/config.py", "RAILGANG_HOME": "daemon/config.py"}
LUA_VARS = {"RAILGANG_HEARTBEAT_FILE": ("daemon", "heartbeat_file"),
            "RAILGANG_GRANTS_FILE": ("ledger", "grants_file")}
RAILGANG_SERVICES = ("slurm-config", "slurmdbd", "slurmctld", "migrate", "railgang-daemon", "railgang-api")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY$|__URL$")
NOT_SECRETS = {"MARIADB_RANDOM_ROOT_PASSWORD"}  # a flag: the image makes up a root password


@pytest.fixture(scope="module")
def toml() -> dict[str, Any]:
    with TOML_PATH.open("rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="module")
def settings(monkeypatch_module: pytest.MonkeyPatch, services: dict[str, dict[str, Any]]) -> Settings:
    """Settings as the daemon container sees them: the mounted TOML plus its environment."""
    for key, value in services["railgang-daemon"]["environment"].items():
        if key != "RAILGANG_CONFIG":
            monkeypatch_module.setenv(key, value)
    return load_settings(TOML_PATH)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def settings_field(var: str) -> bool:
    """Whether RAILGANG_GROUP__KEY (or RAILGANG_KEY) names a field of Settings."""
    parts = var.removeprefix("RAILGANG_").lower().split("__")
    model: type[BaseModel] = Settings
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        ann = field.annotation
        if i < len(parts) - 1:
            if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                return False
            model = ann
    return True


def mounts(service: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """target -> (type, source) of a resolved service's volumes."""
    out = {}
    for vol in service.get("volumes", []):
        if isinstance(vol, dict):
            out[vol["target"]] = (vol["type"], str(vol.get("source", "")))
        else:
            source, target = vol.split(":")[:2]
            out[target] = ("volume" if not source.startswith(("/", ".")) else "bind", source)
    return out


def volume_holding(service: dict[str, Any], path: Path) -> str:
    """The named volume a service mounts at or above ``path``; fails if none."""
    for target, (kind, source) in mounts(service).items():
        if path == Path(target) or Path(target) in path.parents:
            assert kind == "volume", f"{path} is on a {kind} mount, not a named volume"
            return source
    raise AssertionError(f"no volume holds {path}")


def test_compose_config_validates_and_requires_every_secret() -> None:
    assert run_compose_config(compose_env(**DUMMY_SECRETS)).returncode == 0
    for missing in DUMMY_SECRETS:
        others = {k: v for k, v in DUMMY_SECRETS.items() if k != missing}
        res = run_compose_config(compose_env(**others))
        assert res.returncode != 0 and missing in res.stderr, f"compose starts without {missing}"


def test_every_service_has_a_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        check = svc.get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), f"{name}: no healthcheck"


def test_no_baked_secrets(services: dict[str, dict[str, Any]], raw_compose: dict[str, Any]) -> None:
    baked = []
    for name, svc in raw_compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if SECRET_NAME.search(key) and key not in NOT_SECRETS and "${" not in str(value):
                baked.append(f"{name}: {key}")
    for key, value in raw_compose["x-railgang-env"].items():
        if SECRET_NAME.search(key) and "${" not in str(value):
            baked.append(f"x-railgang-env: {key}")
    assert not baked, f"secrets written into docker-compose.yml: {baked}"
    for path in [TOML_PATH, *DEPLOY.rglob("Dockerfile*"), *DEPLOY.rglob("*.sh"), COMPOSE_FILE]:
        text = path.read_text()
        for secret in DUMMY_SECRETS.values():
            assert secret not in text
        assert not re.search(r"(?mi)^\s*(secret_key|password)\s*=", text), f"{path}: a secret in the file"
    # .env holds the real secrets: git and the image build both leave it out
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT, check=False)
    assert ignored.returncode == 0, ".env is not in .gitignore"
    assert ".env" in (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    # the resolved stack really receives the secrets from the environment
    daemon_env = services["railgang-daemon"]["environment"]
    assert daemon_env["RAILGANG_API__SECRET_KEY"] == DUMMY_SECRETS["RAILGANG_API__SECRET_KEY"]
    assert DUMMY_SECRETS["POSTGRES_PASSWORD"] in daemon_env["RAILGANG_DB__URL"]


def test_every_railgang_variable_is_a_settings_key(services: dict[str, dict[str, Any]]) -> None:
    lua = (ROOT / "slurm_plugins" / "job_submit.lua").read_text()
    for name, svc in services.items():
        for var in svc.get("environment", {}):
            if not var.startswith("RAILGANG_") or var in NON_SETTINGS_VARS:
                continue
            if var in LUA_VARS:
                assert f'os.getenv("{var}")' in lua, f"{name}: job_submit.lua does not read {var}"
                continue
            assert settings_field(var), f"{name}: {var} is not a railgang setting (daemon/config.py)"


def test_the_shared_configuration_loads(settings: Settings, services: dict[str, dict[str, Any]]) -> None:
    assert settings.environment == "prod"  # so the development API secret is refused
    for name in RAILGANG_SERVICES:
        svc = services[name]
        assert svc["environment"]["RAILGANG_CONFIG"] == CONFIG_MOUNT, name
        assert mounts(svc)[CONFIG_MOUNT] == ("bind", str(TOML_PATH)), f"{name}: not the shared TOML"


def test_ports_agree_with_settings(settings: Settings, services: dict[str, dict[str, Any]]) -> None:
    api = services["railgang-api"]
    assert settings.api.host == "0.0.0.0" and settings.daemon.metrics_host == "0.0.0.0"
    # "127.0.0.1:8780:8780/tcp": published on the host's loopback only
    published = {int(p.split(":")[-1].split("/")[0]) for p in api["ports"]}
    assert all(p.startswith("127.0.0.1:") for p in api["ports"])
    assert published == {settings.api.port}
    assert f":{settings.api.port}/healthz" in " ".join(api["healthcheck"]["test"])
    assert str(settings.daemon.metrics_port) in [str(p) for p in services["railgang-daemon"]["expose"]]
    prom = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    assert f'"railgang-daemon:{settings.daemon.metrics_port}"' in prom
    assert f'"railgang-api:{settings.api.port}"' in prom


def test_database_url_points_at_the_postgres_service(settings: Settings,
                                                     services: dict[str, dict[str, Any]]) -> None:
    url = make_url(settings.db.url)
    pg = services["postgres"]["environment"]
    assert url.drivername == "postgresql+psycopg"
    assert url.host == "postgres" and (url.port or 5432) == 5432  # the image's port
    assert (url.username, url.database) == (pg["POSTGRES_USER"], pg["POSTGRES_DB"])
    assert url.password == pg["POSTGRES_PASSWORD"]


def test_slurm_paths_are_the_mounted_rendered_config(settings: Settings,
                                                     services: dict[str, dict[str, Any]]) -> None:
    spec = ClusterSpec(dir=settings.devcluster.dir)
    assert settings.slurm.conf == spec.slurm_conf
    etc_volume = volume_holding(services["slurm-config"], spec.etc)
    for name in ("slurmdbd", "slurmctld", "railgang-daemon", "slurmd-n01"):
        assert volume_holding(services[name], spec.slurm_conf) == etc_volume, name
    # job_submit.lua (in slurmctld) must read the files the daemon writes, on one shared volume
    ctld, daemon = services["slurmctld"], services["railgang-daemon"]
    for var, (group, key) in LUA_VARS.items():
        path = Path(getattr(getattr(settings, group), key))
        assert ctld["environment"][var] == str(path), var
        assert volume_holding(ctld, path) == volume_holding(daemon, path), var
    for name, target in (("mariadb", Path("/var/lib/mysql")), ("postgres", Path("/var/lib/postgresql/data")),
                         ("slurmctld", spec.dir / "state")):
        volume_holding(services[name], target)  # state on named volumes


def test_slurm_services_match_the_rendered_cluster(settings: Settings, tmp_path: Path,
                                                   services: dict[str, dict[str, Any]]) -> None:
    """Render exactly as the slurm-config service does; every host and port must be a service."""
    dc = settings.devcluster
    env = {k: v for k, v in compose_env().items()} | {
        "RAILGANG_CONFIG": str(TOML_PATH), "SLURM_DB_PASSWORD": DUMMY_SECRETS["SLURM_DB_PASSWORD"],
        "RAILGANG_API__SECRET_KEY": DUMMY_SECRETS["RAILGANG_API__SECRET_KEY"]}
    res = subprocess.run([str(ROOT / ".venv" / "bin" / "railgang"), "devcluster", "render", "--dir",
                          str(tmp_path), "--containers"], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    conf = (tmp_path / "etc" / "slurm.conf").read_text()
    dbd = (tmp_path / "etc" / "slurmdbd.conf").read_text()
    hostnames = {svc.get("hostname"): name for name, svc in services.items() if svc.get("hostname")}
    assert f"SlurmctldHost={CONTAINER_HOSTS['slurmctld_host']}\n" in conf
    assert hostnames[CONTAINER_HOSTS["slurmctld_host"]] == "slurmctld"
    assert hostnames[CONTAINER_HOSTS["dbd_host"]] == "slurmdbd"
    assert CONTAINER_HOSTS["storage_host"] in services  # mariadb: reached by service name
    nodes = ClusterSpec(dir=tmp_path, nodes=dc.nodes).node_names
    assert re.findall(r"NodeName=(n\d+) NodeAddr=(n\d+)", conf) == [(n, n) for n in nodes]
    slurmds = sorted(n for n, s in services.items() if s.get("command") == ["slurmd"])
    assert [services[s]["hostname"] for s in slurmds] == nodes, "one slurmd service per node"
    maria = services["mariadb"]["environment"]
    assert f"StoragePort={dc.mariadb_port}\n" in dbd and dc.mariadb_port == 3306  # the image's port
    assert f"StorageUser={maria['MARIADB_USER']}\n" in dbd
    assert f"StorageLoc={maria['MARIADB_DATABASE']}\n" in dbd
    assert f"StoragePass={DUMMY_SECRETS['SLURM_DB_PASSWORD']}\n" in dbd
    assert maria["MARIADB_PASSWORD"] == DUMMY_SECRETS["SLURM_DB_PASSWORD"]


def entrypoint_var(name: str) -> str:
    text = ENTRYPOINT.read_text()
    m = re.search(rf"^{name}=(\S+)", text, re.M)
    assert m, f"{ENTRYPOINT}: no {name}="
    value = m.group(1)
    for ref in re.findall(r"\$(\w+)", value):  # $SLURM_DIR/run -> expanded
        value = value.replace(f"${ref}", entrypoint_var(ref))
    return value


def test_entrypoint_paths_are_those_of_the_rendered_configs(settings: Settings, tmp_path: Path) -> None:
    spec = ClusterSpec(dir=settings.devcluster.dir, gpus_per_node=settings.devcluster.gpus_per_node)
    assert Path(entrypoint_var("SLURM_DIR")) == spec.dir
    assert Path(entrypoint_var("MUNGE_SOCKET")) == spec.munge_socket  # AuthInfo=socket=…
    assert Path(entrypoint_var("DEV")) == spec.dev
    from railgang.devcluster.layout import GPU_DEVICE_MAJOR, render_gres_conf

    assert int(entrypoint_var("GPU_DEVICE_MAJOR")) == GPU_DEVICE_MAJOR
    # the entrypoint's own sed finds the last GPU index in the rendered gres.conf
    gres = tmp_path / "gres.conf"
    gres.write_text(render_gres_conf(spec))
    sed = re.search(r"sed -n '([^']+)'", ENTRYPOINT.read_text())
    assert sed
    out = subprocess.run(["sed", "-n", sed.group(1), str(gres)], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == str(spec.gpus_per_node - 1)
