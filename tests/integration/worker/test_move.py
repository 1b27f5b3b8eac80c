"""A machine moves between two real workers (process driver, namespaces, mutual TLS).

The source stops it, hands its record to the target, which starts it if it was running,
then lets go of it: the same id, name, config and history, one copy at the end. The
source is killed (SIGKILL) before and after every step of the move and restarted
without the failpoint; the target is down while the source hands it over; the target
refuses (cordoned) and the source starts its machine again. Each time exactly one
worker has the machine, and exactly one program runs when it was running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import BodegaError, NotFound
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.core.fsm import FSMS
from tests.ports_kit import free_port

from .crash_kit import CrashWorker, crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process driver test needs root")

# A live move's steps are a running vm's (tests/cluster/test_vm_live_move.py kills its
# workers mid-stream); these machines are the process driver's.
STEPS = [(step.name, when) for step in FSMS["move_machine"].steps
         if not step.final and step.when != "live" for when in ("before", "after")]


async def move(source: WorkerClient, machine_id: str, target: CrashWorker,
               reason: str = "test") -> Any:
    assert target.daemon is not None
    return await source.call("POST", machine_id, "move", timeout=150, json={
        "target": target.name, "target_url": target.daemon.url, "reason": reason})


async def started_machine(worker: CrashWorker, marker: str, *, launch: bool = True) -> str:
    assert worker.client is not None
    machine = await worker.client.create_machine({
        "app": "moving", "name": f"m-{marker[:8]}", "skip_launch": not launch,
        "config": machine_config(marker, metadata={"role": "web"})})
    if launch:
        await worker.reached(machine.id, "started")
        await until(lambda: len(program_pids(marker)) == 1)
    return machine.id


async def gone_from(worker: CrashWorker, machine_id: str) -> bool:
    assert worker.client is not None
    try:
        await worker.client.machine(machine_id)
    except NotFound:
        return True
    return False


async def has(worker: CrashWorker, machine_id: str) -> bool:
    return not await gone_from(worker, machine_id)


async def only_on(target: CrashWorker, source: CrashWorker, machine_id: str, state: str,
                  marker: str) -> None:
    """The machine is on ``target`` in ``state``, the source has let go of it, and as
    many of its programs run as the state says."""
    await until(lambda: has(target, machine_id), timeout=60)  # a resumed move runs on
    await target.reached(machine_id, state, timeout=60)
    await until(lambda: gone_from(source, machine_id))  # its last steps run on after
    await until(lambda: len(program_pids(marker)) == (1 if state == "started" else 0))


async def machine_with_volume(worker: CrashWorker, tmp_path: Path, name: str
                              ) -> tuple[str, Path, tuple[int, str], str]:
    """A started machine of app ``moving`` on ``worker`` mounting a volume of its own, with
    64 KiB at random in the volume's ``state``: (machine id, the volume's directory, its
    tree's bytes and digest, the machine's marker)."""
    from bodega.worker.host.volume_copy import tree_digest

    assert worker.client is not None
    volume = await worker.client.create_volume({"app": "moving", "name": "data",
                                                "size_gb": 1})
    data = tmp_path / worker.name / "volumes" / volume.id
    await until(data.is_dir)
    (data / "state").write_bytes(os.urandom(1 << 16))
    digest = tree_digest(data)
    marker = uuid.uuid4().hex
    machine = await worker.client.create_machine({
        "app": "moving", "name": name,
        "config": machine_config(marker, mounts=[{"volume": volume.id, "path": "/data"}])})
    await worker.reached(machine.id, "started")
    return machine.id, data, digest, marker


async def test_a_running_machine_moves_with_its_history(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        await b.start()
        assert a.client is not None
        assert b.client is not None
        marker = uuid.uuid4().hex
        mid = await started_machine(a, marker)
        before = await a.client.machine(mid)
        pid_before = program_pids(marker)
        done = await move(a.client, mid, b, reason="maintenance")
        assert done == {"worker": b.name}
        await only_on(b, a, mid, "started", marker)
        assert program_pids(marker) != pid_before  # stopped there, started here
        after = await b.client.machine(mid)
        assert (after.name, after.config, after.instance_id) == (
            before.name, before.config, before.instance_id)
        assert after.config is not None
        assert after.config.metadata == {"role": "web"}
        events = await b.client.call("GET", mid, "events")
        moved = events[0]
        assert (moved["type"], moved["status"]) == ("start", "started")
        kinds = [(e["type"], e["status"]) for e in events]
        assert ("move", "moved") in kinds  # the target's own record of it
        assert ("move", "moving") in kinds  # the source's history, handed over
        assert ("launch", "created") in kinds
        said = next(e for e in events if (e["type"], e["status"]) == ("move", "moved")
                    and e["request"].get("moved_to"))
        assert said["request"] == {"reason": "maintenance", "moved_from": a.name,
                                   "moved_to": b.name}
        # And back: the generation rises again, the first worker takes it once more.
        await move(b.client, mid, a)
        await only_on(a, b, mid, "started", marker)


async def test_a_stopped_machine_moves_stopped(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        await b.start()
        assert a.client is not None
        assert b.client is not None
        marker = uuid.uuid4().hex
        mid = await started_machine(a, marker)
        await a.client.stop(mid)
        await a.reached(mid, "stopped")
        await move(a.client, mid, b)
        await only_on(b, a, mid, "stopped", marker)
        await b.client.start(mid)
        await b.reached(mid, "started")
        await until(lambda: len(program_pids(marker)) == 1)


async def test_a_target_that_refuses_leaves_it_running_where_it_was(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        await b.start()
        assert a.client is not None
        assert b.client is not None
        await b.client.cordon(True)
        marker = uuid.uuid4().hex
        mid = await started_machine(a, marker)
        with pytest.raises(BodegaError) as refused:
            await move(a.client, mid, b)
        assert refused.value.status == "cordoned"
        await a.reached(mid, "started")  # rolled back: started again here
        assert await gone_from(b, mid)
        await until(lambda: len(program_pids(marker)) == 1)
        events = await a.client.call("GET", mid, "events")
        assert ("move", "failed") in [(e["type"], e["status"]) for e in events]


async def test_a_target_down_during_the_handoff_takes_it_once_back(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        same_port = ("--listen", f"127.0.0.1:{free_port()}")  # as a real worker comes back
        await b.start(extra=same_port)
        assert a.client is not None
        assert b.client is not None
        assert b.daemon is not None
        marker = uuid.uuid4().hex
        mid = await started_machine(a, marker)
        await b.daemon.kill9()
        moving = asyncio.create_task(move(a.client, mid, b))
        await asyncio.sleep(2.0)  # stopped here, asked of a target that does not answer
        assert not moving.done()
        await until(lambda: len(program_pids(marker)) == 0)
        await b.start(extra=same_port)
        assert await moving == {"worker": b.name}
        await only_on(b, a, mid, "started", marker)


@pytest.mark.parametrize(("step", "when"), STEPS, ids=[f"{s}:{w}" for s, w in STEPS])
async def test_the_source_killed_at_any_step_leaves_one_copy(tmp_path: Path, step: str,
                                                               when: str) -> None:
    """With a volume, so that every step is taken: its data is there once, intact."""
    from bodega.worker.host.volume_copy import tree_digest

    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start(failpoints=f"move_machine:{step}:{when}")
        await b.start()
        assert a.client is not None
        machine_id, data, digest, marker = await machine_with_volume(a, tmp_path, "crashing")
        await until(lambda: len(program_pids(marker)) == 1)
        with contextlib.suppress(BodegaError):  # it dies while the call waits
            await move(a.client, machine_id, b)
        await a.crashed()
        await a.start()  # without the failpoint: the move resumes
        await only_on(b, a, machine_id, "started", marker)
        assert tree_digest(tmp_path / b.name / "volumes" / data.name) == digest
        await until(lambda: not data.exists())


@pytest.mark.parametrize("when", ["before", "after"])
async def test_the_target_killed_at_its_import_leaves_one_copy(tmp_path: Path,
                                                                when: str) -> None:
    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        same_port = ("--listen", f"127.0.0.1:{free_port()}")
        await b.start(failpoints=f"import_machine:commit:{when}", extra=same_port)
        assert a.client is not None
        marker = uuid.uuid4().hex
        mid = await started_machine(a, marker)
        moving = asyncio.create_task(move(a.client, mid, b))
        await b.crashed()  # before its commit, or after it with the answer never sent
        await b.start(extra=same_port)  # without the failpoint: the source asks again
        assert await moving == {"worker": b.name}
        await only_on(b, a, mid, "started", marker)


async def test_a_caller_that_gives_up_does_not_stop_the_move(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        same_port = ("--listen", f"127.0.0.1:{free_port()}")
        await b.start(extra=same_port)
        assert a.client is not None
        assert b.daemon is not None
        marker = uuid.uuid4().hex
        mid = await started_machine(a, marker)
        await b.daemon.kill9()
        with pytest.raises(BodegaError):  # the caller's own timeout: it hangs up
            await a.client.call("POST", mid, "move", timeout=2, json={
                "target": b.name, "target_url": b.daemon.url})
        await b.start(extra=same_port)
        await until(lambda: gone_from(a, mid), timeout=60)  # the move ended on its own
        await only_on(b, a, mid, "started", marker)


async def test_a_machine_moves_with_its_volume_and_its_data(tmp_path: Path) -> None:
    from bodega.worker.host.volume_copy import tree_digest

    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        await b.start()
        assert a.client is not None
        assert b.client is not None
        volume = await a.client.create_volume({"app": "moving", "name": "data",
                                               "size_gb": 1})
        data = tmp_path / a.name / "volumes" / volume.id
        await until(data.is_dir)
        (data / "notes").mkdir()
        (data / "notes" / "a.txt").write_text("kept across the move\n")
        (data / "blob").write_bytes(os.urandom(3 << 20))  # past a request body's 1 MiB
        (data / "link").symlink_to("notes/a.txt")
        digest = tree_digest(data)
        marker = uuid.uuid4().hex
        machine = await a.client.create_machine({
            "app": "moving", "name": "with-volume",
            "config": machine_config(marker, mounts=[{"volume": volume.id,
                                                      "path": "/data"}])})
        await a.reached(machine.id, "started")
        await move(a.client, machine.id, b)
        await only_on(b, a, machine.id, "started", marker)
        moved = tmp_path / b.name / "volumes" / volume.id
        assert tree_digest(moved) == digest
        assert not data.exists()
        assert [p.name for p in moved.parent.iterdir()] == [volume.id]  # nothing staged left
        there = await b.client.list_volumes("moving")
        assert [(v.id, v.attached_machine_id, v.state) for v in there] == [
            (volume.id, machine.id, "created")]
        assert await a.client.list_volumes("moving") == []
        config = (await b.client.machine(machine.id)).config
        assert config is not None
        assert [m.volume for m in config.mounts or []] == [volume.id]


async def test_a_refused_volume_stays_whole_where_it_was(tmp_path: Path) -> None:
    """The target refuses the machine after its volume's data came: the data it received
    goes, the source's stays as it was, and the machine runs there again."""
    from bodega.worker.host.volume_copy import tree_digest

    async with crash_worker(tmp_path) as a, crash_worker(tmp_path) as b:
        await a.start()
        await b.start()
        assert a.client is not None
        assert b.client is not None
        await b.client.cordon(True)
        machine_id, data, digest, _ = await machine_with_volume(a, tmp_path, "refused")
        with pytest.raises(BodegaError) as refused:
            await move(a.client, machine_id, b)
        assert refused.value.status == "cordoned"
        await a.reached(machine_id, "started")
        assert tree_digest(data) == digest
        assert list((tmp_path / b.name / "volumes").iterdir()) == []
        assert await b.client.list_volumes("moving") == []
