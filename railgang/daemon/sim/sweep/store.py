"""Where a sweep keeps what it computed: content-addressed point results, the plan, logs.

A point's **key** is the SHA-256 of its sim options, each input file (trace, topology, quotas)
replaced by the SHA-256 of its content. Its result is ``points/<key>.json``, written once,
atomically (a temporary file renamed into place), so a point killed half-way leaves nothing and a
result present is complete. A result also lists every railgang source file the point's process
loaded, with its SHA-256 (``code_files``): it stands only while those files are unchanged, so a
change to the code a replay runs reruns it, and a change anywhere else (the API, the daemon
service, docs) reruns nothing. Hence:

- rerunning a sweep runs only the points without a standing result (failed, killed, never run,
  or whose code changed: ``stale``);
- changing one value of the grid reruns only the points that have it;
- a changed trace file reruns what reads it; moving or renaming it reruns nothing.

Layout of ``OUT``::

    plans/<sha>.json     the points of one grid as planned (Slurm tasks read theirs by name)
    points/<key>.json    one result per point: labels, options, inputs, code, git revision, timings
    failed/<key>.json    the last failure of a point without result (exit status, last line)
    logs/<key>.log       the point's stderr
    results.csv, results.json, plots/
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from railgang.errors import InputError
from railgang.topology.files import InputProblem, open_input

RESULT_FORMAT = "railgang-sweep-point/1"
PLAN_FORMAT = "railgang-sweep-plan/1"
RESULT_MAX_BYTES = 64 * 2**20  # a point's --json: the per-account table of 15 accounts is ~10 kB
_CHUNK = 1 << 20
MAX_DIR_FILES = 10_000  # a Philly directory has 16 files


def package_root() -> Path:
    """The directory of the installed ``railgang`` package (the code a point runs)."""
    import railgang.daemon

    return Path(railgang.daemon.__file__).resolve().parents[1]


def code_fingerprint(files: list[str], root: Path | None = None) -> dict[str, str]:
    """Path (relative to the package) -> SHA-256 of each loaded railgang source file; a file
    outside the package or gone is left out (it changes nothing a rerun could restore)."""
    root = root or package_root()
    out = {}
    for name in files:
        path = Path(name).resolve()
        if root in path.parents and path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(out.items()))


def code_id(fingerprint: dict[str, str]) -> str:
    """One hash for a fingerprint: equal when the same files had the same content."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def git_revision(root: Path | None = None) -> str:
    """``HEAD``'s commit, ``+dirty`` when the package has changes not committed; ``unknown``
    outside a git checkout (an installed wheel): recorded per point, never part of its key."""
    root = root or package_root()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty.strip() else "")


def _file_digest(path: Path, what: str) -> bytes:
    try:
        stream = open_input(path, what)  # regular files only: a FIFO or /dev/zero is refused
    except InputProblem as exc:
        raise InputError(exc.message, path=exc.path) from exc
    digest = hashlib.sha256()
    with stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.digest()


def input_hash(path: Path, what: str) -> str:
    """``sha256:<hex>`` of a file, or of a directory's regular files (relative path and content,
    sorted; a Philly trace directory), so a point's key follows content, not location."""
    if not path.is_dir():
        return "sha256:" + _file_digest(path, what).hex()
    digest = hashlib.sha256()
    files = []
    for folder, subdirs, names in os.walk(path):  # symlinked folders are not followed
        subdirs.sort()
        for name in sorted(names):
            file = Path(folder) / name
            if file.is_symlink() or not file.is_file():
                continue
            files.append(file)
            if len(files) > MAX_DIR_FILES:  # `trace = "/"`: refused, not walked for an hour
                raise InputError(f"the {what} directory holds more than {MAX_DIR_FILES:,} "
                                 "files; name the trace's own directory", path=str(path))
    if not files:
        raise InputError(f"the {what} directory has no files", path=str(path))
    for file in files:
        digest.update(str(file.relative_to(path)).encode() + b"\0" + _file_digest(file, what))
    return "sha256:" + digest.hexdigest()


def point_key(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def write_atomic(path: Path, data: Any) -> None:
    """JSON into ``path`` through a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """The directory ``OUT`` of one sweep (shared by the Slurm tasks: it must be on a file system
    every node sees). ``code_root`` is where the code a result lists is checked (the package)."""

    def __init__(self, root: Path, code_root: Path | None = None) -> None:
        self.root = root
        self.code_root = code_root
        self._digests: dict[str, str | None] = {}  # file -> sha256, once per command

    def result_path(self, key: str) -> Path:
        return self.root / "points" / f"{key}.json"

    def failed_path(self, key: str) -> Path:
        return self.root / "failed" / f"{key}.json"

    def log_path(self, key: str) -> Path:
        return self.root / "logs" / f"{key}.log"

    def plan_path(self, digest: str) -> Path:
        return self.root / "plans" / f"{digest}.json"

    def result(self, key: str) -> dict[str, Any] | None:
        """The point's standing result: None when there is none readable under its key (a file
        of another format or key, truncated by hand, is treated as missing) or when a source
        file its replay loaded has changed since (stale)."""
        data = _read_json(self.result_path(key), key)
        return data if data is not None and self._current(data) else None

    def lookup(self, key: str) -> tuple[str, dict[str, Any] | None]:
        """("done", result), ("stale", result: the code it ran has changed since) or
        ("missing", None)."""
        data = _read_json(self.result_path(key), key)
        if data is None:
            return "missing", None
        return ("done" if self._current(data) else "stale"), data

    def _current(self, data: dict[str, Any]) -> bool:
        files = data.get("code_files")
        if not isinstance(files, dict) or not files:
            return False
        root = self.code_root or package_root()
        for rel, digest in files.items():
            if rel not in self._digests:
                path = root / str(rel)
                self._digests[rel] = (hashlib.sha256(path.read_bytes()).hexdigest()
                                      if root in path.resolve().parents and path.is_file()
                                      else None)
            if self._digests[rel] != digest:
                return False
        return True

    def failure(self, key: str) -> dict[str, Any] | None:
        return _read_json(self.failed_path(key), key)

    def save_result(self, key: str, data: dict[str, Any]) -> None:
        write_atomic(self.result_path(key), data)
        self.failed_path(key).unlink(missing_ok=True)

    def save_failure(self, key: str, data: dict[str, Any]) -> None:
        write_atomic(self.failed_path(key), data)


def read_json(path: Path, what: str) -> Any:
    """A bounded JSON file (a result, a plan, a point's --json output); InputError otherwise."""
    from railgang.daemon.inputs import read_input

    text = read_input(path, what, limit=RESULT_MAX_BYTES)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{what} is not valid JSON: {exc}", path=str(path)) from exc


def _read_json(path: Path, key: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = read_json(path, "sweep result")
    except InputError:
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


__all__ = [
    "PLAN_FORMAT",
    "RESULT_FORMAT",
    "Store",
    "code_fingerprint",
    "code_id",
    "git_revision",
    "input_hash",
    "package_root",
    "point_key",
    "read_json",
    "write_atomic",
]
