"""The real job_submit.lua under lua5.1 with Slurm's table stubbed by plain values: a harness's
loop body (a Lua chunk that reads ``line`` and prints one answer) wrapped in the stub, the
script loaded and one stdin line per case. Shared by the lua tests that hold the script to the
daemon's Python rules."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

LUA = "/usr/bin/lua5.1"
SCRIPT = Path(__file__).parents[2] / "slurm_plugins" / "job_submit.lua"

_HEAD = """
slurm = {SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, INFINITE = 4294967295,
         log_user = function(fmt, msg) last = msg end, log_info = function() end}
dofile(arg[1])
for line in io.lines() do
    last = nil
"""


def run_harness(tmp_path: Path, body: str, lines: list[str], env: Mapping[str, str] | None = None,
                args: tuple[str, ...] = ()) -> list[str]:
    """Each of ``lines`` through ``body`` (Lua, inside the loop: ``line``, ``last`` and the
    script's ``slurm_job_submit`` in scope; ``arg[2]``... are ``args``); stdout's lines."""
    if not Path(LUA).exists():
        pytest.fail("lua5.1 is not installed (apt-get install lua5.1)")
    harness = tmp_path / "harness.lua"
    harness.write_text(_HEAD + body + "\nend\n")
    out = subprocess.run([LUA, str(harness), str(SCRIPT), *args], input="".join(x + "\n" for x in lines),
                         capture_output=True, text=True, timeout=120, check=True,
                         env={"PATH": "/usr/bin:/bin", **(env or {})})
    return out.stdout.splitlines()


__all__ = ["LUA", "SCRIPT", "run_harness"]
