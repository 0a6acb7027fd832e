"""The fixed sets the database's CHECK constraints allow, without SQLAlchemy: the CLI offers them
as choices (``railgang token create --role``, ``quota grant``, ``quota rate``) and its ``--help``
must not import the models to do so. The models import them from here."""

from __future__ import annotations

from railgang.topology.tiers import CAPACITIES

ROLES = ("admin", "team-admin", "team-reader")  # api_tokens.role
CAPACITY_TIERS = tuple(c.value for c in CAPACITIES)  # rates.capacity (topology/tiers.py)
GRANT_KINDS = ("account", "user", "qos")  # class_grants.kind

__all__ = ["CAPACITY_TIERS", "GRANT_KINDS", "ROLES"]
