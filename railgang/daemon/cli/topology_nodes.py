"""Where ``railgang topology check`` reads the cluster's node list from (issue 35 item 5).

``--slurm-conf`` (repeatable: a slurm.conf and the files it includes), ``--nodes`` (a host list,
or ``@FILE`` holding ``scontrol show nodes -o`` / ``--json`` output) or ``--from-slurm`` (runs
``scontrol show nodes -o`` against the configured cluster, ``slurm.conf`` of the settings). Each
malformed, missing, non-UTF-8 or oversized input is one ``InputError`` line.
"""

from __future__ import annotations

from pathlib import Path

import typer

from railgang.errors import InputError, SlurmError
from railgang.topology.cluster_nodes import (
    nodes_from_hostlist,
    nodes_from_scontrol,
    nodes_from_slurm_conf,
)
from railgang.topology.files import InputProblem, read_text

__all__ = ["known_nodes"]


def _error(exc: InputProblem) -> InputError:
    return InputError(exc.message, path=exc.path, line=exc.line, field=exc.field)


def known_nodes(ctx: typer.Context, slurm_confs: list[Path] | None, nodes: str | None,
                from_slurm: bool) -> tuple[frozenset[str] | None, tuple[str, ...]]:
    """(the cluster's nodes, or None when no source was given; warnings)."""
    if sum((bool(slurm_confs), nodes is not None, from_slurm)) > 1:
        raise InputError("give one of --slurm-conf, --nodes and --from-slurm", field="--nodes")
    names: set[str] = set()
    warnings: list[str] = []
    try:
        if slurm_confs:
            for path in slurm_confs:
                found, said = nodes_from_slurm_conf(read_text(path, "slurm.conf"), str(path))
                names.update(found)
                warnings.extend(said)
            if not names:
                raise InputError("no NodeName= line defines a node", path=str(slurm_confs[0]))
        elif nodes is not None and nodes.startswith("@"):
            names.update(nodes_from_scontrol(read_text(nodes[1:], "node list"), nodes[1:]))
        elif nodes is not None:
            names.update(nodes_from_hostlist(nodes))
        elif from_slurm:
            names.update(nodes_from_scontrol(_scontrol(ctx), "scontrol show nodes -o"))
        else:
            return None, ()
    except InputProblem as exc:
        raise _error(exc) from exc
    return frozenset(names), tuple(warnings)


def _scontrol(ctx: typer.Context) -> str:
    from railgang.daemon.cli.common import settings_from
    from railgang.daemon.slurm.cli.runner import SlurmRunner

    runner = SlurmRunner.from_settings(settings_from(ctx).slurm)
    try:
        return runner.run(["scontrol", "show", "nodes", "-o"]).stdout
    except SlurmError as exc:
        raise InputError(f"cannot read the node list from Slurm: {str(exc)[:200]}; give --slurm-conf "
                         "or --nodes", field="--from-slurm") from exc
