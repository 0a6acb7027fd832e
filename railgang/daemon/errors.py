"""Moved to ``railgang.errors`` (issue 22: the database may not import the daemon). This alias
keeps code written against the old path working for one release; import ``railgang.errors``."""

from railgang.errors import *  # noqa: F403
from railgang.errors import __all__  # noqa: F401
