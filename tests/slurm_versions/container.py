"""A newer Debian's Slurm in a container on this machine's loopback (docs/devcluster.md,
"Newer Slurm versions"): the image from scripts/slurm_image.sh, railgang's wheel of this tree
installed in it, host networking, the capabilities a whole Slurm cluster needs."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPS = ["--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
        "--security-opt", "apparmor=unconfined", "--device-cgroup-rule", "c 195:* rmw"]


class ContainerUnavailable(RuntimeError):
    """No Docker engine, no image and no way to build one: the reason, in one line."""


def _run(argv: list[str], timeout: float, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        raise ContainerUnavailable(f"{' '.join(argv[:3])} failed: {' | '.join(tail)}")
    return res


def docker_ready() -> None:
    if shutil.which("docker") is None:
        raise ContainerUnavailable("no docker client (apt-get install docker.io)")
    res = _run(["docker", "info", "--format", "{{.ServerVersion}}"], 60, check=False)
    if res.returncode != 0:
        raise ContainerUnavailable("no Docker engine running (start it with `dockerd "
                                   "--iptables=false --bridge=none`, docs/devcluster.md)")


def ensure_image(suite: str, build: bool) -> str:
    """railgang/slurm:SUITE; if missing, built by scripts/slurm_image.sh (minutes, once) when
    ``build``, else :class:`ContainerUnavailable` (a plain test run does not build images)."""
    image = f"railgang/slurm:{suite}"
    if _run(["docker", "image", "inspect", image], 60, check=False).returncode != 0:
        if not build:
            raise ContainerUnavailable(f"no image {image}: bash scripts/slurm_image.sh {suite}")
        _run(["bash", str(REPO / "scripts" / "slurm_image.sh"), suite], 1800)
    return image


@dataclass
class SlurmContainer:
    name: str
    suite: str
    build: bool = False  # build the image if missing (when the tests are required)

    def start(self) -> None:
        docker_ready()
        image = ensure_image(self.suite, self.build)
        wheels = Path(tempfile.mkdtemp(prefix="railgang-wheel-"))
        try:  # the tree under test, as a wheel: the image has only the dependencies
            _run([str(REPO / ".venv" / "bin" / "pip"), "wheel", "-q", "--no-deps", "-w",
                  str(wheels), str(REPO)], 600)
            self.stop()
            _run(["docker", "run", "-d", "--name", self.name, "--network", "host", *CAPS,
                  "-v", f"{REPO}:/src:ro", "-v", f"{wheels}:/wheels:ro",
                  image, "sleep", "infinity"], 120)
            wheel = next(wheels.glob("railgang-*.whl")).name
            self.exec(["pip", "install", "-q", "--no-deps", "--force-reinstall",
                       f"/wheels/{wheel}"], timeout=300)
        finally:
            shutil.rmtree(wheels, ignore_errors=True)

    def exec(self, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return _run(["docker", "exec", self.name, *argv], timeout)

    def stop(self) -> None:
        _run(["docker", "rm", "-f", self.name], 120, check=False)


__all__ = ["ContainerUnavailable", "SlurmContainer", "docker_ready", "ensure_image"]
