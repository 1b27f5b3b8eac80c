"""The worker's publisher against a fake driver and a registry node that is not started.

A node reads and writes its local view before ``start``, so no socket is
needed to see what the worker publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from bodega.model.capacity import Ask
from bodega.model.machine import EventRequest
from bodega.model.machine_config import MachineConfig
from bodega.model.rows import WorkerRow
from bodega.registry import RegistryConfig, RegistryNode
from bodega.registry.replication.core.rows import Row
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import HOLD_BACK, Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.drivers.vm import arrivals
from bodega.worker.publish import CAPACITY_REFRESH, Publisher
from tests.keyring_kit import KEYRING

W = tuple[Worker, FakeDriver]
TTL = 600.0


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RegistryNode]:
    registry_node = RegistryNode(RegistryConfig(
        name="w1", role="worker", region="ams", data_dir=tmp_path / "registry",
        keyring=KEYRING), registry=CollectorRegistry())
    yield registry_node
    registry_node.view.close()


def publisher(w: Worker, node: RegistryNode) -> Publisher:
    return Publisher(node, name="w1", region="ams", url="http://w1", driver="fake",
                     store=w.store, ledger=w.ledger, service_host=w.service_host,
                     destroyed_ttl=TTL)


async def create(w: Worker) -> str:
    config = MachineConfig.model_validate({"image": "app:1", "guest": {"cpus": 1,
                                                                        "memory_mb": 256}})
    row, _ = await w.machines.creation.create(CreateMachineBody(app="web", config=config))
    await w.machines.settle()
    return row.id


async def test_every_change_in_the_log_is_published_once_per_tick(worker: W,
                                                                  node: RegistryNode) -> None:
    w, _ = worker
    pub = publisher(w, node)
    pub.publish_all()
    doc = node.get("workers", "w1")
    assert doc is not None
    assert (doc["url"], doc["machines"], doc["cordoned"]) == ("http://w1", 0, False)
    before = node.replica.counter
    mid = await create(w)  # several log entries: create, prepare, start, ...
    pub.tick(0.0)
    machine = node.get("machines", mid)
    assert machine is not None
    assert (machine["state"], machine["worker"], machine["app"]) == ("started", "w1", "web")
    assert "events" not in machine
    # one version for the machine and one for the capacity: a burst coalesces
    assert node.replica.counter == before + 2
    doc = node.get("workers", "w1")
    assert doc is not None
    assert (doc["machines"], doc["free"]["memory_mb"]) == (1, 1024 - 256)
    row = node.get(WorkerRow, "w1")  # the same row, read as its model
    assert row is not None
    assert row.free is not None
    assert (row.name, row.driver, row.machines, row.free.memory_mb) == ("w1", "fake", 1, 768)
    assert set(doc) == {"name", "region", "url", "driver", "totals", "used", "free",
                        "cordoned", "reservations", "machines", "updated_at"}  # as before


async def test_reservations_and_cordons_reach_the_workers_row(worker: W,
                                                             node: RegistryNode) -> None:
    w, _ = worker
    pub = publisher(w, node)
    pub.publish_all()
    w.ledger.reserve(Ask(cpus=1, memory_mb=512), "web", ttl=30)
    pub.tick(0.0)
    doc = node.get("workers", "w1")
    assert doc is not None
    assert (doc["reservations"], doc["free"]["memory_mb"]) == (1, 512)
    w.ledger.set_cordoned(True)
    pub.tick(0.1)
    assert [d["name"] for d in node.rows("workers", cordoned=True)] == ["w1"]
    counter = node.replica.counter
    pub.tick(0.2)  # nothing changed: nothing written
    assert node.replica.counter == counter


async def test_a_create_and_destroy_within_one_tick_still_republish_the_workers_row(
        worker: W, node: RegistryNode) -> None:
    """A broker counts each create it placed until the worker's row comes: a row must come
    even when the machine is gone by the next tick and the capacity is as last published,
    or the broker counts the machine forever and stops placing on a worker with room."""
    w, _ = worker
    pub = publisher(w, node)
    pub.publish_all()
    published = node.get("workers", "w1")
    mid = await create(w)
    await w.machines.destroy(mid, force=True)
    await w.machines.settle()
    before = node.replica.counter
    pub.tick(0.0)
    doc = node.get("workers", "w1")
    assert doc is not None
    assert published is not None
    assert (doc["used"], doc["machines"]) == (published["used"], 0)  # capacity as it was
    assert node.replica.counter == before + 2  # the machine's row, and the worker's again


async def test_destroyed_machines_stay_listed_for_the_ttl_then_become_tombstones(
        worker: W, node: RegistryNode) -> None:
    w, _ = worker
    pub = publisher(w, node)
    pub.publish_all()
    mid = await create(w)
    await w.machines.destroy(mid, force=True)
    await w.machines.settle()
    pub.tick(0.0)
    machine = node.get("machines", mid)
    assert machine is not None
    assert machine["state"] == "destroyed"
    pub.expire_destroyed()
    assert node.get("machines", mid) is not None  # not yet past the TTL
    w.store.clock = lambda: w.machines.get(mid).updated_at + TTL + 1
    pub.expire_destroyed()
    assert node.get("machines", mid) is None


async def test_publishing_everything_deletes_rows_the_worker_no_longer_has(
        worker: W, node: RegistryNode) -> None:
    w, _ = worker
    node.put_owned("machines", "m-gone", {"id": "m-gone", "app": "web", "name": "x",
                                          "region": "ams", "worker": "w1", "state": "started"})
    mid = await create(w)
    publisher(w, node).publish_all()
    assert node.get("machines", "m-gone") is None
    assert node.get("machines", mid) is not None


async def test_a_publish_that_fails_is_retried_from_the_same_place_in_the_log(
        worker: W, node: RegistryNode, monkeypatch: pytest.MonkeyPatch) -> None:
    # A full disk under the registry's view fails the write: the machine must still be
    # published once the disk has room, though no new log entry names it.
    w, _ = worker
    pub = publisher(w, node)
    pub.publish_all()
    mid = await create(w)
    put_owned = node.put_owned

    def full_disk(table: str, key: str, doc: dict[str, object]) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(node, "put_owned", full_disk)
    with pytest.raises(sqlite3.OperationalError):
        pub.tick(0.0)
    assert node.get("machines", mid) is None
    monkeypatch.setattr(node, "put_owned", put_owned)
    pub.tick(0.1)
    machine = node.get("machines", mid)
    assert machine is not None
    assert machine["state"] == "started"
    doc = node.get("workers", "w1")
    assert doc is not None
    assert doc["machines"] == 1  # the capacity row, refused with it, is retried too


async def test_a_worker_with_an_image_cache_says_what_it_holds_and_the_disk_it_takes(
        worker: W, node: RegistryNode) -> None:
    w, _ = worker
    w.ledger.image_disk_gb = lambda: 3
    pub = Publisher(node, name="w1", region="ams", url="http://w1", driver="fake",
                    store=w.store, ledger=w.ledger, service_host=w.service_host,
                    destroyed_ttl=TTL, images=lambda: ["sha256:abc", "app:1"])
    pub.publish_all()
    doc = node.get("workers", "w1")
    assert doc is not None
    assert (doc["images"], doc["image_disk_gb"], doc["used"]["disk_gb"]) == (
        ["sha256:abc", "app:1"], 3, 3)
    plain = publisher(w, node)  # a driver without an image cache says nothing of one
    plain.publish_all()
    doc = node.get("workers", "w1")
    assert doc is not None
    assert "image_disk_gb" not in doc


async def test_a_tick_waits_for_the_operations_being_driven(worker: W,
                                                            node: RegistryNode) -> None:
    w, _ = worker
    ended = asyncio.Event()

    async def after_drives(_timeout: float) -> None:
        await ended.wait()  # a start being driven, until it ends

    pub = Publisher(node, name="w1", region="ams", url="http://w1", driver="fake",
                    store=w.store, ledger=w.ledger, service_host=w.service_host,
                    destroyed_ttl=TTL, interval=0.001, after_drives=after_drives)
    mid = await create(w)
    running = asyncio.create_task(pub.run())
    try:
        for _ in range(20):
            await asyncio.sleep(0.002)
        assert node.get("machines", mid) is None  # not in the middle of the start
        ended.set()
        async with asyncio.timeout(5):
            while node.get("machines", mid) is None:
                await asyncio.sleep(0.001)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_a_ticks_rows_are_kept_and_told_together_or_not_at_all(
        worker: W, node: RegistryNode, monkeypatch: pytest.MonkeyPatch) -> None:
    w, _ = worker
    pub = publisher(w, node)
    pub.publish_all()
    told: list[set[str]] = []
    node.table_listeners.append(told.append)
    made = [await create(w) for _ in range(3)]
    put = node.view.put
    calls: list[str] = []

    def full_at_the_third_row(row: Row, now: float) -> None:
        calls.append(row.key)
        if len(calls) == 3:  # the workers row and one machine went in before it
            raise sqlite3.OperationalError("database or disk is full")
        put(row, now)

    monkeypatch.setattr(node.view, "put", full_at_the_third_row)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        pub.tick(0.0)
    assert [node.get("machines", mid) for mid in made] == [None, None, None]
    assert told == []  # nothing was said of rows the view does not hold
    monkeypatch.setattr(node.view, "put", put)
    pub.tick(0.1)
    assert all(node.get("machines", mid) is not None for mid in made)
    assert told == [{"workers", "machines"}]  # told once, of the whole tick


async def held_arrival(w: Worker, node: RegistryNode) -> tuple[Publisher, str, Path]:
    """A machine whose VM waits for a live move's state, as a target stages it, and a
    publisher that has published everything once: the machine is not in the view."""
    pub = Publisher(node, name="w1", region="ams", url="http://w1", driver="fake",
                    store=w.store, ledger=w.ledger, service_host=w.service_host,
                    destroyed_ttl=TTL, held_back=w.arriving_live)
    mid = await create(w)
    machine_dir = w.config.machine_dir(mid)
    arrivals.stage_arrival(machine_dir, arrivals.Arrival(move_id="mv1", mac="02:00:00:00:00:01",
                                                         disk_bytes=1 << 20))
    pub.publish_all()
    pub.tick(0.0)
    assert node.get("machines", mid) is None
    return pub, mid, machine_dir


async def test_a_live_moves_arrival_is_published_only_once_its_vm_goes_on_here(
        worker: W, node: RegistryNode) -> None:
    """While its VM waits here for the source's state, the view keeps the source's row
    (the source's VM serves); the switch's log entry publishes it."""
    w, _ = worker
    pub, mid, machine_dir = await held_arrival(w, node)
    arrivals.clear_arrival(machine_dir)
    event = w.store.new_event("move", "migrated", "flyd", EventRequest(reason="live"))
    with w.store.tx() as conn:
        w.store.append(conn, op_id="op-switch", resource_id=mid, fsm="move", step="migrated",
                       event=event, payload={})
    pub.tick(0.0)
    machine = node.get("machines", mid)
    assert machine is not None
    assert (machine["worker"], machine["state"]) == ("w1", "started")


async def test_an_arrival_held_back_past_its_bound_is_published_at_the_next_refresh(
        worker: W, node: RegistryNode) -> None:
    """A source lost mid-move never switches: past ``HOLD_BACK`` the view names this
    worker, with no log entry to say so."""
    w, _ = worker
    pub, mid, machine_dir = await held_arrival(w, node)
    staged = arrivals.vm_dir(machine_dir) / arrivals.ARRIVAL
    long_ago = time.time() - HOLD_BACK - 1
    os.utime(staged, (long_ago, long_ago))
    pub.tick(0.5)  # no entry, and no refresh due yet
    assert node.get("machines", mid) is None
    pub.tick(CAPACITY_REFRESH + 1)
    machine = node.get("machines", mid)
    assert machine is not None
    assert machine["worker"] == "w1"
