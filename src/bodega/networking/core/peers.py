"""Which WireGuard peers a host should have, and the changes that get it there; pure.

Every worker with a private network publishes, in its ``workers`` row, its
overlay's public key, endpoint and block (``Overlay``). A host wants one peer
per *other* host whose row carries them and whom membership holds alive or
suspect (a suspect may be slow, not gone): a host declared dead, or that left,
drops out as soon as membership says so, and one that joins is added as soon
as its row arrives; nobody restarts.

``changes`` compares what ``wg show <if> dump`` reports with what is wanted and
returns the ``wg set`` steps: add or update a peer (endpoint and allowed IPs),
remove one. Applying them twice changes nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bodega.model.rows import WorkerRow

LIVE = frozenset({"alive", "suspect"})
KEEPALIVE = 25  # seconds: keeps NAT and conntrack state open, as Fly's hosts do


@dataclass(frozen=True)
class Peer:
    public_key: str
    endpoint: str  # host:port ([v6]:port)
    block: str  # the peer host's /64: its AllowedIPs
    name: str = ""


@dataclass(frozen=True)
class SetPeer:
    peer: Peer

    def describe(self) -> str:
        return (f"peer {self.peer.name or '?'} ({self.peer.public_key}) at "
                f"{self.peer.endpoint} for {self.peer.block}")

    def argv(self, interface: str) -> list[str]:
        return ["wg", "set", interface, "peer", self.peer.public_key,
                "endpoint", self.peer.endpoint, "allowed-ips", self.peer.block,
                "persistent-keepalive", str(KEEPALIVE)]


@dataclass(frozen=True)
class RemovePeer:
    public_key: str

    def describe(self) -> str:
        return f"peer {self.public_key} removed"

    def argv(self, interface: str) -> list[str]:
        return ["wg", "set", interface, "peer", self.public_key, "remove"]


Change = SetPeer | RemovePeer


def overlay_of(row: WorkerRow) -> Peer | None:
    """The peer a ``workers`` row describes; None if it has no (well-formed) overlay."""
    info = row.wireguard
    if info is None or not (info.public_key and info.endpoint and info.block):
        return None
    try:
        ipaddress.IPv6Network(info.block)
    except ValueError:
        return None
    return Peer(info.public_key, info.endpoint, info.block, row.name)


def wanted(rows: Sequence[WorkerRow], statuses: Mapping[str, str],
           me: str) -> dict[str, Peer]:
    """Peers by public key: every other live host with an overlay in its row."""
    out: dict[str, Peer] = {}
    for row in rows:
        name = row.name
        peer = overlay_of(row)
        if peer is None or name == me or statuses.get(name) not in LIVE:
            continue
        out[peer.public_key] = peer
    return out


def parse_dump(text: str) -> dict[str, Peer]:
    """Peers as ``wg show <if> dump`` lists them (the first line is the interface)."""
    out: dict[str, Peer] = {}
    for line in text.splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        key, endpoint, allowed = fields[0], fields[2], fields[3]
        out[key] = Peer(key, "" if endpoint == "(none)" else endpoint,
                        "" if allowed == "(none)" else allowed)
    return out


@dataclass(frozen=True)
class Counters:
    received: int
    sent: int


def transfer(text: str) -> dict[str, Counters]:
    """Bytes received and sent per peer, from ``wg show <if> dump``."""
    out: dict[str, Counters] = {}
    for line in text.splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) >= 7 and fields[5].isdigit() and fields[6].isdigit():
            out[fields[0]] = Counters(int(fields[5]), int(fields[6]))
    return out


def changes(current: Mapping[str, Peer], want: Mapping[str, Peer]) -> list[Change]:
    """The steps from ``current`` to ``want``: removals first, then additions and updates."""
    steps: list[Change] = [RemovePeer(key) for key in sorted(current) if key not in want]
    for key in sorted(want):
        have, peer = current.get(key), want[key]
        if have is None or have.endpoint != peer.endpoint or \
                _networks(have.block) != _networks(peer.block):
            steps.append(SetPeer(peer))
    return steps


def _networks(allowed: str) -> set[str]:
    return {str(ipaddress.ip_network(part.strip(), strict=False))
            for part in allowed.split(",") if part.strip()}
