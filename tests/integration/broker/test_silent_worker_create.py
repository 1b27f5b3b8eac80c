"""A worker that takes a create and falls silent (frozen, cut off): the broker asks it again,
and the client hears "indeterminate" within the broker's create timeout, not after its own
timeout has run out; the same Idempotency-Key, once the worker answers, returns the machine.
A volume's create, whose first answer is lost, is asked again of the same worker under the
same volume id and makes one volume."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.core.records import MachineRow, VolumeRow
from bodega.worker.daemon import Worker
from bodega.worker.ops.volumes import VolumeRequest

from .broker_kit import in_process_cluster, machine

CREATE_TIMEOUT = 2.0  # the broker's, here: a client's own timeout is far longer
CLIENT_TIMEOUT = 9.0  # under one worker call's default timeout (10 s), twice for a retry


def silence(worker: Worker) -> asyncio.Event:
    """Make the worker hold every create until the event is set, as a frozen worker does."""
    create = worker.machines.creation.create
    speak = asyncio.Event()

    async def held(req: CreateMachineBody, *,
                   owner: str = "bodega") -> tuple[MachineRow, str | None]:
        await speak.wait()
        return await create(req, owner=owner)

    worker.machines.creation.create = held  # type: ignore[method-assign]
    return speak


async def test_a_create_to_a_silent_worker_is_answered_indeterminate_in_time(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        await c.add_broker(create_timeout=CREATE_TIMEOUT)
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "quiet", "org_slug": "personal"})
            speak = silence(worker)
            key = {"idempotency-key": "quiet-1"}
            try:
                answer = await api.post("/v1/apps/quiet/machines", json=machine(), headers=key,
                                        timeout=CLIENT_TIMEOUT)
            except httpx.TimeoutException:
                pytest.fail(f"no answer within the client's {CLIENT_TIMEOUT} s")
            assert answer.status_code >= 500, answer.text
            assert answer.json()["status"] == "indeterminate", answer.text
            assert "Idempotency-Key" in answer.json()["error"]
            speak.set()  # the worker comes back: the held creates go on, one machine made
            again = await api.post("/v1/apps/quiet/machines", json=machine(), headers=key,
                                   timeout=CLIENT_TIMEOUT)
            assert again.status_code == 200, again.text
            listed = (await api.get("/v1/apps/quiet/machines")).json()
            assert [m["id"] for m in listed] == [again.json()["id"]]


async def test_a_volume_create_whose_answer_was_lost_makes_one_volume_in_time(
        tmp_path: Path) -> None:
    # Its worker makes the volume but the first answer never comes back (frozen, cut off):
    # the broker asks it again within its create timeout and gets that volume, where a
    # second ask once met "a volume named data already exists" and made one elsewhere.
    async with in_process_cluster(tmp_path) as c:
        first = await c.add_worker("ams-1", disk_gb=10)  # the best fit: asked first
        await c.add_worker("ams-2", disk_gb=100)  # room for a second one
        await c.add_broker(create_timeout=CREATE_TIMEOUT)
        create = first.volumes.create
        asked: list[str | None] = []
        speak = asyncio.Event()

        async def first_answer_lost(req: VolumeRequest) -> VolumeRow:
            asked.append(req.volume_id)
            made = await create(req)
            if len(asked) == 1:
                await speak.wait()
            return made

        first.volumes.create = first_answer_lost  # type: ignore[method-assign]
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "disks", "org_slug": "personal"})
            try:
                answer = await api.post("/v1/apps/disks/volumes",
                                        json={"name": "data", "size_gb": 1, "region": "ams"},
                                        timeout=CLIENT_TIMEOUT)
            except httpx.TimeoutException:
                pytest.fail(f"no answer within the client's {CLIENT_TIMEOUT} s")
            finally:
                speak.set()
            assert answer.status_code == 200, answer.text
            assert asked == [answer.json()["id"]] * 2  # one id, asked twice
            listed = (await api.get("/v1/apps/disks/volumes")).json()
            assert [v["id"] for v in listed] == [answer.json()["id"]]
            assert first.volumes.list("disks")[0].state == "created"
