"""docs/security.md names the tests that hold each rule; a rule whose test was renamed or removed
would be a promise nobody checks (issue 38: "docs/security.md's rules each name their test")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "security.md"


def _rule_numbers(text: str) -> list[int]:
    head = text.split("\n## ", 1)[0]
    return [int(m) for m in re.findall(r"^(\d+)\. \*\*", head, flags=re.M)]


def _table(text: str) -> dict[int, list[str]]:
    rows: dict[int, list[str]] = {}
    for m in re.finditer(r"^\| (\d+) \| (.+) \|$", text, flags=re.M):
        rows[int(m.group(1))] = re.findall(r"`(tests/[^`]+\.py)`", m.group(2))
    return rows


def test_every_rule_names_a_test_that_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    rules = _rule_numbers(text)
    assert rules == list(range(1, len(rules) + 1)) and len(rules) >= 10
    table = _table(text)
    assert sorted(table) == rules, "every rule has one row in the table of tests"
    for rule, files in table.items():
        assert files, f"rule {rule} names no test"
        for f in files:
            assert (ROOT / f).is_file(), f"rule {rule}: {f} does not exist"


def test_every_test_named_anywhere_in_the_page_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", text))
    assert len(named) >= 20
    assert [f for f in sorted(named) if not (ROOT / f).is_file()] == []
