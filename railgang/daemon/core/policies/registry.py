"""The policy registry: every module of ``railgang.daemon.core.policies`` that defines ``POLICY``
(a class with a ``name`` and a ``plan`` method) is a policy; adding a policy is adding one file."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from railgang.daemon.core.model.plan import Policy


def _discover() -> dict[str, type[Any]]:
    import railgang.daemon.core.policies as pkg

    found: dict[str, type[Any]] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        cls = getattr(mod, "POLICY", None)
        if cls is not None:
            found[str(cls.name)] = cls
    return found


def names() -> tuple[str, ...]:
    """Registered policy names, sorted."""
    return tuple(sorted(_discover()))


def get(name: str, **params: Any) -> Policy:
    """Instantiate the policy ``name`` with optional parameters (raises ``KeyError`` if unknown)."""
    classes = _discover()
    if name not in classes:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(classes))}")
    policy: Policy = classes[name](**params)
    return policy


__all__ = ["get", "names"]
