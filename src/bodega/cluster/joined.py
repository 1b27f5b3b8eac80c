"""A host that joined a cluster: what it keeps (``joined.json``) and what it runs.

``joined.json`` (in the host's data dir) names the cluster, the region, the
address the host serves on, the workers it was given names and machine
subnets for, its broker and proxy (unless it opted out), whether it is a
server (its broker holds the CA's key and lets hosts join), where to gossip,
and whether its workers run the private network (kept once given: its
machines then have private addresses). With it, ``bodega join`` starts the
same members again after a restart, with the keys and certificates they keep
in ``workers/<name>/tls``, ``broker/tls``, ``proxy/tls`` and ``agent/tls``
and renew themselves: no token is needed again.

Each member runs as ``bodega up`` runs its own (``components.py``): a ready
file and a log file of its own, a worker's machines stopped when it stops,
restarted with a backoff if it crashes (a worker re-adopting its machines).
A joined host's broker serves the whole Machines API and its proxy every
app, as host 1's do: no host is special but for who holds the CA's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.cluster.components import (
    METRICS_NAME,
    Component,
    bodega_argv,
    metrics_component,
    private_network_args,
    registry_component,
)
from bodega.cluster.edge_files import CA_CRT, DEFAULT_CERT
from bodega.registry.sealing import keyfile
from bodega.runtime.lifecycle import write_json_atomic
from bodega.wire.internal.join import JOIN_PORT

API_PORT, PROXY_PORT, PROXY_TLS_PORT = 4280, 8080, 8443  # as `bodega up --advertise` serves

JOINED = "joined.json"
JOIN_LOCK = "join.lock"  # held by `bodega join` while it runs
# How long a server host's image registry's certificate lives (renewed at two thirds), as
# `bodega up`'s default.
REGISTRY_CERT_LIFETIME = 365 * 86400.0


@dataclass(frozen=True)
class HostRoles:
    """What a joining host runs beside its workers, and where it serves it."""

    broker: bool = True  # the Machines API (--no-broker: a worker-only host)
    proxy: bool = True  # apps' traffic (--no-proxy)
    server: bool = False  # holds the CA's key and lets hosts join (--server; needs a broker)
    api_port: int = API_PORT
    proxy_port: int = PROXY_PORT
    proxy_tls_port: int = PROXY_TLS_PORT  # 0: no TLS listener
    join_port: int = JOIN_PORT


class JoinedWorker(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    subnet: str | None = None


class JoinedHost(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cluster_id: str
    ca_sha256: str
    region: str
    advertise: str  # where this host's workers serve and gossip
    join: str  # the join listener it joined through (host:port)
    api_url: str
    seeds: list[str]
    workers: list[JoinedWorker]
    image_registry: str | None = None
    proxy: str | None = None  # the proxy's public host:port, for Flycast
    # As the cluster ran it at the join, or as `--[no-]private-network` said since; kept:
    # its machines have 6PN addresses.
    private_network: bool = False
    wireguard_port: int = 51820  # the first worker's; the next ones take the next ports
    agent: str | None = None  # its registry agent's name (its certificate is in agent/tls)
    registry_agent: bool = False  # the cluster runs one per host: this host runs its agent
    broker: str | None = None  # its broker's name (None: it serves no Machines API)
    proxy_name: str | None = None  # its proxy's name (None: it routes no app's traffic)
    server: bool = False  # its broker holds the CA's key (tls/ca-key.pem) and lets hosts join
    join_subnets: str | None = None  # a server's: joined workers' machine subnets come from it
    edge_domain: str = "localhost"
    api_port: int = API_PORT
    proxy_port: int = PROXY_PORT
    proxy_tls_port: int = PROXY_TLS_PORT
    join_port: int = JOIN_PORT

    @property
    def own_api(self) -> str | None:
        """This host's own Machines API, if it runs a broker."""
        return f"http://{self.advertise}:{self.api_port}" if self.broker else None

    @property
    def flycast(self) -> str | None:
        """The proxy this host's workers relay Flycast to: its own, else the one it was told."""
        return f"{self.advertise}:{self.proxy_port}" if self.proxy_name else self.proxy

    def member_names(self) -> list[str]:
        """Every member this host runs, each gossiping on a port of its own."""
        return [*([self.agent] if self.registry_agent and self.agent else []),
                *(w.name for w in self.workers),
                *(n for n in (self.broker, self.proxy_name) if n)]

    @classmethod
    def read(cls, data_dir: Path) -> JoinedHost | None:
        try:
            return cls.model_validate_json((data_dir / JOINED).read_bytes())
        except FileNotFoundError:
            return None

    def write(self, data_dir: Path) -> None:
        write_json_atomic(data_dir / JOINED, self.model_dump(mode="json"))


