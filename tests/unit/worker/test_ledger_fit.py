"""The ledger's hint that an ask may fit agrees with what a reserve decides, as the host
fills, empties and is cordoned (a caller that asks often skips only reserves that would
have been refused); room held by what gives way shows as free, and is made for a call
refused for room (an update's refusal included), once, never for a cordon."""

from __future__ import annotations

import pytest

from bodega.model.capacity import Ask
from bodega.model.errors import Conflict
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store.ledger import CapacityRejected

ASK = Ask(cpus=1, memory_mb=256)  # the host: 2 cpus at 2x, 1024 MB: room for four


def reserve_agrees(w: Worker) -> bool:
    hinted = w.ledger.may_fit(ASK)
    try:
        w.ledger.reserve(ASK, "app", 30.0)
    except CapacityRejected:
        assert not hinted
        return False
    assert hinted
    return True


async def test_may_fit_says_what_the_next_reserve_decides(
        worker: tuple[Worker, FakeDriver]) -> None:
    w, _ = worker
    assert [reserve_agrees(w) for _ in range(5)] == [True] * 4 + [False]
    held = w.store.db.execute("SELECT id FROM reservations").fetchone()[0]
    w.ledger.release(held)
    assert reserve_agrees(w)
    w.ledger.set_cordoned(True)
    w.ledger.release(w.store.db.execute("SELECT id FROM reservations").fetchone()[0])
    with pytest.raises(CapacityRejected):
        w.ledger.reserve(ASK, "app", 30.0)
    assert not w.ledger.may_fit(ASK)  # room, but cordoned


async def test_room_that_gives_way_shows_free_and_is_made_for_a_refused_ask(
        worker: tuple[Worker, FakeDriver]) -> None:
    w, _ = worker
    held = [w.ledger.reserve(ASK, "app", 30.0) for _ in range(4)]  # the host is full
    w.ledger.giving_way = lambda: [ASK, ASK]  # two of them give way on demand
    assert w.ledger.snapshot().free.memory_mb == 512
    asked: list[Ask] = []

    async def make_room(ask: Ask, exclude_machine: str | None) -> bool:
        asked.append(ask)
        excluded.append(exclude_machine)
        w.ledger.release(held.pop().id)  # as an idle slot's stop would
        return True

    excluded: list[str | None] = []

    w.ledger.make_room = make_room

    async def reserve() -> str:
        return w.ledger.reserve(ASK, "app", 30.0).id

    assert await w.ledger.making_room(ASK, reserve)
    assert asked == [ASK]  # made once, then tried again
    w.ledger.set_cordoned(True)
    with pytest.raises(CapacityRejected) as cordoned:
        await w.ledger.making_room(ASK, reserve)
    assert cordoned.value.status == "cordoned"
    assert asked == [ASK]  # nothing gives way to a cordon

    # An update's refusal for room is a plain Conflict of that status: room is made for
    # it too, its own machine's room counted as its own.
    w.ledger.set_cordoned(False)

    async def update() -> str:
        if len(asked) == 1:
            raise Conflict("aborted: could not reserve resource for machine",
                           status="insufficient_capacity")
        return "updated"

    assert await w.ledger.making_room(ASK, update, exclude_machine="m1") == "updated"
    assert excluded == [None, "m1"]


async def test_may_fit_counts_what_would_be_freed_and_a_machine_s_own_room(
        worker: tuple[Worker, FakeDriver]) -> None:
    w, _ = worker
    for _ in range(4):
        w.ledger.reserve(ASK, "app", 30.0)
    assert not w.ledger.may_fit(ASK)
    assert w.ledger.may_fit(ASK, freed=[ASK])
    assert not w.ledger.may_fit(Ask(cpus=1, memory_mb=512), freed=[ASK])
