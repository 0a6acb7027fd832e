"""Ask the real Slurm 24.11 ``slurmctld`` (Debian trixie, in a container) about topology/block
files, many at a time.

The host writes the texts as JSON into a work folder, starts one container of the
``railgang/slurm:trixie`` image (scripts/slurm_image.sh) with ``--network host`` and this tree
mounted read-only, and runs this module inside it (``python3 /src/tests/.../block_oracle.py IN
OUT PORT``): the same ``SlurmctldOracle`` as for 22.05, with ``TopologyPlugin=topology/block``,
``select/cons_tres`` and nodes ``n[001-128]``, one ``slurmctld -D -i -c`` per file (20-200 ms).
The container needs no capabilities: no slurmd, auth/none. Only the standard library runs in the
container; the comparison with ``railgang topology check`` happens on the host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IMAGE = "railgang/slurm:trixie"
SLURMCTLD_2411 = Path("/usr/sbin/slurmctld-wlm")
NODES_2411 = "n[001-128]"  # what the oracle's slurm.conf defines

__all__ = ["NODES_2411", "ask_many", "block_oracle_unavailable"]


def block_oracle_unavailable() -> str | None:
    """Why the 24.11 oracle cannot run here (None when it can)."""
    import os
    import shutil

    if os.geteuid() != 0:
        return "needs root (docker)"
    if shutil.which("docker") is None:
        return "no docker client (apt-get install docker.io)"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False).returncode:
        return "no Docker engine running (dockerd --iptables=false --bridge=none, docs/devcluster.md)"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=60,
                      check=False).returncode:
        return f"no image {IMAGE}: bash scripts/slurm_image.sh trixie"
    return None


def ask_many(texts: list[str], port: int, name: str, timeout_s: float = 600) -> list[dict[str, object]]:
    """slurmctld 24.11's verdict on each text: ``{"accepted", "complaints": [{level, text}], "seconds"}``."""
    with tempfile.TemporaryDirectory(prefix="rg-block-oracle-") as tmp:
        work = Path(tmp)
        (work / "in.json").write_text(json.dumps(texts))
        work.chmod(0o777)
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120, check=False)
        argv = ["docker", "run", "--rm", "--name", name, "--network", "host",
                "-v", f"{REPO}:/src:ro", "-v", f"{work}:/work", IMAGE,
                "python3", "/src/tests/topology/conformance/block_oracle.py", "/work/in.json",
                "/work/out.json", str(port)]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"block oracle failed (rc {res.returncode}): {res.stderr.strip()[-2000:]}")
        out: list[dict[str, object]] = json.loads((work / "out.json").read_text())
        return out


def _inside(src: Path, dst: Path, port: int) -> None:
    sys.path.insert(0, "/src")
    from tests.topology.conformance.slurmctld_oracle import SlurmctldOracle

    oracle = SlurmctldOracle(Path("/var/tmp/block-oracle"), port, plugin="block", nodes=NODES_2411,
                             binary=SLURMCTLD_2411)
    out = []
    for text in json.loads(src.read_text()):
        v = oracle.ask(text)
        out.append({"accepted": v.accepted, "seconds": v.seconds,
                    "complaints": [{k: asdict(c)[k] for k in ("level", "text")} for c in v.complaints]})
    dst.write_text(json.dumps(out))


if __name__ == "__main__":
    _inside(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
