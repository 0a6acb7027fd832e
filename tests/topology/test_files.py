"""The one bounded reader (``railgang.topology.files``): file types refused before a byte is read,
and JSON/TOML that would recurse without bound or carry NaN/Infinity refused with one line.
The same corpus through every CLI entry point: tests/test_hostile_files.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from railgang.topology.files import InputProblem, iter_lines, parse_json, parse_toml, read_text


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done: list[str] = []

    def read() -> None:
        for reader in (lambda: read_text(fifo, "config"), lambda: list(iter_lines(fifo, "trace"))):
            try:
                reader()
            except InputProblem as exc:
                done.append(str(exc))

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO without a writer blocked"
    assert len(done) == 2 and all("is a FIFO (named pipe)" in d for d in done), done


def test_directories_and_devices(tmp_path: Path) -> None:
    with pytest.raises(InputProblem, match="is a directory"):
        read_text(tmp_path, "trace")
    with pytest.raises(InputProblem, match="is a character device"):
        list(iter_lines("/dev/zero", "trace"))


def test_bad_bytes_name_their_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"ok\nok\ncaf\xe9\n")
    with pytest.raises(InputProblem, match=r"f:3: .*not UTF-8"):
        read_text(tmp_path / "f", "trace")


@pytest.mark.parametrize(("text", "needle"), [
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ('{"a": NaN}', "NaN is not a number"),
    ('{"a": -Infinity}', "-Infinity is not a number"),
    ('{"a": 1e400}', "1e400 is not a finite number"),
    ('{"a": ', "not valid JSON"),
], ids=["deep", "nan", "infinity", "overflow", "truncated"])
def test_parse_json_refuses(text: str, needle: str) -> None:
    with pytest.raises(InputProblem, match=needle):
        parse_json(text, "x.json", "file")


@pytest.mark.parametrize(("text", "needle"), [
    ("a = " + "[" * 100_000 + "]" * 100_000, "nested too deep"),
    ("a = nan", "nan is not a finite number"),
    ("a = -inf", "-inf is not a finite number"),
    ("a = ", "not valid TOML"),
], ids=["deep", "nan", "inf", "truncated"])
def test_parse_toml_refuses(text: str, needle: str) -> None:
    with pytest.raises(InputProblem, match=needle):
        parse_toml(text, "x.toml", "file")


def test_parse_toml_may_leave_floats_to_the_caller() -> None:
    assert parse_toml("a = inf", "x.toml", "config", finite=False)["a"] == float("inf")
