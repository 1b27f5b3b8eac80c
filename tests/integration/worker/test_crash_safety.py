"""Invariant 3: a worker killed at any instant resumes every operation; nothing runs twice.

For every step of every state machine, and on both sides of its side effect,
a real worker (process driver, real namespaces and cgroups) is started with a
failpoint that SIGKILLs it there, the operation is driven into it, and the
worker is restarted without the failpoint. The operation must complete, the
machine must end where the operation leads, exactly as many programs must run
as the state says, and a program started before the crash must be re-adopted
(same pid), not started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import BodegaError
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.core.fsm import FSMS
from bodega.worker.drivers.process.parking import PARK_NAME
from bodega.worker.host.netns import NetnsNetwork
from bodega.worker.host.network import run
from bodega.worker.host.survey import MARKER_DIR
from tests.freezer_kit import frozen
from tests.leftovers_kit import names_of

from .crash_kit import crash_worker, environ_of, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process driver test needs root")

CASES = [
    (fsm.name, step.name, when)
    for fsm in FSMS.values()
    if fsm.name != "move_machine"  # two workers: test_move.py kills each at every step
    for step in fsm.steps
    if not step.final and step.name != "backoff"
    for when in ("before", "after")
]


async def _ignore_drop(call: Any) -> None:
    """The worker may die while answering: that is the point."""
    with contextlib.suppress(BodegaError):
        await call


async def _setup(client: WorkerClient, fsm: str, marker: str) -> str:
    if fsm in ("create_machine", "create_volume", "delete_volume"):
        return ""
    body = {"app": "crash", "config": machine_config(marker),
            "skip_launch": fsm == "start_machine"}
    machine = await client.create_machine(body)
    if fsm != "start_machine":
        await client.wait(machine.id, "started", timeout=30)
    if fsm == "resume_machine":
        await until(lambda: len(program_pids(marker)) == 1)
        await client.suspend(machine.id)
        await client.wait(machine.id, "suspended", timeout=30)
    return str(machine.id)


async def _trigger(client: WorkerClient, fsm: str, mid: str, marker: str) -> None:
    if fsm == "create_machine":
        await _ignore_drop(client.create_machine(
            {"app": "crash", "config": machine_config(marker), "name": "victim"}))
    elif fsm in ("start_machine", "resume_machine"):  # a start of a suspended one resumes
        await _ignore_drop(client.start(mid))
    elif fsm == "suspend_machine":
        await until(lambda: len(program_pids(marker)) == 1)
        await _ignore_drop(client.suspend(mid))
    elif fsm == "stop_machine":
        await _ignore_drop(client.stop(mid, signal="SIGTERM"))
    elif fsm == "restart_machine":
        await _ignore_drop(client.call("POST", mid, "restart"))
    elif fsm == "update_machine":
        await _ignore_drop(client.call("POST", mid, json={
            "config": machine_config(marker, env={"VERSION": "2"})}))
    elif fsm == "destroy_machine":
        await _ignore_drop(client.destroy(mid, force=True))
    elif fsm == "create_volume":
        await _ignore_drop(client.create_volume({"app": "crash", "name": "data", "size_gb": 1}))
    elif fsm == "delete_volume":
        volume = await client.create_volume({"app": "crash", "name": "data", "size_gb": 1})
        await _ignore_drop(client.request("DELETE", f"/v1/volumes/{volume.id}",
                                          params={"app": "crash"}))


@pytest.mark.parametrize(("fsm", "step", "when"), CASES,
                         ids=[f"{f}:{s}:{w}" for f, s, w in CASES])
async def test_crash_at_every_step(tmp_path: Path, fsm: str, step: str, when: str) -> None:
    marker = f"bodega-crash-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start(failpoints=f"{fsm}:{step}:{when}")
        mid = await _setup(client, fsm, marker)
        await _trigger(client, fsm, mid, marker)
        assert await worker.crashed() == -9, "the failpoint did not fire"
        if step == "spawn" and when == "after":
            # Spawned before the crash: it comes up with no worker at all.
            await until(lambda: len(program_pids(marker)) == 1)
        before = program_pids(marker)
        client = await worker.start()
        await _verify(client, fsm, step, when, mid, marker, before, worker.tmp / worker.name,
                      worker.subnet)


async def _verify(client: WorkerClient, fsm: str, step: str, when: str, mid: str, marker: str,
                  before: list[int], data_dir: Path, subnet: str) -> None:
    if fsm in ("create_volume", "delete_volume"):
        want = "created" if fsm == "create_volume" else "destroyed"
        for _ in range(200):
            volumes = await client.request("GET", "/v1/volumes",
                                           params={"app": "crash", "include_deleted": "1"})
            if volumes and all(v["state"] == want for v in volumes):
                break
            await asyncio.sleep(0.05)
        assert [v["state"] for v in volumes] == [want]
        assert (data_dir / "volumes" / volumes[0]["id"]).exists() == (want == "created")
        return
    if fsm == "create_machine":
        machines = await client.list_machines("crash")
        assert len(machines) == 1, machines
        mid = machines[0].id
    expected = {"stop_machine": "stopped", "destroy_machine": "destroyed",
                "suspend_machine": "suspended"}.get(fsm, "started")
    await client.wait(mid, expected, timeout=30)
    if fsm in ("suspend_machine", "resume_machine"):
        # Frozen or thawed, it is the one process that ran before the crash.
        assert program_pids(marker) == before
        assert len(before) == 1
        assert frozen(before[0]) == (expected == "suspended")
    if expected in ("started", "suspended"):
        await until(lambda: len(program_pids(marker)) == 1)
        (pid,) = program_pids(marker)
        if step == "spawn" and when == "after":
            assert before == [pid], "a program started before the crash was not re-adopted"
        if fsm == "update_machine":
            assert environ_of(pid).get("VERSION") == "2"
        machine = await client.machine(mid)
        assert machine.state == expected
    else:
        await until(lambda: program_pids(marker) == [])
    if expected == "destroyed":
        machine = await client.machine(mid)
        index = int(machine.private_ip.rsplit(".", 1)[1])
        namespace = NetnsNetwork(ipaddress.ip_network(subnet), names_of(data_dir)).netns(index)
        if Path(f"/run/netns/{namespace}").exists():
            # It may be wired afresh for the next machine, with a launcher parked in it
            # (the worker does that as soon as the address is free), and the mount it
            # runs to bind the next machine's directory; nothing else may be.
            # While it is being wired, the ip that sets up its inside runs in it: the
            # namespace is looked at once wired whole (its marker), or gone.
            await until(lambda: (MARKER_DIR / namespace).exists()
                        or not Path(f"/run/netns/{namespace}").exists())
            pids = (await run("ip", "netns", "pids", namespace, check=False)).split()
            assert [p for p in pids if _cmdline(int(p)) and not _of_a_launcher(int(p))] == []
        assert not (data_dir / "machines" / mid).exists()
    log = await client.request("GET", "/v1/log", params={"resource": mid, "limit": 500})
    finished = [e for e in log if e["fsm"] == fsm]
    assert finished, f"no {fsm} entries in the log"


def _of_a_launcher(pid: int) -> bool:
    """A parked launcher, or a command it runs (its ``mount``): itself or an ancestor is."""
    while pid > 1:
        if PARK_NAME in _cmdline(pid):
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""  # it has exited since it was listed