def worker_dir(data_dir: Path, name: str) -> Path:
    return data_dir / "workers" / name


def worker_tls(data_dir: Path, name: str) -> Path:
    return worker_dir(data_dir, name) / "tls"


def agent_dir(data_dir: Path) -> Path:
    return data_dir / "agent"


def agent_tls(data_dir: Path) -> Path:
    return agent_dir(data_dir) / "tls"


def member_tls(data_dir: Path, role: str) -> Path:
    """The TLS directory of the host's ``role``: agent, broker or proxy."""
    return data_dir / role / "tls"


def joined_components(host: JoinedHost, data_dir: Path, gossip_ports: dict[str, int], *,
                      driver: str, log_level: str, extra_worker_args: tuple[str, ...] = (),
                      proxy_tls: bool = True, metrics_interval: float | None = None,
                      own_registry: str | None = None) -> list[Component]:
    """``proxy_tls``: whether the proxy may serve TLS here (it needs haproxy);
    ``metrics_interval``: a server's metrics store scrapes that often (None: no store);
    ``own_registry``: where this server host serves its image registry (host:port), for
    its workers to pull from first and advertise, and its broker to name first."""
    store = metrics_interval is not None and host.server and host.broker is not None
    run_dir, logs = data_dir / "run", data_dir / "logs"
    images = registry_args(host, data_dir, own_registry)
    components = []
    if own_registry is not None:  # first: its workers pull from it
        components.append(registry_component(data_dir, host.region, own_registry,
                                             REGISTRY_CERT_LIFETIME))
    hosted: tuple[str, ...] = ()
    seeds = list(host.seeds)
    if host.registry_agent and host.agent:  # first: the workers read its replica
        gossip = f"{host.advertise}:{gossip_ports.get(host.agent, 0)}"
        ready = run_dir / "agent.json"
        components.append(Component("agent", host.agent, host.region, bodega_argv(
            "agent", "--name", host.agent, "--region", host.region,
            "--data-dir", str(agent_dir(data_dir)), "--listen", f"{host.advertise}:0",
            "--gossip-listen", gossip, "--gossip-keyring", str(data_dir / keyfile.FILE_NAME),
            "--join", ",".join(host.seeds), "--exit-with-parent", "--ready-file", str(ready),
            "--log-level", log_level), ready, logs / "agent.log"))
        hosted = ("--registry-agent", str(agent_dir(data_dir)))
        seeds = [gossip, *seeds]
    for index, worker in enumerate(host.workers):
        ready = run_dir / f"{worker.name}.json"
        argv = bodega_argv(
            "worker", "--name", worker.name, "--region", host.region,
            "--data-dir", str(worker_dir(data_dir, worker.name)),
            "--listen", f"{host.advertise}:0", "--driver", driver,
            *(("--machine-subnet", worker.subnet) if worker.subnet else ()),
            "--cluster-id", host.cluster_id,
            "--stop-machines-on-interrupt", "--exit-with-parent",
            "--ready-file", str(ready), "--log-level", log_level,
            "--gossip-listen", f"{host.advertise}:{gossip_ports.get(worker.name, 0)}",
            "--gossip-keyring", str(data_dir / keyfile.FILE_NAME),
            "--join", ",".join(seeds), *images, *hosted,
            *(("--image-registry-here",) if own_registry is not None else ()),
            *private_network_args(host.private_network, host.wireguard_port + index,
                                  host.flycast),
            *extra_worker_args)
        components.append(Component("worker", worker.name, host.region, argv, ready,
                                    logs / f"{worker.name}.log"))
    every = ",".join([*seeds, *(f"{host.advertise}:{gossip_ports.get(w.name, 0)}"
                                for w in host.workers)])
    for role, name in (("broker", host.broker), ("proxy", host.proxy_name)):
        if name is None:
            continue
        ready = run_dir / f"{role}.json"
        port = host.api_port if role == "broker" else host.proxy_port
        argv = bodega_argv(
            role, "--name", name, "--region", host.region,
            "--data-dir", str(data_dir / role), "--listen", f"{host.advertise}:{port}",
            "--gossip-listen", f"{host.advertise}:{gossip_ports.get(name, 0)}",
            "--join", every, "--gossip-keyring", str(data_dir / keyfile.FILE_NAME),
            "--exit-with-parent", "--ready-file", str(ready), "--log-level", log_level,
            *hosted, *(_broker_args(host, data_dir, images) if role == "broker"
                       else _proxy_args(host, data_dir, proxy_tls)),
            *(("--metrics-store", str(data_dir / METRICS_NAME))
              if role == "broker" and store else ()))
        components.append(Component(role, name, host.region, argv, ready, logs / f"{role}.log",
                                    flags={"--listen": "--api-port" if role == "broker"
                                           else "--proxy-port",
                                           "--tls-listen": "--proxy-tls-port",
                                           "--join-listen": "--join-port"}))
    if store and metrics_interval is not None:  # after the broker: it discovers there
        components.append(metrics_component(data_dir, host.region, run_dir / "broker.json",
                                            metrics_interval, tls=True, log_level=log_level))
    return components


