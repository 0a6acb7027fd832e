"""What every ``railgang`` sub-command shares: the settings in the typer context, ``--json``,
choices from the registries, the exit codes.

Settings travel in ``ctx.obj`` (a :class:`CliState` made by the root callback for each
invocation), never in a module global, so one process can run commands with different
``--config`` files (the tests do) and ``--help`` works without any config: the file is read on
the first :func:`settings_from`.

Choices: a fixed set is a ``Literal`` type (typer validates it); a set that comes from a registry
(policies, trace formats) is a ``str`` option with :func:`registry_choice`, which checks the value
against the registry when the command line is parsed. Both make a wrong value a usage error
(exit 2) that lists the valid ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from railgang.errors import ExitCode, RailgangError

if TYPE_CHECKING:  # pydantic is imported when settings are first read, not by --help
    from railgang.daemon.config import Settings

T = TypeVar("T")
JSON_HELP = "Machine-readable output."
JsonOpt = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


@dataclass
class CliState:
    """One invocation's context object: the ``--config`` path and, once read, the settings."""

    config_path: Path | None = None
    _settings: Settings | None = field(default=None, repr=False)

    def settings(self) -> Settings:
        if self._settings is None:
            from railgang.daemon.config import load_settings

            self._settings = load_settings(self.config_path)
        return self._settings


def state_from(ctx: typer.Context) -> CliState:
    """The invocation's :class:`CliState` (a fresh one when a sub-app runs on its own)."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    ctx.obj = root.obj
    return root.obj


def settings_from(ctx: typer.Context) -> Settings:
    """The effective settings of this invocation, read on first use."""
    return state_from(ctx).settings()


def emit(data: Any, as_json: bool, text: str | Iterable[str]) -> None:
    """Print ``data`` as JSON, or the human lines."""
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        typer.echo(text if isinstance(text, str) else "\n".join(text))


def exit_with(code: ExitCode) -> NoReturn:
    """End the command with one of the table's codes (for outcomes that are not errors)."""
    raise typer.Exit(int(code))


def registry_choice(names: Callable[[], Sequence[str]], *, comma_list: bool = False
                    ) -> Callable[[str | None], str | None]:
    """An option callback accepting only names the registry knows (a comma list with
    ``comma_list``); anything else is a usage error naming the valid values."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        known = tuple(names())
        wanted = [v.strip() for v in value.split(",")] if comma_list else [value]
        bad = [v for v in wanted if v not in known]
        if bad or not any(wanted):
            raise typer.BadParameter(f"{', '.join(map(repr, bad)) or repr(value)} is not one of "
                                     f"{', '.join(map(repr, known))}.")
        return ",".join(dict.fromkeys(w for w in wanted if w)) if comma_list else value

    return check


def deprecated_alias(new: T | None, old: T | None, old_flag: str, new_flag: str) -> T | None:
    """The value of an option renamed from ``old_flag`` to ``new_flag`` (the old spelling is a
    hidden option that still works, with a warning on stderr; both at once is a usage error)."""
    if old is None:
        return new
    if new is not None:
        raise typer.BadParameter(f"{old_flag} is the old name of {new_flag}: give only "
                                 f"{new_flag}", param_hint=f"'{old_flag}'")
    typer.echo(f"warning: {old_flag} is deprecated and will go; use {new_flag}", err=True)
    return old


def when_option(value: str | datetime | None) -> datetime | None:
    """typer ``parser=`` of a time option: ISO or relative (``now-1day``, ``yesterday``;
    ``railgang.daemon.when``), counted from now; a bad value is a usage error."""
    if value is None or isinstance(value, datetime):
        return value
    from railgang.daemon.when import parse_when

    try:
        return parse_when(value, datetime.now(UTC))
    except RailgangError as exc:
        raise typer.BadParameter(str(exc)) from exc


def choices_metavar(names: Sequence[str]) -> str:
    """``<a|b|c>``, as typer shows a ``Literal``'s choices."""
    return "<" + "|".join(names) + ">"


__all__ = ["JSON_HELP", "CliState", "JsonOpt", "choices_metavar", "deprecated_alias", "emit",
           "exit_with",
           "registry_choice", "settings_from", "state_from", "when_option"]
