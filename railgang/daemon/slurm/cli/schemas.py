"""Which schema a Slurm JSON document speaks, read from its own ``meta``, and one reader per schema.

Slurm's ``--json`` output changed shape between releases without changing its top-level keys
enough to notice: a reader that does not know the schema reads an empty cluster. So every
document names its schema and is read by that schema's reader, or refused:

| ``meta``                                                     | schema   | Slurm           |
|--------------------------------------------------------------|----------|-----------------|
| ``plugin.type = "openapi/v0.0.38"`` (sacct: ``dbv0.0.38``)     | v0.0.38  | 22.05           |
| ``plugin.data_parser = "data_parser/v0.0.40"`` … ``v0.0.45``   | v0.0.40+ | 23.11 – 26.05   |

Recorded from real clusters (tests/daemon/slurm/cli/data): 22.05.8 (v0.0.38), 24.11.5 (default
v0.0.42; it serves v0.0.40-v0.0.42), 26.05.5 (default v0.0.45; serves v0.0.42-v0.0.45, all four
recorded). v0.0.40/v0.0.41 are 24.11's older views of the same records, read the same way.

Anything else (no ``meta``, an ``openapi/`` or ``data_parser/`` version not in that table) is a
:class:`SchemaProblem`: the daemon fails the cycle loudly instead of seeing no jobs.

The v0.0.38 reader is ``records.py`` itself. The v0.0.40+ reader (:class:`DataParserReader`)
turns each record into the fields and shapes of v0.0.38 that ``records.py``/``sacct.py`` read,
field by field, leaving a value it does not understand as it is, so the hardened per-record
readers still skip one bad record with a warning naming the job and never raise past it:

- ``job_state``/``state.current``/``node.state`` are lists (``["PENDING", "REQUEUED"]``): the
  22.05 word is the first flag Slurm's ``job_state_string`` would print, else the base state;
- numbers are ``{"set", "infinite", "number"}``: unset is absent, an infinite ``time_limit`` is
  unlimited (``None``, was ``null``), any other infinite number is ``Infinity`` (the reader
  refuses the record);
- ``job_resources.nodes.allocation[].name`` is ``job_resources.allocated_nodes[].nodename``;
- ``sinfo[]`` entries group nodes (``nodes.nodes[]``) of one partition with the same state,
  GRES (``gres.total``), reason (``reason.description``, set by ``reason.user``) and features (``features.active``): one
  node record per name, first partition wins; a group of one node gives its CPUs and memory
  (``cpus.total``/``allocated``, ``memory.maximum``/``allocated``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from railgang.daemon.slurm.cli.parse import ParseProblem

LEGACY = "v0.0.38"
DATA_PARSER_VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
# what the backend asks for where the CLI takes a version (`squeue --json=v0.0.42`, 23.02+):
# 24.11 (v0.0.40-42) and 26.05 (v0.0.42-45) both serve it, so an upgrade between them does not
# change what railgang reads
PINNED = "v0.0.42"

_VERSION = re.compile(r"^(?:openapi|data_parser)/(?:db)?(v\d+\.\d+\.\d+)$")


class SchemaProblem(ParseProblem):
    """The document's schema is not one railgang reads, or its records all vanished in the
    reader: the whole output is refused (never an empty cluster)."""


@dataclass(frozen=True, slots=True)
class Schema:
    version: str  # v0.0.38, v0.0.42, ...
    release: str  # the Slurm release that wrote it (24.11.5), "" when meta does not say

    @property
    def legacy(self) -> bool:
        return self.version == LEGACY

    def __str__(self) -> str:
        return f"{self.version} (Slurm {self.release or '?'})"


def schema_of(doc: Mapping[str, Any], command: str) -> Schema:
    """The schema ``doc`` declares in its ``meta``; :class:`SchemaProblem` if none we read."""
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        raise SchemaProblem(f"{command}: the output has no 'meta' naming its schema; refusing "
                            "to read it (an unknown schema reads as an empty cluster)")
    plugin = meta.get("plugin")
    plugin = plugin if isinstance(plugin, dict) else {}
    release = _release(meta)
    declared = [str(plugin.get(k) or "") for k in ("data_parser", "type")]
    for text in declared:
        m = _VERSION.match(text)
        if m and (m.group(1) == LEGACY or m.group(1) in DATA_PARSER_VERSIONS):
            return Schema(m.group(1), release)
    said = next((t for t in declared if t), "nothing")
    raise SchemaProblem(
        f"{command}: unknown output schema {said[:60]!r} (Slurm {release or '?'}); railgang reads "
        f"openapi/{LEGACY} (Slurm 22.05) and data_parser/{DATA_PARSER_VERSIONS[0]}-"
        f"{DATA_PARSER_VERSIONS[-1]} (Slurm 23.11-26.05); refusing to read it as an empty cluster")


def _release(meta: Mapping[str, Any]) -> str:
    slurm = meta.get("slurm") or meta.get("Slurm")
    release = slurm.get("release") if isinstance(slurm, dict) else None
    return release[:32] if isinstance(release, str) else ""


# Slurm's job_state_string(): a flag, when set, is printed instead of the base state, in this order
_FLAG_WORDS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
               "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")
BASE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
                         "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                         "OUT_OF_MEMORY"})
KNOWN_JOB_STATES = BASE_STATES | frozenset(_FLAG_WORDS)


def state_word(states: Any) -> Any:
    """``["PENDING", "REQUEUED"]`` -> ``"REQUEUED"``, ``["RUNNING"]`` -> ``"RUNNING"`` (22.05's
    single word). Anything but a non-empty list of strings is returned as it is."""
    if not isinstance(states, list) or not states or not all(isinstance(s, str) for s in states):
        return states
    flags = set(states)
    return next((w for w in _FLAG_WORDS if w in flags), states[0])


def _number(value: Any, *, limit: bool = False) -> Any:
    """``{"set", "infinite", "number"}`` -> the number; unset -> ``None``; infinite -> ``None``
    for a time limit (unlimited), else ``inf``. Anything else is returned as it is."""
    if not isinstance(value, dict) or "number" not in value:
        return value
    if value.get("infinite") is True:
        return None if limit else math.inf
    if value.get("set") is False:
        return None
    return value.get("number")


class DataParserReader:
    """Records of data_parser v0.0.40+ (Slurm 23.11-26.05) in the shapes of v0.0.38."""

    def job(self, raw: Any) -> Any:
        """One ``squeue --json`` ``jobs[]`` record."""
        if not isinstance(raw, dict):
            return raw
        out = dict(raw)
        for key, value in raw.items():
            if isinstance(value, dict) and "number" in value and "set" in value:
                out[key] = _number(value, limit=key == "time_limit")
        out["job_state"] = state_word(raw.get("job_state"))
        res = raw.get("job_resources")
        if isinstance(res, dict) and isinstance(res.get("nodes"), dict):
            alloc = res["nodes"].get("allocation")
            if isinstance(alloc, list):
                out["job_resources"] = {
                    **res, "allocated_nodes": [
                        {"nodename": a.get("name")} if isinstance(a, dict) else a for a in alloc]}
        return out

    def nodes(self, doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """``sinfo --json``'s ``sinfo[]`` groups -> (where, one v0.0.38 node record) per node
        name, first group wins; a group that cannot be split yields itself to be refused."""
        seen: set[str] = set()
        groups = doc.get("sinfo")
        if not isinstance(groups, list):
            raise ParseProblem("sinfo --json: 'sinfo' is not a list")
        parts = _partitions(groups)
        for i, group in enumerate(groups):
            names = group.get("nodes", {}).get("nodes") if isinstance(group, dict) else None
            if not isinstance(group, dict) or not isinstance(group.get("nodes"), dict) or (
                    not isinstance(names, list)):
                yield f"sinfo[{i}]", group  # not a node: the node reader says why
                continue
            node = self._group(group)
            for name in names:
                if isinstance(name, str) and name in seen:
                    continue
                if isinstance(name, str):
                    seen.add(name)
                yield f"sinfo[{i}]", {**node, "name": name, "partitions": parts.get(name, [])}

    @staticmethod
    def _group(group: Mapping[str, Any]) -> dict[str, Any]:
        def part(key: str, sub: str) -> Any:
            value = group.get(key)
            return value.get(sub) if isinstance(value, dict) else value

        states = part("node", "state")
        base, flags = ("", []) if not isinstance(states, list) or not states else (
            states[0], states[1:])
        out = {"gres": part("gres", "total"), "state": base, "state_flags": flags,
               "reason": part("reason", "description"), "reason_set_by_user": part("reason", "user"),
               "active_features": part("features", "active"), "features": part("features", "total")}
        if part("nodes", "total") == 1:  # CPUs and memory of one node (asks.py); a group's are sums
            out |= {"cpus": part("cpus", "total"), "alloc_cpus": part("cpus", "allocated"),
                    "real_memory": part("memory", "maximum"), "alloc_memory": part("memory", "allocated")}
        return out

    def accounting(self, raw: Any) -> Any:
        """One ``sacct --json`` ``jobs[]`` record: ``state.current`` as one word."""
        if not isinstance(raw, dict) or not isinstance(raw.get("state"), dict):
            return raw
        return {**raw, "state": {**raw["state"], "current": state_word(raw["state"].get("current"))}}


def _partitions(groups: list[Any]) -> dict[Any, list[str]]:
    """Every partition each node is in: a node of two partitions is in two groups (the node
    record takes the first group's other fields, and both partitions)."""
    out: dict[Any, list[str]] = {}
    for group in groups:
        part = group.get("partition") if isinstance(group, dict) else None
        name = part.get("name") if isinstance(part, dict) else part
        names = group.get("nodes", {}).get("nodes") if isinstance(group, dict) and isinstance(
            group.get("nodes"), dict) else None
        if isinstance(name, str) and name and isinstance(names, list):
            for node in names:
                if isinstance(node, str) and name not in out.setdefault(node, []):
                    out[node].append(name)
    return out


def reader_for(schema: Schema) -> DataParserReader | None:
    """The schema's record reader; ``None`` for v0.0.38, which ``records.py`` reads as it is."""
    return None if schema.legacy else DataParserReader()


def json_flag(version: str | None) -> str:
    """``--json`` or ``--json=VERSION`` (23.02+ take a data_parser version; 22.05 refuses one)."""
    return f"--json={version}" if version else "--json"


__all__ = ["BASE_STATES", "DATA_PARSER_VERSIONS", "KNOWN_JOB_STATES", "LEGACY", "PINNED",
           "DataParserReader", "Schema", "SchemaProblem", "json_flag", "reader_for", "schema_of",
           "state_word"]
