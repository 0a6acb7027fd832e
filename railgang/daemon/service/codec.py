"""Actions as the journal stores them: a kind name and a canonical JSON payload.

Canonical means byte-for-byte the same for equal actions (sorted keys, no spaces, GPU lists
sorted), so the idempotency key derived from it is stable across processes and restarts.
Decoding is the exact inverse; a payload that does not decode is reported, never guessed at.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Mapping
from typing import Any

from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    Migrate,
    Preempt,
    ReleaseBurnIn,
    Requeue,
    Resize,
    Resume,
    SetPriority,
    Start,
    SubmitBurnIn,
    TagNode,
)

KINDS: dict[str, type[Any]] = {
    "start": Start,
    "resize": Resize,
    "preempt": Preempt,
    "migrate": Migrate,
    "set_priority": SetPriority,
    "drain_node": DrainNode,
    "tag_node": TagNode,
    "requeue": Requeue,
    "submit_burn_in": SubmitBurnIn,
    "release_burn_in": ReleaseBurnIn,
    "resume": Resume,
}
_KIND_OF = {cls: kind for kind, cls in KINDS.items()}


class PayloadError(ValueError):
    """A journal payload that does not decode into an action (corrupt or from another version)."""


def kind_of(action: Action) -> str:
    return _KIND_OF[type(action)]


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list | frozenset | set):
        items = [_plain(v) for v in value]
        return sorted(items) if isinstance(value, frozenset | set) else items
    return value


def encode(action: Action) -> str:
    """The canonical JSON payload of ``action``."""
    data = {f.name: _plain(getattr(action, f.name)) for f in dataclasses.fields(action) if f.init}
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def decode(kind: str, payload: str) -> Action:
    """Rebuild the action a journal entry recorded (raises :class:`PayloadError`)."""
    cls = KINDS.get(kind)
    if cls is None:
        raise PayloadError(f"unknown action kind {kind!r}")
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise PayloadError(f"{kind}: payload is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PayloadError(f"{kind}: payload is not a JSON object")
    hints = typing.get_type_hints(cls)
    args: dict[str, Any] = {}
    for name, value in data.items():
        hint = hints.get(name)
        if hint is None:
            raise PayloadError(f"{kind}: unknown field {name!r}")
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            try:
                value = hint(value)
            except ValueError as exc:
                raise PayloadError(f"{kind}: {name}: {exc}") from exc
        elif isinstance(value, dict):  # an assignment: node -> GPU indices
            value = {str(n): tuple(int(g) for g in gs) for n, gs in value.items()}
        args[name] = value
    try:
        action: Action = cls(**args)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"{kind}: {exc}") from exc
    return action


def subject(action: Action) -> tuple[str | None, str | None]:
    """``(job_id, node)`` the action is about (one of them is None)."""
    return getattr(action, "job_id", None), getattr(action, "node", None)


__all__ = ["KINDS", "PayloadError", "decode", "encode", "kind_of", "subject"]
