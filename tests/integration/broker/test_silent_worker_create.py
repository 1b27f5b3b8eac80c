"""A worker that takes a create and falls silent (frozen, cut off): the broker asks it again,
and the client hears "indeterminate" within the broker's create timeout, not after its own
timeout has run out; the same Idempotency-Key, once the worker answers, returns the machine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bodega.worker.core.records import MachineRow
from bodega.worker.daemon import Worker
from bodega.worker.ops.machines import CreateRequest

from .broker_kit import in_process_cluster, machine

CREATE_TIMEOUT = 2.0  # the broker's, here: a client's own timeout is far longer
CLIENT_TIMEOUT = 9.0  # under one worker call's default timeout (10 s), twice for a retry


def silence(worker: Worker) -> asyncio.Event:
    """Make the worker hold every create until the event is set, as a frozen worker does."""
    create = worker.machines.creation.create
    speak = asyncio.Event()

    async def held(req: CreateRequest) -> tuple[MachineRow, str | None]:
        await speak.wait()
        return await create(req)

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
