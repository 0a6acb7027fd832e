"""The job-side training library: what a job script imports to cooperate with railgang
(``contract.py`` says what and how; docs/training.md shows a training loop). Standard library
only, so any training framework can import it."""

from railgang.training.contract import (
    PROGRESS_PREFIX,
    Progress,
    Shape,
    TrainingContext,
    World,
    format_progress,
    parse_progress,
    read_progress,
    shape_from_env,
    world_from_squeue,
)
from railgang.training.elastic import (
    Rendezvous,
    Scaled,
    SizeNotice,
    rendezvous,
    scale_batch,
    shrink_notice,
)

__all__ = ["PROGRESS_PREFIX", "Progress", "Rendezvous", "Scaled", "Shape", "SizeNotice",
           "TrainingContext", "World", "format_progress", "parse_progress", "read_progress",
           "rendezvous", "scale_batch", "shape_from_env", "shrink_notice", "world_from_squeue"]
