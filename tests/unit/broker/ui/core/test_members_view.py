"""The members screen: brokers, proxies, then workers by name; a suspect's time to refute."""

from __future__ import annotations

from bodega.broker.ui.core.members_view import member_rows, status_counts


def test_members_are_ordered_by_role_and_a_suspect_shows_its_time_left() -> None:
    asked: list[str] = []

    def left(name: str) -> float | None:
        asked.append(name)
        return -0.5 if name == "ams-10" else 2.5

    rows = member_rows([
        {"name": "ams-10", "role": "worker", "status": "suspect", "incarnation": 3},
        {"name": "ams-2", "role": "worker", "status": "suspect", "meta": {"url": "http://w"}},
        {"name": "proxy", "role": "proxy", "status": "alive"},
        {"name": "broker", "role": "broker", "status": "alive"},
        {"name": "ams-1", "role": "worker", "status": "dead"},
    ], left)
    assert [r.name for r in rows] == ["broker", "proxy", "ams-1", "ams-2", "ams-10"]
    assert [r.suspect_for for r in rows] == [None, None, None, 2.5, 0.0]  # never below zero
    assert sorted(asked) == ["ams-10", "ams-2"]  # only suspects are asked about
    assert rows[3].url == "http://w"
    assert rows[4].incarnation == 3
    assert status_counts(rows) == (("alive", 2), ("dead", 1), ("suspect", 2))
