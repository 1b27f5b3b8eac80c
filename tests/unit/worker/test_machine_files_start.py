"""A start's files on a worker (fake driver): built at every spawn from the config and the
app's secrets as they are then; a missing secret fails the start with an event naming it,
and a secret's value is never in the machine's config, events or ops."""

from __future__ import annotations

import base64

from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.core.guest_files import GuestFile
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver

W = tuple[Worker, FakeDriver]
SECRET = "s3cr3t-file-bytes"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def create(w: Worker) -> str:
    config = MachineConfig.model_validate({
        "image": "app:1", "guest": {"cpus": 1, "memory_mb": 256},
        "files": [{"guest_path": "/app/motd", "raw_value": b64(b"hi\n")},
                  {"guest_path": "/app/key", "secret_name": "KEY", "mode": 0o600}]})
    body = CreateMachineBody.model_validate({"app": "web", "config": config})
    row, _nonce = await w.machines.creation.create(body)
    await w.machines.settle()
    return row.id


def started_files(driver: FakeDriver, machine_id: str) -> list[tuple[GuestFile, ...]]:
    return [task.spec.files for task in driver.tasks.values()
            if task.handle.machine_id == machine_id]


async def test_each_start_writes_the_files_with_the_secret_as_it_is_then(worker: W) -> None:
    w, driver = worker
    secrets = {"KEY": b64(b"first")}
    w.machines.effects.secret_env = lambda app: dict(secrets) if app == "web" else {}
    mid = await create(w)
    assert w.machines.get(mid).state == "started"
    assert started_files(driver, mid) == [(GuestFile("/app/motd", b"hi\n", 0o644),
                                           GuestFile("/app/key", b"first", 0o600))]
    secrets["KEY"] = b64(b"second")
    await w.machines.restart(mid)
    await w.machines.settle()
    assert [files[1].data for files in started_files(driver, mid)] == [b"first", b"second"]


async def test_a_missing_secret_fails_the_start_naming_it_never_its_value(worker: W) -> None:
    w, driver = worker
    w.machines.effects.secret_env = lambda _app: {"OTHER": b64(SECRET.encode())}
    mid = await create(w)
    row = w.machines.get(mid)
    assert row.state == "failed"
    assert started_files(driver, mid) == []
    last = w.store.events(mid, 1)[0]
    assert last.request is not None
    assert last.request.model_dump(exclude_none=True) == {
        "error": "file /app/key: the app has no secret KEY (set it with `bodega secrets set`)",
        "step": "spawn"}
    # A secret's value is in no record of the machine: its config names the secret only.
    w.machines.effects.secret_env = lambda _app: {"KEY": b64(SECRET.encode())}
    await w.machines.start(mid)
    await w.machines.settle()
    assert w.machines.get(mid).state == "started"
    dump = "".join(line for line in w.store.db.iterdump())
    assert "KEY" in dump
    assert SECRET not in dump
    assert b64(SECRET.encode()) not in dump
