"""``railgang sim --config FILE``: replay the cycle and policy the daemon's settings file
configures, built by the daemon's own ``cycle_from`` (issue 34 item 4).

Without ``--config`` a replay keeps its documented replay defaults (the core's ``CycleConfig``
defaults: no leaf wait, no spares, no fair share), which the pinned schedules and the benchmarks
rely on. With it, every option of the cycle and the policy that is not on the command line takes
the file's value, else the daemon's default; an option given overrides the file
(docs/simulator.md "One set of settings").
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from railgang.daemon.cycle_settings import DEFAULT_HALF_LIFE_S, CycleSetup, cycle_from

# sim option -> CycleConfig field it sets
CYCLE_OPTIONS = {"leaf_wait_s": "leaf_wait_s", "leaf_holds": "leaf_holds",
                 "leaf_wait_max_s": "leaf_wait_max_s", "whole_leaf_first": "whole_leaf_first",
                 "backfill_held_leaf": "backfill_held_leaf"}


def settings_setup(a: SimpleNamespace) -> CycleSetup | None:
    """The file's cycle with the options given applied (the options left out take the file's
    values, in ``a`` too, so the report shows what ran); None without ``--config``."""
    if a.settings_file is None:
        return None
    from railgang.daemon.config import load_settings

    settings = load_settings(a.settings_file)  # a bad file: one ConfigError line naming the key
    setup = cycle_from(settings)
    a.serving_settings = settings.serving  # sim --serving decides as the daemon's [serving]
    given = a.given
    if "policy" not in given and a.compare is None:
        a.policy = setup.policy_name
    if "seed" not in given:
        a.seed = settings.daemon.seed
    # the daemon's timer: a cycle every cycle_interval_s whether or not anything changed, so
    # changes wait for the next quantum and time alone (a level crossed, a wait aged) is seen
    for option in ("cycle_s", "tick_s"):
        if option not in given:
            setattr(a, option, settings.daemon.cycle_interval_s)
    for option, name in CYCLE_OPTIONS.items():
        if option not in given:
            setattr(a, option, getattr(setup.config, name))
    if "fair_share" not in given:
        a.fair_share = setup.fair_share
    if "fair_share_half_life_s" not in given:  # no scontrol to ask: Slurm's default
        a.fair_share_half_life_s = (DEFAULT_HALF_LIFE_S if setup.fair_share_half_life_s is None
                                    else setup.fair_share_half_life_s)
    migration = setup.config.migration
    if "no_migrate" in given:
        migration = dataclasses.replace(migration, enabled=not a.no_migrate)
    if "panic_checkpoint" in given:
        migration = dataclasses.replace(migration, checkpoint_on_signal=a.panic_checkpoint)
    config = dataclasses.replace(setup.config, migration=migration,
                                 **{name: getattr(a, option) for option, name in CYCLE_OPTIONS.items()})
    return dataclasses.replace(setup, config=config, policy_name=a.policy, fair_share=a.fair_share,
                               fair_share_half_life_s=a.fair_share_half_life_s)


__all__ = ["CYCLE_OPTIONS", "settings_setup"]
