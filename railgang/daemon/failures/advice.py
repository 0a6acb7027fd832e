"""The checkpoint interval the daemon hands a job when it starts it (issue 33 item 3).

The Young–Daly interval ``railgang explain`` shows for a running job (``service/explain.py:
checkpoint_advice``) is written into the job's railgang tag as ``ckpt=SECONDS`` in the same
``scontrol update`` that starts it (``slurm/cli/apply.py``). The tag lives in the AdminComment:
only Slurm's operators (the daemon) write it, every user who can see the job reads it, and the
user's own Comment (the progress reports) stays the user's. The training helper reads it back
(``TrainingContext.advised_checkpoint_interval_s``, docs/training.md).

The interval is for the nodes the job starts on: MTBF from the default (Llama 3) failure rates,
a node's rate counting all its GPUs, a leaf's all its nodes; never below twice the job's
checkpoint cost (the simulator's rule for ``--checkpoint-s advised``), whole seconds; none when
nothing fails (an infinite interval) or the cost is unusable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from railgang.daemon.failures.rates import LLAMA3
from railgang.daemon.failures.young_daly import young_daly_s

MAX_S = 2**31 - 1  # what the tag's parser accepts


def mtbf_s(assignment: Mapping[str, Sequence[int]], fabric: Any) -> float:
    """MTBF of a job on ``assignment`` (node -> GPU indices) at the default failure rates."""
    facts = getattr(fabric, "facts", None)
    per_node = max(facts(n).gpus if callable(facts) and n in fabric else len(g)
                   for n, g in assignment.items())
    leaf_of = getattr(fabric, "leaf_of", None)
    leaves = {leaf_of(n) for n in assignment} if callable(leaf_of) else set()
    return LLAMA3.mtbf_s(len(assignment), per_node, max(1, len(leaves)))


def advised_interval_s(checkpoint_cost_s: float, assignment: Mapping[str, Sequence[int]],
                       fabric: Any) -> int | None:
    """Whole seconds between checkpoints advised for a job starting on ``assignment`` (None:
    no assignment, nothing fails, or a cost advice cannot use)."""
    if not assignment:
        return None
    try:
        interval = young_daly_s(checkpoint_cost_s, mtbf_s(assignment, fabric))
    except ValueError:
        return None
    if not math.isfinite(interval):
        return None
    return min(MAX_S, max(1, round(max(interval, 2.0 * checkpoint_cost_s))))


__all__ = ["MAX_S", "advised_interval_s", "mtbf_s"]
