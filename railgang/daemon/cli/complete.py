"""TAB completion answered from the shipped table (``completion.json``, written by
``docs.py`` from the command tree), without importing typer, rich or any component: a
TAB costs the interpreter's start and one small JSON read (BENCHMARKS.md, "Shell completion").

The shell scripts ``railgang completion bash|zsh|fish`` prints call ``railgang`` with
``_RAILGANG_COMPLETE=complete_<shell>``, ``COMP_WORDS`` (the command line's words) and
``COMP_CWORD`` (the index of the word being completed); the entry point
(``daemon/cli/entry.py``) sends such a call here. Candidates are printed one per line (fish:
``value<TAB>help``); none means the shell's own file completion (an option's path value).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SPEC = Path(__file__).with_name("completion.json")
HELP = {"value": False, "choices": None, "help": "Show this message and exit."}

SCRIPTS = {
    "bash": """\
# railgang(1) completion for bash: `railgang completion bash > /etc/bash_completion.d/railgang`
_railgang_complete() {
    local IFS=$'\\n'
    COMPREPLY=($(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" \\
        _RAILGANG_COMPLETE=complete_bash railgang 2>/dev/null))
    return 0
}
complete -o default -F _railgang_complete railgang
""",
    "zsh": """\
#compdef railgang
# railgang(1) completion for zsh: `railgang completion zsh > "${fpath[1]}/_railgang"`
_railgang() {
    local -a items
    items=("${(@f)$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT - 1)) \\
        _RAILGANG_COMPLETE=complete_zsh railgang 2>/dev/null)}")
    if [[ -n "${items[1]}" ]]; then
        compadd -a items
    else
        _files
    fi
}
compdef _railgang railgang
""",
    "fish": """\
# railgang(1) completion for fish: `railgang completion fish > ~/.config/fish/completions/railgang.fish`
function __railgang_complete
    set -l words (commandline -opc) (commandline -ct)
    env COMP_WORDS="$words" COMP_CWORD=(math (count $words) - 1) \\
        _RAILGANG_COMPLETE=complete_fish railgang 2>/dev/null
end
complete -c railgang -a '(__railgang_complete)'
""",
}


def candidates(spec: Mapping[str, Any], words: list[str], cword: int) -> list[tuple[str, str]]:
    """(value, help) for the word at ``cword``: a sub-command, an option, or an option's
    choice; empty where a free value (a path, a number) is expected."""
    incomplete = words[cword] if cword < len(words) else ""
    path, pending = "", None
    for word in words[1:cword]:
        if pending is not None:  # this word is the previous option's value
            pending = None
            continue
        node = spec[path]
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            opt = node["options"].get(name) or spec[""]["options"].get(name)  # --config anywhere
            if opt is not None and opt["value"] and "=" not in word:
                pending = opt
            continue
        sub = f"{path} {word}".strip()
        if sub in spec and word in node["commands"]:
            path = sub
    node = spec[path]
    if pending is not None:
        return [(c, "") for c in pending["choices"] or () if c.startswith(incomplete)]
    if incomplete.startswith("-"):
        options = {**node["options"], "--help": HELP, "-h": HELP}
        return [(o, v["help"]) for o, v in sorted(options.items()) if o.startswith(incomplete)]
    return [(c, h) for c, h in node["commands"].items() if c.startswith(incomplete)]


def run(env: Mapping[str, str]) -> int:
    """Answer one TAB from the environment the scripts set; always exit 0 (a shell shows no
    error for a completion)."""
    shell = env.get("_RAILGANG_COMPLETE", "").removeprefix("complete_")
    try:
        words = shlex.split(env.get("COMP_WORDS", ""))
    except ValueError:  # an open quote while typing
        words = env.get("COMP_WORDS", "").split()
    try:
        cword = int(env.get("COMP_CWORD", "0"))
        spec = json.loads(SPEC.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return 0
    if cword >= len(words):
        words.append("")
    for value, help_ in candidates(spec, words, cword):
        print(f"{value}\t{help_}" if shell == "fish" and help_ else value)
    return 0


__all__ = ["SCRIPTS", "SPEC", "candidates", "run"]
