"""One host-list expander with a limit (issue 34 item 5): every module goes through
``railgang.topology.hostnames``; a list of many parts, each under python-hostlist's per-part
bound, is refused once it passes the limit instead of building millions of names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railgang.topology.hostnames import MAX_HOSTS, HostListError, collect, expand

ROOT = Path(__file__).resolve().parents[2] / "railgang"


def test_expands_slurm_lists_in_order_without_duplicates() -> None:
    assert expand("n[01-03],gpu[1-2]-ib[0-1]") == ("n01", "n02", "n03", "gpu1-ib0", "gpu1-ib1",
                                                   "gpu2-ib0", "gpu2-ib1")
    assert expand("n2,n1,n2") == ("n2", "n1")
    assert expand("") == () and expand("  ") == ()


@pytest.mark.parametrize("bad", ["n[", "n[3-1]", "n[a-b]", "n]x[", "n[0-9999999]"])
def test_a_malformed_list_is_one_line_naming_it(bad: str) -> None:
    with pytest.raises(HostListError) as exc:
        expand(bad)
    assert "\n" not in str(exc.value) and bad[:10] in str(exc.value)


def test_many_parts_each_under_the_per_part_bound_are_refused_early(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """python-hostlist stops one part at 100,000 names, not a list of 1,000 such parts
    (100 million names, gigabytes): refused after the first part past the limit, so the parts
    after it are never expanded (counted, not timed)."""
    import hostlist

    huge = ",".join(f"p{i}x[0-99999]" for i in range(1000))
    parts: list[str] = []
    real = hostlist.expand_hostlist
    monkeypatch.setattr(hostlist, "expand_hostlist", lambda p: parts.append(p) or real(p))
    with pytest.raises(HostListError, match="more than 1000 hosts"):
        expand(huge, limit=1000)
    assert parts == ["p0x[0-99999]"]
    parts.clear()
    with pytest.raises(HostListError, match=f"more than {MAX_HOSTS} hosts"):
        expand(huge)
    assert len(parts) == 2  # 100,000 names, then one part past the limit
    with pytest.raises(HostListError) as exc:
        expand(huge, limit=10)
    assert len(str(exc.value)) < 200


@given(st.lists(st.tuples(st.sampled_from(["n", "gpu", "a-b"]), st.integers(0, 300)),
                min_size=1, max_size=60, unique=True))
def test_collect_then_expand_gives_the_same_hosts(items: list[tuple[str, int]]) -> None:
    names = [f"{p}{i:03d}" for p, i in items]
    assert sorted(expand(collect(names))) == sorted(set(names))


def test_no_module_but_hostnames_imports_python_hostlist() -> None:
    users = []
    for path in ROOT.rglob("*.py"):
        if path.name == "hostnames.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Import) and any(a.name == "hostlist" for a in node.names)) or (
                    isinstance(node, ast.ImportFrom) and node.module == "hostlist"):
                users.append(str(path.relative_to(ROOT)))
    assert users == [], users
