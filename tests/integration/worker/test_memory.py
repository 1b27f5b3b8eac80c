"""A machine's memory limit through a real worker's API, on the process driver's cgroups.

The limit is the machine's memory cgroup's, set live; it is refused above the
reservation (400) and below what the program uses (412); the ledger keeps
counting the whole reservation; the limit outlives a restart of the machine and
a worker killed and started again. A reclaim has the kernel take back page
cache the program wrote, and the answer says how much, as the cgroup measures.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import BadRequest, PreconditionFailed
from bodega.wire.internal.worker_client import WorkerClient
from tests.python_kit import machine_python

from .crash_kit import CrashWorker, crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists(),
    reason="memory limits need root and the cgroup v1 memory controller")

MIB = 1024 * 1024
# Holds 40 MB of its own (a heap the kernel cannot take without swap), writes 48 MB to a
# file (page cache, charged to the machine, which the kernel can reclaim), then waits.
HOLDER = ("import os, time\nheld = bytearray(os.urandom(40 << 20))\n"
          "with open('cache.bin', 'wb') as f:\n"
          "    for _ in range(48):\n        f.write(os.urandom(1 << 20))\n"
          "open('ready', 'w').write('1')\ntime.sleep(600)")


def holder_config(marker: str) -> dict[str, Any]:
    config = machine_config(marker)
    config["init"] = {"exec": [machine_python(), "-c", HOLDER, marker]}
    return config


def memory_cgroup(pid: int) -> Path:
    """The memory cgroup the kernel says ``pid`` is in."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    raise AssertionError(f"process {pid} has no memory cgroup")


def kernel_limit(pid: int) -> int:
    return int((memory_cgroup(pid) / "memory.limit_in_bytes").read_text())


def kernel_usage(pid: int) -> int:
    return int((memory_cgroup(pid) / "memory.usage_in_bytes").read_text())


async def started_holder(worker: CrashWorker, client: WorkerClient,
                         marker: str) -> tuple[str, int]:
    machine = await client.create_machine({"app": "a", "config": holder_config(marker)})
    await client.wait(machine.id, "started", timeout=30)
    ready = worker.tmp / worker.name / "machines" / machine.id / "root" / "ready"
    await until(lambda: ready.exists() and len(program_pids(marker)) == 1)
    (pid,) = program_pids(marker)
    return machine.id, pid


async def test_a_limit_is_set_live_refused_out_of_range_and_kept(tmp_path: Path) -> None:
    marker = f"bodega-memory-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid, pid = await started_holder(worker, client, marker)
        assert kernel_limit(pid) == 256 * MIB
        first = await client.call("GET", mid, "memory")
        assert first["limit_mb"] == 256
        assert 0 < first["available_mb"] < 256 - 40  # the program holds 40 MB and more
        used_before = (await client.capacity()).used.memory_mb

        with pytest.raises(BadRequest, match=r"above .* reservation of 256 MB"):
            await client.call("PUT", mid, "memory", json={"limit_mb": 512})
        with pytest.raises(PreconditionFailed, match=r"below the .* MB machine"):
            await client.call("PUT", mid, "memory", json={"limit_mb": 8})
        with pytest.raises(BadRequest, match="limit_mb is required"):
            await client.call("PUT", mid, "memory", json={"limit_mb": 0})
        assert kernel_limit(pid) == 256 * MIB, "a refused limit leaves the cgroup alone"

        lowered = await client.call("PUT", mid, "memory", json={"limit_mb": 200})
        assert lowered["limit_mb"] == 200
        assert kernel_limit(pid) == 200 * MIB
        assert program_pids(marker) == [pid], "a lower limit the program fits in kills nothing"
        # The ledger counts the reservation, not the limit: nothing was freed for others.
        assert (await client.capacity()).used.memory_mb == used_before

        # A restart of the machine: its next run gets the limit.
        await client.call("POST", mid, "restart")
        # One read per look: two reads could see the old program, then nobody, and pass.
        old, found = pid, [pid]
        def replaced() -> bool:
            nonlocal found
            found = program_pids(marker)
            return len(found) == 1 and found != [old]
        await until(replaced)
        (pid,) = found
        assert kernel_limit(pid) == 200 * MIB

        # A worker killed and started again: the running machine keeps it, and so does the
        # next run after a stop and a start.
        assert worker.daemon is not None
        assert worker.daemon.process is not None
        worker.daemon.process.send_signal(signal.SIGKILL)
        await worker.crashed()
        client = await worker.start()
        assert (await client.call("GET", mid, "memory"))["limit_mb"] == 200
        assert kernel_limit(pid) == 200 * MIB
        await client.stop(mid, signal="SIGKILL")
        await client.wait(mid, "stopped", timeout=30)
        assert (await client.call("GET", mid, "memory")) == {"limit_mb": 200,
                                                              "available_mb": 200}
        await client.start(mid)
        await client.wait(mid, "started", timeout=30)
        await until(lambda: len(program_pids(marker)) == 1)
        (pid,) = program_pids(marker)
        assert kernel_limit(pid) == 200 * MIB

        # Raising it back to the reservation is allowed, live.
        raised = await client.call("PUT", mid, "memory", json={"limit_mb": 256})
        assert raised["limit_mb"] == 256
        assert kernel_limit(pid) == 256 * MIB
        log = await client.request("GET", "/v1/log", params={"resource": mid})
        assert [e["payload"] for e in log if e["step"] == "set_memory_limit"] == [
            {"limit_mb": 200}, {"limit_mb": 256}]


