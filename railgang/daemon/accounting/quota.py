"""The quota tree's pure rules, for the API and the CLI.

They live in the decision core (``railgang.daemon.core.model.quota``), which may import nothing from
``daemon/accounting``; this module re-exports them so the database and API layers keep one name.
"""

from __future__ import annotations

from railgang.daemon.core.model.quota import (
    ANY_GPU,
    EffectiveQuota,
    LevelHeadroom,
    QuotaNode,
    check_hierarchy,
    effective_quota,
)

__all__ = ["ANY_GPU", "EffectiveQuota", "LevelHeadroom", "QuotaNode", "check_hierarchy",
           "effective_quota"]
