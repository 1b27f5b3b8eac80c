"""Operation payloads: typed in the worker, the same JSON objects on disk as before.

A worker killed mid-operation leaves the operation's payload in its store as a
JSON object; the next worker (maybe a newer version) reads it back and resumes.
The objects below are written exactly as a worker wrote them before payloads
were typed (dicts built key by key), so these tests fail if a key is renamed,
a number's type is assumed, or a field the old shape left out becomes required.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bodega.model.machine_config import MachineConfig
from bodega.model.states import MachineState
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.config import WorkerConfig
from bodega.worker.core.fsm import FSMS
from bodega.worker.core.payloads import PAYLOADS, payload_from_json, payload_json
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.host.network import HostNetwork
from bodega.worker.store import queries

from .conftest import worker_config

S = MachineState
EXIT = {"exit_code": 143, "oom_killed": False, "requested_stop": True,
        "exited_at": "2026-01-02T03:04:05Z", "signal": 15}

# (state machine, payload) as the worker wrote them before they were typed.
OLD_SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("create_machine", {"source": "user", "launch": True}),
    ("create_machine", {"source": "user", "launch": False, "error": "exec: x: not found",
                        "failed_step": "prepare"}),
    ("start_machine", {"source": "user", "start_seq": 1, "delay": 0.0}),
    ("start_machine", {"source": "flyd", "start_seq": 4, "delay": 0.4, "pid": 1234}),
    ("stop_machine", {"source": "user"}),
    ("stop_machine", {"source": "user", "thaw": True, "signal": "SIGTERM", "timeout": 2.0,
                      "exit": EXIT}),
    ("exit_machine", {"source": "flyd"}),
    ("restart_machine", {"source": "user", "signal": 15, "start_seq": 3, "exit": EXIT,
                         "pid": 77}),
    ("update_machine", {"source": "user", "launch": False, "rest_state": "stopped",
                        "start_seq": 3}),
    ("update_machine", {"source": "user", "launch": True, "rest_state": "created",
                        "start_seq": 2, "thaw": True, "exit": EXIT, "pid": 9}),
    ("suspend_machine", {"source": "user"}),
    ("resume_machine", {"source": "user"}),
    ("destroy_machine", {"source": "user", "thaw": True}),
    ("destroy_machine", {"source": "flyd", "signal": "SIGKILL", "timeout": 0}),
    ("move_machine", {"source": "user", "move_id": "01J", "target": "w2",
                      "target_url": "https://w2:4000", "generation": 1,
                      "resting": "stopping", "was_running": True, "exit": EXIT}),
    ("move_machine", {"source": "user", "reason": "drain", "move_id": "01K",
                      "target": "w3", "target_url": "https://w3:4000", "generation": 2,
                      "resting": "stopped", "was_running": False, "reservation_id": "r1",
                      "error": "no room", "failed_step": "handoff"}),
    ("create_volume", {"source": "user"}),
    ("delete_volume", {"source": "user", "error": "Permission denied",
                       "failed_step": "removing"}),
]


def test_every_state_machine_has_a_payload_and_an_old_shape_here() -> None:
    assert set(PAYLOADS) == set(FSMS)
    assert {fsm for fsm, _ in OLD_SHAPES} == set(FSMS)


@pytest.mark.parametrize(("fsm", "stored"), OLD_SHAPES)
def test_a_stored_payload_reads_back_and_writes_the_same_object(fsm: str,
                                                                stored: dict[str, Any]) -> None:
    payload = payload_from_json(fsm, json.loads(json.dumps(stored)))
    assert payload.fsm == fsm
    assert payload_json(payload) == stored


def test_seconds_stored_as_integers_read_as_floats() -> None:
    payload = payload_from_json("destroy_machine", {"source": "flyd", "signal": "SIGKILL",
                                                    "timeout": 0})
    assert payload_json(payload)["timeout"] == 0.0
    assert isinstance(payload_json(payload)["timeout"], float)


def test_a_null_pid_the_null_driver_reported_is_left_out() -> None:
    payload = payload_from_json("start_machine", {"source": "user", "start_seq": 1,
                                                  "delay": 0.0, "pid": None})
    assert payload_json(payload) == {"source": "user", "start_seq": 1, "delay": 0.0}


def test_unknown_keys_are_ignored_and_a_missing_run_is_a_clear_error() -> None:
    payload = payload_from_json("exit_machine", {"source": "flyd", "from_the_future": 1})
    assert payload_json(payload) == {"source": "flyd"}
    with pytest.raises(ValueError, match=r"start_machine payload .*start_seq"):
        payload_from_json("start_machine", {"source": "user", "delay": 0.0})
    with pytest.raises(ValueError, match="no operation is named 'reboot_machine'"):
        payload_from_json("reboot_machine", {})


# -- resuming what an older worker left running ---------------------------------------------


def config(**extra: Any) -> MachineConfig:
    return MachineConfig.model_validate({"image": "x", "guest": {"cpus": 1, "memory_mb": 128},
                                         "init": {"exec": ["/bin/true"]}, **extra})


@contextlib.asynccontextmanager
async def worker_on(cfg: WorkerConfig, driver: FakeDriver) -> AsyncIterator[Worker]:
    """A recovered worker on ``cfg``'s data dir; the fake driver's runs outlive it."""
    network = HostNetwork("127.0.0.1", ipaddress.ip_network("10.250.0.0/24"))
    worker = Worker(cfg, driver=driver, network=network)
    await worker.network.setup()
    await worker.machines.recover()
    yield worker
    await worker.machines.settle()
    await worker.machines.supervision.close()
    worker.store.close()


def leave_running(db: sqlite3.Connection, machine_id: str, fsm: str, step: str,
                  payload: dict[str, Any], state: str, **columns: Any) -> None:
    """What an older worker killed in ``step`` left: the operation, its log row, the state."""
    text = json.dumps(payload)
    db.execute("INSERT INTO operations (op_id, resource_id, fsm, step, status, payload, "
               "started_at, updated_at) VALUES (?, ?, ?, ?, 'running', ?, 1.0, 1.0)",
               (f"old-{machine_id}", machine_id, fsm, step, text))
    db.execute("INSERT INTO ops (op_id, resource_id, fsm, step, payload, at) "
               "VALUES (?, ?, ?, ?, ?, 1.0)", (f"old-{machine_id}", machine_id, fsm, step,
                                               json.dumps(payload, separators=(",", ":"))))
    sets = ", ".join(f"{name} = ?" for name in ("state", *columns))
    db.execute(f"UPDATE machines SET {sets} WHERE id = ?",
               (state, *columns.values(), machine_id))


async def test_operations_an_older_worker_left_running_resume(tmp_path: Path) -> None:
    cfg = worker_config(tmp_path)
    driver = FakeDriver()
    async with worker_on(cfg, driver) as w:
        made = {}
        for key, skip in (("start", True), ("stop", False), ("destroy", False),
                          ("update", True)):
            row, _ = await w.machines.creation.create(CreateMachineBody(
                app="app", config=config(), skip_launch=skip))
            made[key] = row.id
        await w.machines.settle()
        await w.machines.stop(made["update"])
        await w.machines.settle()
        path = w.store.path

    db = sqlite3.connect(path)
    with db:
        leave_running(db, made["start"], "start_machine", "spawn",
                      {"source": "user", "start_seq": 1, "delay": 0.0},
                      S.STARTING, start_seq=1, holds_compute=1)
        leave_running(db, made["stop"], "stop_machine", "stopping",
                      {"source": "user", "signal": "SIGTERM", "timeout": 2}, S.STOPPING)
        leave_running(db, made["destroy"], "destroy_machine", "destroying",
                      {"source": "flyd", "signal": "SIGKILL", "timeout": 0}, S.DESTROYING)
        leave_running(db, made["update"], "update_machine", "prepare",
                      {"source": "user", "launch": False, "rest_state": "stopped",
                       "start_seq": 1}, S.UPDATING)
    db.close()

    async with worker_on(cfg, driver) as w:
        await w.machines.settle()
        assert w.store.running_operations() == []
        state = {key: w.machines.get(mid).state for key, mid in made.items()
                 if key != "destroy"}
        assert state == {"start": S.STARTED, "stop": S.STOPPED, "update": S.STOPPED}
        destroyed = queries.get_machine(w.store.db, made["destroy"])
        assert destroyed is not None
        assert destroyed.state == S.DESTROYED

        started = driver.running(made["start"])
        assert [task.handle.start_seq for task in started] == [1]
        spawned = w.store.history(made["start"])[-1]
        assert (spawned.step, spawned.payload["start_seq"]) == ("started", 1)
        assert spawned.payload["pid"] == started[0].handle.pid

        stop_signals = [t.signals for t in driver.tasks.values()
                        if t.handle.machine_id == made["stop"]]
        assert stop_signals == [[15]]  # the SIGTERM the old payload named
        exit_event = w.store.events(made["stop"])[0]
        assert (exit_event.type, exit_event.status) == ("exit", "stopped")
        assert exit_event.request is not None
        assert exit_event.request.exit_event is not None
        assert exit_event.request.exit_event.signal == 15

        kill_signals = [t.signals for t in driver.tasks.values()
                        if t.handle.machine_id == made["destroy"]]
        assert kill_signals == [[9]]
        settled = w.store.events(made["update"])[0]
        assert (settled.type, settled.status) == ("update", "stopped")
