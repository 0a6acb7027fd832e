"""What is written from the command tree (``daemon/cli/docs.py``): the completion table TAB
answers from and the man page are current and cover every command; TAB imports neither typer
nor rich (issue 36 item 5: `railgang completion`, a man page)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.complete import candidates
from railgang.daemon.cli.docs import MAN, SPEC, man_page, spec
from railgang.daemon.cli.main import app
from tests.daemon.test_cli_surface import COMMANDS

REGENERATE = "stale: run `python -m railgang.daemon.cli.docs` and commit what it writes"
BIN = str(Path(sys.executable).parent)


def test_the_completion_table_and_the_man_page_are_current() -> None:
    assert json.loads(SPEC.read_text(encoding="utf-8")) == spec(), REGENERATE
    assert MAN.read_text(encoding="utf-8") == man_page(), REGENERATE


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_in_the_man_page_and_the_table(name: str) -> None:
    assert f".SS railgang {name.replace('-', chr(92) + '-')}\n" in MAN.read_text(), name
    assert name in json.loads(SPEC.read_text())


def _words(line: str, cword: int | None = None) -> list[str]:
    words = line.split(" ")
    return [v for v, _ in candidates(spec_now, words, len(words) - 1 if cword is None else cword)]


spec_now = json.loads(SPEC.read_text(encoding="utf-8"))


def test_candidates() -> None:
    assert _words("railgang ex") == ["explain"]
    assert "--once" in _words("railgang top --") and "-h" in _words("railgang top -")
    assert _words("railgang top --source ") == ["auto", "slurm", "daemon"]
    assert _words("railgang --config x.toml daemon s") == ["status"]
    assert _words("railgang daemon status --config ") == []  # a path: the shell's files
    assert _words("railgang sim sw") == ["sweep"]
    assert "--fair-share-half-life-s" in _words("railgang sim --fair")
    assert _words("railgang completion ") == []  # an argument: nothing to offer but files


def test_a_tab_imports_neither_typer_nor_rich() -> None:
    probe = ("import json, sys\nfrom railgang.daemon.cli.entry import main\ntry:\n    main()\n"
             "except SystemExit:\n    pass\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)")
    env = {**os.environ, "_RAILGANG_COMPLETE": "complete_bash", "COMP_WORDS": "railgang top --",
           "COMP_CWORD": "2"}
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    assert "--once" in res.stdout.splitlines()
    loaded = set(json.loads(res.stderr.strip().splitlines()[-1]))
    assert not loaded & {"typer", "rich", "click", "pydantic", "sqlalchemy"}, loaded


def test_completion_prints_a_script_bash_runs() -> None:
    res = CliRunner().invoke(app, ["completion", "bash"])
    assert res.exit_code == 0 and "complete -o default -F _railgang_complete railgang" in res.stdout
    for shell in ("zsh", "fish"):
        assert "railgang" in CliRunner().invoke(app, ["completion", shell]).stdout
    assert CliRunner().invoke(app, ["completion", "tcsh"]).exit_code == 2
    script = res.stdout + ('COMP_WORDS=(railgang daemon st); COMP_CWORD=2; _railgang_complete; '
                           'printf "%s\\n" "${COMPREPLY[@]}"\n')
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    assert out.stdout.split() == ["status"], (out.stdout, out.stderr)
