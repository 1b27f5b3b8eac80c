"""The WireGuard overlay between hosts: one interface per host, a peer per other host.

A host's interface carries every packet for another host's block: the route
for the whole cluster /48 points at it (the host's own /64 is more specific and
stays on its machine bridge), and WireGuard's cryptokey routing sends each
packet to the peer whose ``AllowedIPs`` (its block) holds the destination.

The kernel's WireGuard is used when ``ip link add ... type wireguard`` works;
otherwise ``wireguard-go`` runs in userspace, detached (told it may, with
``WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD``): like the interface, it stays
while the worker is away and its machines run on. Its control socket
lives in one directory shared by every network namespace, so the interface name
carries the cluster id and the host field: unique on the machine. ``wg``
configures both kinds.

Several workers may share one kernel (``bodega up`` runs all of its workers on
its host, ``bodega join --workers N`` too), each a host of the overlay with a
block, an interface and a port of its own. So the cluster's /48 is routed by
source as well (``routing``): a rule sends what leaves this worker's block to a
table of its own, in which the block itself stays on its bridge and the rest
of the /48 goes into its own interface, the one whose key the other hosts
accept that block from. Without it, the last worker's route for the /48 would
carry every worker's packets out under a key the peers do not accept them from.

The private key is made once (``wg genkey``) and kept in the data dir; the
public key, endpoint and block go into the worker's ``workers`` row, where the
other hosts learn them (``peers.py`` decides, ``sync`` applies).

The interface can go from under a running worker: a ``wireguard-go`` killed (by
the OOM killer, an operator) takes its interface and the routes through it with
it, and the next ``wg`` that finds its socket refused removes the socket. ``sync``
then looks at what is left and, when ``gone`` says the overlay is, brings it up
again as ``start`` does (same key, port and routes; the fence names the interface,
not its index, and stays) before it sets the peers. A ``wireguard-go`` that is
alive but does not answer is not replaced: its dump times out and the error is
logged each round (replacing it would race the stopped one for its socket).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bodega.model.rows import OverlayAdvert
from bodega.networking.commands import CommandFailed, run
from bodega.networking.core.kernel_objects import RULE_PRIORITY
from bodega.networking.core.kernel_objects import interface_name as interface_name
from bodega.networking.core.kernel_objects import table_of as table_of
from bodega.networking.core.peers import Peer, changes, parse_dump
from bodega.runtime.binding import BindError

log = logging.getLogger("bodega.networking.overlay")

SOCKET_DIR = Path("/var/run/wireguard")
USERSPACE_ENV = "WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD"
READY_POLLS = 100  # 5 s for wireguard-go's socket to appear
DUMP_TIMEOUT = 10.0  # seconds: a stopped wireguard-go accepts wg's connection, never answers
UNREACHABLE = "Unable to access interface"  # wg, when no kernel or userspace device answers


@dataclass(frozen=True)
class OverlaySpec:
    interface: str
    key_dir: Path
    listen_port: int
    endpoint: str  # host:port others reach this host's overlay at
    block: str  # this host's /64
    cluster: str  # the cluster's /48, routed into the overlay
    bridge: str = ""  # this host's machine bridge: its block stays there ("": no rule)
    table: int = 0  # this host's routing table for what leaves its block (0: none)


def routing(spec: OverlaySpec) -> list[list[str]]:
    """The ``ip`` commands that route what leaves ``spec``'s block: its own block on its
    bridge, the rest of the cluster into its interface; pure (``start`` runs them)."""
    if not spec.table or not spec.bridge:
        return []
    table = str(spec.table)
    return [["ip", "-6", "route", "replace", spec.block, "dev", spec.bridge, "table", table],
            ["ip", "-6", "route", "replace", spec.cluster, "dev", spec.interface,
             "table", table],
            ["ip", "-6", "rule", "add", "from", spec.block, "lookup", table,
             "priority", str(RULE_PRIORITY)]]


def unrouting(spec: OverlaySpec) -> list[str]:
    """The ``ip`` command that removes the rule ``routing`` adds (run until it fails)."""
    return ["ip", "-6", "rule", "del", "from", spec.block, "lookup", str(spec.table),
            "priority", str(RULE_PRIORITY)]


@dataclass(frozen=True)
class Sight:
    """What was seen of the overlay after ``wg`` failed on it."""

    interface: bool  # the interface exists in this network namespace
    socket: bool  # a wireguard-go control socket exists for it
    userspace: bool  # it was brought up with wireguard-go
    error: str  # what wg said


def gone(sight: Sight) -> str | None:
    """Why the overlay must be brought up again, or None when it stands (``wg`` failed for
    another reason, or a wireguard-go that is alive did not answer); pure."""
    if not sight.interface:
        return "its interface is gone"
    if sight.userspace and not sight.socket:
        return "its wireguard-go is gone (no control socket)"
    if UNREACHABLE in sight.error:
        return f"wg cannot reach it ({sight.error.rsplit(': ', 1)[-1]})"
    return None


class Overlay:
    def __init__(self, spec: OverlaySpec) -> None:
        self.spec = spec
        self.public_key = ""
        self.userspace = False

    @property
    def private_key_path(self) -> Path:
        return self.spec.key_dir / "private.key"

    def advertised(self) -> OverlayAdvert:
        """What goes into the ``workers`` row for other hosts to peer with this one."""
        return OverlayAdvert(public_key=self.public_key, endpoint=self.spec.endpoint,
                             block=self.spec.block, interface=self.spec.interface)

    async def start(self) -> None:
        await self._key()
        name = self.spec.interface
        await run("ip", "link", "del", name, check=False)  # a crashed run's
        try:
            await run("ip", "link", "add", name, "type", "wireguard")
            self.userspace = False
            log.info("overlay %s: kernel WireGuard", name)
        except CommandFailed:
            await self._userspace()
            self.userspace = True
            log.info("overlay %s: wireguard-go (no WireGuard in this kernel)", name)
        try:
            await run("wg", "set", name, "private-key", str(self.private_key_path),
                      "listen-port", str(self.spec.listen_port), timeout=DUMP_TIMEOUT)
        except CommandFailed as err:
            if "Address already in use" not in str(err):
                raise
            # One line naming the port (the command maps it to its flag), not a traceback.
            raise BindError(OSError(errno.EADDRINUSE, "in use"), "0.0.0.0",
                            self.spec.listen_port, "UDP") from None
        await run("ip", "link", "set", name, "up")
        await run("ip", "-6", "route", "replace", self.spec.cluster, "dev", name)
        await self._unroute()  # a previous run's rule, exactly once
        for argv in routing(self.spec):
            await run(*argv)

    async def _unroute(self) -> None:
        if not self.spec.table:
            return
        for _ in range(16):  # a rule added twice must be deleted twice
            try:
                await run(*unrouting(self.spec))
            except CommandFailed:
                break
        await run("ip", "-6", "route", "flush", "table", str(self.spec.table), check=False)

    async def _key(self) -> None:
        path = self.private_key_path
        if not path.exists():
            self.spec.key_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            key = (await run("wg", "genkey")).strip()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(key + "\n")
        self.public_key = (await run("wg", "pubkey", stdin=path.read_bytes())).strip()

    async def _userspace(self) -> None:
        """Start ``wireguard-go``, which detaches itself: it outlives this process when the
        worker leaves its machines running, and exits when its interface is deleted."""
        name = self.spec.interface
        for _ in range(READY_POLLS):  # a previous one removes its socket as it exits
            if not _socket(name).exists():
                break
            await asyncio.sleep(0.05)
        _socket(name).unlink(missing_ok=True)
        # Its detached child must not hold pipes of ours: nothing would ever read them to EOF.
        starter = await asyncio.create_subprocess_exec(
            "wireguard-go", name, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, USERSPACE_ENV: "1"})
        if await starter.wait() != 0:
            raise CommandFailed(f"wireguard-go {name} exited with {starter.returncode}")
        for _ in range(READY_POLLS):
            if _up(name):
                return
            await asyncio.sleep(0.05)
        raise CommandFailed(f"wireguard-go did not bring up {name}")

    async def dump(self) -> str:
        return await run("wg", "show", self.spec.interface, "dump", timeout=DUMP_TIMEOUT)

    async def sync(self, want: dict[str, Peer]) -> int:
        """Make the interface's peers ``want``, bringing the overlay up again first if it is
        gone; how many peer changes that took."""
        try:
            dump = await self.dump()
        except CommandFailed as failed:
            reason = gone(_sight(self.spec.interface, self.userspace, str(failed)))
            if reason is None:
                raise
            await self.start()
            log.warning("overlay %s was gone (%s): brought up again with its key, port and "
                        "routes", self.spec.interface, reason)
            dump = await self.dump()
        steps = changes(parse_dump(dump), want)
        for step in steps:
            await run(*step.argv(self.spec.interface))
            log.info("overlay %s: %s", self.spec.interface, step.describe())
        return len(steps)

    async def stop(self) -> None:
        """Delete the interface (a userspace one's wireguard-go then exits by itself) and the
        routing of the block."""
        await run("ip", "link", "del", self.spec.interface, check=False)
        await self._unroute()

def _socket(name: str) -> Path:
    return SOCKET_DIR / f"{name}.sock"


def _sight(name: str, userspace: bool, error: str) -> Sight:
    """What is left of the overlay ``name`` (sysfs and /run are in memory: no disk wait)."""
    return Sight(interface=Path(f"/sys/class/net/{name}").exists(),
                 socket=_socket(name).exists(), userspace=userspace, error=error)


def _up(name: str) -> bool:
    """wireguard-go made the interface and listens on its control socket (sysfs and /run are
    in memory: no disk wait)."""
    return _socket(name).exists() and Path(f"/sys/class/net/{name}").exists()