async def test_a_reclaim_takes_back_page_cache_and_says_how_much(tmp_path: Path) -> None:
    marker = f"bodega-memory-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid, pid = await started_holder(worker, client, marker)
        before = kernel_usage(pid)
        assert before > (40 + 40) * MIB  # its heap and most of the file's pages
        some = await client.call("POST", mid, "memory/reclaim", json={"amount_mb": 20})
        assert 16 <= some["actual_mb"] <= 40  # about what was asked, as the cgroup measured
        assert kernel_usage(pid) < before - 16 * MIB
        assert kernel_limit(pid) == 256 * MIB, "the limit is put back after the reclaim"
        rest = await client.call("POST", mid, "memory/reclaim", json={})
        assert rest["actual_mb"] >= 8  # the rest of the file's pages
        assert kernel_usage(pid) >= 40 * MIB, "the program's own heap stays (no swap)"
        assert program_pids(marker) == [pid]

        with pytest.raises(BadRequest, match="amount_mb must not be negative"):
            await client.call("POST", mid, "memory/reclaim", json={"amount_mb": -1})
        await client.stop(mid, signal="SIGKILL")
        await client.wait(mid, "stopped", timeout=30)
        with pytest.raises(PreconditionFailed, match="not started"):
            await client.call("POST", mid, "memory/reclaim", json={})


def kernel_memsw(pid: int) -> int | None:
    """The memory + swap limit of ``pid``'s cgroup; None where the host does not account swap."""
    path = memory_cgroup(pid) / "memory.memsw.limit_in_bytes"
    return int(path.read_text()) if path.exists() else None


async def test_a_process_machine_swaps_what_its_config_asks_and_a_live_limit_keeps_it(
        tmp_path: Path) -> None:
    accounted = Path("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists()
    marker = f"bodega-memory-{uuid.uuid4().hex[:12]}"
    plain_marker = f"bodega-memory-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        config = machine_config(marker)
        config["init"]["swap_size_mb"] = 128
        machine = await client.create_machine({"app": "a", "config": config})
        plain = await client.create_machine({"app": "a", "config": machine_config(plain_marker)})
        for mid in (machine.id, plain.id):
            await client.wait(mid, "started", timeout=30)
        await until(lambda: len(program_pids(marker)) == len(program_pids(plain_marker)) == 1)
        (pid,), (plain_pid,) = program_pids(marker), program_pids(plain_marker)
        assert kernel_limit(pid) == 256 * MIB
        assert kernel_memsw(pid) == ((256 + 128) * MIB if accounted else None)
        assert kernel_memsw(plain_pid) == (256 * MIB if accounted else None)  # no swap

        await client.call("PUT", machine.id, "memory", json={"limit_mb": 200})
        assert kernel_limit(pid) == 200 * MIB
        assert kernel_memsw(pid) == ((200 + 128) * MIB if accounted else None)
        await client.stop(machine.id, signal="SIGKILL")
        await client.wait(machine.id, "stopped", timeout=30)
        await client.start(machine.id)
        await client.wait(machine.id, "started", timeout=30)
        await until(lambda: len(program_pids(marker)) == 1 and program_pids(marker) != [pid])
        (pid,) = program_pids(marker)
        assert kernel_memsw(pid) == ((200 + 128) * MIB if accounted else None)
