"""The nftables rules that keep networks apart on one host; pure.

One ``inet`` table and one ``bridge`` table per host (named with the cluster id
and the host field, so two clusters, or two workers on one kernel, never touch
each other's). What they say:

- **between machines** (forward hook): a packet from one private address to
  another passes only if both carry the same network field, for each network
  with a machine on this host (``ip6 saddr & mask == N ip6 daddr & mask == N``);
  anything else between private addresses is dropped and counted. A packet
  crossing this host always has a machine of this host at one end, so its
  networks are the only ones to let through: default deny, fail closed while
  a new network's rule is being written. Only packets in or out of this
  host's bridge or overlay are judged: workers sharing one kernel each fence
  their own machines, and one with no machine of a network must not drop the
  packets of another worker's machines in it.
- **machines to the host** (input hook, from the machine bridge or the overlay):
  replies to what the host opened, ICMP (neighbour discovery needs it), and DNS
  to the resolver's address; nothing else: a machine never reaches the worker's
  API, the registry's gossip or any other internal listener.
- **on the bridge** (bridge family): no frame from one machine's port to
  another's, so machines of one host meet only at layer 3, where the rules
  above apply (their IPv4 addresses share a /24 and would otherwise talk
  directly).

Every worker whose machines have namespaces also keeps networks apart over IPv4
(``fence4_ruleset``, tables of its own), with or without the private network:

- **on its bridge** (bridge family, without the private network): machines meet at
  layer 2 (their IPv4 addresses share the worker's /24) only with machines of their
  own network, by the bridge ports they hold; a port no machine holds (one wired
  ahead) meets no one;
- **routed into its bridge** (forward hook): a packet from any worker's machine
  subnet (another worker's machine, on this host or one that routes subnets here)
  reaches a machine here only if both addresses are of one network; with the private
  network, never (machines meet over 6PN).

It needs neither forwarding changes nor WireGuard.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from bodega.networking.core.sixpn import Layout, network_mask

DNS_PORT = 53


@dataclass(frozen=True)
class Fence:
    """Where this host's rules apply."""

    table: str  # both tables' name
    layout: Layout
    bridge: str  # the machine bridge
    machine_ports: str  # an interface-name pattern matching every machine's host-side veth
    overlay: str | None  # the WireGuard interface, None before it exists
    flycast_ports: tuple[int, ...] = ()  # the proxy's Flycast listeners machines may reach


def ruleset(fence: Fence, networks: Collection[int]) -> str:
    """The whole ruleset for ``networks`` (the fields of the networks with a machine here),
    as ``nft -f`` input that replaces the previous version in one transaction."""
    prefix = fence.layout.prefix
    mask = network_mask()
    same = "\n".join(
        f"    ip6 saddr & {mask} == {fence.layout.network_prefix(n)} "
        f"ip6 daddr & {mask} == {fence.layout.network_prefix(n)} accept"
        for n in sorted(set(networks)))
    ingress = f'"{fence.bridge}"' if fence.overlay is None else \
        f'"{fence.bridge}", "{fence.overlay}"'
    resolver = fence.layout.resolver()
    flycast = "".join(
        f'    iifname "{fence.bridge}" ip6 daddr {fence.layout.served()} tcp dport {port} accept\n'
        for port in fence.flycast_ports)
    return (
        f"table inet {fence.table} {{}}\ndelete table inet {fence.table}\n"
        f"table bridge {fence.table} {{}}\ndelete table bridge {fence.table}\n"
        f"table inet {fence.table} {{\n"
        f"  chain forward {{\n    type filter hook forward priority -10; policy accept;\n"
        f"    iifname {{ {ingress} }} ip6 saddr {prefix} ip6 daddr {prefix} jump between\n"
        f"    oifname {{ {ingress} }} ip6 saddr {prefix} ip6 daddr {prefix} jump between\n"
        f"  }}\n"
        f"  chain between {{\n{same}\n    counter drop\n  }}\n"
        f"  chain input {{\n    type filter hook input priority -10; policy accept;\n"
        f"    iifname {{ {ingress} }} jump from_machines\n  }}\n"
        f"  chain from_machines {{\n"
        f"    ct state established,related accept\n"
        f"    meta l4proto {{ icmp, ipv6-icmp }} accept\n"
        f'    iifname "{fence.bridge}" ip6 daddr {resolver} udp dport {DNS_PORT} accept\n'
        f'    iifname "{fence.bridge}" ip6 daddr {resolver} tcp dport {DNS_PORT} accept\n'
        f"{flycast}"
        f"    counter drop\n  }}\n}}\n"
        f"table bridge {fence.table} {{\n"
        f"  chain forward {{\n    type filter hook forward priority -10; policy accept;\n"
        f'    iifname "{fence.machine_ports}" oifname "{fence.machine_ports}" counter drop\n'
        f"  }}\n}}\n")


