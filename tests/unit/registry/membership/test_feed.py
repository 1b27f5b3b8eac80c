"""Feeds deliver in order, end when closed, and cut off a consumer that falls behind."""

from __future__ import annotations

import pytest

from bodega.registry.membership.feed import Feed, FeedLagged


async def test_a_feed_yields_in_order_and_ends_when_closed() -> None:
    closed: list[Feed[int]] = []
    feed: Feed[int] = Feed(10, closed.append)
    for i in range(3):
        feed.put(i)
    feed.close()
    assert [i async for i in feed] == [0, 1, 2]
    assert closed == [feed]


async def test_a_consumer_that_falls_behind_gets_feed_lagged_after_what_it_had() -> None:
    feed: Feed[int] = Feed(2, lambda f: None)
    for i in range(3):
        feed.put(i)
    assert [await anext(feed), await anext(feed)] == [0, 1]
    with pytest.raises(FeedLagged):
        await anext(feed)
    assert feed.lagged


async def test_closing_as_a_context_manager_unsubscribes() -> None:
    closed: list[Feed[int]] = []
    with Feed(2, closed.append) as feed:
        feed.put(1)
    assert closed == [feed]
    feed.put(2)  # ignored once closed
    assert [i async for i in feed] == [1]
