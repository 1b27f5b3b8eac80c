"""The private network's kernel objects on a host: their names, and whose one is; pure.

A worker running the private network makes, in its host's network namespace,
objects named with its cluster id and its host field (``sixpn.host_field``,
four hex digits)::

    fence tables   bodega6pn_<cid>_<host> (and bodegafence_<cid>_<host>), inet and bridge
    overlay        bwg<cid><host>, served by a wireguard-go where the kernel has no WireGuard
    routing        ip -6 rule priority 20000 from <its block> lookup table 0x6b0000 | host

Stopping, the worker removes them; killed with SIGKILL it cannot, and they stay
(a wireguard-go, detached, keeps serving) until a worker starts again on the same
data dir and replaces them, or a sweep takes them: ``pick`` decides, from what
``nft -j list tables``, ``ip -j -6 rule show``, the host's links and processes
say, which are a ``Scope``'s: every host's of a cluster, or the hosts (workers)
of one data dir. ``cluster/network_sweep.py`` lists and removes.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

from bodega.networking.core.sixpn import Layout, cluster_prefix

RULE_PRIORITY = 20000  # before the main table (32766), after the local one (0)
TABLE_BASE = 0x6B0000  # + the host field: one table per host on the kernel
FAMILIES = ("inet", "bridge")
# Both kinds of fence table: the name carries the cluster id and the host field.
FENCE_TABLE = re.compile(r"(?:bodega6pn|bodegafence)_(?P<cluster>[a-z][a-z0-9]{4})_"
                         r"(?P<host>[0-9a-f]{4})")
INTERFACE = re.compile(r"bwg(?P<cluster>[a-z][a-z0-9]{4})(?P<host>[0-9a-f]{4})")
USERSPACE = "wireguard-go"


def interface_name(cluster_id: str, host: int) -> str:
    """``bwg<cluster id><host field>``: 12 characters, unique on the machine."""
    return f"bwg{cluster_id}{host:04x}"


def table_of(host: int) -> int:
    return TABLE_BASE | host


@dataclass(frozen=True)
class Scope:
    """Whose objects a sweep takes: a cluster's on every host field, or on some, or on all
    but some (those of the workers a starting cluster runs: theirs to take up)."""

    cluster_id: str
    hosts: frozenset[int] | None = None  # None: every host field
    spared: frozenset[int] = frozenset()  # host fields never taken

    def takes(self, cluster_id: str, host: int) -> bool:
        return (cluster_id == self.cluster_id and host not in self.spared
                and (self.hosts is None or host in self.hosts))

    def named(self, pattern: re.Pattern[str], name: str) -> bool:
        match = pattern.fullmatch(name)
        return match is not None and self.takes(match["cluster"], int(match["host"], 16))


@dataclass(frozen=True, order=True)
class Table:
    family: str
    name: str


@dataclass(frozen=True, order=True)
class Rule:
    """A source rule that sends what leaves a host's block to the host's table."""

    block: str
    table: int

    def line(self) -> str:
        return f"from {self.block} lookup {self.table} priority {RULE_PRIORITY}"


@dataclass(frozen=True)
class NetworkLeftovers:
    tables: tuple[Table, ...] = ()
    interfaces: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    daemons: tuple[tuple[int, str], ...] = ()  # (pid, interface) of each wireguard-go
    sockets: tuple[str, ...] = ()  # wireguard-go control sockets nothing serves

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def lines(self) -> list[str]:
        """One line per object (the daemons are processes: the caller says those)."""
        return ([f"nftables table {t.family} {t.name}" for t in self.tables]
                + [f"overlay interface {name}" for name in self.interfaces]
                + [f"routing rule {rule.line()}" for rule in self.rules]
                + [f"wireguard-go socket {path}" for path in self.sockets])

    def nft_input(self) -> str:
        """``nft -f`` input removing the tables, present or not (the whole batch is one
        transaction: a table already gone must not fail it)."""
        return "".join(f"table {t.family} {t.name} {{}}\ndelete table {t.family} {t.name}\n"
                       for t in self.tables)

    def ip_input(self) -> str:
        """``ip -6 -batch`` input removing the rules, then emptying their tables."""
        return ("".join(f"rule del {rule.line()}\n" for rule in self.rules)
                + "".join(f"route flush table {table}\n"
                          for table in sorted({rule.table for rule in self.rules})))


def pick(scope: Scope, *, tables: str, rules: str, links: Iterable[str],
         commands: Mapping[int, Sequence[str]], elsewhere: Mapping[int, Sequence[str]],
         sockets: Iterable[str]) -> NetworkLeftovers:
    """What of the host is ``scope``'s: from ``nft -j list tables`` and ``ip -j -6 rule
    show`` output (empty when the tool is missing), the link names, pid -> argv of the
    processes in this network namespace and of those in others, and the paths in
    wireguard-go's socket directory.

    A wireguard-go here serving one of the scope's interfaces is to be killed; a control
    socket of the scope goes unless a wireguard-go elsewhere still serves it (its
    directory is the machine's, not the namespace's)."""
    daemons = tuple(sorted(found for pid, argv in commands.items()
                           if (found := _daemon(pid, argv)) and scope.named(INTERFACE, found[1])))
    served = {found[1] for pid, argv in elsewhere.items() if (found := _daemon(pid, argv))}
    return NetworkLeftovers(
        tables=tuple(sorted(t for t in nft_tables(tables)
                            if t.family in FAMILIES and scope.named(FENCE_TABLE, t.name))),
        interfaces=tuple(sorted(n for n in set(links) if scope.named(INTERFACE, n))),
        rules=tuple(sorted(rule for rule in routing_rules(rules) if _rule_of(scope, rule))),
        daemons=daemons,
        sockets=tuple(sorted(path for path in set(sockets) if path.endswith(".sock")
                             and scope.named(INTERFACE, (name := _socket_name(path)))
                             and name not in served)),
    )


def _daemon(pid: int, argv: Sequence[str]) -> tuple[int, str] | None:
    """(pid, interface) if ``argv`` is a wireguard-go's (its interface comes last)."""
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == USERSPACE:
        return pid, argv[-1]
    return None


