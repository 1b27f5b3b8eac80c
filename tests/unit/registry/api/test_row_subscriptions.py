"""Subscriptions: the matching rows, then inserts, updates and deletes as the result changes."""

from __future__ import annotations

import asyncio

import pytest

from bodega.registry.api.subscriptions import RowChange, Subscriptions, normalize_filters
from bodega.registry.membership.feed import FeedLagged
from bodega.registry.replication.core.rows import Change
from tests.unit.registry.replication.row_kit import machine_doc, replica, row


def drain(feed: object) -> list[RowChange]:
    """What a subscription holds right now, without waiting (no event loop turns needed)."""
    out: list[RowChange] = []
    items = feed._items  # type: ignore[attr-defined]
    while items:
        out.append(items.popleft())
    return out


def test_initial_rows_then_changes_as_they_enter_change_and_leave_the_result() -> None:
    r = replica("w1")
    hub = Subscriptions()
    r.write("machines", "m1", machine_doc("m1", "w1", "started"), shared=False)
    r.write("machines", "m2", machine_doc("m2", "w1", "stopped"), shared=False)
    sub = hub.open("machines", normalize_filters("machines", {"state": "started"}),
                   r.view.select("machines", {"state": "started"}))
    assert [(c.kind, c.key) for c in drain(sub)] == [("initial", "m1")]

    def write(key: str, state: str | None, **extra: object) -> None:
        doc = None if state is None else machine_doc(key, "w1", state, **extra)
        change = r.write("machines", key, doc, shared=False)
        assert change is not None
        hub.publish([change])

    write("m2", "started")  # enters the result
    write("m1", "started", note=1)  # changes inside it
    write("m2", "stopped")  # leaves it
    write("m3", "stopped")  # never in it
    write("m3", "started")
    write("m3", None)  # deleted
    kinds = [(c.kind, c.key, c.doc is None) for c in drain(sub)]
    assert kinds == [("insert", "m2", False), ("update", "m1", False), ("delete", "m2", True),
                     ("insert", "m3", False), ("delete", "m3", True)]


def test_a_subscriber_that_falls_behind_is_cut_off_not_silently_skipped() -> None:
    lagged: list[int] = []
    hub = Subscriptions(capacity=3, on_lagged=lambda: lagged.append(1))
    sub = hub.open("apps", {}, [row("apps", "a0", {"name": "a0", "org_slug": "o"}, "x", 1)])
    for i in range(1, 6):
        new = row("apps", f"a{i}", {"name": f"a{i}", "org_slug": "o"}, "x", i + 1)
        hub.publish([Change(None, new)])
    assert lagged == [1]
    assert len(hub) == 0

    async def consume() -> list[str]:
        seen = []
        async for change in sub:
            seen.append(change.key)
        return seen

    with pytest.raises(FeedLagged):
        asyncio.run(consume())


def test_filters_must_name_indexed_columns() -> None:
    assert normalize_filters("workers", {"cordoned": True, "name": "w1"}) == {
        "cordoned": 1, "name": "w1"}
    with pytest.raises(ValueError, match="filtered on"):
        normalize_filters("workers", {"url; DROP TABLE": "x"})
    with pytest.raises(ValueError, match="unknown table"):
        normalize_filters("nope", {})
    with pytest.raises(ValueError, match="string or an integer"):
        normalize_filters("workers", {"name": 1.5})


def test_a_reset_shows_as_deletes() -> None:
    hub = Subscriptions()
    held = row("apps", "a", {"name": "a", "org_slug": "o"}, "x", 1)
    sub = hub.open("apps", {}, [held])
    hub.publish([Change(held, None)])
    assert [(c.kind, c.key) for c in drain(sub)] == [("initial", "a"), ("delete", "a")]
