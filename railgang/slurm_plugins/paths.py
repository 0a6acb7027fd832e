"""Where the installed plugin files are, to copy into a Slurm installation (``railgang paths``).

``job_submit.lua`` goes next to slurm.conf (``JobSubmitPlugins=lua``); the SPANK source is built
with ``gcc -shared -fPIC -o railgang_spank.so railgang_spank.c`` and named in plugstack.conf
(docs/deploy.md, "On an existing Slurm cluster"). The files are package data of
``railgang.slurm_plugins``, so the paths are those of this installation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PLUGINS = Path(__file__).resolve().parent
FILES = {
    "job_submit_lua": PLUGINS / "job_submit.lua",
    "spank_source": PLUGINS / "spank" / "railgang_spank.c",
    "burn_in_script": PLUGINS / "burnin.sh",  # the daemon's default burn-in (docs/failures.md)
}


def installed_paths() -> dict[str, Any]:
    """Each plugin file with its path and whether it is there; the config file in effect."""
    out: dict[str, Any] = {name: {"path": str(p), "exists": p.exists()} for name, p in FILES.items()}
    out["config"] = os.environ.get("RAILGANG_CONFIG")
    return out


__all__ = ["FILES", "PLUGINS", "installed_paths"]
