"""``bodega metrics``' figures per machine from the answers of its queries (pure)."""

from __future__ import annotations

from bodega.cli.commands.core.metrics_top import cells, figures, queries, size


def test_each_figure_is_asked_by_machine_of_the_apps_series_only() -> None:
    asked = queries("web")
    assert set(asked) == {"cpu", "memory", "rps", "p95", "avg"}
    for text in asked.values():
        assert 'app="web"' in text
        assert "by (machine" in text
    assert asked["p95"].startswith("histogram_quantile(0.95,")


def test_a_machine_without_series_shows_dashes_and_p95_falls_back_to_the_average() -> None:
    rows = figures([("m2", "syd", "started"), ("m1", "ams", "started"),
                    ("m3", "ams", "stopped")],
                   {"cpu": {"m1": 12.5, "m2": float("nan")}, "memory": {"m1": 3 * 1024**2},
                    "rps": {"m1": 4.0, "m2": 0.0}, "p95": {"m1": 0.0123},
                    "avg": {"m1": 0.005, "m2": 0.002}})
    assert [r.id for r in rows] == ["m1", "m3", "m2"]  # by region, then id
    m1, m3, m2 = rows
    assert (m1.cpu_percent, m1.latency, m1.latency_seconds) == (12.5, "p95", 0.0123)
    assert (m2.cpu_percent, m2.latency, m2.latency_seconds) == (None, "avg", 0.002)
    assert m2.requests_per_second == 0.0  # a zero measured is shown, not a dash
    assert cells(m1) == ("m1", "ams", "started", "12.5%", "3.0 MiB", "4.0", "12.3 ms")
    assert cells(m2)[-1] == "2.0 ms (avg)"
    assert cells(m3)[3:] == ("-", "-", "-", "-")
    assert m3.to_json()["latency"] is None


def test_sizes() -> None:
    assert size(None) == "-"
    assert size(512) == "512 B"
    assert size(1536) == "1.5 KiB"
    assert size(5 * 1024**4) == "5120.0 GiB"
