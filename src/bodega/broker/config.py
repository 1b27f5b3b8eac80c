"""The broker's configuration, built once by the entry point and passed in."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bodega.placement import Curve, Policy, Weights
from bodega.placement.curves import BALANCED, ROOMY
from bodega.placement.named import DEFAULT_POLICY, POLICY_NAMES, scorer_named

if TYPE_CHECKING:  # the registry loads only for a broker that runs a node
    from bodega.registry.sealing.keyfile import KeyringSource

POLICIES = POLICY_NAMES


@dataclass(frozen=True)
class BrokerConfig:
    name: str
    data_dir: Path
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
    # The join listener (broker/trust/joining.py), with ``ca_dir`` only; None: no host may join.
    join_host: str | None = None
    join_port: int = 0
    join_subnets: str | None = None  # joined workers' machine subnets come from this range
    join_proxy: str | None = None  # the proxy's public host:port, told to joining hosts
    region: str = "any"  # the default region expression for creates that name none
    listen_host: str = "127.0.0.1"
    listen_port: int = 4280
    gossip_host: str | None = None  # default: the listen host
    gossip_port: int = 0
    seeds: tuple[str, ...] = ()
    gossip_keyring: KeyringSource | None = None  # required with a registry node
    registry_agent: Path | None = None  # the host's registry agent's data dir (None: our own)
    # placement
    policy: str = DEFAULT_POLICY
    sample: int = 0  # power-of-d choices; 0 ranks every worker
    cpu_curve: Curve = BALANCED
    memory_curve: Curve = BALANCED
    disk_curve: Curve = ROOMY
    weights: Weights = field(default_factory=Weights)
    deadline: float = 5.0
    # Seconds a create is answered within, whatever its workers do: a worker that took
    # the create and fell silent gets what is left of it, then the client hears
    # "indeterminate" (retry with the same Idempotency-Key) before its own timeout.
    create_timeout: float = 15.0
    hedge: bool = False
    reservation_ttl: float = 10.0
    # A second policy ranked and logged beside the live one, for a fraction of creates: the
    # one you might switch to beside the one you run (``fgd`` beside the default).
    shadow_policy: str | None = None
    shadow_sample: float = 0.1
    # host:port of the cluster's image registry, told to clients by GET /v1/cluster.
    image_registry: str | None = None
    # The CA (PEM) that registry's certificate chains to, told with it: the cluster's.
    image_registry_ca: str | None = None
    # The host's metrics store's data dir (its endpoint.json); None: queries answer 503.
    metrics_store: Path | None = None
    # Late binding's d: reservations placed per task of a bodega-pool job (docs/jobs.md).
    probe_ratio: float = 2.0

    def shadow_placement_policy(self) -> Policy | None:
        """The shadow policy, with the live one's curves, weights and sampling."""
        if self.shadow_policy is None:
            return None
        return replace(self, policy=self.shadow_policy).placement_policy()

    def placement_policy(self) -> Policy:
        """ValueError naming the known policies for an unknown one."""
        scorer = scorer_named(self.policy, self.weights, self.cpu_curve, self.memory_curve,
                              self.disk_curve)
        return Policy(scorer, sample=self.sample)
