"""deploy/grafana: every panel says its unit, thresholds and legend, reads Prometheus through the
``$datasource`` variable (no hard-coded uid) and only metrics railgang exports; link health and
per-team panels are there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy.conftest import DEPLOY, exported_metrics, metrics_in

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "railgang.json"
DS = {"type": "prometheus", "uid": "${datasource}"}


def dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text())
    assert isinstance(data, dict)
    return data


PANELS = [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_datasource_is_a_template_variable() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["account"]["datasource"] == DS  # per-team panels pick accounts
    uids = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                uids.add(node["datasource"].get("uid"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard())
    assert uids == {"${datasource}"}, f"hard-coded datasource uids: {uids - {'${datasource}'}}"


@pytest.mark.parametrize("panel", PANELS, ids=lambda p: p["title"])
def test_panel_has_unit_thresholds_legend_and_the_variable(panel: dict[str, Any]) -> None:
    defaults = panel["fieldConfig"]["defaults"]
    assert defaults.get("unit"), "no unit"
    steps = defaults["thresholds"]["steps"]
    assert steps and steps[0]["value"] is None, "thresholds need a base step"
    assert panel["datasource"] == DS
    assert panel["description"]
    assert panel["options"]["legend"]["showLegend"] is True
    for target in panel["targets"]:
        assert target["datasource"] == DS
        assert target["legendFormat"], f"{target['expr']}: no legend"


@pytest.mark.parametrize("panel", PANELS, ids=lambda p: p["title"])
def test_panel_queries_name_real_metrics(panel: dict[str, Any]) -> None:
    used = {m for t in panel["targets"] for m in metrics_in(t["expr"])}
    assert used and used <= exported_metrics(), f"unknown metrics: {used - exported_metrics()}"


def test_link_health_and_team_panels() -> None:
    exprs = " ".join(t["expr"] for p in PANELS for t in p["targets"])
    for metric in ("railgang_link_ports", "railgang_link_quarantined_ports",
                   "railgang_link_port_factor", "railgang_link_changes_total",
                   "railgang_account_gpus", "railgang_account_quota_gpus",
                   "railgang_account_oldest_wait_seconds", "railgang_cycle_seconds_bucket"):
        assert metric in exprs, metric
    team = [p for p in PANELS if "railgang_account_" in json.dumps(p["targets"])]
    assert team and all('account=~\\"$account\\"' in json.dumps(p["targets"]) for p in team)


def test_panels_do_not_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for p in dashboard()["panels"]:
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        assert g["x"] + g["w"] <= 24
        cells |= mine
