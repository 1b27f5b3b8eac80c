"""The broker's configuration, built once by the entry point and passed in."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from bodega.placement import Curve, Policy, Weights
from bodega.placement.curves import BALANCED, ROOMY
from bodega.placement.named import DEFAULT_POLICY, POLICY_NAMES, scorer_named

POLICIES = POLICY_NAMES


@dataclass(frozen=True)
class BrokerConfig:
    name: str
    data_dir: Path
    cluster_secret: str
    admin_tokens: tuple[str, ...] = ()
    region: str = "any"  # the default region expression for creates that name none
    listen_host: str = "127.0.0.1"
    listen_port: int = 4280
    gossip_host: str | None = None  # default: the listen host
    gossip_port: int = 0
    seeds: tuple[str, ...] = ()
    # placement
    policy: str = DEFAULT_POLICY
    sample: int = 0  # power-of-d choices; 0 ranks every worker
    cpu_curve: Curve = BALANCED
    memory_curve: Curve = BALANCED
    disk_curve: Curve = ROOMY
    weights: Weights = field(default_factory=Weights)
    deadline: float = 5.0
    hedge: bool = False
    reservation_ttl: float = 10.0
    # A second policy ranked and logged beside the live one, for a fraction of creates: the
    # one you might switch to beside the one you run (``fgd`` beside the default).
    shadow_policy: str | None = None
    shadow_sample: float = 0.1
    # host:port of the cluster's image registry, told to clients by GET /v1/cluster.
    image_registry: str | None = None
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
