"""The check behind the pinned-public-surface tests: a module's ``__all__`` is exactly the names a
test pins, and each of them exists."""

from __future__ import annotations

import importlib


def assert_public_surface(module: str, names: set[str]) -> None:
    mod = importlib.import_module(module)
    assert set(mod.__all__) == names
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.__all__ names {name!r}, which it does not define"


__all__ = ["assert_public_surface"]