def removal(table: str) -> str:
    """``nft -f`` input that removes both tables (present or not)."""
    return (f"table inet {table} {{}}\ndelete table inet {table}\n"
            f"table bridge {table} {{}}\ndelete table bridge {table}\n")


@dataclass(frozen=True)
class Fence4:
    """What one worker's IPv4 fence judges (``fence4_ruleset``)."""

    table: str  # its tables' name (``inet`` and, without the private network, ``bridge``)
    bridge: str  # the worker's machine bridge
    machine_ports: str  # an interface-name pattern matching every machine's host-side veth
    private: bool  # the private network runs: machines meet over 6PN only, not IPv4


def fence4_ruleset(fence: Fence4, ports: Mapping[str, str], addresses: Mapping[str, str],
                   subnets: Collection[str]) -> str:
    """The IPv4 fence, as ``nft -f`` input that replaces the previous version in one
    transaction.

    ``ports``: each of this worker's machine ports (host-side veths) and its machine's
    network key; ``addresses``: the IPv4 address of every machine the worker knows of, on
    any worker, and its network key; ``subnets``: the machine subnets of every worker,
    which tell a machine's packet from any other. With the private network, no machine
    meets another over IPv4: the 6PN fence's bridge rule drops every frame between ports,
    and here every routed packet from a machine subnet into this bridge."""
    def by_network(found: Mapping[str, str]) -> list[list[str]]:
        members: dict[str, list[str]] = {}
        for item, key in found.items():
            members.setdefault(key, []).append(item)
        return [sorted(items) for _key, items in sorted(members.items())]

    def named_set(name: str, kind: str, items: Collection[str], flags: str = "") -> str:
        elements = (f"    elements = {{ {', '.join(items)} }}\n" if items else "")
        return f"  set {name} {{\n    type {kind}\n{flags}{elements}  }}\n"

    groups = [] if fence.private else by_network(addresses)
    sets = named_set("subnets", "ipv4_addr", sorted(set(subnets)),
                     "    flags interval\n    auto-merge\n") + "".join(
        named_set(f"net{i}", "ipv4_addr", group) for i, group in enumerate(groups))
    same = "".join(f"    ip saddr @net{i} ip daddr @net{i} accept\n" for i in range(len(groups)))
    text = (f"table inet {fence.table} {{}}\ndelete table inet {fence.table}\n"
            f"table bridge {fence.table} {{}}\ndelete table bridge {fence.table}\n"
            f"table inet {fence.table} {{\n{sets}"
            f"  chain forward {{\n    type filter hook forward priority -10; policy accept;\n"
            f'    oifname "{fence.bridge}" ip saddr @subnets jump between\n'
            f"  }}\n"
            f"  chain between {{\n{same}    counter drop\n  }}\n}}\n")
    if fence.private:
        return text
    port_groups = by_network(ports)
    port_sets = "".join(named_set(f"net{i}", "ifname", [f'"{p}"' for p in group])
                        for i, group in enumerate(port_groups))
    port_same = "".join(f"    iifname @net{i} oifname @net{i} accept\n"
                        for i in range(len(port_groups)))
    return text + (
        f"table bridge {fence.table} {{\n{port_sets}"
        f"  chain forward {{\n    type filter hook forward priority -10; policy accept;\n"
        f'    iifname "{fence.machine_ports}" oifname "{fence.machine_ports}" jump between\n'
        f"  }}\n"
        f"  chain between {{\n{port_same}    counter drop\n  }}\n}}\n")


def table_name(cluster_id: str, host: int) -> str:
    return f"bodega6pn_{cluster_id}_{host:04x}"


def fence4_table_name(cluster_id: str, host: int) -> str:
    """The IPv4 fence's tables of a worker."""
    return f"bodegafence_{cluster_id}_{host:04x}"


def addresses_of(text: str) -> list[ipaddress.IPv6Address]:
    """Every IPv6 address mentioned in a ruleset (tests read what a rule lets through)."""
    found = []
    for word in text.replace("{", " ").replace("}", " ").replace(",", " ").split():
        try:
            found.append(ipaddress.IPv6Address(word))
        except ValueError:
            continue
    return found
