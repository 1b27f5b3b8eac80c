"""The private network's address plan, shaped like Fly's 6PN; pure.

One /48 per cluster, made from its id: ``fdaa:<32 bits of the id's hash>::/48``.
Inside it, three fields::

    | cluster /48 | host (16) | network (16) | machine (48) |
      fdaa:c1:c2  : HHHH      : NNNN         : 0:0:index

- the **host** field comes first so each host owns one contiguous block, its /64:
  that block is the one route and the one WireGuard ``AllowedIPs`` entry other hosts
  need for every machine on it, whatever networks they are in. It is the two octets
  that tell the worker's machine /24 apart (``10.b.c.0/24`` -> ``b << 8 | c``),
  unique because the machine subnets already are;
- the **network** field is a 16-bit hash of ``<org>/<network name>``: every host
  computes it alone, and isolation matches on it (``network_mask``). Zero is never
  a network: host 0 and network 0 hold the addresses the host itself serves
  (the resolver at ``::3``, as ``fdaa::3`` on Fly; Flycast addresses, host 0 with
  the app's network: ``Layout.flycast``);
- the **machine** field is the machine's address index on its host, so a machine
  keeps its address across restarts there.

Fly puts the network before the host (``fdaa:<net>:<host>...``); with a cluster's
few networks and hosts the order here keeps each host one prefix.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

HOST_BITS = NETWORK_BITS = 16
MACHINE_BITS = 48
HOST_SHIFT = MACHINE_BITS + NETWORK_BITS  # 64
NETWORK_SHIFT = MACHINE_BITS  # 48
RESOLVER_SUFFIX = 3  # the resolver's address: <cluster>::3, as Fly's fdaa::3
GATEWAY_SUFFIX = 1  # the host's own address in its block: <cluster>:<host>::1
DEFAULT_NETWORK = "default"


def network_key(org: str, network: str | None) -> str:
    """A network's name cluster-wide: networks are per organization."""
    return f"{org}/{network or DEFAULT_NETWORK}"


def network_field(key: str) -> int:
    """The network's 16-bit field: a hash of its key, never 0 (the hosts' own)."""
    value = int.from_bytes(hashlib.sha256(key.encode()).digest()[:2], "big")
    return value or 1


def host_field(subnet: ipaddress.IPv4Network) -> int:
    """The host's field, from the machine /24 it already owns alone: 10.b.c.0/24 -> b<<8|c."""
    if subnet.prefixlen != 24:
        raise ValueError(f"a host's machine subnet must be a /24, got {subnet}")
    packed = subnet.network_address.packed
    value = packed[1] << 8 | packed[2]
    if value == 0:
        raise ValueError(f"machine subnet {subnet} gives host field 0, which no host may have")
    return value


def cluster_prefix(cluster_id: str) -> ipaddress.IPv6Network:
    """The cluster's /48: fdaa followed by 32 bits of the id's hash."""
    bits = int.from_bytes(hashlib.sha256(cluster_id.encode()).digest()[:4], "big")
    return ipaddress.IPv6Network(((0xFDAA << 112) | (bits << 80), 48))


@dataclass(frozen=True)
class Fields:
    host: int
    network: int
    machine: int


@dataclass(frozen=True)
class Layout:
    """The address plan of one cluster."""

    prefix: ipaddress.IPv6Network

    def __post_init__(self) -> None:
        if self.prefix.prefixlen != 48:
            raise ValueError(f"the private network is a /48, got {self.prefix}")

    def _base(self) -> int:
        return int(self.prefix.network_address)

    def host_block(self, host: int) -> ipaddress.IPv6Network:
        """The one routable block of a host: every machine on it, in every network."""
        _check(host, HOST_BITS, "host")
        return ipaddress.IPv6Network((self._base() | host << HOST_SHIFT, 64))

    def gateway(self, host: int) -> ipaddress.IPv6Address:
        """The host's address in its block, machines' next hop."""
        return self.host_block(host).network_address + GATEWAY_SUFFIX

    def resolver(self) -> ipaddress.IPv6Address:
        """The resolver's address: the same on every host, each serving its own."""
        return ipaddress.IPv6Address(self._base() | RESOLVER_SUFFIX)

    def machine(self, host: int, network: int, index: int) -> ipaddress.IPv6Address:
        _check(host, HOST_BITS, "host")
        _check(network, NETWORK_BITS, "network")
        _check(index, MACHINE_BITS, "machine")
        if host == 0 or network == 0:
            raise ValueError("host and network 0 are the hosts' own addresses")
        return ipaddress.IPv6Address(
            self._base() | host << HOST_SHIFT | network << NETWORK_SHIFT | index)

    def flycast(self, network: int, app: str) -> ipaddress.IPv6Address:
        """An app's Flycast address: host 0 (every host serves it), the app's network, and
        32 bits of the app's name: the same wherever it is computed."""
        _check(network, NETWORK_BITS, "network")
        tag = int.from_bytes(hashlib.sha256(app.encode()).digest()[:4], "big") or 1
        return ipaddress.IPv6Address(self._base() | network << NETWORK_SHIFT | tag)

    def served(self) -> ipaddress.IPv6Network:
        """The block of host 0: what every host serves itself (resolver, Flycast)."""
        return ipaddress.IPv6Network((self._base(), 64))

    def network_prefix(self, network: int) -> ipaddress.IPv6Address:
        """The value ``address & network_mask()`` takes for a machine of ``network``."""
        _check(network, NETWORK_BITS, "network")
        return ipaddress.IPv6Address(network << NETWORK_SHIFT)

    def fields(self, address: str | ipaddress.IPv6Address) -> Fields | None:
        """The fields of an address in this cluster's /48; None for any other address."""
        try:
            addr = ipaddress.IPv6Address(address)
        except ValueError:
            return None
        if addr not in self.prefix:
            return None
        value = int(addr)
        return Fields(host=value >> HOST_SHIFT & 0xFFFF, network=value >> NETWORK_SHIFT & 0xFFFF,
                      machine=value & (1 << MACHINE_BITS) - 1)


def network_mask() -> ipaddress.IPv6Address:
    """The bits of the network field: ``::ffff:0:0:0``."""
    return ipaddress.IPv6Address(0xFFFF << NETWORK_SHIFT)


def _check(value: int, bits: int, what: str) -> None:
    if not 0 <= value < 1 << bits:
        raise ValueError(f"{what} field {value} does not fit {bits} bits")
