"""The model of slurmdbd's Down miscount the sreport e2e test subtracts
(tests/support/slurmdbd_down.py), held to what the local 22.05 cluster's rollup gave: one hour
(03:00-04:00) with three cluster bring-ups, two drains and a down, two pairs of reservations;
sreport said 20608 GPU-seconds Down where the node events last 706 node-seconds (x 8 GPUs)."""

from __future__ import annotations

from tests.support.slurmdbd_down import Event, Resv, overcount_s, parse_events, parse_resvs

H = 1_796_353_200  # 03:00


def at(m: int, s: int) -> int:
    return H + 60 * m + s


NODES = [f"n{i:02d}" for i in range(1, 17)]
EVENTS = [
    *(Event(n, at(10, 56), at(10, 57)) for n in NODES),  # cold starts
    *(Event(n, at(16, 39), at(16, 47)) for n in NODES),
    *(Event(n, at(17, 30), at(17, 56 if n in ("n15", "n16") else 55)) for n in NODES),
    Event("n02", at(11, 13), at(12, 34)), Event("n02", at(12, 36), at(12, 56)),  # drains
    Event("n03", at(11, 13), at(11, 21)),  # down
    Event("n13", at(16, 57), at(17, 22)), Event("n14", at(16, 57), at(17, 23)),
]
RESVS = [Resv(frozenset({"n04"}), at(11, 13), at(12, 34), False),
         Resv(frozenset({"n05"}), at(11, 13), at(12, 34), True),
         Resv(frozenset({"n15"}), at(16, 57), at(17, 22), False),
         Resv(frozenset({"n16"}), at(16, 57), at(17, 22), True)]


def test_the_model_gives_what_the_rollup_counted() -> None:
    own = sum(e.end - e.start for e in EVENTS if e.end is not None)
    extra = overcount_s(EVENTS, RESVS, H, H + 3600)
    assert extra == {"n04": 557, "n05": 557, "n15": 378, "n16": 378}
    assert (own + sum(extra.values())) * 8 == 20608  # sreport -t Seconds --tres=gres/gpu Down


def test_an_event_inside_its_reservation_is_counted_once() -> None:
    resv = [Resv(frozenset({"n01", "n02"}), H + 100, H + 400, False)]
    assert overcount_s([Event("n01", H + 200, H + 300)], resv, H, H + 3600) == {}
    # in a MAINT one it is PLND Down, not Down: nothing over
    resv = [Resv(frozenset({"n01"}), H + 100, H + 400, True)]
    assert overcount_s([Event("n01", H + 200, H + 300)], resv, H, H + 3600) == {}
    # apart, in the same hour: the gap counts as Down; in the next hour nothing
    assert overcount_s([Event("n01", H + 500, H + 600)], resv, H, H + 3600) == {"n01": 100}
    assert overcount_s([Event("n01", H + 3700, H + 3800)], resv, H, H + 7200) == {}


def test_sacctmgr_lines() -> None:
    events = parse_events("|2026-12-04T03:10:56|Unknown|0\n"
                          "n02|2026-12-04T03:11:13|2026-12-04T03:12:34|514\n"
                          "n05|2026-12-04T03:11:13|Unknown|32770\n")
    assert [(e.node, e.end is None, e.maint) for e in events] == [("n02", False, False),
                                                                   ("n05", True, True)]
    resvs = parse_resvs("4|n[15-16]|2026-12-04T03:16:57|2026-12-04T03:17:22|MAINT,SPEC_NODES\n"
                        "1|n04|2026-12-04T03:11:13|2026-12-04T03:12:34|SPEC_NODES\n")
    assert [(sorted(r.nodes), r.maint) for r in resvs] == [(["n04"], False),
                                                           (["n15", "n16"], True)]
