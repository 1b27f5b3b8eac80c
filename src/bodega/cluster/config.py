"""What ``bodega up`` runs, decided once from its flags."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

AGENT_NAME = "agent"


@dataclass(frozen=True)
class ClusterConfig:
    data_dir: Path
    token: str
    secrets_key: str = ""  # brokers' and workers' only; "" for none
    certs_key: str = ""  # brokers' and proxies' only (cluster/edge_files.py); "" for none
    # Carried by every kernel object the workers make (runtime/cluster_id.py); "" for none.
    cluster_id: str = ""
    regions: tuple[str, ...] = ("ams", "syd")
    workers_per_region: int = 2
    worker_cpus: int = 4
    worker_memory_mb: int = 4096
    worker_disk_gb: int = 20
    api_port: int = 4280
    proxy_port: int = 8080
    proxy_tls_port: int = 0  # the proxy's TLS listener; 0: none
    proxy_tls_cert: Path | None = None  # its default certificate (cluster/edge_files.py)
    # Component name -> its UDP gossip port, chosen once (cluster/ports.py) so restarts keep it.
    gossip_ports: dict[str, int] = field(default_factory=dict)
    host: str = "127.0.0.1"
    driver: str = "process"
    machine_cidr: str = "10.209.0.0/16"
    extra_worker_args: tuple[str, ...] = field(default_factory=tuple)
    extra_broker_args: tuple[str, ...] = field(default_factory=tuple)
    extra_proxy_args: tuple[str, ...] = field(default_factory=tuple)
    log_level: str = "info"
    registry_port: int = 0  # the image registry's port on host; 0: no registry
    # The metrics store (victoria-metrics, when installed: cluster/metrics_store.py) and how
    # often it scrapes, in seconds; False: none.
    metrics_store: bool = False
    metrics_interval: float = 15.0
    # Mutual TLS on internal links; False only to measure what it costs (plain, loopback).
    internal_tls: bool = True
    cert_lifetime: float = 365 * 86400.0  # seconds; renewed at two thirds
    # `--advertise`: other hosts join through this address (``host`` is it too); None: a
    # cluster of this host alone, on loopback.
    advertise: str | None = None
    join_port: int = 4281
    # The private network: workers give machines 6PN addresses and peer over WireGuard,
    # each on its own UDP port (``wireguard_ports``, chosen once by cluster/ports.py; the
    # index-th worker on ``wireguard_port + index`` where none was chosen).
    private_network: bool = False
    registry_agent: bool = True  # one registry agent for the host (components read its view)
    fork_server: bool = True  # components are forked from one interpreter (forkserver.py)
    wireguard_port: int = 51820
    wireguard_ports: dict[str, int] = field(default_factory=dict)

    @property
    def trust_domain(self) -> str:
        """The cluster the CA vouches for: its cluster id."""
        return self.cluster_id or "local"

    @property
    def keyring_file(self) -> Path:
        """The cluster's gossip keyring, made by `bodega up`, read by every component."""
        return self.data_dir / "gossip-keyring"

    @property
    def worker_count(self) -> int:
        return len(self.regions) * self.workers_per_region

    def worker_names(self) -> list[tuple[str, str]]:
        """(name, region) for every worker, e.g. ("ams-1", "ams")."""
        return [
            (f"{region}-{i}", region)
            for region in self.regions
            for i in range(1, self.workers_per_region + 1)
        ]

    def worker_subnet(self, index: int) -> str:
        """The index-th /24 of ``machine_cidr``, skipping the first (of its lower half when
        hosts may join: the upper half is theirs, ``join_subnets``)."""
        whole = ipaddress.ip_network(self.machine_cidr)
        network = whole
        if self.advertise is not None:  # the lower half
            network = ipaddress.ip_network(f"{whole.network_address}/{whole.prefixlen + 1}")
        subnets = list(network.subnets(new_prefix=24))
        if index + 1 >= len(subnets):
            raise ValueError(f"{network} has room for {len(subnets) - 1} workers")
        return str(subnets[index + 1])

    @property
    def join_subnets(self) -> str:
        """The upper half of ``machine_cidr``: joined hosts' workers get their /24s there."""
        return str(list(ipaddress.ip_network(self.machine_cidr).subnets(prefixlen_diff=1))[1])

    def component_names(self) -> list[str]:
        """Every component that gossips: the registry agent alone when there is one (the
        others are its tenants), else the workers, the broker and the proxy."""
        if self.registry_agent:
            return [AGENT_NAME]
        return [name for name, _ in self.worker_names()] + ["broker", "proxy"]

    @property
    def agent_dir(self) -> Path | None:
        """The registry agent's data dir, which the other components are given."""
        return self.data_dir / AGENT_NAME if self.registry_agent else None

    def worker_wireguard(self, index: int) -> int:
        """The UDP port of the index-th worker's WireGuard overlay."""
        name = self.worker_names()[index][0]
        return self.wireguard_ports.get(name, self.wireguard_port + index)

    def worker_gossip(self, index: int) -> str:
        """The gossip address of the index-th worker."""
        return self.gossip(self.worker_names()[index][0])

    def gossip(self, name: str) -> str:
        """A component's fixed gossip address (port 0, any, if none was chosen)."""
        return f"{self.host}:{self.gossip_ports.get(name, 0)}"
