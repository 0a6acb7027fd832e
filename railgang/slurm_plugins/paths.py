"""``railgang paths``: where the installed plugin files are, to copy into a Slurm installation.

``job_submit.lua`` goes next to slurm.conf (``JobSubmitPlugins=lua``); the SPANK source is built
with ``gcc -shared -fPIC -o railgang_spank.so railgang_spank.c`` and named in plugstack.conf
(docs/deploy.md, "On an existing Slurm cluster"). The files are package data of
``railgang.slurm_plugins``, so the paths are those of this installation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from railgang.daemon.cli_common import JsonOpt, emit, exit_with
from railgang.errors import ExitCode

PLUGINS = Path(__file__).resolve().parent
FILES = {
    "job_submit_lua": PLUGINS / "job_submit.lua",
    "spank_source": PLUGINS / "spank" / "railgang_spank.c",
}


def installed_paths() -> dict[str, Any]:
    """Each plugin file with its path and whether it is there; the config file in effect."""
    out: dict[str, Any] = {name: {"path": str(p), "exists": p.exists()} for name, p in FILES.items()}
    out["config"] = os.environ.get("RAILGANG_CONFIG")
    return out


def paths(as_json: JsonOpt = False) -> None:
    """Print where the installed job_submit.lua and SPANK plugin source are. Exit 1: one is missing."""
    data = installed_paths()
    lines = [f"{name:<22} {d['path']}{'' if d['exists'] else '  (missing)'}"
             for name, d in data.items() if isinstance(d, dict)]
    lines.append(f"{'config':<22} {data['config'] or '(none: $RAILGANG_CONFIG unset)'}")
    emit(data, as_json, lines)
    if not all(d["exists"] for d in data.values() if isinstance(d, dict)):
        exit_with(ExitCode.ERROR)


__all__ = ["FILES", "installed_paths", "paths"]