def _socket_name(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".sock")


def nft_tables(listing: str) -> list[Table]:
    """The tables ``nft -j list tables`` names."""
    found = []
    for entry in _json(listing, "nftables"):
        table = entry.get("table") if isinstance(entry, dict) else None
        if isinstance(table, dict) and isinstance(table.get("family"), str) \
                and isinstance(table.get("name"), str):
            found.append(Table(table["family"], table["name"]))
    return found


def routing_rules(listing: str) -> list[Rule]:
    """The rules at ``RULE_PRIORITY`` from an IPv6 prefix to a numbered table, in ``ip -j
    -6 rule show`` output (one listed twice is there twice)."""
    found = []
    for entry in _json(listing, None):
        if not isinstance(entry, dict) or entry.get("priority") != RULE_PRIORITY:
            continue
        try:
            block = ipaddress.IPv6Network(f"{entry['src']}/{entry['srclen']}")
            table = int(entry["table"])
        except (KeyError, TypeError, ValueError):
            continue
        found.append(Rule(str(block), table))
    return found


def _rule_of(scope: Scope, rule: Rule) -> bool:
    """The rule of a host of the scope's cluster: from its block to its own table."""
    block = ipaddress.IPv6Network(rule.block)
    layout = Layout(cluster_prefix(scope.cluster_id))
    if block.prefixlen != 64 or not block.subnet_of(layout.prefix):
        return False
    found = layout.fields(block.network_address)
    return found is not None and rule.table == table_of(found.host) \
        and scope.takes(scope.cluster_id, found.host)


def _json(text: str, key: str | None) -> list[object]:
    """The list ``text`` holds (under ``key``); nothing for what does not parse."""
    try:
        parsed = json.loads(text) if text.strip() else []
    except ValueError:
        return []
    if key is not None:
        parsed = parsed.get(key, []) if isinstance(parsed, dict) else []
    return parsed if isinstance(parsed, list) else []
