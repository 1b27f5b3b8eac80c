"""Which sockets a process listens on, read from /proc rather than from any configuration.

A process's open sockets are the ``socket:[inode]`` links in ``/proc/<pid>/fd``;
the kernel's tables in ``/proc/<pid>/net/{tcp,tcp6,udp,udp6}`` (the process's
own network namespace) say what each inode is bound to. A TCP socket counts
when it is listening; a UDP socket counts when it is bound to a port, since
any datagram sent there is read by the process.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

TCP_LISTEN = "0A"
UNIX_ACCEPTING = 0x10000  # __SO_ACCEPTCON: a listening Unix socket
TABLES = {"tcp": "tcp", "tcp6": "tcp", "udp": "udp", "udp6": "udp"}


@dataclass(frozen=True)
class Listener:
    proto: str  # "tcp" or "udp"
    host: str
    port: int
    inode: int

    def reachable_host(self) -> str:
        """Where a client on this host reaches it: a wildcard bind is reached on loopback."""
        if self.host == "0.0.0.0":
            return "127.0.0.1"
        if self.host == "::":
            return "::1"
        return self.host

    def url(self, scheme: str = "http") -> str:
        host = self.reachable_host()
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.proto} {self.host}:{self.port} (inode {self.inode})"


def decode_address(field: str) -> tuple[str, int]:
    """``0100007F:1F90`` -> ("127.0.0.1", 8080); the kernel prints each 32-bit word host-endian."""
    raw_ip, raw_port = field.split(":")
    packed = bytes.fromhex(raw_ip)
    words = b"".join(packed[i:i + 4][::-1] for i in range(0, len(packed), 4))
    family = socket.AF_INET if len(packed) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words), int(raw_port, 16)


def parse_table(text: str, proto: str) -> list[Listener]:
    """The listening (tcp) or bound (udp) sockets of one /proc/net table."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        host, port = decode_address(fields[1])
        state, inode = fields[3], int(fields[9])
        if proto == "tcp" and state != TCP_LISTEN:
            continue
        if proto == "udp" and port == 0:
            continue
        found.append(Listener(proto, host, port, inode))
    return found


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for entry in fd_dir.iterdir():
        try:
            target = os.readlink(entry)
        except OSError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def listeners_of(pid: int) -> list[Listener]:
    """Every TCP listener and bound UDP socket open in process ``pid``."""
    inodes = socket_inodes(pid)
    found = []
    for table, proto in TABLES.items():
        text = Path(f"/proc/{pid}/net/{table}").read_text()
        found += [s for s in parse_table(text, proto) if s.inode in inodes]
    return sorted(found, key=lambda s: (s.proto, s.port))


def unix_listeners_of(pid: int) -> list[Path]:
    """The paths of the Unix sockets process ``pid`` listens on (abstract ones have none)."""
    inodes = socket_inodes(pid)
    found = []
    for line in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        # Num RefCount Protocol Flags Type St Inode [Path]; the flags say it accepts.
        if len(fields) >= 8 and int(fields[6]) in inodes and \
                int(fields[3], 16) & UNIX_ACCEPTING and fields[7].startswith("/"):
            found.append(Path(fields[7]))
    return sorted(found)


def children_of(pid: int) -> list[int]:
    """The direct children of ``pid``, from every thread's ``children`` list."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found
