"""The daemon's live link collector: a real HTTP scrape of node_exporter-format text served from
the fake fabric, hysteresis, quarantine into the cycle (tag) and out again on repair (untag),
the state file ``railgang topology links`` shows, and /metrics."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.clock import SimClock
from railgang.daemon.config import LinkSettings, load_settings
from railgang.daemon.core.model.actions import TagNode
from railgang.daemon.service.links import LinkCollector
from railgang.daemon.service.metrics import DaemonMetrics, observe_links
from railgang.errors import ConfigError
from railgang.topology.fakefabric import FakeIBFabric
from tests.daemon.service.conftest import JOBS, Recording, cluster, service

TAG = "lame-link"


class Exporter:
    """node_exporter stand-in: ``GET /<host>/metrics`` -> the fake fabric's text for that host;
    hosts in ``down`` answer 503, unknown paths 404."""

    def __init__(self, fake: FakeIBFabric) -> None:
        self.fake, self.down, self.hits = fake, set[str](), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                parts = self.path.strip("/").split("/")
                host = parts[0] if len(parts) == 2 and parts[1] == "metrics" else ""
                if host in outer.down:
                    self.send_error(503)
                    return
                if host not in outer.fake.fabric:
                    self.send_error(404)
                    return
                body = outer.fake.exporter_text(host).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{{host}}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[FakeIBFabric, Exporter, LinkCollector]]:
    sim = cluster()
    fake = FakeIBFabric(None, sim.sim.fabric)
    exporter = Exporter(fake)
    settings = LinkSettings(enabled=True, exporter_url=exporter.url, quarantine_after=2, window=3,
                            release_after=2, state_file=tmp_path / "links.json", workers=4)
    collector = LinkCollector(settings, sim.sim.fabric, clock=lambda: fake.time)
    yield fake, exporter, collector
    collector.close()
    exporter.close()


def _round(fake: FakeIBFabric, collector: LinkCollector) -> None:
    fake.step(30.0)
    assert collector.collect() is not None


def test_scrape_over_http_quarantines_with_hysteresis_and_releases(rig: tuple[FakeIBFabric, Exporter, LinkCollector]) -> None:
    fake, exporter, collector = rig
    assert collector.collect() is not None  # first samples: no verdicts yet
    assert exporter.hits == 8
    fake.burst("n03", 2, symbol_error=900)  # one noisy interval
    _round(fake, collector)
    _round(fake, collector)
    health = collector.health()
    assert health is not None and not health.quarantined
    fake.inject("n03", 2, symbol_error=4)  # a lame cable
    _round(fake, collector)
    _round(fake, collector)
    health = collector.health()
    assert health is not None and set(health.quarantined) == {"n03"}
    assert "symbol_error" in health.quarantined["n03"]
    state = json.loads(collector.settings.state_file.read_text())
    assert state["quarantine"][0]["node"] == "n03" and state["quarantined_ports"] == 1
    assert state["counts"]["lame"] == 1 and state["hosts"] == 8
    fake.repair("n03", 2)
    _round(fake, collector)
    assert set(collector.health().quarantined) == {"n03"}  # type: ignore[union-attr]
    _round(fake, collector)
    assert not collector.health().quarantined  # type: ignore[union-attr]
    assert [(c.key.host, c.quarantined) for r in [collector.last] if r for c in r.changes] == [("n03", False)]


def test_unreachable_host_is_an_error_not_an_exception(rig: tuple[FakeIBFabric, Exporter, LinkCollector]) -> None:
    _fake, exporter, collector = rig
    exporter.down.add("n05")
    result = collector.collect()
    assert result is not None and result.hosts == 8
    assert len(result.errors) == 1 and "n05" in result.errors[0] and "503" in result.errors[0]
    assert {p.key.host for p in result.ports} == {f"n0{i}" for i in range(1, 9)} - {"n05"}
    metrics = DaemonMetrics()
    observe_links(metrics, result)
    assert metrics.registry.get_sample_value("railgang_link_scrape_errors_total") == 1.0
    assert metrics.registry.get_sample_value("railgang_link_ports", {"status": "unknown"}) == 56.0


def test_metrics_show_quarantine_and_degraded_ports(rig: tuple[FakeIBFabric, Exporter, LinkCollector]) -> None:
    fake, _exporter, collector = rig
    fake.degrade("n06", 1, rate_text="200 Gb/sec (4X HDR)")
    collector.collect()
    for _ in range(2):
        _round(fake, collector)
    metrics = DaemonMetrics()
    assert collector.last is not None
    observe_links(metrics, collector.last)
    get = metrics.registry.get_sample_value
    assert get("railgang_link_quarantined_nodes") == 1.0
    assert get("railgang_link_port_factor", {"host": "n06", "device": "mlx5_1", "port": "1"}) == 0.5
    assert get("railgang_link_ports", {"status": "lame"}) == 1.0
    assert get("railgang_link_ports", {"status": "healthy"}) == 63.0


def test_daemon_cycle_tags_the_quarantined_node_and_untags_it_after_repair(
        engine: Engine, rig: tuple[FakeIBFabric, Exporter, LinkCollector]) -> None:
    fake, _exporter, collector = rig
    backend = Recording(cluster(JOBS[:1]))
    svc = service(engine, backend, SimClock(0.0), links=collector)
    svc.run_once()  # no round yet: health None, nothing to tag
    assert not any(isinstance(a, TagNode) for a in backend.accepted)
    collector.collect()
    fake.inject("n04", 0, link_downed=1)
    for _ in range(2):
        _round(fake, collector)
    svc.run_once()
    assert TagNode("n04", TAG) in backend.accepted
    fake.repair("n04", 0)
    for _ in range(2):
        _round(fake, collector)
    svc.run_once()
    assert TagNode("n04", TAG, remove=True) in backend.accepted
    assert TAG not in backend.inner.sim.nodes["n04"].tags


def test_topology_links_shows_the_live_state(rig: tuple[FakeIBFabric, Exporter, LinkCollector]) -> None:
    fake, _exporter, collector = rig
    fake.flap("n02", 3)
    collector.collect()
    for _ in range(3):
        _round(fake, collector)
    state = str(collector.settings.state_file)
    out = CliRunner().invoke(app, ["topology", "links", "--state", state])
    assert out.exit_code == 0, out.output
    assert "n02 mlx5_3 port 1" in out.output and "QUARANTINED" in out.output
    assert "quarantine (1 node(s)):" in out.output
    js = CliRunner().invoke(app, ["topology", "links", "--state", state, "--json"])
    data = json.loads(js.stdout)
    assert [p["host"] for p in data["ports"]] == ["n02"] and data["quarantine"][0]["node"] == "n02"
    missing = CliRunner().invoke(app, ["topology", "links", "--state", state + ".nope"])
    assert missing.exit_code == 1 and "no link state yet" in str(missing.exception)


@pytest.mark.parametrize(("links", "message"), [
    ({"enabled": True}, "without a source"),
    ({"exporter_url": "ftp://{host}/x"}, "http(s) URL containing {host}"),
    ({"exporter_url": "http://node:9100/metrics"}, "containing {host}"),
    ({"quarantine_after": 6, "window": 5}, "must not exceed window"),
], ids=["no-source", "scheme", "no-host", "window"])
def test_link_settings_are_validated(links: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings(daemon={"links": links})
