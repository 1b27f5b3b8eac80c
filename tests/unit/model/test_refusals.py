"""A refusal's details cross the wire as one model per kind and are read back as it."""

from __future__ import annotations

from bodega.model.capacity import Ask
from bodega.model.errors import InsufficientCapacity, TooManyRequests, from_wire
from bodega.model.refusals import NoRoom, RefusalDetails, RetryLater, Unplaced
from bodega.model.rows import Free

FREE = Free(millicpus=500, cpus=0.5, memory_mb=256, disk_gb=10, summary="little")

# A worker's no as the ledger sent it before the models: the free room and the ask.
OLD_NO_ROOM = {"error": "could not reserve resource for machine: memory", "status":
               "insufficient_capacity",
               "details": {"free": FREE.doc(), "asked": {
                   "cpu_kind": "shared", "cpus": 1, "memory_mb": 512, "disk_gb": 0, "gpus": 0,
                   "gpu_kind": None, "isolation": "container"}}}


def test_a_workers_no_reads_back_as_no_room_with_its_free_room_and_its_ask() -> None:
    err = from_wire(409, OLD_NO_ROOM)
    assert isinstance(err.details, NoRoom)
    assert err.details.free == FREE
    assert err.details.asked == Ask(cpus=1, memory_mb=512)
    assert err.details.full is None
    sent = InsufficientCapacity("no", details=NoRoom(free=FREE, asked=Ask(cpus=1)))
    again = from_wire(409, sent.to_wire())
    assert again.details == sent.details


def test_a_full_worker_says_so_and_the_figures_are_not_asked_for() -> None:
    err = from_wire(409, {"error": "no addresses", "status": "insufficient_capacity",
                          "details": {"full": True}})
    assert err.details == NoRoom(full=True)
    assert NoRoom(full=True).doc() == {"full": True}  # as it was sent before the model


def test_a_full_queue_says_when_to_come_back() -> None:
    sent = TooManyRequests("full", retry_after=3.0, status="resource_exhausted",
                           details=RetryLater(retry_after=3.0))
    err = from_wire(429, sent.to_wire())
    assert err.details == RetryLater(retry_after=3.0)
    assert err.retry_after == 3.0


def test_a_refusal_of_a_kind_not_known_here_is_passed_on_whole() -> None:
    body = {"error": "x", "status": "y", "details": {"quota": {"left": 0}}}
    err = from_wire(412, body)
    assert type(err.details) is RefusalDetails
    assert err.to_wire() == body
    placed = from_wire(412, {"error": "none", "status": "insufficient_capacity",
                             "details": {"placement": {"regions": []}}})
    assert placed.details == Unplaced(placement={"regions": []})
    bad_free = from_wire(409, {"error": "x", "details": {"free": "plenty"}})
    assert type(bad_free.details) is RefusalDetails  # unreadable as NoRoom: kept, not believed
