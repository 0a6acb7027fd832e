"""One set of settings (issue 34 item 4): the cycle the daemon runs, the one its start-time
estimator simulates and the one ``railgang sim --config FILE`` replays are all built here, by
``cycle_from(settings)``, from the settings file.

Every ``CycleConfig`` field, nested rules included, is reachable from the file: the common ones
through a key of their own (``NAMED``: ``daemon.leaf_wait_s``, ``failures.spares_per_leaf`` ...),
every other one through the ``[daemon.cycle]`` table, by its field name (``lame_link_tag``,
``[daemon.cycle.migration] min_loss`` ...). A field has one name only: ``[daemon.cycle]`` refuses
one that has a key of its own, so two spellings can never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.policies import registry
from railgang.daemon.core.policies.tiresias import Tiresias
from railgang.daemon.pipeline import Cycle, MemoryStore, Pipeline, Step
from railgang.errors import ConfigError

if TYPE_CHECKING:
    from railgang.daemon.config import Settings

# CycleConfig fields (dotted, nested rules included) that have a key of their own in the file
NAMED: Mapping[str, str] = {
    "preempt": "daemon.preempt", "resize": "daemon.resize",
    "emit_priorities": "daemon.emit_priorities",
    "budget.grace_s": "daemon.preempt_grace_s", "budget.churn_cap": "daemon.preempt_churn_cap",
    "budget.domain_patience_s": "daemon.domain_patience_s",
    "budget.churn_burst_gpus": "daemon.churn_burst_gpus",
    "elastic.min_interval_s": "daemon.resize_min_interval_s",
    "elastic.shrink_grace_s": "daemon.shrink_grace_s",  # unset: daemon.preempt_grace_s
    "leaf_wait_s": "daemon.leaf_wait_s", "leaf_holds": "daemon.leaf_holds",
    "leaf_wait_max_s": "daemon.leaf_wait_max_s", "whole_leaf_first": "daemon.whole_leaf_first",
    "backfill_held_leaf": "daemon.backfill_held_leaf",
    "whole_domain_evict": "daemon.whole_domain_evict", "defrag.enabled": "daemon.defrag",
    "spares.per_leaf": "failures.spares_per_leaf",
    "spares.min_gang_gpus": "failures.spares_min_gang_gpus",
    "spares.lend_max_s": "failures.spares_lend_max_s",
}
DEFAULT_HALF_LIFE_S = 7 * 86400.0  # Slurm's PriorityDecayHalfLife default


@dataclass(frozen=True)
class CycleSetup:
    """What one cycle runs: the core's knobs and the policy with its parameters."""

    config: CycleConfig = field(default_factory=CycleConfig)
    policy_name: str = "default"
    fair_share: bool = False  # the policy's fair_share, where it has one (daemon.fair_share)
    tiresias_thresholds_gpu_h: tuple[float, ...] = (1.0, 10.0, 100.0)  # policy tiresias' queues
    # the fair-share half-life; None: Slurm's PriorityDecayHalfLife where the daemon can read it
    # (scontrol show config), else DEFAULT_HALF_LIFE_S
    fair_share_half_life_s: float | None = None

    def policy(self, name: str | None = None, **params: Any) -> Policy:
        """A fresh instance of the policy ``name`` (default: the settings' one) with this setup's
        parameters where it takes them (policies keep state: each user gets its own)."""
        name = name or self.policy_name
        try:
            fields = {f.name for f in dataclasses.fields(registry.get(name))}  # type: ignore[arg-type]
        except KeyError as exc:
            raise ConfigError(f"daemon.policy: unknown policy {name!r}; known: "
                              f"{', '.join(registry.names())}") from exc
        if self.fair_share and "fair_share" in fields:
            params.setdefault("fair_share", True)
        policy = registry.get(name, **params)
        if isinstance(policy, Tiresias):
            policy = dataclasses.replace(policy, thresholds_gpu_h=self.tiresias_thresholds_gpu_h)
        return policy


