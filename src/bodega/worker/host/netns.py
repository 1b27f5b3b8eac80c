"""Network namespaces for machines: a worker as root gives each address one of its own.

The worker owns a machine subnet (a /24) and a Linux bridge holding its
gateway address. Each address ``.2``-``.254`` gets a network namespace named by
the address (``names.py``: ``bodega-<cluster id>-<b>-<c>-<index>``), so the
next few are wired ahead of time, off the request path: a veth pair (host end
on the bridge, the machine end renamed ``eth0``, with a MAC fixed per
address), the address and a default route through the gateway. A namespace is
wired completely or not at all: a marker in ``/run/bodega/netns`` says it is
done, and wiring an address found half wired (a crash in the middle) deletes
its pieces and builds them again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
from pathlib import Path

from bodega.networking import netlink
from bodega.worker.host.core.names import HostNames, Subnet, octets
from bodega.worker.host.network import Attachment, NetworkError, SubnetInUse, run
from bodega.worker.host.survey import MARKER_DIR, NETNS_DIR

log = logging.getLogger("bodega.worker.network")


class NetnsNetwork:
    def __init__(self, subnet: Subnet, names: HostNames) -> None:
        if subnet.prefixlen != 24 or subnet.version != 4:
            raise ValueError(f"machine subnet must be an IPv4 /24, got {subnet}")
        self.subnet = subnet
        self.names = names
        self.index_range = (2, 254)
        self.bridge = names.bridge(subnet)
        self.gateway = str(subnet.network_address + 1)
        self._second, self._third = octets(subnet)
        self._prefix = names.namespace_prefix(subnet)
        self._locks: dict[int, asyncio.Lock] = {}
        # With ``links`` (a private network's worker), a route netlink socket in each
        # namespace wired here and not yet attached (``netlink.Link``), for the private
        # address the create attaching it gives the machine end there; taken once, so a
        # worker holds a few, not one per machine.
        self.links = False
        self._links: dict[int, netlink.Link] = {}

    def address(self, index: int) -> str:
        return str(self.subnet.network_address + index)

    def mac(self, index: int) -> str:
        """The machine end's MAC, fixed per address: a namespace wired afresh for a reused
        address answers at the MAC the host's neighbour table already holds, so the first
        packets to a new machine are not sent to a veth that is gone."""
        return f"02:bd:00:{self._second:02x}:{self._third:02x}:{index:02x}"

    @property
    def gateway_mac(self) -> str:
        """The bridge's MAC, set once (index 1: the gateway's, no machine's). Left to the
        kernel, a bridge takes the lowest MAC of its ports, so it changed whenever a
        machine's host end came or went: the machines' neighbour entries for the gateway
        then named a MAC no port answered, and their packets were lost until those
        entries went stale (tens of seconds of a machine's connections hanging)."""
        return self.mac(1)

    def veth(self, index: int) -> str:
        # Unique per host: cluster id, subnet and index; 13 characters (Linux allows 15).
        return self.names.veth(self.subnet, index)

    def service_host(self, private_ip: str | None) -> str | None:
        return private_ip

    @property
    def routed_subnet(self) -> str:
        """Machines have addresses of this /24 that other hosts route here (peer_routes.py)."""
        return str(self.subnet)

    async def setup(self) -> None:
        await self._refuse_a_subnet_in_use()
        links = await run("ip", "-o", "link", "show")
        if f" {self.bridge}:" not in links:
            await run("ip", "link", "add", self.bridge, "address", self.gateway_mac,
                      "type", "bridge")
        else:  # one an older version made, whose MAC followed its ports
            await run("ip", "link", "set", self.bridge, "address", self.gateway_mac)
        await run("ip", "addr", "replace", f"{self.gateway}/24", "dev", self.bridge)
        await run("ip", "link", "set", self.bridge, "up")
        try:
            await asyncio.to_thread(Path("/proc/sys/net/ipv4/ip_forward").write_text, "1\n")
        except OSError as exc:
            log.warning("could not enable ip_forward: %s", exc)

    async def _refuse_a_subnet_in_use(self) -> None:
        """Another device with an address in our /24 (another cluster's bridge its stop never
        removed, or an older version's) would take the route to our machines, and wiring
        beside it would quietly adopt its half: refuse, naming it and the way out."""
        for line in (await run("ip", "-o", "-4", "addr", "show")).splitlines():
            fields = line.split()
            if len(fields) < 4 or fields[1] == self.bridge:
                continue
            try:
                held = ipaddress.ip_interface(fields[3]).network
            except ValueError:
                continue
            if held.overlaps(self.subnet):
                raise SubnetInUse(
                        f"machine subnet {self.subnet} is in use on this host: {fields[1]} has "
                        f"{fields[3]}; if a stopped cluster left it, `bodega clean --data-dir "
                        "<its data dir>` removes it (`bodega clean --legacy`: what older "
                        "versions left); or move this worker with --machine-subnet")

    async def teardown(self) -> None:
        """Remove every namespace of this subnet and the bridge (tests, benchmarks)."""
        await self.release_spares(in_use=set())
        await run("ip", "link", "del", self.bridge, check=False)

    def _wired_indexes(self) -> set[int]:
        prefix = self._prefix
        found = set()
        for path in (*NETNS_DIR.glob(prefix + "*"), *MARKER_DIR.glob(prefix + "*")):
            suffix = path.name.removeprefix(prefix)
            if suffix.isdigit():
                found.add(int(suffix))
        return found

    async def release_spares(self, in_use: set[int]) -> None:
        """Unwire namespaces wired ahead that no machine took (a worker going away)."""
        for index in sorted(self._wired_indexes() - in_use):
            async with self._locks.setdefault(index, asyncio.Lock()):
                await self._unwire(index)

    def netns(self, index: int) -> str:
        """Namespaces are named by address, so they can be wired before a machine exists."""
        return f"{self._prefix}{index}"

    def namespace(self, index: int) -> str | None:
        return self.netns(index)

    def _marker(self, index: int) -> Path:
        return MARKER_DIR / self.netns(index)

    # sysfs and /run are in memory: these checks never wait on a disk.
    def _namespace_exists(self, index: int) -> bool:
        return (NETNS_DIR / self.netns(index)).exists()

    def _veth_exists(self, index: int) -> bool:
        return Path(f"/sys/class/net/{self.veth(index)}").exists()

    def _mark(self, index: int, wired: bool) -> None:
        marker = self._marker(index)
        if wired:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        else:
            marker.unlink(missing_ok=True)

    def ready(self, index: int) -> bool:
        return self._wired(index)

    def fixed_attachment(self) -> Attachment | None:
        return None  # every machine gets its own namespace, wired by attach

    def _wired(self, index: int) -> bool:
        """Fully wired: marked done, namespace present, host end still on our bridge (its
        ``master`` link names the bridge: one readlink, where resolving the link walked
        sysfs in a dozen calls; a create asks this on its way to the spawn)."""
        if not (self._marker(index).exists() and (NETNS_DIR / self.netns(index)).exists()):
            return False
        try:
            master = os.readlink(f"/sys/class/net/{self.veth(index)}/master")
        except OSError:  # no such veth, or it is on no bridge
            return False
        return os.path.basename(master) == self.bridge

    async def attach(self, machine_id: str, index: int) -> Attachment:
        """The namespace for ``index``, usually wired ahead of time by ``prewarm``."""
        ip = self.address(index)
        async with self._locks.setdefault(index, asyncio.Lock()):
            if not self._wired(index):
                await self._wire(index)
        log.debug("%s: attached at %s", machine_id, ip)
        return Attachment(ip, self.netns(index), ip)

    async def prewarm(self, indexes: list[int]) -> None:
        """Wire namespaces for addresses the next creates will get, off the request path."""
        for index in indexes:
            async with self._locks.setdefault(index, asyncio.Lock()):
                if not self._wired(index):
                    try:
                        await self._wire(index)
                    except NetworkError as exc:
                        log.warning("could not prewire %s: %s", self.netns(index), exc)

    def take_link(self, index: int) -> netlink.Link | None:
        """The route netlink socket made in ``index``'s namespace as it was wired, if it is
        still that namespace; the caller closes it. Once: a later attach (a start after a
        stop) makes one for the call (``netlink.open_link``)."""
        link = self._links.pop(index, None)
        if link is not None and not link.current():  # deleted (and made again) behind us
            link.close()
            return None
        return link

    async def _open_link(self, index: int) -> None:
        try:
            self._links[index] = await netlink.open_link(self.netns(index))
        except OSError as exc:  # the create's attach makes do without one
            log.warning("no netlink socket in %s: %s", self.netns(index), exc)

    def _drop_link(self, index: int) -> None:
        link = self._links.pop(index, None)
        if link is not None:
            link.close()  # it held the namespace alive

    def close(self) -> None:
        """Let go of the sockets kept in namespaces (the worker stops)."""
        for index in list(self._links):
            self._drop_link(index)

    async def _wire(self, index: int) -> None:
        name, veth, ip = self.netns(index), self.veth(index), self.address(index)
        if self._namespace_exists(index) or self._veth_exists(index):
            await self._unwire(index)  # half wired by an earlier attempt
        # Two ip processes, not one per command: each spawn of a process costs the worker
        # milliseconds of its event loop. The host side's batch makes the namespace too
        # (ip returns to its own namespace after ``netns add``); the machine side's runs
        # inside it (a batch line cannot name a namespace of its own).
        # The host's neighbour entry for the address goes: one left by the address's last
        # occupant may name another MAC than the next one's (a VM arrived by a live move
        # keeps its source's), and the host's packets would go there until it went stale
        # (half a minute). The next packet asks afresh, and whoever is there answers.
        host_side = (f"netns add {name}\n"
                     f"link add {veth} type veth peer name eth0 address {self.mac(index)} "
                     f"netns {name}\n"
                     f"link set {veth} master {self.bridge} up\n"
                     f"neigh flush to {ip} dev {self.bridge}\n")
        machine_side = (f"addr add {ip}/24 dev eth0\nlink set eth0 up\nlink set lo up\n"
                        f"route add default via {self.gateway}\n")
        await run("ip", "-batch", "-", stdin=host_side.encode())
        await run("ip", "-n", name, "-batch", "-", stdin=machine_side.encode())
        self._mark(index, True)
        if self.links:
            await self._open_link(index)

    async def detach(self, machine_id: str, index: int | None = None) -> None:
        """Tear the machine's namespace down; the next machine at this address gets a new one."""
        if index is None:
            return
        async with self._locks.setdefault(index, asyncio.Lock()):
            await self._unwire(index)

    async def _unwire(self, index: int) -> None:
        self._mark(index, False)
        self._drop_link(index)
        # Deleting the namespace destroys its veth end, and with it the host end; the host
        # end is deleted first all the same, so it is gone the moment this returns. One ip
        # process for both (``-force``: the second runs even if the first finds nothing).
        commands = []
        if self._veth_exists(index):
            commands.append(f"link del {self.veth(index)}\n")
        if self._namespace_exists(index):
            commands.append(f"netns del {self.netns(index)}\n")
        if commands:
            await run("ip", "-force", "-batch", "-", stdin="".join(commands).encode(),
                      check=False)