def registry_args(host: JoinedHost, data_dir: Path, own: str | None = None
                  ) -> tuple[str, ...]:
    """Where the host's workers and broker find the cluster's image registry (``own``, the
    one this server host serves, else the one the join named), and the CA its certificate
    is checked by: the cluster's, kept at the join (``ca.crt``). A cluster hosts join
    serves its registries over TLS, since joins need the cluster CA. The others come from
    the view: each server host's workers advertise theirs."""
    registry = own or host.image_registry
    if not registry:
        return ()
    return ("--image-registry", registry,
            "--image-registry-ca", str(data_dir / CA_CRT))


def _broker_args(host: JoinedHost, data_dir: Path, images: tuple[str, ...]
                 ) -> tuple[str, ...]:
    """A joined broker's internal listener and, on a server, the CA and the join listener."""
    args: tuple[str, ...] = ("--internal-listen", f"{host.advertise}:0", *images,
                             *(("--edge-domain", host.edge_domain)
                               if host.edge_domain != "localhost" else ()))
    if not host.server:
        return args
    return (*args, "--ca-dir", str(data_dir / "tls"),
            "--join-listen", f"{host.advertise}:{host.join_port}",
            *(("--join-subnets", host.join_subnets) if host.join_subnets else ()),
            *(("--join-proxy", host.flycast) if host.flycast else ()))


def _proxy_args(host: JoinedHost, data_dir: Path, tls: bool) -> tuple[str, ...]:
    """A joined proxy's admin listener (registry sync and metrics) and, with the edge's default
    certificate it was given, its TLS listener."""
    args: tuple[str, ...] = ("--admin-listen", f"{host.advertise}:0",
                             *(("--base-domain", host.edge_domain)
                               if host.edge_domain != "localhost" else ()))
    edge = data_dir / DEFAULT_CERT
    if tls and host.proxy_tls_port and edge.exists():
        args = (*args, "--tls-listen", f"{host.advertise}:{host.proxy_tls_port}",
                "--tls-cert", str(edge))
    return args
