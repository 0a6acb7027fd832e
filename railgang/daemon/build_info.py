"""``railgang_build_info``: which railgang runs where (the version as a label, the value 1).

Both ``/metrics`` endpoints (daemon and API) carry it, so an alert or a dashboard can tell a
rollout from a fault and ``count by (version)`` shows a half-finished upgrade.
"""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Gauge

from railgang.daemon import __version__


def register_build_info(registry: CollectorRegistry, component: str) -> Gauge:
    """Add the ``railgang_build_info{version, python, component}`` gauge (1) to ``registry``."""
    info = Gauge("railgang_build_info", "railgang version running (value 1)",
                 ["version", "python", "component"], registry=registry)
    info.labels(__version__, platform.python_version(), component).set(1)
    return info


__all__ = ["register_build_info"]
