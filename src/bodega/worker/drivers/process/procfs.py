"""Reading processes from /proc: start times, sessions, resource use, listening sockets."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name can contain spaces and parentheses; fields follow the last ')'.
    return text.rsplit(")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (stat field 22)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


PF_KTHREAD = 0x00200000  # stat's flags: a kernel thread, whose command line is always empty
EXEC_SETTLE = 0.02  # how long a command line may read empty at the end of an exec


def command_line(pid: int, read: Callable[[int], bytes] | None = None,
                 stat: Callable[[int], list[str] | None] | None = None,
                 pause: Callable[[float], None] = time.sleep) -> list[bytes] | None:
    """``pid``'s arguments; None if it is gone.

    A process finishing an exec reads for a moment as an empty command line (the
    kernel is putting the new image's arguments in place): seen here right after a
    spawn, in state D. That moment is waited out (``EXEC_SETTLE`` at most), so a
    wrapper just spawned is never taken for a stranger. A zombie's and a kernel
    thread's command lines are empty for good, and are answered at once.
    """
    read = read or (lambda p: Path(f"/proc/{p}/cmdline").read_bytes())
    stat = stat or _stat_fields
    waited = 0.0
    while True:
        try:
            text = read(pid)
        except OSError:
            return None
        if text:
            return text.split(b"\0")
        fields = stat(pid)
        if fields is None:
            return None
        if fields[0] == "Z" or int(fields[6]) & PF_KTHREAD or waited >= EXEC_SETTLE:
            return []
        pause(0.0005)
        waited += 0.0005


def pids_with_argument(argument: str) -> list[int]:
    """Live processes that carry ``argument`` as one of their command-line arguments."""
    wanted = argument.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = command_line(int(entry.name))
        if argv is not None and wanted in argv:
            found.append(int(entry.name))
    return sorted(found)


def _pids_where(field: int, value: int) -> list[int]:
    """Live pids whose stat ``field`` (counted after the command name) is ``value``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and int(fields[field]) == value:
                pids.append(int(entry.name))
    return sorted(pids)


def session_pids(session: int) -> list[int]:
    return _pids_where(3, session)


@dataclass(frozen=True)
class ProcStat:
    command: str
    cpu: int
    rss: int
    stime: int
    rtime: int
    directory: str


def proc_info(pid: int) -> ProcStat | None:
    fields = _stat_fields(pid)
    if fields is None:
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        directory = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    utime, stime = int(fields[11]), int(fields[12])
    with open("/proc/uptime") as handle:
        uptime = float(handle.read().split()[0])
    started = int(fields[19]) / _CLK_TCK
    return ProcStat(
        command=command.decode(errors="replace"), cpu=utime + stime,
        rss=int(fields[21]) * _PAGE, stime=stime, rtime=int((uptime - started) * 1000),
        directory=directory,
    )


def listen_sockets(pid: int) -> list[dict[str, str]]:
    """TCP sockets in LISTEN state that ``pid`` holds open, as {proto, address}."""
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    if not inodes:
        return []
    sockets = []
    for proto, name in (("tcp", "tcp"), ("tcp6", "tcp6")):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A" and parts[9] in inodes:
                sockets.append({"proto": proto, "address": _address(parts[1], proto)})
    return sockets


def _address(hex_addr: str, proto: str) -> str:
    host_hex, port_hex = hex_addr.split(":")
    port = int(port_hex, 16)
    if proto == "tcp":
        octets = bytes.fromhex(host_hex)[::-1]
        return f"{'.'.join(str(b) for b in octets)}:{port}"
    raw = bytes.fromhex(host_hex)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    import ipaddress

    return f"[{ipaddress.IPv6Address(words)}]:{port}"


def child_pids(pid: int) -> list[int]:
    """The live children of ``pid`` (from its ``children`` file, else by scanning ppids)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        pass  # a kernel built without CONFIG_PROC_CHILDREN
    except OSError:
        return []
    return _pids_where(1, pid)  # by parent pid


def runs_another_program(pid: int) -> bool:
    """True once a child of ``pid`` has exec'd something other than ``pid``'s own command.

    A shell's forked child keeps its parent's command line (and its trapped
    signals) until it execs; only then does a signal reach the new program
    with default dispositions. Used for the process wrapper: its program has
    started once this is true.
    """
    try:
        own = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    for child in child_pids(pid):
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes() not in (own, b""):
                return True
        except OSError:
            continue
    return False


async def until_program_runs(pid: int, limit: float = 2.0) -> None:
    """Wait (up to ``limit`` seconds) until the wrapper ``pid`` runs its program, or is gone.

    Before its trap a wrapper dies of a signal sent to its group, and once the
    program runs the program gets it; in between the wrapper would swallow it,
    and a stop would wait out its timeout and kill. Setup that outlasts
    ``limit`` (a big volume's chown) is still before the trap, where a signal
    ends the run as it should.
    """
    deadline = time.monotonic() + limit
    while not runs_another_program(pid) and time.monotonic() < deadline:
        fields = _stat_fields(pid)
        if fields is None or fields[0] == "Z":
            return
        await asyncio.sleep(0.002)


def read_pid(pidfile: Path) -> int | None:
    try:
        text = pidfile.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def is_ours(pid: int, pidfile: Path, expected_start: object) -> bool:
    """True if ``pid`` is the wrapper of this run and not a stranger that reused the pid."""
    cmdline = command_line(pid)
    if cmdline is None or str(pidfile).encode() not in cmdline:
        return False
    if expected_start is not None and start_time(pid) != expected_start:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def until_gone(pid: int) -> None:
    for _ in range(200):
        if not os.path.exists(f"/proc/{pid}"):  # noqa: ASYNC240 (procfs: no disk)
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 (WNOHANG never blocks)
        await asyncio.sleep(0.01)
