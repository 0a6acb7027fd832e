"""A database URL as it may be shown: the password masked. The database's own messages use it
(``session.py``), and so does the configuration the daemon prints (``daemon/config.py``)."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(?P<head>^[^:/?#]+://[^:/?#@]*:)(?P<secret>[^/?#]*)(?P<tail>@)")
# any query parameter whose name says it is a secret: password, passwd, pass, libpq's
# sslpassword, access_token, client_secret... (a name is a secret's if it holds one of the words)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&][^=&#]*(?:pass|pwd|secret|token)[^=&#]*=)"
                             r"(?P<secret>[^&#]*)", re.IGNORECASE)
MASK = "***"


def mask_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (as SQLAlchemy's ``hide_password`` renders it),
    in the authority and in every query parameter named like a secret (``password=``,
    ``sslpassword=``, ``access_token=``, ``client_secret=``); anything else unchanged."""
    url = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}{m['tail']}", url, count=1)
    return _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", url)


__all__ = ["MASK", "mask_url"]
