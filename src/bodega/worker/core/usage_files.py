"""What a machine uses, read from the kernel's files: the parsing, no I/O.

A scrape of the worker's ``/metrics`` reads each live machine's cgroup files
(``host/usage.py``) and hands their text here. The sources, by hierarchy:

    figure          cgroup v2 (the machine's dir)   cgroup v1                    no cgroup file
    cpu seconds     cpu.stat usage_usec             cpuacct/ cpuacct.usage (ns)  /proc/<pid>/stat
    memory          memory.current                  memory/ memory.usage_in_bytes
    memory peak     memory.peak                     memory/ memory.max_usage_in_bytes
    memory limit    memory.max ("max": none)        memory/ memory.limit_in_bytes
    io bytes        io.stat rbytes, wbytes          blkio/ throttle.io_service_bytes  /proc/<pid>/io
    net bytes       /proc/<pid>/net/dev, eth0 (the machine's own network namespace)

On v1 a process (or vm) machine is in the memory and cpu controllers only (the
fewer cgroups a start joins, the sooner it runs): its cpu time and IO are then
the sums over its processes' ``/proc/<pid>/stat`` (user and system time, its
own and its waited-for children's) and ``/proc/<pid>/io``. Image machines are
in every controller (the OCI runtime joins them all), so theirs are the
cgroup's, which count processes gone too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_LIMIT_V1 = 1 << 62  # v1 writes "unlimited" as PAGE_COUNTER_MAX pages: anything above this
NET_INTERFACE = "eth0"


@dataclass(frozen=True)
class MachineUsage:
    """One look at a machine's figures; None where its host has no source for one."""

    cpu_seconds: float | None = None
    memory_bytes: int | None = None
    memory_peak_bytes: int | None = None
    memory_limit_bytes: int | None = None
    io_read_bytes: int | None = None
    io_write_bytes: int | None = None
    net_recv_bytes: int | None = None
    net_sent_bytes: int | None = None


def number(text: str | None) -> int | None:
    """A file holding one integer; None for no file or no integer."""
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def keyed(text: str | None, key: str) -> int | None:
    """The value of ``key`` in a ``key value`` per line file (cpu.stat, memory.stat)."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return number(value)
    return None


def cpu_seconds_v2(cpu_stat: str | None) -> float | None:
    usec = keyed(cpu_stat, "usage_usec")
    return None if usec is None else usec / 1e6


def cpu_seconds_v1(cpuacct_usage: str | None) -> float | None:
    ns = number(cpuacct_usage)
    return None if ns is None else ns / 1e9


def memory_limit(text: str | None) -> int | None:
    """A memory limit in bytes; None when there is none ("max", or v1's page counter max)."""
    if text is None or text.strip() == "max":
        return None
    limit = number(text)
    return None if limit is None or limit >= NO_LIMIT_V1 else limit


def io_v2(io_stat: str | None) -> tuple[int, int] | None:
    """Bytes read and written over every device of ``io.stat`` (``8:0 rbytes=1 wbytes=2 ..``)."""
    if io_stat is None:
        return None
    read = written = 0
    for line in io_stat.splitlines():
        for field in line.split()[1:]:
            key, _, value = field.partition("=")
            if key == "rbytes":
                read += number(value) or 0
            elif key == "wbytes":
                written += number(value) or 0
    return read, written


def io_v1(service_bytes: str | None) -> tuple[int, int] | None:
    """Bytes read and written over every device of blkio's ``io_service_bytes``
    (``8:0 Read 4096`` lines, a ``Total`` line per device and one for all)."""
    if service_bytes is None:
        return None
    read = written = 0
    for line in service_bytes.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        if parts[1] == "Read":
            read += number(parts[2]) or 0
        elif parts[1] == "Write":
            written += number(parts[2]) or 0
    return read, written


def proc_cpu_seconds(stats: Iterable[str], ticks_per_second: int) -> float | None:
    """User and system time of processes, with their waited-for children's, from their
    ``/proc/<pid>/stat`` lines (fields 14 to 17, after the command's closing parenthesis,
    which may itself hold spaces and parentheses)."""
    ticks = 0
    seen = False
    for line in stats:
        fields = line[line.rfind(")") + 2:].split()
        if len(fields) < 15:
            continue
        ticks += sum(number(value) or 0 for value in fields[11:15])
        seen = True
    return ticks / ticks_per_second if seen else None


def proc_io(ios: Iterable[str]) -> tuple[int, int] | None:
    """Bytes processes read from and wrote to storage (``read_bytes``, ``write_bytes``)."""
    read = written = 0
    seen = False
    for text in ios:
        seen = True
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key == "read_bytes":
                read += number(value) or 0
            elif key == "write_bytes":
                written += number(value) or 0
    return (read, written) if seen else None


def net_dev(text: str | None, interface: str = NET_INTERFACE) -> tuple[int, int] | None:
    """Bytes ``interface`` received and sent, from ``/proc/<pid>/net/dev``: the counters of
    the network namespace that process is in."""
    for line in (text or "").splitlines():
        name, colon, rest = line.partition(":")
        if not colon or name.strip() != interface:
            continue
        fields = rest.split()
        if len(fields) < 9:
            return None
        return number(fields[0]) or 0, number(fields[8]) or 0
    return None
