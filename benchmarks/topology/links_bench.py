"""Cost of one live link-health collection round on a large fabric (issue 11 part 5).

A fake fabric of ``--nodes`` nodes x 8 HCAs is served as node_exporter pages over real HTTP by a
separate process (each page padded with ``--padding`` non-InfiniBand lines, as a real
node_exporter page carries ~2,000 other series), and/or written as per-host sysfs trees on
tmpfs. The daemon's ``LinkCollector`` scrapes every host (``--workers`` in flight), parses with
prometheus_client's parser, and runs the hysteresis tracker. Reports wall time and this
process's CPU time per round (the scrape server's CPU is not counted), per source.

    .venv/bin/python -m benchmarks.topology.links_bench --nodes 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from railgang.daemon.config import LinkSettings
from railgang.daemon.service.links import LinkCollector
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.fakefabric import FakeIBFabric


def _serve(nodes: int, padding: int, port_q: Any, step_q: Any) -> None:
    """The exporter process: pages are rendered once per fabric step, then served from memory."""
    fabric = fabric_from_shape(nodes, 8, 16)
    fake = FakeIBFabric(None, fabric)
    pad = "".join(f'node_cpu_seconds_total{{cpu="{i % 128}",mode="m{i}"}} {i}.5\n' for i in range(padding))
    pages: dict[str, bytes] = {}

    def render() -> None:
        for n in fabric.nodes:
            pages[n] = (pad + fake.exporter_text(n)).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path.strip("/").split("/")[0])
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    render()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_q.put(server.server_port)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:
        cmd = step_q.get()
        if cmd is None:
            break
        fake.inject("n0007" if nodes >= 7 else "n1", 2, symbol_error=5)
        fake.step(30.0)
        render()
        port_q.put("stepped")
    server.shutdown()


def _round(collector: LinkCollector) -> tuple[float, float, int, int]:
    c0, t0 = time.process_time(), time.perf_counter()
    result = collector.collect()
    assert result is not None
    return time.perf_counter() - t0, time.process_time() - c0, result.samples, len(result.errors)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--padding", type=int, default=2000)
    ap.add_argument("--skip-sysfs", action="store_true")
    args = ap.parse_args()
    fabric = fabric_from_shape(args.nodes, 8, 16)
    tmp = Path(tempfile.mkdtemp(prefix="rg-links-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    port_q: Any = mp.Queue()
    step_q: Any = mp.Queue()
    proc = mp.Process(target=_serve, args=(args.nodes, args.padding, port_q, step_q), daemon=True)
    proc.start()
    port = port_q.get(timeout=120)
    url = f"http://127.0.0.1:{port}/{{host}}/metrics"
    http = LinkCollector(LinkSettings(enabled=True, exporter_url=url, workers=args.workers,
                                      state_file=tmp / "links-http.json"), fabric)
    print(f"{args.nodes} nodes x 8 ports, node_exporter pages with {args.padding} other lines, "
          f"{args.workers} scrapes in flight", file=sys.stderr)
    rows = []
    for i in range(args.rounds):
        if i:
            step_q.put("step")
            port_q.get(timeout=120)
        wall, cpu, samples, errors = _round(http)
        rows.append(("http", wall, cpu, samples, errors))
    step_q.put(None)
    http.close()
    if not args.skip_sysfs:
        fake = FakeIBFabric(tmp / "sysfs", fabric)
        sysfs = LinkCollector(LinkSettings(enabled=True, sysfs_root=tmp / "sysfs", workers=args.workers,
                                           state_file=tmp / "links-sysfs.json"), fabric)
        for i in range(args.rounds):
            if i:
                fake.step(30.0)
            wall, cpu, samples, errors = _round(sysfs)
            rows.append(("sysfs", wall, cpu, samples, errors))
        sysfs.close()
    print("| source | round | wall s | CPU s (collector) | ports read | errors |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, (src, wall, cpu, samples, errors) in enumerate(rows):
        print(f"| {src} | {i % args.rounds + 1} | {wall:.2f} | {cpu:.2f} | {samples:,} | {errors} |")
    print(f"load average: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
