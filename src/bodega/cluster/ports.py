"""The ports ``bodega up`` listens on: free ones by default, remembered in the data dir.

Ports internal to the cluster (every component's gossip port, the image
registry's) are picked free, since two clusters on one host must not collide,
and written to ``ports.json``, so a restarted component, and a restarted
``bodega up`` on the same data dir, comes back on the address its peers (and
the images it pushed) remember. A remembered port that is now taken is
replaced by a free one, and the caller says so. Fresh ones come from outside the
kernel's ephemeral range and are claimed host-wide while ``bodega up`` runs
(``port_claims``), so neither an outgoing socket nor a second cluster starting at the
same moment takes one before its component binds it. The API and proxy ports are
the documented ones users type (4280, 8080): they are never moved silently; a
taken one is refused in one line that names the address and the flag that
moves it.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bodega.cluster.port_claims import PortClaims, candidates
from bodega.runtime.binding import BindError
from bodega.runtime.lifecycle import write_json_atomic
from bodega.runtime.serve import bind

PORTS_FILE = "ports.json"
KERNEL_TRIES = 64  # ports asked of the kernel when the quiet range has none left
EVERY_ADDRESS = "0.0.0.0"  # WireGuard's: every address of the host, IPv4 and IPv6


class RememberedPorts(BaseModel):
    """What ``ports.json`` holds: component name -> UDP gossip port, worker name -> UDP
    WireGuard port (a cluster of this host alone; with --advertise they are fixed), and
    the image registry's TCP port (None: none chosen yet)."""

    model_config = ConfigDict(extra="forbid")
    gossip: dict[str, int] = {}
    wireguard: dict[str, int] = {}
    registry: int | None = None


@dataclass(frozen=True)
class GossipPlan:
    ports: dict[str, int]  # component name -> UDP port
    moved: dict[str, tuple[int, int]]  # name -> (remembered port, the one it gets now)


def plan_gossip(names: list[str], remembered: dict[str, int], taken: set[int],
                fresh: Iterable[int]) -> GossipPlan:
    """Keep every remembered port still free; give the others ports from ``fresh``."""
    supply: Iterator[int] = iter(fresh)
    ports: dict[str, int] = {}
    moved: dict[str, tuple[int, int]] = {}
    for name in names:
        old = remembered.get(name)
        if old is not None and old not in taken and old not in ports.values():
            ports[name] = old
            continue
        new = next(port for port in supply if port not in ports.values()
                   and port not in remembered.values())
        ports[name] = new
        if old is not None:
            moved[name] = (old, new)
    return GossipPlan(ports=ports, moved=moved)


def consecutive(names: list[str], first: int) -> dict[str, int]:
    """``--gossip-port N``: the first component on N, each next one on the next port."""
    return {name: first + i for i, name in enumerate(names)}


def remembered(data_dir: Path) -> RememberedPorts:
    """The ports this data dir used last; nothing if none (or the file is unreadable)."""
    path = data_dir / PORTS_FILE
    try:
        return RememberedPorts.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return RememberedPorts()
    except (OSError, ValueError, ValidationError):
        # Only a record of earlier choices: choosing again loses nothing.
        return RememberedPorts()


def remember(data_dir: Path, ports: RememberedPorts) -> None:
    write_json_atomic(data_dir / PORTS_FILE, json.loads(ports.model_dump_json()))


def udp_taken(host: str, port: int) -> BindError | None:
    """Why ``host:port`` cannot take a gossip socket now, or None if it can. On
    ``EVERY_ADDRESS`` both families are checked, as WireGuard binds both."""
    try:
        for sock in _udp_every(host, port):
            sock.close()
    except OSError as exc:
        return BindError(exc, host, port, "UDP")
    return None


def tcp_taken(host: str, port: int) -> BindError | None:
    """Why ``host:port`` cannot take an HTTP listener now (bound the way serve binds it)."""
    try:
        bind(host, port).close()
    except BindError as err:
        return err
    return None


def free_udp_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports the kernel says are free now (all held until all are found)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    held = [socket.socket(family, socket.SOCK_DGRAM) for _ in range(count)]
    try:
        for sock in held:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()


def claimed_ports(transport: str, host: str, count: int, claims: PortClaims,
                  avoid: Collection[int] = ()) -> list[int]:
    """``count`` distinct ports free now for ``transport`` ("UDP", "TCP"), each claimed for
    this process: from the quiet range next to the kernel's ephemeral one (``port_claims``),
    else from the kernel. All are held bound until all are found."""
    held: list[socket.socket] = []
    chosen: list[int] = []

    def attempt(port: int) -> None:
        # A port another bodega up claimed is not bound, even for a look: its component
        # may be about to bind it, and would find it taken for that moment.
        if port and not claims.take(transport.lower(), port):
            return
        try:
            socks = [bind(host, port)] if transport == "TCP" else _udp_every(host, port)
        except OSError:
            return
        got = int(socks[0].getsockname()[1])
        if got in avoid or got in chosen or not claims.take(transport.lower(), got):
            for sock in socks:
                sock.close()
            return
        held.extend(socks)
        chosen.append(got)

    try:
        for port in candidates():
            if len(chosen) == count:
                break
            if port not in avoid:
                attempt(port)
        for _ in range(KERNEL_TRIES):
            if len(chosen) == count:
                break
            attempt(0)
        if len(chosen) < count:
            raise OSError(f"found only {len(chosen)} of {count} free {transport} ports")
        return chosen
    finally:
        for sock in held:
            sock.close()


