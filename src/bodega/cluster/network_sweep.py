"""The private network's leftovers on this host, listed and removed.

What a worker killed with SIGKILL left of its private network (the fence's
nftables tables, its WireGuard interface and the wireguard-go serving it, its
routing rule): ``networking/core/kernel_objects.py`` decides whose each is; this lists
them with the host's tools and removes them. All of it is in this process's
network namespace (a host's, where its workers ran), save wireguard-go's control
sockets, in one directory for the machine: a socket goes only when no
wireguard-go anywhere serves its interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from bodega.networking.core.kernel_objects import NetworkLeftovers, Scope, pick
from bodega.networking.overlay import SOCKET_DIR
from bodega.runtime.commands import run_command
from bodega.worker.host.survey import links

SETTLE = 10.0  # seconds a killed wireguard-go may take to go
POLL = 0.02


async def survey(scope: Scope) -> NetworkLeftovers:
    """``scope``'s objects in this network namespace, and its stale control sockets."""
    here, elsewhere = _commands()
    return pick(scope, tables=await _output("nft", "-j", "list", "tables"),
                rules=await _output("ip", "-j", "-6", "rule", "show"),
                links=[link.name for link in links()], commands=here, elsewhere=elsewhere,
                sockets=[str(path) for path in _sockets()])


async def remove(found: NetworkLeftovers, settle: float = SETTLE) -> list[str]:
    """Remove ``found``; one line per object that would not go."""
    problems = []
    pids = [pid for pid, _interface in found.daemons]
    for pid in pids:  # its interface goes with it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle
    while (alive := [pid for pid in pids if _alive(pid)]) and loop.time() < deadline:
        await asyncio.sleep(POLL)
    problems += [f"wireguard-go {pid}: still running after {settle:.0f}s" for pid in alive]
    if found.interfaces:  # a kernel WireGuard's, or one whose wireguard-go is gone
        batch = "".join(f"link del {name}\n" for name in found.interfaces)
        await run_command("ip", "-force", "-batch", "-", stdin=batch.encode())
    if found.tables:
        problems += await _problem("nft", "-f", "-", stdin=found.nft_input())
    if found.rules:
        await run_command("ip", "-6", "-force", "-batch", "-", stdin=found.ip_input().encode())
    _unlink(found.sockets)
    names = {link.name for link in links()}
    problems += [f"overlay interface {n}: still there" for n in found.interfaces if n in names]
    return problems


async def _output(*argv: str) -> str:
    """What ``argv`` prints; nothing if it fails or is not installed (no nftables here, or
    not root: then there is nothing of ours to list either)."""
    try:
        done = await run_command(*argv)
    except OSError:
        return ""
    return done.stdout.decode() if done.returncode == 0 else ""


async def _problem(*argv: str, stdin: str) -> list[str]:
    try:
        done = await run_command(*argv, stdin=stdin.encode())
    except OSError as exc:
        return [f"{argv[0]}: {exc.strerror}"]
    return [] if done.returncode == 0 else [f"{' '.join(argv)}: {done.stderr.decode().strip()}"]


def _commands() -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """pid -> argv of the live processes in this network namespace, and of the others."""
    here: dict[int, list[str]] = {}
    elsewhere: dict[int, list[str]] = {}
    try:
        own = os.stat("/proc/self/ns/net")
        entries = list(Path("/proc").iterdir())
    except OSError:
        return here, elsewhere
    for entry in entries:
        if not entry.name.isdigit() or not _alive(int(entry.name)):
            continue
        try:
            argv = [a.decode(errors="replace")
                    for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            net = os.stat(entry / "ns" / "net")
        except OSError:
            continue
        same = (net.st_dev, net.st_ino) == (own.st_dev, own.st_ino)
        (here if same else elsewhere)[int(entry.name)] = argv
    return here, elsewhere


def _unlink(paths: tuple[str, ...]) -> None:
    for path in paths:
        Path(path).unlink(missing_ok=True)


def _sockets() -> list[Path]:
    try:
        return sorted(path for path in SOCKET_DIR.iterdir() if path.suffix == ".sock")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
