"""Fixtures of the deployment checks: the compose file as Debian's docker-compose resolves it.

There is no Docker engine where these tests run, so the stack is never started here; what can be
checked without one is checked: the file validates, and its names, ports, paths and variables
agree with railgang's Settings, the rendered Slurm configs and the entrypoint. A missing tool
(docker-compose, shellcheck, hadolint, systemd-analyze) is a failure, not a skip: CI installs them
(scripts/install.sh).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"
# stand-ins for the secrets compose requires; the tests check that none of them is baked in
DUMMY_SECRETS = {
    "RAILGANG_API__SECRET_KEY": "test-api-secret-0123456789",
    "POSTGRES_PASSWORD": "test-postgres-password",
    "SLURM_DB_PASSWORD": "test-slurm-db-password",
    "GRAFANA_ADMIN_PASSWORD": "test-grafana-password",
}


def require_tool(name: str, hint: str) -> str:
    """Path of a command-line tool; missing is a failure (CI must run every check)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} not found: {hint} (scripts/install.sh installs it)")
    return found


def compose_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DUMMY_SECRETS and not k.startswith("RAILGANG_")}
    return env | extra


def run_compose_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = require_tool("docker-compose", "apt-get install docker-compose")
    # an empty --env-file keeps a developer's .env in the checkout from supplying the secrets
    with tempfile.TemporaryDirectory(prefix="railgang-compose-") as tmp:
        empty = Path(tmp) / "empty.env"
        empty.touch()
        return subprocess.run([exe, "--project-directory", str(ROOT), "--env-file", str(empty),
                               "-f", str(COMPOSE_FILE), "config"],
                              capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.fixture(scope="session")
def compose() -> dict[str, Any]:
    """The compose file resolved by `docker-compose config`, with stand-in secrets."""
    res = run_compose_config(compose_env(**DUMMY_SECRETS))
    assert res.returncode == 0, f"docker-compose config failed: {res.stderr.strip()}"
    data = yaml.safe_load(res.stdout)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="session")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    svcs = compose["services"]
    assert isinstance(svcs, dict)
    return svcs


@pytest.fixture(scope="session")
def raw_compose() -> dict[str, Any]:
    """The file as written (before interpolation), to see how secrets are given."""
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def expositions() -> dict[str, str]:
    """The /metrics pages of the daemon (a fresh registry) and of the API (one request made)."""
    from fastapi.testclient import TestClient
    from prometheus_client import generate_latest

    from railgang.daemon.api.app import create_app
    from railgang.daemon.config import Settings
    from railgang.daemon.service.metrics import DaemonMetrics

    client = TestClient(create_app(Settings(db={"url": "sqlite://"})))
    client.get("/no-such-page")  # so the request counters have a series
    return {"daemon": generate_latest(DaemonMetrics().registry).decode(),
            "api": client.get("/metrics").text}


def exported_metrics() -> set[str]:
    """Every metric family railgang exports (counters without their ``_total``)."""
    text = "".join(expositions().values())
    return {re.sub(r"_total$", "", m) for m in re.findall(r"^# TYPE (\w+) ", text, re.M)}


def metrics_in(expr: str) -> set[str]:
    """The railgang_* metric families a PromQL expression reads."""
    return {re.sub(r"_(total|bucket|sum|count)$", "", m) for m in re.findall(r"railgang_\w+", expr)}
