"""An exec on a real worker runs where its machine's program runs: in its namespaces (its
mounts with them), its cgroups, as its user, with its environment and working directory."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import PreconditionFailed
from bodega.wire.internal.worker_client import WorkerClient

from .crash_kit import crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines of their own need root")
needs_freezer = pytest.mark.skipif(not Path("/sys/fs/cgroup/freezer").is_dir(),
                                   reason="a v1 freezer cgroup, joined at a suspend")

NAMESPACES = ("mnt", "net", "uts", "ipc", "pid", "cgroup", "user")
# What the exec's own shell is in and was given, section by section, as /proc says; the
# machine's program is read the same way from outside. Host tools only: the machine's user
# cannot reach every path root can (this interpreter's, maybe).
VIEW = (
    f"for n in {' '.join(NAMESPACES)}; do readlink /proc/$$/ns/$n; done\n"
    "echo @@; cat /proc/$$/cgroup\n"
    "echo @@; grep -E '^(Uid|Gid|Groups):' /proc/$$/status\n"
    "echo @@; readlink /proc/$$/cwd\n"
    "echo @@; cat /proc/$$/environ\n"
    "echo; echo @@; cat \"$1/marker\"\n"
)
SECTIONS = ("ns", "cgroup", "ids", "cwd", "env", "volume")
# A value a shell would run, were it ever parsed by one (and a name no shell can export).
TRICKY = "$(touch {ran}) `touch {ran}` 'single' \"double\" \\ ;\nsecond line"


def environment(raw: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def program_view(pid: int) -> dict[str, Any]:
    proc = Path(f"/proc/{pid}")
    status = (proc / "status").read_text().splitlines()
    return {
        "ns": [os.readlink(proc / "ns" / n) for n in NAMESPACES],
        "cgroup": (proc / "cgroup").read_text(),
        "ids": [line for line in status if line.split(":")[0] in ("Uid", "Gid", "Groups")],
        "cwd": os.readlink(proc / "cwd"),
        "env": environment((proc / "environ").read_text()),
    }


async def exec_view(client: WorkerClient, machine_id: str, guest: str) -> dict[str, Any]:
    done = await client.call("POST", machine_id, "exec",
                             json={"command": ["/bin/sh", "-c", VIEW, "view", guest],
                                   "timeout": 30})
    assert done["exit_code"] == 0, done
    parts = dict(zip(SECTIONS, done["stdout"].split("@@\n"), strict=True))
    return {
        "ns": parts["ns"].splitlines(),
        "cgroup": parts["cgroup"],
        "ids": parts["ids"].splitlines(),
        "cwd": parts["cwd"].strip(),
        "env": environment(parts["env"][:-1]),
        "volume": parts["volume"],
    }


async def test_an_exec_sees_what_the_machines_program_sees(tmp_path: Path) -> None:
    marker = f"bodega-exec-{uuid.uuid4().hex[:12]}"
    guest = f"/tmp/{marker}"  # where the volume is bound, in the machine's namespace only
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        volume = await client.create_volume({"app": "a", "name": "data", "size_gb": 1})
        ran = tmp_path / "ran"
        tricky = TRICKY.format(ran=ran)
        config = machine_config(marker, env={"TRICKY": tricky, "odd.name": "dropped"},
                                mounts=[{"volume": volume.id, "path": guest}])
        machine = await client.create_machine({"app": "a", "config": config})
        await worker.reached(machine.id, "started")
        await until(lambda: len(program_pids(marker)) == 1)
        (pid,) = program_pids(marker)
        (worker.tmp / worker.name / "volumes" / volume.id / "marker").write_text("in the volume")
        try:
            program = program_view(pid)
            view = await exec_view(client, machine.id, guest)
            assert view["volume"] == "in the volume", "the exec sees the machine's mounts"
            for key in ("ns", "cgroup", "ids", "cwd", "env"):
                assert view[key] == program[key], key
            assert program["ns"][0] != os.readlink("/proc/self/ns/mnt")
            assert program["ids"][0].split()[1] != "0", "the machine runs as a user of its own"
            assert program["env"]["FLY_MACHINE_ID"] == machine.id
            assert view["env"]["TRICKY"] == tricky
            assert "odd.name" not in view["env"]
            assert not ran.exists()

            await client.stop(machine.id, signal="SIGKILL", timeout="5s")
            await worker.reached(machine.id, "stopped")
            with pytest.raises(PreconditionFailed, match="not started"):
                await client.call("POST", machine.id, "exec", json={"command": ["true"]})
        finally:
            await client.destroy(machine.id, force=True)
            await worker.reached(machine.id, "destroyed")
            Path(guest).rmdir()  # made on the host by the machine's start, as its mount point


@needs_freezer
async def test_an_exec_after_a_resume_is_in_the_freezer_cgroup_its_program_is_in(
        tmp_path: Path) -> None:
    """A suspend moves the machine's processes into its freezer cgroup, where they stay once
    thawed: an exec after goes there too, so the next suspend freezes it with them."""
    marker = f"bodega-exec-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        machine = await client.create_machine({"app": "a", "config": machine_config(marker)})
        await worker.reached(machine.id, "started")
        await until(lambda: len(program_pids(marker)) == 1)
        (pid,) = program_pids(marker)
        await client.suspend(machine.id)
        await worker.reached(machine.id, "suspended")
        await client.start(machine.id)
        await worker.reached(machine.id, "started")
        assert program_pids(marker) == [pid]
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        assert any(":freezer:/bodega/" in line and line.endswith(f"/{machine.id}")
                   for line in cgroups.splitlines()), cgroups
        done = await client.call("POST", machine.id, "exec",
                                 json={"command": ["cat", "/proc/self/cgroup"]})
        assert (done["exit_code"], done["stdout"]) == (0, cgroups), done
