"""The broker's configuration, built once by the entry point and passed in."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from bodega.placement import (
    BinPackScorer,
    Curve,
    Policy,
    Scorer,
    SpreadScorer,
    UtilityScorer,
    Weights,
)
from bodega.placement.curves import BALANCED, ROOMY

POLICIES = ("utility", "binpack", "spread")


@dataclass(frozen=True)
class BrokerConfig:
    name: str
    data_dir: Path
    gossip_secret: str  # keys gossip's packet tags
    admin_tokens: tuple[str, ...] = ()
    # The cluster's secrets key: seals app secrets ("" for none: no secrets routes).
    secrets_key: str = ""
    # The cluster's certificates key: seals the edge's certificate keys, which proxies open
    # ("" for none: no certificates routes).
    certs_key: str = ""
    edge_domain: str = "localhost"  # every app gets a certificate for <app>.<edge_domain>
    # Mutual TLS for the internal listener and calls to workers (bodega.runtime.tls.files);
    # None: plain HTTP with no authentication, for measurement on loopback only.
    tls_dir: Path | None = None
    # The internal listener: the registry's sync routes and certificate renewals, mutual TLS
    # (None: the public listener's host, any port).
    internal_host: str | None = None
    internal_port: int = 0
    # The cluster CA (ca.pem, ca-key.pem), on the host that made it: this broker signs
    # renewals with it (bodega.runtime.tls.files.CaDir).
    ca_dir: Path | None = None
    cert_lifetime: float = 365 * 86400.0  # of the certificates it signs, seconds
    region: str = "any"  # the default region expression for creates that name none
    listen_host: str = "127.0.0.1"
    listen_port: int = 4280
    gossip_host: str | None = None  # default: the listen host
    gossip_port: int = 0
    seeds: tuple[str, ...] = ()
    # placement
    policy: str = "utility"
    sample: int = 0  # power-of-d choices; 0 ranks every worker
    cpu_curve: Curve = BALANCED
    memory_curve: Curve = BALANCED
    disk_curve: Curve = ROOMY
    weights: Weights = field(default_factory=Weights)
    deadline: float = 5.0
    hedge: bool = False
    reservation_ttl: float = 10.0
    # A second policy ranked and logged beside the live one, for a fraction of creates.
    shadow_policy: str | None = None
    shadow_sample: float = 0.1
    # host:port of the cluster's image registry, told to clients by GET /v1/cluster.
    image_registry: str | None = None

    def shadow_placement_policy(self) -> Policy | None:
        """The shadow policy, with the live one's curves, weights and sampling."""
        if self.shadow_policy is None:
            return None
        return replace(self, policy=self.shadow_policy).placement_policy()

    def placement_policy(self) -> Policy:
        scorer: Scorer
        if self.policy == "utility":
            scorer = UtilityScorer(self.cpu_curve, self.memory_curve, self.disk_curve,
                                   self.weights)
        elif self.policy == "binpack":
            scorer = BinPackScorer(self.weights)
        elif self.policy == "spread":
            scorer = SpreadScorer(self.weights)
        else:
            raise ValueError(f"unknown placement policy {self.policy!r}: use "
                             + ", ".join(POLICIES))
        return Policy(scorer, sample=self.sample)
