"""The dashboard's metrics charts: their PromQL and their drawing (pure)."""

from __future__ import annotations

from bodega.broker.ui.core.charts import (
    HEIGHT,
    SPECS,
    WIDTH,
    ChartSpec,
    chart,
    chart_queries,
    shown,
)

CPU = ChartSpec("cpu", "CPU", "%")


def test_each_chart_asks_the_apps_series_or_one_machines() -> None:
    app = chart_queries("web")
    assert set(app) == {s.key for s in SPECS}
    assert all('app="web"' in q and "machine=" not in q for q in app.values())
    one = chart_queries("web", "m1")
    assert all('app="web",machine="m1"' in q for q in one.values())
    assert one["up"] == 'sum(up{app="web",machine="m1",job="apps"})'


def test_a_chart_spans_its_box_lowest_at_the_bottom_newest_value_beside_it() -> None:
    drawn = chart(CPU, [(110.0, 50.0), (100.0, 10.0), (120.0, 30.0)], 100.0, 120.0)
    points = [tuple(map(float, p.split(","))) for p in drawn.points.split()]
    assert [x for x, _ in points] == [0.0, WIDTH / 2, WIDTH]  # in time order
    assert points[0][1] == HEIGHT - 2  # the lowest, at the bottom
    assert points[1][1] == 2.0  # the highest, at the top
    assert (drawn.last, drawn.low, drawn.high) == ("30.0%", "10.0%", "50.0%")
    assert not drawn.empty


def test_nothing_measured_is_drawn_as_nothing() -> None:
    nothing = chart(CPU, [(100.0, float("nan")), (500.0, 1.0)], 100.0, 120.0)
    assert nothing.empty
    assert nothing.last == ""
    one = chart(CPU, [(110.0, 5.0)], 100.0, 120.0)
    assert len(one.points.split()) == 2  # a short stroke, not a lone invisible point
    flat = chart(CPU, [(100.0, 7.0), (120.0, 7.0)], 100.0, 120.0)
    assert flat.points == f"0.0,{HEIGHT / 2:.1f} {WIDTH:.1f},{HEIGHT / 2:.1f}"  # the middle


def test_values_are_shown_in_their_units() -> None:
    assert shown(3 * 1024**2, "bytes") == "3.0 MiB"
    assert shown(0.0042, "s") == "4.2 ms"
    assert shown(12.34, "/s") == "12.3/s"
    assert shown(2.0, "") == "2"
