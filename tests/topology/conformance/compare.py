"""One conformance case: slurmctld's verdict against ``railgang topology check --json``.

They agree when both accept or both refuse, and, when both refuse, every complaint slurmctld makes
is located by railgang too: the line of a "Parse error in file … line N", the switch it names,
the key it names. When both accept, slurmctld's "Multiple leaf switches contain nodes" and
"specified more than once" must be railgang warnings too. One deliberate difference (issue 11
item 7): ``railgang topology check`` refuses a file that names no node, which slurmctld runs
with ("No switches configured"), and one holding a NUL byte (binary input), where slurmctld
just ends that line; such cases count as ``deliberate``, not as disagreements.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from tests.topology.conformance.slurmctld_oracle import Verdict

__all__ = ["Outcome", "compare", "module_check", "railgang_check"]

_runner = CliRunner()


def railgang_check(path: Path) -> dict[str, Any]:
    """``railgang topology check --json PATH``: its JSON plus ``exit_code``."""
    res = _runner.invoke(app, ["topology", "check", "--json", str(path)])
    if res.exit_code == 1 and not res.stdout.strip() and res.stderr.strip():
        # refused before parsing (unreadable, binary, too big): one line on stderr, no JSON
        return {"exit_code": 1, "problems": [{"message": res.stderr.strip(), "line": None}], "warnings": []}
    if res.exit_code not in (0, 1) or not res.stdout.strip():
        raise AssertionError(f"railgang topology check failed on {path}: {res.exit_code}\n{res.output}")
    data: dict[str, Any] = json.loads(res.stdout)
    data["exit_code"] = res.exit_code
    return data


def module_check(check: Callable[[str, str], Any], path: Path) -> dict[str, Any]:
    """The same shape from another parser's ``check_topology(text, path)`` (e.g. an older
    topology/conf.py, to count the disagreements it had): errors only, no warnings."""
    problems = check(path.read_text(encoding="utf-8"), str(path))
    return {"exit_code": 1 if problems else 0, "warnings": [],
            "problems": [{"line": p.line, "field": p.field, "switch": getattr(p, "switch", None),
                          "message": p.message} for p in problems]}


@dataclass(frozen=True)
class Outcome:
    agree: bool
    deliberate: bool
    reasons: tuple[str, ...]


def _located(problems: list[dict[str, Any]], kind: str, value: str | int) -> bool:
    for p in problems:
        if kind == "line" and p.get("line") == value:
            return True
        if kind == "switch" and (p.get("switch") == value or (
                p.get("switch") is None and f"'{value}'" in str(p.get("message")))):
            return True  # the second form for parsers whose problems do not carry the switch
        if kind == "key" and str(p.get("field") or "").lower() == str(value).lower():
            return True
    return False


def compare(verdict: Verdict, ours: dict[str, Any]) -> Outcome:
    refused = ours["exit_code"] != 0
    problems: list[dict[str, Any]] = ours.get("problems", [])
    warnings: list[dict[str, Any]] = ours.get("warnings", [])
    if verdict.accepted and refused and all(str(p["message"]).startswith("no nodes:") for p in problems):
        return Outcome(True, True, ("railgang refuses a file without nodes (issue 11 item 7)",))
    if verdict.accepted and refused and any("NUL bytes" in str(p["message"]) for p in problems):
        return Outcome(True, True, ("railgang refuses binary input; slurmctld ends the line at a NUL",))
    if verdict.accepted != (not refused):
        said = "; ".join(str(p["message"]) for p in problems[:3]) or "ok"
        return Outcome(False, False, (f"slurmctld {'accepts' if verdict.accepted else 'refuses'}, "
                                      f"railgang {'refuses' if refused else 'accepts'} ({said})",))
    reasons: list[str] = []
    if refused:
        for c in verdict.errors:
            for kind, values in (("line", c.lines), ("switch", c.switches), ("key", c.keys)):
                for v in values:
                    if not _located(problems + warnings, kind, v):
                        reasons.append(f"slurmctld names {kind} {v!r} ({c.text}); railgang does not")
    else:
        for c in verdict.complaints:
            if "Multiple leaf switches contain nodes" in c.text and not any(
                    "under two leaves" in str(w["message"]) for w in warnings):
                reasons.append(f"slurmctld warns '{c.text}'; railgang does not")
            if "specified more than once" in c.text and not any(
                    "given twice" in str(w["message"]) for w in warnings):
                reasons.append(f"slurmctld says '{c.text}'; railgang does not warn")
    return Outcome(not reasons, False, tuple(reasons))
