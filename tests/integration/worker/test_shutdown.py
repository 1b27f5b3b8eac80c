"""A worker stopped with ``--stop-machines-on-exit`` leaves no machine process behind;
one stopped with SIGTERM and no machine running leaves nothing at all.

Whatever holds a machine: a lease (the worker must not refuse its own stop), a restart
policy that would start a crashed program again while the worker stops, a start waiting
out its crash-loop backoff, or a launcher parked for the next start. The proof is
``/proc``, not the worker's word.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bodega.wire.internal.worker_client import WorkerClient
from tests.leftovers_kit import names_of
from tests.python_kit import machine_python

from .crash_kit import CrashWorker, crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process driver's netns needs root")

CRASH_LOOP = "import time; time.sleep(0.3); raise SystemExit(1)"


def mentioning(text: str) -> list[int]:
    """Live processes whose command line names ``text`` (wrappers, launchers, programs)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


async def _sigterm_and_wait(worker: CrashWorker) -> int:
    assert worker.daemon is not None
    assert worker.daemon.process is not None
    worker.daemon.process.terminate()
    return await worker.crashed(timeout=90)


async def test_sigterm_stops_leased_and_crash_looping_machines(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as worker:
        client = await worker.start(extra=("--stop-machines-on-exit",))
        leased_marker = f"leased-{worker.name}"
        looping_marker = f"looping-{worker.name}"
        leased = await client.create_machine({"app": "shut", "config": machine_config(
            leased_marker, restart={"policy": "always"})})
        looping_config = machine_config(looping_marker, restart={"policy": "always"})
        looping_config["init"] = {"exec": [machine_python(), "-c", CRASH_LOOP, looping_marker]}
        looping = await client.create_machine({"app": "shut", "config": looping_config})
        await client.wait(leased.id, "started", timeout=30)
        lease = await client.call("POST", leased.id, "lease", json={"ttl": 600})
        assert lease["data"]["nonce"]
        await until(lambda: bool(program_pids(leased_marker)))
        # Let the other one crash and be restarted at least once: it is in its loop now.
        await _until_it_crashed(client, looping.id)
        data_dir = str(worker.tmp / worker.name)  # named by wrappers and parked launchers

        try:
            assert await _sigterm_and_wait(worker) == 0
            # Orphans are reaped by init: allow a moment, no more than a bounded poll.
            await until(lambda: not program_pids(leased_marker), timeout=15)
            await until(lambda: not program_pids(looping_marker), timeout=15)
            await until(lambda: not mentioning(data_dir), timeout=15)
            assert "could not stop" not in (worker.daemon.log() if worker.daemon else "")
        finally:
            # What a failed run left: this test's own wrappers, launchers and programs.
            leftovers = [*mentioning(data_dir), *program_pids(leased_marker),
                         *program_pids(looping_marker)]
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


async def _until_it_crashed(client: WorkerClient, mid: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(e["type"] == "exit" for e in await client.call("GET", mid, "events")):
        assert time.monotonic() < deadline, "the crash-looping machine never exited"
        await asyncio.sleep(0.1)


def _objects_of(cluster: str) -> list[str]:
    """Namespaces and links on the host whose names carry the cluster id."""
    links = [line.split(":")[1].strip().split("@")[0] for line in
             subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                            check=True).stdout.splitlines()]
    namespaces = [p.name for p in Path("/run/netns").glob("*")] if Path("/run/netns").exists() \
        else []
    return sorted(name for name in [*links, *namespaces] if cluster in name)


async def test_sigterm_with_no_machine_running_leaves_nothing_on_the_host(tmp_path: Path) -> None:
    """Machines left running keep their network for the next start; with none running
    (a start that failed beside it under ``bodega up``, a host emptied before an upgrade),
    a worker stopped with SIGTERM takes its bridge, namespaces and links with it, or the
    bridge would hold its subnet against any later cluster on the host."""
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        names = names_of(worker.tmp / worker.name)
        bridge = names.bridge(ipaddress.ip_network(worker.subnet))
        machine = await client.create_machine({"app": "shut", "config": machine_config(
            f"rest-{worker.name}")})
        await worker.reached(machine.id, "started")
        await client.call("POST", machine.id, "stop")
        await worker.reached(machine.id, "stopped")
        assert bridge in _objects_of(names.cluster_id)
        assert await _sigterm_and_wait(worker) == 0
        assert _objects_of(names.cluster_id) == []
