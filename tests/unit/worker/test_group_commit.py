"""Group commit: concurrent creates share one transaction and one fsync, and fail alone.

The queueing decisions are pure and tested as such; the creates run through a real
worker (fake driver) on a real SQLite file, reopened to see what is on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import Conflict, StorageFull
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store.database import Store
from bodega.worker.store.group_commit import GroupQueue, Outcome, answers
from bodega.worker.store.ledger import CapacityRejected

from .conftest import in_process_worker, worker_config

W = tuple[Worker, FakeDriver]


def config(memory_mb: int = 256) -> MachineConfig:
    return MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": memory_mb}})


def request(**kw: Any) -> CreateMachineBody:
    values: dict[str, Any] = {"app": "web", "config": config(),
                              "skip_launch": True}
    values.update(kw)
    return CreateMachineBody(**values)


async def together(w: Worker, *requests: CreateMachineBody) -> list[Any]:
    """Send every create in the same loop turn; each one's machine id, or its error."""
    results = await asyncio.gather(*(w.machines.creation.create(r) for r in requests),
                                   return_exceptions=True)
    return [r if isinstance(r, BaseException) else r[0].id for r in results]


def machine_ids_on_disk(path: Path) -> set[str]:
    store = Store(path)
    try:
        return {row[0] for row in store.db.execute("SELECT id FROM machines")}
    finally:
        store.close()


# -- the pure decisions -----------------------------------------------------------------
def test_the_first_to_join_sets_the_commit_and_the_rest_join_its_group() -> None:
    queue: GroupQueue[str] = GroupQueue()
    assert queue.join("a") is True  # the first: its group's commit must be set
    assert queue.join("b") is False  # a commit is already coming: b joins that group
    assert queue.take() == ["a", "b"]
    assert queue.take() == []
    assert queue.join("c") is True  # the next group


def test_a_failed_commit_fails_every_member_and_a_member_keeps_its_own_error() -> None:
    own, full = Conflict("name taken"), StorageFull("disk full")
    parts = [Outcome(value=1), Outcome(error=own), Outcome(value=3)]
    assert answers(parts, None) == parts
    assert [a.error for a in answers(parts, full)] == [full, own, full]


# -- creates through the worker ----------------------------------------------------------
async def test_concurrent_creates_share_one_commit_and_one_fsync(worker: W) -> None:
    w, _ = worker
    group, syncs = w.machines.lifecycle.group, w.store.syncs
    seen: dict[str, int] = {}  # each machine: the store's fsync count when it was committed

    def committed(resource: str) -> None:
        seen.setdefault(resource, w.store.syncs - syncs)

    w.store.on_commit(committed)
    ids = await together(w, *(request() for _ in range(4)))  # as many as 1024 MB hold
    assert all(isinstance(i, str) for i in ids), ids
    assert len(set(ids)) == 4
    assert group.groups == 1
    assert {seen[i] for i in ids} == {1}  # all four made durable by one and the same fsync
    await w.machines.settle()
    assert machine_ids_on_disk(w.store.path) == set(ids)


async def test_one_create_failing_its_checks_does_not_fail_the_others(worker: W) -> None:
    w, _ = worker
    taken = await together(w, request(name="taken"))
    before = w.machines.lifecycle.group.groups
    # 1024 MB: after "taken" there is room for three more 256 MB machines, not four.
    results = await together(
        w, request(name="taken"), request(), request(idempotency_key="k"),
        request(idempotency_key="k", name="again"), request(), request())
    assert w.machines.lifecycle.group.groups == before + 1
    assert isinstance(results[0], Conflict)
    assert results[0].status == "name_taken"
    assert isinstance(results[5], CapacityRejected)
    made = results[1:5]
    assert all(isinstance(m, str) for m in made)
    assert made[1] == made[2]  # the same idempotency key twice in one group: one machine
    await w.machines.settle()
    assert machine_ids_on_disk(w.store.path) == {taken[0], *made}
    assert w.ledger.usage().memory_mb == 1024  # full, never over


@contextlib.contextmanager
def small_disk(path: Path) -> Iterator[Path]:
    """A real filesystem that can fill up: a 2 MB tmpfs."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):  # ENOSPC: the disk is full
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    return filler


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small disk needs root")
async def test_a_failed_commit_fails_every_create_of_the_group_and_keeps_none(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        async with in_process_worker(worker_config(disk)) as (w, _):
            kept = await together(w, request())
            await w.machines.settle()
            filler = fill(disk)
            results = await together(w, *(request() for _ in range(3)))  # room for 3
            assert all(isinstance(r, StorageFull) for r in results), results
            assert results[0].http_status == 507
            filler.unlink()  # room again: the worker goes on, with none of the failed group
            again = await together(w, request())
            await w.machines.settle()
            assert machine_ids_on_disk(w.store.path) == {kept[0], again[0]}
            assert w.ledger.usage().memory_mb == 512
