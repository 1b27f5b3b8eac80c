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
BLKIO_BYTES = "blkio.throttle.io_service_bytes_recursive"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


class UsageReader:
    """Reads machines' figures on a host with cgroups (v1 or v2)."""

    def __init__(self, cgroups: Cgroups, proc: Path = PROC) -> None:
        self.cgroups = cgroups
        self.proc = proc
        self.ticks = os.sysconf("SC_CLK_TCK")

    def _v1(self, controller: str, machine_id: str) -> Path:
        return self.cgroups.root / controller / "bodega" / self.cgroups.scope / machine_id

    def read(self, machine_id: str, own_netns: bool) -> MachineUsage | None:
        """The machine's figures; None when it has no memory cgroup (no run to measure)."""
        home = self.cgroups.dirs(machine_id)[0]
        procs = _read(home / "cgroup.procs")
        if procs is None:
            return None
        pids = procs.split()
        if self.cgroups.version == 2:
            cpu = cpu_seconds_v2(_read(home / "cpu.stat"))
            current = number(_read(home / "memory.current"))
            peak = number(_read(home / "memory.peak"))
            limit = memory_limit(_read(home / "memory.max"))
            io = io_v2(_read(home / "io.stat"))
        else:
            cpu = cpu_seconds_v1(_read(self._v1("cpuacct", machine_id) / "cpuacct.usage"))
            current = number(_read(home / "memory.usage_in_bytes"))
            peak = number(_read(home / "memory.max_usage_in_bytes"))
            limit = memory_limit(_read(home / "memory.limit_in_bytes"))
            io = io_v1(_read(self._v1("blkio", machine_id) / BLKIO_BYTES))
        if cpu is None:  # not in a cpuacct cgroup: its processes' own times
            cpu = proc_cpu_seconds(self._each(pids, "stat"), self.ticks)
        if io is None:
            io = proc_io(self._each(pids, "io"))
        net = None
        if own_netns and pids:
            net = net_dev(_read(self.proc / pids[0] / "net" / "dev"))
        return MachineUsage(
            cpu_seconds=cpu, memory_bytes=current, memory_peak_bytes=peak,
            memory_limit_bytes=limit,
            io_read_bytes=io[0] if io else None, io_write_bytes=io[1] if io else None,
            net_recv_bytes=net[0] if net else None, net_sent_bytes=net[1] if net else None)

    def _each(self, pids: list[str], name: str) -> list[str]:
        """``/proc/<pid>/<name>`` of each process still there."""
        texts = (_read(self.proc / pid / name) for pid in pids)
        return [text for text in texts if text is not None]
