"""deploy/prometheus: the config and alert rules pass promtool, every alert has a unit test
that makes it fire (alerts_test.yml, `promtool test rules`), every expression reads metrics
railgang exports, and both /metrics pages pass `promtool check metrics`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import DEPLOY, exported_metrics, expositions, metrics_in, require_tool

PROM = DEPLOY / "prometheus"
RULES = PROM / "alerts.yml"
UNIT_TESTS = PROM / "alerts_test.yml"
# what the issue asks alerts for, and the alert that covers it
REQUIRED = {"daemon down": "RailgangDaemonDown", "no successful cycle": "RailgangNoSuccessfulCycle",
            "cycle slow": "RailgangCycleSlow", "journal failures": "RailgangJournalFailures",
            "heartbeat too old for job_submit.lua": "RailgangHeartbeatFileOld",
            "leases about to lapse": "RailgangLeasesLapsing",
            "quarantined links": "RailgangLinksQuarantined",
            "nodes drained by railgang": "RailgangNodesDrained",
            "report not produced": "RailgangReportMissing", "API 5xx": "RailgangApiErrors",
            # issue 36 item 4
            "free GPUs while a job that fits waits": "RailgangGpusIdleWhileJobsFit",
            "ledger lag": "RailgangLedgerBehind", "ledger reads failing": "RailgangLedgerReadsFailing",
            "nodes down/drained by someone else": "RailgangNodesDownOrDrained"}
LUA = DEPLOY.parent / "slurm_plugins" / "job_submit.lua"


def promtool(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = require_tool("promtool", "apt-get install prometheus")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, input=stdin,
                          cwd=PROM, timeout=120, check=False)


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_promtool_checks_config_and_rules() -> None:
    res = promtool("check", "config", PROM / "prometheus.yml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "alerts.yml" in res.stdout  # rule_files found it
    res = promtool("check", "rules", RULES)
    assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_unit_tests_pass() -> None:
    res = promtool("test", "rules", UNIT_TESTS)
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_alert_has_a_test_where_it_fires() -> None:
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    fired = {c["alertname"] for t in doc["tests"] for c in t["alert_rule_test"] if c["exp_alerts"]}
    names = {r["alert"] for r in rules()}
    assert names - fired == set(), f"alerts without a firing unit test: {names - fired}"
    assert set(REQUIRED.values()) <= names


def test_every_alert_has_a_test_where_it_stays_silent() -> None:
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    silent = {c["alertname"] for t in doc["tests"] for c in t["alert_rule_test"]
              if not c["exp_alerts"]}
    names = {r["alert"] for r in rules()}
    assert names - silent == set(), f"alerts without a silent unit test: {names - silent}"


def test_heartbeat_alert_fires_before_job_submit_lua_stops_leasing() -> None:
    """job_submit.lua leases new jobs only while the heartbeat is younger than
    RAILGANG_HEARTBEAT_MAX_AGE (its default read from the script): the alert on the heartbeat
    file's age must fire below that, with no `for:` that would delay it past it."""
    import re

    default = re.search(r'RAILGANG_HEARTBEAT_MAX_AGE"\) or "(\d+)"', LUA.read_text())
    assert default is not None
    max_age = int(default.group(1))
    rule = next(r for r in rules() if r["alert"] == "RailgangHeartbeatFileOld")
    threshold = re.search(r"railgang_heartbeat_timestamp_seconds\{[^}]*\} > (\d+)\)", rule["expr"])
    assert threshold is not None and int(threshold.group(1)) < max_age and "for" not in rule
    assert f"{max_age} s" in rule["annotations"]["summary"]
    assert "RAILGANG_HEARTBEAT_MAX_AGE" in rule["annotations"]["description"]
    # the alerts on the heartbeat file watch it, the one on cycles watches cycles
    for name in ("RailgangHeartbeatFileOld", "RailgangLeasesLapsing"):
        assert "railgang_heartbeat_timestamp_seconds" in next(
            r for r in rules() if r["alert"] == name)["expr"]
    cycles = next(r for r in rules() if r["alert"] == "RailgangNoSuccessfulCycle")["expr"]
    assert "railgang_last_cycle_timestamp_seconds" in cycles and "heartbeat" not in cycles


@pytest.mark.parametrize("rule", rules(), ids=lambda r: r["alert"])
def test_alert_reads_exported_metrics(rule: dict[str, Any]) -> None:
    used = metrics_in(rule["expr"])
    assert used <= exported_metrics(), f"{rule['alert']}: unknown metrics {used - exported_metrics()}"
    assert rule["labels"]["severity"] in ("critical", "warning")
    assert {"summary", "description"} <= set(rule["annotations"])


def test_compose_mounts_the_rules(services: dict[str, dict[str, Any]]) -> None:
    vols = {}
    for v in services["prometheus"]["volumes"]:  # "src:target:ro" (Debian's docker-compose v1)
        source, target = (v["source"], v["target"]) if isinstance(v, dict) else v.split(":")[:2]
        vols[target] = source
    assert Path(vols["/etc/prometheus/alerts.yml"]) == RULES
    assert Path(vols["/etc/prometheus/prometheus.yml"]) == PROM / "prometheus.yml"


@pytest.mark.parametrize("component", ["daemon", "api"])
def test_metrics_pages_pass_promtool(component: str) -> None:
    res = promtool("check", "metrics", stdin=expositions()[component])
    assert res.returncode == 0, res.stdout + res.stderr
