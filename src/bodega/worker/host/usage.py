"""A machine's figures read from its cgroup's files and its processes' ``/proc`` files.

Only files are read (no command is run), once per machine per scrape; what each
file says is parsed by ``core/usage_files.py``, whose table says which file
gives which figure on each hierarchy. Every machine kind is a cgroup here: a
process machine and a vm (qemu, started by the process driver's wrapper) are in
its memory and cpu cgroups, a container (runc, crun) and a sandbox (runsc) in
the cgroups of the same name that their runtime joined (``cgroupsPath``).
"""

from __future__ import annotations

import os
from pathlib import Path

from bodega.worker.core.usage_files import (
    MachineUsage,
    cpu_seconds_v1,
    cpu_seconds_v2,
    io_v1,
    io_v2,
    memory_limit,
    net_dev,
    number,
    proc_cpu_seconds,
    proc_io,
)
from bodega.worker.drivers.process.cgroups import Cgroups

PROC = Path("/proc")
NETNS = Path("/run/netns")  # the namespaces `ip netns` names, a machine's among them
BLKIO_BYTES = "blkio.throttle.io_service_bytes_recursive"
CHUNK = 65536


def _read(path: str) -> str | None:
    """A small kernel file's text; None when it is not there (or its process is gone).
    Paths are strings and the file is read with ``os`` calls: a scrape reads thousands."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, CHUNK):  # seq files answer a page or so at a time
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


class UsageReader:
    """Reads machines' figures on a host with cgroups (v1 or v2)."""

    def __init__(self, cgroups: Cgroups, proc: Path = PROC, netns: Path = NETNS) -> None:
        self.version = cgroups.version
        self.proc = str(proc)
        self.netns = str(netns)
        self.ticks = os.sysconf("SC_CLK_TCK")
        # Where each machine's directory is, per controller: its id is the last step.
        if cgroups.version == 2:
            self.home = str(cgroups.root / "bodega" / cgroups.scope)
        else:
            self.home = str(cgroups.root / "memory" / "bodega" / cgroups.scope)
        self.cpuacct = str(cgroups.root / "cpuacct" / "bodega" / cgroups.scope)
        self.blkio = str(cgroups.root / "blkio" / "bodega" / cgroups.scope)

    def read(self, machine_id: str, netns: str | None) -> MachineUsage | None:
        """The machine's figures; None when it has no memory cgroup (no run to measure).
        ``netns``: the name of its network namespace, None when it has none of its own."""
        home = f"{self.home}/{machine_id}"
        procs = _read(f"{home}/cgroup.procs")
        if procs is None:
            return None
        pids = procs.split()
        if self.version == 2:
            cpu = cpu_seconds_v2(_read(f"{home}/cpu.stat"))
            current = number(_read(f"{home}/memory.current"))
            peak = number(_read(f"{home}/memory.peak"))
            limit = memory_limit(_read(f"{home}/memory.max"))
            io = io_v2(_read(f"{home}/io.stat"))
        else:
            cpu = cpu_seconds_v1(_read(f"{self.cpuacct}/{machine_id}/cpuacct.usage"))
            current = number(_read(f"{home}/memory.usage_in_bytes"))
            peak = number(_read(f"{home}/memory.max_usage_in_bytes"))
            limit = memory_limit(_read(f"{home}/memory.limit_in_bytes"))
            io = io_v1(_read(f"{self.blkio}/{machine_id}/{BLKIO_BYTES}"))
        if cpu is None:  # not in a cpuacct cgroup: its processes' own times
            cpu = proc_cpu_seconds(self._each(pids, "stat"), self.ticks)
        if io is None:
            io = proc_io(self._each(pids, "io"))
        net = None
        if netns is not None and (inside := self._inside(pids, netns)) is not None:
            net = net_dev(_read(f"{self.proc}/{inside}/net/dev"))
        return MachineUsage(
            cpu_seconds=cpu, memory_bytes=current, memory_peak_bytes=peak,
            memory_limit_bytes=limit,
            io_read_bytes=io[0] if io else None, io_write_bytes=io[1] if io else None,
            net_recv_bytes=net[0] if net else None, net_sent_bytes=net[1] if net else None)

    def _inside(self, pids: list[str], netns: str) -> str | None:
        """A process of the machine in its network namespace (not every one is: a sandbox's
        first process, one of runsc's own, has an empty one), by the namespace's inode, as
        ``ip netns identify`` finds it."""
        try:
            wanted = os.stat(f"{self.netns}/{netns}")
        except OSError:
            return None
        for pid in pids:
            try:
                found = os.stat(f"{self.proc}/{pid}/ns/net")
            except OSError:
                continue
            if (found.st_ino, found.st_dev) == (wanted.st_ino, wanted.st_dev):
                return pid
        return None

    def _each(self, pids: list[str], name: str) -> list[str]:
        """``/proc/<pid>/<name>`` of each process still there."""
        texts = (_read(f"{self.proc}/{pid}/{name}") for pid in pids)
        return [text for text in texts if text is not None]