def cycle_from(settings: Settings) -> CycleSetup:
    """The cycle the settings describe (ConfigError, one line, for a bad ``[daemon.cycle]``
    key or an unknown policy)."""
    d = settings.daemon
    config = CycleConfig()
    for path, key in NAMED.items():
        group, name = key.split(".")
        config = _set(config, path.split("."), getattr(getattr(settings, group), name))
    shrink = d.shrink_grace_s if d.shrink_grace_s is not None else d.preempt_grace_s
    config = dataclasses.replace(config, elastic=dataclasses.replace(config.elastic, shrink_grace_s=shrink))
    config = _table(config, d.cycle, "daemon.cycle", "")
    setup = CycleSetup(config=config, policy_name=d.policy, fair_share=d.fair_share,
                       tiresias_thresholds_gpu_h=tuple(d.tiresias_thresholds_gpu_h),
                       fair_share_half_life_s=d.fair_share_half_life_s)
    setup.policy()  # an unknown policy is refused here, before anything runs
    return setup


def pipeline_from(settings: Settings, *, serving: Any = None) -> Pipeline:
    """The steps before the core, in order (issue 34 item 1): the failure response (with its
    memory kept in ``failures.memory_file``, by default next to the heartbeat), the serving
    controller (``serving``: the reader of its facts, ``serving/live.LiveServing``; None: no
    deployment declared), then ``decide()``. The simulator builds the same ones."""
    from railgang.daemon.failures.persist import MemoryFile
    from railgang.daemon.failures.step import FailureStep
    from railgang.daemon.serving.controller import ServingControl

    steps: list[Step] = []
    stores: dict[str, MemoryStore] = {}
    readers: dict[str, Any] = {}
    f = settings.failures
    if f.enabled:
        step = FailureStep(f)
        steps.append(step)
        stores[step.name] = MemoryFile(
            f.memory_file or settings.daemon.heartbeat_file.parent / "failures.json", f.rules())
    control = ServingControl()
    steps.append(control)
    if serving is not None:
        readers[control.name] = serving.read
    return Pipeline(steps, stores, readers)


def cycle_of(settings: Settings, *, serving: Any = None) -> Cycle:
    """``Cycle(steps, config, policy)``: what the daemon runs, from the settings alone."""
    setup = cycle_from(settings)
    return Cycle(pipeline_from(settings, serving=serving), setup.config, setup.policy())


def _set(obj: Any, path: list[str], value: Any) -> Any:
    head, rest = path[0], path[1:]
    return dataclasses.replace(obj, **{head: _set(getattr(obj, head), rest, value) if rest else value})


def _table(obj: Any, table: Mapping[str, Any], where: str, prefix: str) -> Any:
    """``obj`` with the table's values set, each checked against the field's default's type."""
    known = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    changes: dict[str, Any] = {}
    for name, value in table.items():
        key, path = f"{where}.{name}", f"{prefix}{name}"
        if name not in known:
            raise ConfigError(f"{key}: unknown key; known: {', '.join(sorted(known))}")
        if path in NAMED:
            raise ConfigError(f"{key}: set {NAMED[path]} instead (one name per setting)")
        default = known[name]
        if dataclasses.is_dataclass(default):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key}: must be a table of {', '.join(known)}")
            changes[name] = _table(default, value, key, f"{path}.")
        else:
            changes[name] = _value(key, default, value)
    return dataclasses.replace(obj, **changes) if changes else obj


def _value(key: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: must be true or false, not {value!r}")
        return value
    if isinstance(default, int | float):
        whole = isinstance(default, int)
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
            raise ConfigError(f"{key}: must be {'a whole' if whole else 'a'} number, not {value!r}")
        if value < 0:
            raise ConfigError(f"{key}: must not be negative, not {value!r}")
        return value if whole else float(value)
    if isinstance(default, str):
        if not isinstance(value, str) or not value or len(value) > 64:
            raise ConfigError(f"{key}: must be a non-empty string of at most 64 characters")
        return value
    raise ConfigError(f"{key}: cannot be set from the file")


__all__ = ["DEFAULT_HALF_LIFE_S", "NAMED", "CycleSetup", "cycle_from", "cycle_of", "pipeline_from"]