def _udp(family: int, host: str, port: int, *, v6only: bool = False) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        if v6only:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _udp_every(host: str, port: int) -> list[socket.socket]:
    """Sockets bound on ``host:port`` (``port`` 0: one the kernel picks); on
    ``EVERY_ADDRESS``, on the IPv6 wildcard too when the host has IPv6 (wireguard-go
    listens on both and gives up when either is taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    first = _udp(family, host, port)
    if host != EVERY_ADDRESS or not socket.has_ipv6:
        return [first]
    try:
        return [first, _udp(socket.AF_INET6, "::", int(first.getsockname()[1]), v6only=True)]
    except OSError as exc:
        first.close()
        if exc.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
            return [_udp(family, host, port)]  # no IPv6 here: the IPv4 socket is all
        raise


def choose_gossip(data_dir: Path, host: str, names: list[str], first: int | None,
                  claims: PortClaims | None = None) -> GossipPlan:
    """The gossip port of every component, remembered for the next start.

    ``first`` (``--gossip-port``) asks for consecutive ports from it; a taken one
    raises a ``BindError``. Otherwise remembered ports are kept while free. Fresh
    ports are asked for beyond the remembered ones, since a free remembered port
    may be handed out again and must not go to two components. Every port is claimed
    in ``claims`` (none: claimed by no one), and one another process claims counts as taken.
    """
    return _choose_udp(data_dir, "gossip", host, names, first, claims)


def choose_wireguard(data_dir: Path, names: list[str], first: int | None,
                     claims: PortClaims | None = None) -> GossipPlan:
    """Each worker's WireGuard port, as ``choose_gossip`` chooses gossip ports: ``first``
    (``--wireguard-port``, and always with ``--advertise``, since other hosts' firewalls
    must let them through) consecutive from it, else free ones remembered. WireGuard
    listens on every address of the host, so every address is checked."""
    return _choose_udp(data_dir, "wireguard", EVERY_ADDRESS, names, first, claims)


def _choose_udp(data_dir: Path, kind: str, host: str, names: list[str], first: int | None,
                claims: PortClaims | None) -> GossipPlan:
    claims = claims or PortClaims(lock_dir=None)
    if first is not None:
        ports = consecutive(names, first)
        for port in ports.values():
            if (err := udp_taken(host, port)) is not None:
                raise err
            if not claims.take("udp", port):
                raise BindError(OSError(errno.EADDRINUSE, "in use"), host, port, "UDP")
        plan = GossipPlan(ports=ports, moved={})
    else:
        before: dict[str, int] = getattr(remembered(data_dir), kind)
        taken = {port for port in before.values()
                 if udp_taken(host, port) is not None or not claims.take("udp", port)}
        plan = plan_gossip(names, before, taken, claimed_ports(
            "UDP", host, len(names), claims, avoid=set(before.values())))
    remember(data_dir, remembered(data_dir).model_copy(update={kind: plan.ports}))
    return plan


@dataclass(frozen=True)
class RegistryPort:
    port: int
    moved_from: int | None  # the remembered port it replaces, when that one was taken


def choose_registry(data_dir: Path, host: str, asked: int | None,
                    claims: PortClaims | None = None) -> RegistryPort:
    """The image registry's TCP port, remembered for the next start.

    ``asked`` (``--registry-port``) is used as given (the caller checked it is free).
    Otherwise the remembered port is kept while it is free, else a free one is
    picked: the registry is internal to the cluster, no user types its port. Claimed as
    ``choose_gossip`` claims.
    """
    claims = claims or PortClaims(lock_dir=None)
    before = remembered(data_dir)
    if asked is not None:
        claims.take("tcp", asked)
        chosen = RegistryPort(asked, None)
    elif before.registry is not None and tcp_taken(host, before.registry) is None \
            and claims.take("tcp", before.registry):
        chosen = RegistryPort(before.registry, None)
    else:
        (port,) = claimed_ports("TCP", host, 1, claims)
        chosen = RegistryPort(port, before.registry)
    remember(data_dir, before.model_copy(update={"registry": chosen.port}))
    return chosen


def check_listeners(host: str, wanted: dict[str, int]) -> None:
    """Refuse at once, naming the address and its flag, if a wanted TCP port is taken."""
    for flag, port in wanted.items():
        err = tcp_taken(host, port)
        if err is not None:
            raise ValueError(f"{err}; move it with {flag}")
