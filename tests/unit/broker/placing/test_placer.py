"""The placer counts a create on its worker while the create is in flight."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from bodega.broker.metrics import BrokerMetrics
from bodega.broker.placing.placer import Placer, PlacerConfig
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import MemoryCatalog
from bodega.broker.view.workers import Workers
from bodega.model.capacity import Ask, Totals
from bodega.model.errors import (
    BadRequest,
    BodegaError,
    Conflict,
    Indeterminate,
    InsufficientCapacity,
    Unavailable,
)
from bodega.model.refusals import NoRoom
from bodega.placement import PlacementRequest, Policy
from bodega.wire.internal.worker_calls import Reservation
from tests.poll_kit import until as poll_until

ASK = Ask(cpus=1, memory_mb=1024)


def placer(workers: int = 2, used: dict[str, Any] | None = None) -> tuple[Placer, Candidates]:
    catalog = MemoryCatalog()
    for i in range(workers):
        name = f"w{i}"
        catalog.put("workers", name, {
            "name": name, "region": "ams", "url": f"http://{name}",
            "totals": Totals(cpus=8, memory_mb=8192).row().doc(),
            "used": (used or {}).get(name, {}), "cordoned": False})
        catalog.set_status(name, "alive")
    candidates = Candidates(catalog)
    candidates.load()
    return Placer(candidates, cast(Workers, None), Policy(), PlacerConfig(),
                  BrokerMetrics(CollectorRegistry()), "b"), candidates


until = partial(poll_until, timeout=5.0, every=0)


def used_mb(candidates: Candidates, name: str) -> int:
    candidate = candidates.get(name)
    assert candidate is not None
    return candidate.used.memory_mb


async def test_concurrent_creates_spread_while_the_first_is_in_flight() -> None:
    place, candidates = placer()
    release = asyncio.Event()
    chosen: list[str] = []

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        chosen.append(worker)
        await release.wait()
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",))
    first = asyncio.create_task(place.place(request, ask, place.record(request)))
    await until(lambda: len(chosen) == 1)
    assert used_mb(candidates, chosen[0]) == 1024  # counted before the worker answered
    second = asyncio.create_task(place.place(request, ask, place.record(request)))
    await until(lambda: len(chosen) == 2)
    assert chosen[0] != chosen[1]
    release.set()
    await asyncio.gather(first, second)
    assert [used_mb(candidates, w) for w in ("w0", "w1")] == [1024, 1024]


async def test_a_failed_create_gives_its_claim_back() -> None:
    place, candidates = placer(workers=1)

    async def ask(_worker: str, _reservation: str | None) -> dict[str, Any]:
        raise Unavailable("worker at http://w0 unreachable")

    request = PlacementRequest("app", ASK, ("ams",))
    with pytest.raises(InsufficientCapacity, match="1 said no when asked"):
        await place.place(request, ask, place.record(request))
    assert used_mb(candidates, "w0") == 0


async def test_a_full_no_counts_the_worker_full_until_it_publishes() -> None:
    # w0 is the fullest, so the best fit: without the rule it would be asked every time.
    place, candidates = placer(workers=2, used={"w0": {"millicpus": 4000, "memory_mb": 4096}})
    asked: list[str] = []

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        asked.append(worker)
        if worker == "w0":
            raise Conflict("could not reserve resource for machine: no free addresses",
                           status="insufficient_capacity", details=NoRoom(full=True))
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",), colocated={})
    for _ in range(3):
        await place.place(request, ask, place.record(request))
    assert asked == ["w0", "w1", "w1", "w1"]  # asked once, then known to be full
    candidates.on_worker("w0")  # its row arrives again: it is a candidate again
    assert used_mb(candidates, "w0") == 4096


async def test_a_create_that_got_no_answer_is_asked_again_of_the_same_worker() -> None:
    place, _ = placer(workers=2)
    asked: list[str] = []

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        asked.append(worker)
        if len(asked) == 1:
            raise Indeterminate(f"worker at http://{worker} did not answer: TimeoutError")
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",))
    machine, _ = await place.place(request, ask, place.record(request))
    assert asked == [asked[0], asked[0]]
    assert machine == {"id": asked[0]}


async def test_a_create_unanswered_then_unreachable_fails_rather_than_go_elsewhere() -> None:
    # The worker got cut off after the first ask went out: the retry cannot even connect.
    # The first ask may still have made the machine, so the client must hear "may exist",
    # not a refusal, and no other worker is asked.
    place, candidates = placer(workers=2)
    asked: list[str] = []

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        asked.append(worker)
        if len(asked) == 1:
            raise Indeterminate(f"worker at http://{worker} did not answer: TimeoutError")
        raise Unavailable(f"worker at http://{worker} unreachable: ConnectionTimeoutError")

    request = PlacementRequest("app", ASK, ("ams",))
    with pytest.raises(Indeterminate, match="may exist there"):
        await place.place(request, ask, place.record(request))
    assert asked == [asked[0], asked[0]]
    assert used_mb(candidates, asked[0]) == 1024  # it may hold the machine: still counted


async def test_a_create_that_twice_got_no_answer_fails_rather_than_go_elsewhere() -> None:
    place, candidates = placer(workers=2)
    asked: list[str] = []

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        asked.append(worker)
        raise Indeterminate(f"worker at http://{worker} did not answer: TimeoutError")

    request = PlacementRequest("app", ASK, ("ams",))
    with pytest.raises(Indeterminate, match="may exist there"):
        await place.place(request, ask, place.record(request))
    assert len(asked) == 2
    assert asked[0] == asked[1]
    assert used_mb(candidates, asked[0]) == 1024  # it may hold the machine: still counted


class FakeWorker:
    """A worker's reservations, as the hedged path sees them."""

    def __init__(self, name: str, delay: float = 0.0, error: BodegaError | None = None) -> None:
        self.name, self.delay, self.error = name, delay, error
        self.held: set[str] = set()

    async def reserve(self, _app: str, _claim: Ask, _ttl: float) -> Reservation:
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        self.held.add(f"r-{self.name}")
        return Reservation(id=f"r-{self.name}", expires_at=0.0, worker=self.name)

    async def release(self, reservation: str) -> None:
        self.held.discard(reservation)


