"""Membership's configuration: SWIM tuning, and one daemon's endpoint and identity.

``SwimConfig`` is memberlist's LAN defaults plus the few knobs bodega adds;
``MembershipConfig`` is what a daemon passes in (name, role, the UDP address
it binds and advertises, seeds, where it keeps its state, the gossip keyring
it starts with).

The figures and formulas are memberlist's (``config.go``, ``util.go``); the
Lifeguard parts (local health, nacks, suspicion that shortens with
confirmations) follow Dadgar et al., DSN 2018. Setting
``awareness_max_multiplier=1``, ``suspicion_max_timeout_mult=1`` and
``nacks=False`` gives plain SWIM, which the simulation uses as a baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from bodega.registry.membership.core.members import Role
from bodega.registry.sealing.core.keyring import Keyring
from bodega.registry.sealing.core.seal import OVERHEAD

# memberlist stretches push/pull beyond this many members, by a log2 factor.
PUSH_PULL_SCALE_THRESHOLD = 32


@dataclass(frozen=True)
class SwimConfig:
    probe_interval: float = 1.0
    probe_timeout: float = 0.5  # direct ping; the rest of the interval is for ping-req
    indirect_checks: int = 3  # k relays for an indirect probe
    suspicion_mult: int = 4
    suspicion_max_timeout_mult: int = 6
    awareness_max_multiplier: int = 8  # local health score lives in [0, 7]
    nacks: bool = True
    nack_fraction: float = 0.8  # a relay nacks at 80% of the probe timeout (Lifeguard)
    gossip_interval: float = 0.2
    gossip_nodes: int = 3
    gossip_to_the_dead_time: float = 30.0
    retransmit_mult: int = 4
    # State exchange with one random member. memberlist uses 30 s over TCP and
    # sends the whole table; here a push-pull sends a digest of the table (one
    # packet) and only the buckets that differ come back (memberdigest.py), so
    # it costs the same per node at any size. Stretched by log2 beyond 32
    # members, like memberlist's.
    push_pull_interval: float = 10.0
    # Tell a few dead members how we see them. The message is two records, so
    # it is cheap to send often; a member that is really up learns it was
    # declared dead, rejoins as a new generation and answers with its table.
    # This is what heals a partition: Foca sends the same every 125 s on WANs.
    dead_announce_interval: float = 5.0
    dead_announce_nodes: int = 3
    join_retry_interval: float = 1.0
    join_retry_max: float = 10.0
    dead_retention: float = 48 * 3600.0  # forget dead/left members after this (Corrosion: 48 h)
    packet_size: int = 1400  # UDP payload, the envelope's header and tag included
    # A tick that runs this late means our own loop is the slow party; it
    # counts against local health like a missed nack (at most once per probe).
    loop_lag_threshold: float = 0.1
    relay_ttl: float = 1.0  # how long a relay forwards a late ack for a ping-req
    seen_items: int = 16384  # broadcast keys remembered to drop duplicates
    seen_item_ttl: float = 300.0
    max_queued_items: int = 4096
    # A registry agent's tenants (the host's processes it speaks for, ``tenants.py``)
    # check in every ``tenant_interval``; one silent this long is suspect, then dead.
    tenant_interval: float = 1.0
    tenant_suspect_after: float = 3.0
    tenant_dead_after: float = 8.0

    @property
    def payload_budget(self) -> int:
        return self.packet_size - OVERHEAD

    @property
    def max_health_score(self) -> int:
        return max(0, self.awareness_max_multiplier - 1)

    def retransmit_limit(self, n: int) -> int:
        """How many times an update is piggybacked: ``mult·ceil(log10(n+1))``."""
        return self.retransmit_mult * math.ceil(math.log10(n + 1))

    def push_pull_period(self, n: int) -> float:
        if n <= PUSH_PULL_SCALE_THRESHOLD:
            return self.push_pull_interval
        factor = math.ceil(math.log2(n) - math.log2(PUSH_PULL_SCALE_THRESHOLD)) + 1
        return self.push_pull_interval * factor


@dataclass(frozen=True)
class MembershipConfig:
    name: str
    role: Role | str
    region: str
    data_dir: Path
    keyring: Keyring  # the gossip keys to start with (``keyring.py``)
    bind_host: str = "127.0.0.1"
    bind_port: int = 0
    advertise_host: str | None = None  # required when binding a wildcard address
    seeds: tuple[str, ...] = ()  # "host:port" of members to join through
    meta: dict[str, str] = field(default_factory=dict)
    swim: SwimConfig = field(default_factory=SwimConfig)
    tick_interval: float = 0.05
    leave_timeout: float = 1.0  # keep gossiping this long after announcing a leave
    feed_capacity: int = 10_000

    @property
    def state_path(self) -> Path:
        return self.data_dir / "membership.json"


def parse_seed(seed: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` into its parts; ValueError otherwise."""
    host, sep, port = seed.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"seed {seed!r} is not host:port")
    return host.strip("[]"), int(port)
