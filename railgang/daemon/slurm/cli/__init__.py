"""The Slurm CLI backend (Slurm 22.05+): ``squeue``/``sinfo --json`` in, ``scontrol``/``scancel`` out.

Layers, each usable and tested on its own: ``runner`` (processes, timeouts, retries, typed
errors), ``parse``/``records`` (raw output -> typed records), ``snapshot`` (records -> the core's
Snapshot), ``commands`` (argument lists), ``apply`` (actions -> commands -> ActionResults),
``backend`` (:class:`CliBackend`), ``lease`` (the heartbeat file job_submit.lua reads).
"""

from railgang.daemon.slurm.cli.backend import CliBackend
from railgang.daemon.slurm.cli.lease import read_heartbeat, write_heartbeat
from railgang.daemon.slurm.cli.runner import CommandResult, SlurmRunner

__all__ = ["CliBackend", "CommandResult", "SlurmRunner", "read_heartbeat", "write_heartbeat"]
