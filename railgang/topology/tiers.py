"""Capacity tiers: how a node's GPUs are bought, a fact of the fleet like its GPU type.

``Tier`` is what a node is (``Node.tier`` in the core, the ``tier_*`` node feature in Slurm, a
``--gpus TYPE:TIER=N`` pool in the simulator); ``Capacity`` is what a charge is billed as in the
ledger, the tiers plus ``borrowed`` (GPUs used beyond a team's guarantee). Both are ``StrEnum``:
their values are the strings in configuration files, the database and the API.
"""

from __future__ import annotations

import enum


class Tier(enum.StrEnum):
    RESERVED = "reserved"  # bought ahead (owned or committed): the cheapest per GPU-hour
    ON_DEMAND = "on-demand"
    SPOT = "spot"  # may be reclaimed with a short notice


class Capacity(enum.StrEnum):
    RESERVED = "reserved"
    ON_DEMAND = "on-demand"
    SPOT = "spot"
    BORROWED = "borrowed"  # beyond the team's guarantee, lent by another team


TIERS: tuple[Tier, ...] = tuple(Tier)
CAPACITIES: tuple[Capacity, ...] = tuple(Capacity)

__all__ = ["CAPACITIES", "TIERS", "Capacity", "Tier"]