class FakeWorkers:
    def __init__(self, *workers: FakeWorker) -> None:
        self.by_name = {w.name: w for w in workers}

    def client(self, name: str) -> FakeWorker:
        return self.by_name[name]


def hedging(*workers: FakeWorker) -> tuple[Placer, Candidates]:
    place, candidates = placer(workers=len(workers))
    place.workers = cast(Workers, FakeWorkers(*workers))
    place.config = PlacerConfig(hedge=True)
    return place, candidates


async def test_hedging_creates_on_the_first_yes_and_releases_the_other() -> None:
    slow, fast = FakeWorker("w0", delay=0.05), FakeWorker("w1")
    place, candidates = hedging(slow, fast)
    created: list[tuple[str, str | None]] = []

    async def ask(worker: str, reservation: str | None) -> dict[str, Any]:
        created.append((worker, reservation))
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",))
    machine, _ = await place.place(request, ask, place.record(request))
    assert created == [("w1", "r-w1")]
    assert machine == {"id": "w1"}
    assert slow.held == set()  # released
    assert [used_mb(candidates, w) for w in ("w0", "w1")] == [0, 1024]


async def test_a_hedged_error_gives_back_the_other_reservation() -> None:
    good, bad = FakeWorker("w0"), FakeWorker("w1", error=BadRequest("invalid_argument: no"))
    place, candidates = hedging(good, bad)

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        raise AssertionError(f"nothing should be created on {worker}")

    request = PlacementRequest("app", ASK, ("ams",))
    with pytest.raises(BadRequest):
        await place.place(request, ask, place.record(request))
    assert good.held == set()
    assert used_mb(candidates, "w0") == 0


async def test_a_hedged_create_with_no_answer_keeps_its_room() -> None:
    first, second = FakeWorker("w0"), FakeWorker("w1", delay=0.05)
    place, candidates = hedging(first, second)

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        raise Indeterminate(f"worker at http://{worker} did not answer: TimeoutError")

    request = PlacementRequest("app", ASK, ("ams",))
    with pytest.raises(Indeterminate):
        await place.place(request, ask, place.record(request))
    assert first.held == {"r-w0"}  # the machine may hold it now
    assert second.held == set()
    assert used_mb(candidates, "w0") == 1024


