"""A database URL as it may be shown: the password masked. The database's own messages use it
(``session.py``), and so does the configuration the daemon prints (``daemon/config.py``)."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(?P<head>^[^:/?#]+://[^:/?#@]*:)(?P<secret>[^/?#]*)(?P<tail>@)")
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|passwd|pass)=)(?P<secret>[^&#]*)",
                             re.IGNORECASE)
MASK = "***"


def mask_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (as SQLAlchemy's ``hide_password`` renders it),
    in the authority and in a ``password=`` query parameter alike; anything else unchanged."""
    url = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}{m['tail']}", url, count=1)
    return _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", url)


__all__ = ["MASK", "mask_url"]
