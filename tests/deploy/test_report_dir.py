"""Where the nightly report goes is writable wherever the docs install railgang (issue 36 item 1):
the `[report] dir` of docs/deploy.md lies under the daemon unit's ReadWritePaths, and the compose
stack's report.dir is a volume of the daemon's container that its entrypoint hands to the
daemon's user. A site that follows the docs gets a report without a hand-made directory."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from tests.deploy.conftest import DEPLOY, ROOT


def _toml_blocks(markdown: str) -> list[dict[str, Any]]:
    blocks = re.findall(r"```toml\n(.*?)```", markdown, re.S)
    return [tomllib.loads(re.sub(r"^ {3}", "", b, flags=re.M)) for b in blocks]


def _writable(unit: Path) -> list[Path]:
    return [Path(p.lstrip("-")) for line in unit.read_text().splitlines()
            if line.startswith("ReadWritePaths=") for p in line.split("=", 1)[1].split()]


def test_the_deploy_docs_report_dir_is_writable_under_the_unit() -> None:
    docs = (ROOT / "docs" / "deploy.md").read_text()
    dirs = [Path(b["report"]["dir"]) for b in _toml_blocks(docs) if "dir" in b.get("report", {})]
    assert dirs, "docs/deploy.md configures no [report] dir"
    writable = _writable(DEPLOY / "systemd" / "railgang-daemon.service")
    for d in dirs:
        assert any(d.is_relative_to(w) for w in writable), (d, writable)
    assert "ingest_every_s" in docs and "telemetry_prometheus_url" in docs


def test_compose_report_dir_is_a_volume_the_daemon_owns(services: dict[str, dict[str, Any]]) -> None:
    conf = tomllib.loads((DEPLOY / "railgang.toml").read_text())
    report_dir = conf["report"]["dir"]
    targets = []
    for v in services["railgang-daemon"]["volumes"]:
        targets.append(v["target"] if isinstance(v, dict) else v.split(":")[1])
    assert report_dir in targets
    entry = (DEPLOY / "entrypoint.sh").read_text()
    assert f"REPORTS={report_dir}" in entry and 'chown "$DAEMON_USER:" "$SHARED" "$REPORTS"' in entry
    assert conf["ledger"]["ingest_every_s"] > 0  # the stack's ledger fills itself
