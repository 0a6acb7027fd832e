"""The compose stack driven for real: docker-compose.yml + deploy/docker-compose.host.yml on a
Docker engine, through Compose v2 (scripts/compose_v2.sh), for tests/deploy/test_compose_stack.py.

Every call is bounded in time; :meth:`ComposeStack.logs` is what a failing test prints.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.deploy.conftest import DEPLOY, ROOT

T = TypeVar("T")
OVERRIDE = DEPLOY / "docker-compose.host.yml"


class StackError(AssertionError):
    """A step of the stack failed; the message says which and with what output."""


@dataclass
class ComposeStack:
    """One project of the stack: ``compose`` is the Compose v2 binary, ``env`` its variables
    (secrets, ports, image names, RAILGANG_BASE_IMAGE)."""

    compose: str
    project: str
    env: dict[str, str]
    env_file: Path
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in self.env.items()))
        self.env_file.chmod(0o600)

    def run(self, *args: str, timeout: float = 300, check: bool = True,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [self.compose, "--env-file", str(self.env_file), "-p", self.project,
               "-f", str(ROOT / "docker-compose.yml"), "-f", str(OVERRIDE), *args]
        try:
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                                 input=stdin, check=False)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"timed out after {timeout:.0f} s: compose {' '.join(args)}") from exc
        if check and res.returncode != 0:
            raise StackError(f"compose {' '.join(args)}: exit {res.returncode}\n"
                             f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
        return res

    def timed(self, name: str, step: Callable[[], T]) -> T:
        t0 = time.monotonic()
        out = step()
        self.timings[name] = round(time.monotonic() - t0, 1)
        return out

    def exec(self, service: str, *cmd: str, user: str | None = None,
             timeout: float = 120) -> str:
        args = ["exec", "-T", *(["--user", user] if user else []), service, *cmd]
        return self.run(*args, timeout=timeout).stdout

    def logs(self, tail: int = 60) -> str:
        """Every service's last lines and `compose ps` (best effort: never raises)."""
        try:
            ps = self.run("ps", "-a", check=False, timeout=60).stdout
            logs = self.run("logs", "--no-color", "--tail", str(tail), check=False,
                            timeout=120).stdout
        except StackError as exc:
            return f"(no logs: {exc})"
        return f"== compose ps\n{ps}\n== compose logs --tail {tail}\n{logs}"

    def down(self) -> None:
        self.run("down", "-v", "--remove-orphans", "--timeout", "10", check=False, timeout=180)


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 2) -> T:
    """``probe()``'s first non-None answer, polled until ``timeout``; StackError after."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            got = probe()
        except StackError as exc:  # a command that fails now may succeed on the next poll
            got, last = None, exc
        if got is not None:
            return got
        time.sleep(every)
    raise StackError(f"{what}: not within {timeout:.0f} s" + (f" (last error: {last})" if last else ""))


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among ``compose logs`` lines ("service  | {...}")."""
    out = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            rec = json.loads(line[start:])
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out
