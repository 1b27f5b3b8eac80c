"""The names of the kernel objects a worker makes, and whose a name is; pure.

Every object carries its cluster's id (``bodega.runtime.cluster_id``), so a
sweep removes exactly its own cluster's objects, however many clusters share
the host. For a worker with machine subnet ``10.<b>.<c>.0/24``, address index
``i`` and name ``w``:

    namespace     bodega-<cid>-<b>-<c>-<i>        /run/netns/; marker in /run/bodega/netns/
    bridge        bdg<cid><bb><cc>                12 characters (hex octets)
    veth          bv<cid><bb><cc><ii>             13 (Linux allows 15)
    cgroups       bodega/<cid>-<w>/<machine>      under every controller (v1), or the root (v2)
    runc state    /run/bodega/runc/<cid>-<w>/

Older versions named objects by subnet alone (``bodega-209-1-5``, ``bdg-209-1``,
``bv209-1-5``); ``LEGACY_*`` match those, for ``bodega clean --legacy``. A
cluster id starts with a letter, so no legacy name carries one.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from bodega.runtime.cluster_id import check

Subnet = ipaddress.IPv4Network | ipaddress.IPv6Network
NAMESPACE_PREFIX = "bodega-"
BRIDGE_PREFIX = "bdg"
VETH_PREFIX = "bv"
_SCOPE_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")

LEGACY_NAMESPACE = re.compile(r"bodega-(\d+)-(\d+)-(\d+)")
LEGACY_BRIDGE = re.compile(r"bdg-(\d+)-(\d+)")
LEGACY_VETH = re.compile(r"bv(\d+)-(\d+)-(\d+)")
# A scope a cluster id opens; any other scope under bodega/ is an older version's.
CLUSTER_SCOPE = re.compile(r"[a-z][a-z0-9]{4}-.+")


def octets(subnet: Subnet) -> tuple[int, int]:
    """The two octets that tell a worker's /24 apart: 10.<b>.<c>.0/24 -> (b, c)."""
    packed = subnet.network_address.packed
    return packed[-3], packed[-2]


@dataclass(frozen=True)
class HostNames:
    """The names one cluster's objects take."""

    cluster_id: str

    def __post_init__(self) -> None:
        check(self.cluster_id)

    def namespace(self, subnet: Subnet, index: int) -> str:
        return f"{self.namespace_prefix(subnet)}{index}"

    def namespace_prefix(self, subnet: Subnet | None = None) -> str:
        """What every namespace of the cluster (or of one worker's subnet) starts with."""
        if subnet is None:
            return f"{NAMESPACE_PREFIX}{self.cluster_id}-"
        b, c = octets(subnet)
        return f"{NAMESPACE_PREFIX}{self.cluster_id}-{b}-{c}-"

    def bridge(self, subnet: Subnet) -> str:
        b, c = octets(subnet)
        return f"{BRIDGE_PREFIX}{self.cluster_id}{b:02x}{c:02x}"

    def veth(self, subnet: Subnet, index: int) -> str:
        return f"{self.veth_prefix(subnet)}{index:02x}"

    def veth_prefix(self, subnet: Subnet | None = None) -> str:
        if subnet is None:
            return f"{VETH_PREFIX}{self.cluster_id}"
        b, c = octets(subnet)
        return f"{VETH_PREFIX}{self.cluster_id}{b:02x}{c:02x}"

    def cgroup_scope(self, worker: str) -> str:
        """The worker's directory under ``bodega/`` in the cgroup tree (and runc's state)."""
        return f"{self.cluster_id}-{_SCOPE_UNSAFE.sub('_', worker) or 'worker'}"

    def scope_prefix(self) -> str:
        return f"{self.cluster_id}-"


@dataclass(frozen=True)
class Owner:
    """Whose objects a sweep takes: a whole cluster, or one worker of it.

    A worker stopping for good takes only its own (its subnet's network, its
    cgroup scope, mounts under its data dir); ``bodega up`` and ``bodega clean``
    take everything carrying the cluster id.
    """

    names: HostNames
    subnet: Subnet | None = None  # one worker's: its subnet's namespaces, veths and bridge
    scope: str | None = None  # one worker's: its cgroup scope and runtime state

    def namespace(self, name: str) -> bool:
        return name.startswith(self.names.namespace_prefix(self.subnet))

    def link(self, name: str) -> bool:
        if self.subnet is not None and name == self.names.bridge(self.subnet):
            return True
        if self.subnet is None and name.startswith(BRIDGE_PREFIX + self.names.cluster_id):
            return True
        return name.startswith(self.names.veth_prefix(self.subnet))

    def cgroup_scope(self, scope: str) -> bool:
        if self.scope is not None:
            return scope == self.scope
        return scope.startswith(self.names.scope_prefix())


def legacy_namespace(name: str) -> bool:
    return LEGACY_NAMESPACE.fullmatch(name) is not None


def legacy_bridge(name: str) -> bool:
    return LEGACY_BRIDGE.fullmatch(name) is not None


def legacy_veth_namespace(name: str) -> str | None:
    """The namespace an older version's host veth end belonged to; None if not one."""
    match = LEGACY_VETH.fullmatch(name)
    return f"bodega-{match[1]}-{match[2]}-{match[3]}" if match else None


def legacy_scope(scope: str) -> bool:
    """A cgroup scope no cluster id opens: a worker name, as older versions used."""
    return CLUSTER_SCOPE.fullmatch(scope) is None


def legacy_octets(name: str) -> tuple[int, int] | None:
    """The subnet octets (b, c) an older version's namespace or bridge was named after."""
    match = LEGACY_NAMESPACE.fullmatch(name) or LEGACY_BRIDGE.fullmatch(name)
    return (int(match[1]), int(match[2])) if match else None
