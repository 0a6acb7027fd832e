"""What is written from the command tree rather than by hand: the completion table
(``daemon/cli/completion.json``, which ``railgang completion``'s scripts answer TAB from without
importing typer or any component) and the man page (``docs/railgang.1``).

Regenerate both after changing a command: ``python -m railgang.daemon.cli.docs``;
``tests/daemon/test_cli_docs.py`` fails while either is stale.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import typer

from railgang.daemon.cli.main import app

SPEC = Path(__file__).with_name("completion.json")
MAN = Path(__file__).resolve().parents[3] / "docs" / "railgang.1"


def walk(cmd: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any, list[Any]]]:
    """(path, command, its parameters) for the root and every group and command below it;
    ``sim`` is a group whose own options are its ``plain`` command's."""
    cmd = cmd if cmd is not None else typer.main.get_command(app)
    params = list(cmd.params)
    plain = getattr(cmd, "plain", None)
    if plain is not None:
        params = [*plain.params, *params]
    yield " ".join(path), cmd, params
    if isinstance(cmd, typer.core.TyperGroup):
        ctx = typer.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from walk(sub, (*path, name))


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def _choices(param: Any, ctx: Any) -> list[str] | None:
    shown = param.display_type(ctx=ctx) if callable(getattr(param, "display_type", None)) else None
    shown = param.metavar or shown
    if isinstance(shown, str) and shown.startswith("<") and "|" in shown:
        return shown.strip("<>").split("|")
    return None


def spec() -> dict[str, Any]:
    """path -> {commands: {name: help}, options: {flag: {value, choices, help}}}."""
    out: dict[str, Any] = {}
    for path, cmd, params in walk():
        ctx = typer.Context(cmd)
        options: dict[str, Any] = {}
        for p in params:
            if p.param_type_name != "option" or getattr(p, "hidden", False):
                continue
            entry = {"value": not p.is_flag and not getattr(p, "count", False),
                     "choices": _choices(p, ctx), "help": _first_line(p.help)}
            for opt in (*p.opts, *p.secondary_opts):
                options[opt] = entry
        commands = {}
        if isinstance(cmd, typer.core.TyperGroup):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    commands[name] = _first_line(sub.help or sub.short_help)
        out[path] = {"commands": commands, "options": options,
                     "help": _first_line(cmd.help)}
    return out


def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line
                     for line in text.splitlines())


def man_page(today: date | None = None) -> str:
    """railgang(1): every command with its usage, help and options, the exit codes, the
    environment. The date is the version's, not the build's, so the page is reproducible."""
    from railgang.daemon import __version__
    from railgang.errors import ExitCode

    lines = [f'.TH RAILGANG 1 "" "railgang {__version__}" "User Commands"',
             ".SH NAME", "railgang \\- ML\\-aware scheduling layer for Slurm GPU clusters",
             ".SH SYNOPSIS", ".B railgang", "[\\fB\\-\\-config\\fR \\fIFILE\\fR] "
             "\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]",
             ".SH DESCRIPTION",
             _roff("railgang decides where and when GPU jobs start on a Slurm cluster. Each "
                   "command below is also documented by `railgang COMMAND --help`; "
                   "docs/cli.md describes the --json output of each."),
             ".SH COMMANDS"]
    for path, cmd, params in walk():
        if not path:
            continue
        ctx = typer.Context(cmd)
        args = " ".join(f"\\fI{p.name.upper()}\\fR" for p in params
                        if p.param_type_name == "argument")
        sub = " \\fICOMMAND\\fR" if isinstance(cmd, typer.core.TyperGroup) else ""
        lines += [f".SS railgang {_roff(path)}",
                  f".B railgang {_roff(path)}", f"[\\fIOPTIONS\\fR]{sub} {args}".rstrip(),
                  ".PP", _roff(" ".join((cmd.help or "").split()))]
        for p in params:
            if getattr(p, "hidden", False) or p.param_type_name != "option":
                continue
            if p.opts in (["--help", "-h"], ["-h", "--help"]):
                continue
            choices = _choices(p, ctx)
            value = "" if p.is_flag else (" \\fI" + ("|".join(choices) if choices else "VALUE")
                                           + "\\fR")
            flags = ", ".join(f"\\fB{_roff(o)}\\fR" for o in (*p.opts, *p.secondary_opts))
            lines += [".TP", flags + value, _roff(" ".join((p.help or "").split()))]
    lines += [".SH EXIT STATUS"]
    for code in ExitCode:
        lines += [".TP", f"\\fB{int(code)}\\fR", code.name.replace("_", " ").lower()]
    lines += [".SH ENVIRONMENT", ".TP", ".B RAILGANG_CONFIG",
              "The TOML config file (as \\fB\\-\\-config\\fR).", ".TP", ".B RAILGANG_*",
              _roff("Any setting, e.g. RAILGANG_DB__URL for db.url (docs/configuration.md)."),
              ".SH SEE ALSO", "\\fBsqueue\\fR(1), \\fBsbatch\\fR(1), \\fBsreport\\fR(1); "
              "docs/cli.md, docs/configuration.md"]
    return "\n".join(lines) + "\n"


def write() -> list[Path]:
    SPEC.write_text(json.dumps(spec(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    MAN.write_text(man_page(), encoding="utf-8")
    return [SPEC, MAN]


if __name__ == "__main__":
    for path in write():
        print(f"wrote {path}", file=sys.stderr)


__all__ = ["MAN", "SPEC", "man_page", "spec", "walk", "write"]
