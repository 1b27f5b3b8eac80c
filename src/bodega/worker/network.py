"""Per-machine networking: a private address for every machine.

Two modes, chosen by the worker at start:

``NetnsNetwork`` (root). The worker owns a machine subnet (a /24) and a Linux
bridge holding its gateway address. Each machine gets a named network
namespace ``bodega-<machine id>``, a veth pair (host end on the bridge, the
machine end renamed ``eth0``), its own address and a default route through the
gateway. Two machines on one worker can both bind ``0.0.0.0:8080``. A
machine's services are published at ``private_ip:internal_port``: the host
(and the proxy on it) reach them straight through the bridge; other hosts
reach them once the operator routes the worker's subnet to the worker, the
way Kubernetes pod CIDRs are routed (the multi-host tests do it with
``ip route``). Forwarding is enabled in the worker's namespace for that.

``HostNetwork`` (not root). Machines share the host's network namespace;
their address and published host are the worker's own, so two machines on
one worker cannot use the same internal port.

Setup is idempotent: attaching a machine that is half attached (a crash in
the middle) deletes its pieces and builds them again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger("bodega.worker.network")

NETNS_DIR = Path("/run/netns")
Subnet = ipaddress.IPv4Network | ipaddress.IPv6Network


class NetworkError(Exception):
    """A network step failed; the message carries the command's error."""


@dataclass(frozen=True)
class Attachment:
    private_ip: str
    netns: str | None  # the machine's namespace, None when it shares the host's
    service_host: str  # where others reach the machine's services


class Network(Protocol):
    index_range: tuple[int, int]

    async def setup(self) -> None: ...

    async def attach(self, machine_id: str, index: int) -> Attachment: ...

    async def detach(self, machine_id: str, index: int | None = None) -> None: ...

    async def teardown(self) -> None: ...

    def service_host(self, private_ip: str | None) -> str | None: ...


async def run(*argv: str, stdin: bytes | None = None, check: bool = True) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin)
    if check and process.returncode != 0:
        raise NetworkError(f"{' '.join(argv[:4])} failed: {err.decode().strip()}")
    return out.decode()


def netns_name(machine_id: str) -> str:
    return f"bodega-{machine_id}"


def _octets(subnet: Subnet) -> tuple[int, int]:
    packed = subnet.network_address.packed
    return packed[-3], packed[-2]


class NetnsNetwork:
    def __init__(self, subnet: Subnet) -> None:
        if subnet.prefixlen != 24 or subnet.version != 4:
            raise ValueError(f"machine subnet must be an IPv4 /24, got {subnet}")
        self.subnet = subnet
        self.index_range = (2, 254)
        second, third = _octets(subnet)
        self.bridge = f"bdg-{second}-{third}"
        self.gateway = str(subnet.network_address + 1)
        self._third = third
        self._second = second

    def address(self, index: int) -> str:
        return str(self.subnet.network_address + index)

    def veth(self, index: int) -> str:
        # Unique per host as long as workers on it have different subnets; at most 15 chars.
        return f"bv{self._second}-{self._third}-{index}"

    def service_host(self, private_ip: str | None) -> str | None:
        return private_ip

    async def setup(self) -> None:
        links = await run("ip", "-o", "link", "show")
        if f" {self.bridge}:" not in links:
            await run("ip", "link", "add", self.bridge, "type", "bridge")
        await run("ip", "addr", "replace", f"{self.gateway}/24", "dev", self.bridge)
        await run("ip", "link", "set", self.bridge, "up")
        try:
            await asyncio.to_thread(Path("/proc/sys/net/ipv4/ip_forward").write_text, "1\n")
        except OSError as exc:
            log.warning("could not enable ip_forward: %s", exc)

    async def teardown(self) -> None:
        await run("ip", "link", "del", self.bridge, check=False)

    async def attach(self, machine_id: str, index: int) -> Attachment:
        name = netns_name(machine_id)
        ip = self.address(index)
        attachment = Attachment(ip, name, ip)
        if await self._attached(name, ip):
            return attachment
        await self.detach(machine_id, index)
        veth = self.veth(index)
        await run("ip", "netns", "add", name)
        host_side = (f"link add {veth} type veth peer name eth0 netns {name}\n"
                     f"link set {veth} master {self.bridge} up\n")
        machine_side = (f"addr add {ip}/24 dev eth0\nlink set eth0 up\nlink set lo up\n"
                        f"route add default via {self.gateway}\n")
        # One ip process per side keeps attaching to a few milliseconds.
        await run("ip", "-batch", "-", stdin=host_side.encode())
        await run("ip", "-n", name, "-batch", "-", stdin=machine_side.encode())
        return attachment

    async def _attached(self, name: str, ip: str) -> bool:
        if not (NETNS_DIR / name).exists():
            return False
        addrs = await run("ip", "-n", name, "-o", "addr", "show", "dev", "eth0", check=False)
        routes = await run("ip", "-n", name, "route", "show", "default", check=False)
        return f"inet {ip}/24" in addrs and self.gateway in routes

    async def detach(self, machine_id: str, index: int | None = None) -> None:
        name = netns_name(machine_id)
        if index is not None:
            await run("ip", "link", "del", self.veth(index), check=False)
        if (NETNS_DIR / name).exists():
            # Deleting the namespace destroys its veth end, and with it the host end.
            await run("ip", "netns", "del", name, check=False)


class HostNetwork:
    def __init__(self, host: str, subnet: Subnet) -> None:
        self.host = host
        self.subnet = subnet
        self.index_range = (2, min(subnet.num_addresses - 2, 65000))

    def service_host(self, private_ip: str | None) -> str | None:
        return self.host

    async def setup(self) -> None:
        return None

    async def teardown(self) -> None:
        return None

    async def attach(self, machine_id: str, index: int) -> Attachment:
        return Attachment(self.host, None, self.host)

    async def detach(self, machine_id: str, index: int | None = None) -> None:
        return None
