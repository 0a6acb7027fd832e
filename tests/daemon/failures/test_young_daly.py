"""Young–Daly advice: the formula, its minimum, its edges."""

from __future__ import annotations

import math

import pytest

from railgang.daemon.failures.young_daly import advise, waste, young_daly_s


def test_formula() -> None:
    assert young_daly_s(60, 3 * 3600) == pytest.approx(math.sqrt(2 * 60 * 3 * 3600))
    assert young_daly_s(0, 3600) == 0
    assert young_daly_s(10, math.inf) == math.inf
    assert young_daly_s(1e6, 100) == 100  # capped at the MTBF


@pytest.mark.parametrize(("cost", "mtbf"), [(-1, 10), (math.nan, 10), (math.inf, 10), (1, 0),
                                            (1, -5), (1, math.nan)])
def test_bad_inputs(cost: float, mtbf: float) -> None:
    with pytest.raises(ValueError):
        young_daly_s(cost, mtbf)


@pytest.mark.parametrize("cost", [1.0, 5.0, 60.0, 600.0])
@pytest.mark.parametrize("mtbf", [600.0, 3 * 3600.0, 86400.0 * 30])
def test_advised_interval_minimises_first_order_waste(cost: float, mtbf: float) -> None:
    best = young_daly_s(cost, mtbf)
    at_best = waste(best, cost, mtbf, 120.0)
    assert 0 <= at_best <= 1
    for factor in (0.25, 0.5, 0.8, 1.25, 2.0, 4.0):
        assert waste(best * factor, cost, mtbf, 120.0) >= at_best - 1e-12


def test_advice_renders_current_interval() -> None:
    advice = advise(3 * 3600, 10, 120, current_interval_s=1800)
    assert advice.current_waste is not None and advice.current_waste > advice.waste
    text = advice.render()
    assert "Young-Daly" in text and "now every 30 min" in text
    assert "never" in advise(math.inf, 10, 120).render()


@pytest.mark.parametrize("stored", [None, "x", {}, {"waste": "0.1"}, {"waste": math.nan},
                                    {"waste": True}, {"waste": -1}],
                         ids=["none", "str", "empty", "str-waste", "nan", "bool", "negative"])
def test_stored_advice_that_is_not_advice_renders_nothing(stored: object) -> None:
    from railgang.daemon.failures.young_daly import render_advice

    assert render_advice(stored) == ""


def test_advice_round_trips_through_json() -> None:
    import json

    from railgang.daemon.failures.young_daly import render_advice

    advice = advise(3 * 3600, 10, 120, current_interval_s=1800)
    assert render_advice(json.loads(json.dumps(advice.as_dict()))) == advice.render()
    assert json.dumps(advise(math.inf, 10, 120).as_dict())  # no Infinity in JSON
