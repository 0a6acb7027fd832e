"""The pure quota rules: hierarchy checks and Q_eff up the tree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.org.hierarchy import QuotaNode, check_hierarchy, effective_quota


def tree(**over: tuple[int, int | None]) -> dict[str, QuotaNode]:
    base = {"org": ("org", None, 100, None), "d1": ("dept", "org", 60, 80),
            "d2": ("dept", "org", 40, None), "a": ("team", "d1", 30, 50),
            "b": ("team", "d1", 20, None), "c": ("team", "d2", 10, None)}
    out = {}
    for name, (level, parent, g, lim) in base.items():
        g, lim = over.get(name, (g, lim))
        out[name] = QuotaNode(name, level, parent, g, lim)
    return out


def test_sound_tree_has_no_failures() -> None:
    assert check_hierarchy(tree()) == {}


@pytest.mark.parametrize(("over", "fields"), [
    ({"a": (61, None)}, {"a.guaranteed_gpus", "d1.guaranteed_gpus"}),
    ({"b": (31, None)}, {"d1.guaranteed_gpus"}),
    ({"a": (30, 81)}, {"a.limit_gpus"}),
    ({"a": (30, 20)}, {"a.guaranteed_gpus"}),
    ({"org": (90, None)}, {"org.guaranteed_gpus"}),
], ids=["team-over-dept", "sum-over-dept", "limit-over-parent", "guarantee-over-limit",
        "org-under-depts"])
def test_failures_name_every_field(over: dict[str, tuple[int, int | None]],
                                   fields: set[str]) -> None:
    assert set(check_hierarchy(tree(**over))) == fields


def test_q_eff_names_the_binding_level() -> None:
    t = tree()
    eq = effective_quota(t, {"a": 10, "b": 45, "c": 5}, "a")
    # team a: limit 50; d1: 80 - 45 = 35; org: 100 - (45 + 5) = 50
    assert (eq.q_eff, eq.binding, eq.allocated) == (35, "d1", 10)
    assert [(lv.account, lv.others_allocated) for lv in eq.levels] == [
        ("a", 0), ("d1", 45), ("org", 50)]
    uncapped = {n: QuotaNode(n, v.level, v.parent, 0, None) for n, v in t.items()}
    assert effective_quota(uncapped, {}, "a").q_eff is None


def _subtree(t: dict[str, QuotaNode], root: str, alloc: dict[str, int]) -> int:
    return alloc.get(root, 0) + sum(_subtree(t, n, alloc) for n, v in t.items()
                                    if v.parent == root)


@settings(max_examples=200, deadline=None)
@given(alloc=st.dictionaries(st.sampled_from("abc"), st.integers(0, 120)),
       team=st.sampled_from("abc"))
def test_q_eff_is_the_largest_holding_that_breaks_no_cap(alloc: dict[str, int],
                                                         team: str) -> None:
    """Holding q_eff keeps every level on the team's path within its cap (where the others
    alone are within it); holding one more GPU breaks the binding level."""
    t = tree()
    eq = effective_quota(t, alloc, team)
    assert eq.q_eff is not None and eq.q_eff >= 0
    holding = {**alloc, team: eq.q_eff}
    for lv in eq.levels:
        if lv.cap is not None and lv.others_allocated <= lv.cap:
            assert _subtree(t, lv.account, holding) <= lv.cap
    binding = next(lv for lv in eq.levels if lv.account == eq.binding)
    if binding.cap is not None and binding.others_allocated < binding.cap:
        one_more = {**alloc, team: eq.q_eff + 1}
        assert _subtree(t, binding.account, one_more) > binding.cap