async def test_a_placement_that_finds_no_room_is_reported_with_its_record() -> None:
    place, _ = placer(workers=2, used={"w0": {"millicpus": 8000}, "w1": {"millicpus": 8000}})
    heard: list[tuple[str, str, str]] = []
    place.refused = lambda app, record, message: heard.append(
        (app, message, ",".join(f"{k}={n}" for r in record.regions
                                for k, n in r.refused_by_kind.items())))

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",))
    with pytest.raises(InsufficientCapacity) as refused:
        await place.place(request, ask, place.record(request))
    assert heard == [("app", refused.value.message, "cpu=2")]
    await place.place(PlacementRequest("app", Ask(memory_mb=128), ("ams",)), ask,
                      place.record(request))  # placed: nothing reported
    assert len(heard) == 1


async def test_the_record_sent_with_a_create_ranks_the_view_the_winner_was_chosen_on() -> None:
    # The create is counted on its worker before it is sent (the claim); the explanation it
    # carries still lists every worker as ranked, the winner first with its winning score.
    place, _ = placer(workers=3, used={"w1": {"millicpus": 2000, "memory_mb": 2048}})
    sent = []

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        sent.append(record.answer())
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",))
    record = place.record(request)
    await place.place(request, ask, record)
    answer = sent[0]
    assert answer.winner is not None
    assert answer.winner.worker == "w1"
    ranked = answer.regions[0].ranked
    assert [r.worker for r in ranked] == ["w1", "w0", "w2"]
    assert ranked[0] == answer.winner
    assert ranked[1].score == ranked[2].score  # two empty workers, scored alike


async def test_a_hedged_placement_cancelled_while_reserving_gives_its_claims_back() -> None:
    # The client went away (its request cancelled) while one reservation had come back and
    # the other had not: what the placement counted on the candidates must not stay,
    # else the worker ranks as fuller than it is until its next row.
    fast, stuck = FakeWorker("w0"), FakeWorker("w1", delay=60)
    place, candidates = hedging(fast, stuck)

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        raise AssertionError(f"nothing should be created on {worker}")

    request = PlacementRequest("app", ASK, ("ams",))
    task = asyncio.create_task(place.place(request, ask, place.record(request)))
    await until(lambda: used_mb(candidates, "w0") == 1024)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [used_mb(candidates, w) for w in ("w0", "w1")] == [0, 0]


@pytest.mark.parametrize("answers", [
    ("no", "unreachable", "yes"), ("unreachable", "no", "no"), ("no", "yes", "yes"),
    ("yes",), ("error",), ("no", "error"), ("unreachable", "silent"),
])
@pytest.mark.parametrize("hedge", [False, True])
async def test_a_placement_leaves_counted_only_the_room_it_kept(
        answers: tuple[str, ...], hedge: bool) -> None:
    """However a placement ends (placed, refused everywhere, a real error, no answer), the
    candidates count its claim on the worker that made the machine (or may have), on no
    other."""
    workers = [FakeWorker(f"w{i}") for i in range(len(answers))]
    place, candidates = hedging(*workers)
    place.config = PlacerConfig(hedge=hedge)
    answer_of = {f"w{i}": a for i, a in enumerate(answers)}

    async def ask(worker: str, _reservation: str | None) -> dict[str, Any]:
        match answer_of[worker]:
            case "no":
                raise Conflict("no room", status="insufficient_capacity")
            case "unreachable":
                raise Unavailable(f"worker at http://{worker} unreachable")
            case "error":
                raise BadRequest("invalid_argument: no")
            case "silent":
                raise Indeterminate(f"worker at http://{worker} did not answer")
        return {"id": worker}

    request = PlacementRequest("app", ASK, ("ams",))
    kept: str | None = None
    try:
        machine, _ = await place.place(request, ask, place.record(request))
        kept = machine["id"]
    except Indeterminate:
        kept = next(w for w, a in answer_of.items() if a == "silent")
    except BodegaError:
        pass
    for name in answer_of:
        assert used_mb(candidates, name) == (1024 if name == kept else 0), name
