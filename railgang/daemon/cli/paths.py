"""``railgang paths``: print where the installed plugin files are (``slurm_plugins/paths.py``)."""

from __future__ import annotations

from railgang.daemon.cli.common import JsonOpt, emit, exit_with
from railgang.errors import ExitCode
from railgang.slurm_plugins.paths import installed_paths


def paths(as_json: JsonOpt = False) -> None:
    """Print where the installed job_submit.lua and SPANK plugin source are. Exit 1: one is missing."""
    data = installed_paths()
    lines = [f"{name:<22} {d['path']}{'' if d['exists'] else '  (missing)'}"
             for name, d in data.items() if isinstance(d, dict)]
    lines.append(f"{'config':<22} {data['config'] or '(none: $RAILGANG_CONFIG unset)'}")
    emit(data, as_json, lines)
    if not all(d["exists"] for d in data.values() if isinstance(d, dict)):
        exit_with(ExitCode.ERROR)


__all__ = ["paths"]
