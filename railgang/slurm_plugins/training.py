"""Moved to ``railgang.training`` (issue 22: slurm_plugins/ holds the Slurm plugins; the job-side
library has a room of its own). Job scripts written against this path keep working for one
release; import ``railgang.training``."""

from railgang.training.contract import *  # noqa: F403
from railgang.training.contract import __all__  # noqa: F401
