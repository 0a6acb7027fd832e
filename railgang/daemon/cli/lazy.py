"""The root group of ``railgang``: components imported only when they run, global flags anywhere.

``railgang --help`` and tab completion list the components from a table (name, module, attribute,
one help line) without importing them, so neither pays for SQLAlchemy, networkx or FastAPI; a
component's module is imported the first time its command is resolved (to run it or to show its
own ``--help``). ``tests/daemon/test_cli_imports.py`` checks the table against the commands and
which modules each ``--help`` imports.

Global flags (``--config``) may also follow the sub-command: ``railgang db current --config X``
is ``railgang --config X db current``.

A usage error anywhere below the root (unknown option or command, missing argument, bad value) is
one line on stderr, as Slurm's commands write theirs, and exit 2:
``railgang: error: No such option: --foo (see railgang explain --help)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any, ClassVar, NoReturn

import typer
from typer._click.exceptions import (  # typer 0.29 vendors click
    ClickException,
    NoArgsIsHelpError,
    UsageError,
)
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Component:
    """A sub-command another package contributes: ``module:attr`` is a ``typer.Typer`` (a group)
    or a command function; ``help`` is its first help line, shown by ``railgang --help``."""

    module: str
    attr: str
    help: str


# root flags that take a value and may be given after the sub-command, too
GLOBAL_VALUE_FLAGS = ("--config",)


def hoist_global_flags(args: Sequence[str], commands: Sequence[str]) -> list[str]:
    """Move ``--config X`` / ``--config=X`` found after the sub-command name to the front."""
    args = list(args)
    i = 0
    while i < len(args) and args[i] not in commands:  # root options before the sub-command
        if args[i] == "--":
            return args
        i += 2 if args[i] in GLOBAL_VALUE_FLAGS or args[i] == "-c" else 1
    head, tail, moved = args[:i], args[i:], []
    out: list[str] = []
    j = 0
    while j < len(tail):
        tok = tail[j]
        if tok == "--":
            out.extend(tail[j:])
            break
        if tok in GLOBAL_VALUE_FLAGS and j + 1 < len(tail):
            moved += [tok, tail[j + 1]]
            j += 2
            continue
        if tok.startswith(tuple(f + "=" for f in GLOBAL_VALUE_FLAGS)):
            moved.append(tok)
        else:
            out.append(tok)
        j += 1
    return [*moved, *head, *out]


class LazyGroup(TyperGroup):
    """A TyperGroup whose ``components`` are imported on first use."""

    components: ClassVar[dict[str, Component]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Any] = {}
        self._listing = False  # True while only names and help lines are needed

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(n for n in self.components if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        comp = self.components.get(cmd_name)
        if comp is None:
            return None
        if self._listing:
            return TyperCommand(cmd_name, help=comp.help, short_help=comp.help)
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = load_component(cmd_name, comp)
        return self._loaded[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        self._listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._listing = False

    # The root makes its context and invokes everything below it, so catching here covers
    # every sub-command; typer would print its boxed five-line form instead.
    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except ClickException as exc:
            usage_exit(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ClickException as exc:
            usage_exit(exc)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if ctx.parent is None and not ctx.resilient_parsing:
            args = hoist_global_flags(args, self.list_commands(ctx))
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as exc:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                exc.message = (exc.message.rstrip(".") + ". Did you mean "
                               + ", ".join(map(repr, matches)) + "?")
            raise


def usage_line(exc: ClickException) -> str:
    """``railgang: error: <message> (see <command> --help)``: what the user typed is quoted in
    the message, so it is made terminal-safe (never a control sequence)."""
    from railgang.daemon.safe_output import term_safe

    line = "railgang: error: " + term_safe(exc.format_message())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, UsageError) and ctx is not None:
        line += f" (see {ctx.command_path} --help)"
    return line


def usage_exit(exc: ClickException) -> NoReturn:
    if isinstance(exc, NoArgsIsHelpError):  # a group given no command: its help, as before
        if exc.format_message().strip():  # (rich has printed it already; plain help has not)
            exc.show()
    else:
        typer.echo(usage_line(exc), err=True)
    raise typer.Exit(exc.exit_code)


def load_component(name: str, comp: Component) -> Any:
    """Import the component and turn it into its click command."""
    obj = getattr(importlib.import_module(comp.module), comp.attr)
    if isinstance(obj, typer.Typer):
        group = typer.main.get_group(obj)
        group.name = name
        return group
    one = typer.Typer(add_completion=False)  # completion is `railgang completion`'s, not each command's
    one.command(name)(obj)
    return typer.main.get_command(one)


__all__ = ["GLOBAL_VALUE_FLAGS", "Component", "LazyGroup", "hoist_global_flags", "load_component",
           "usage_exit", "usage_line"]
