"""What a local cluster runs: each component's command line, environment and files.

An image registry (when it has a port: HTTPS with a certificate from the
cluster CA, which workers check it by), the host's registry agent (with
``--registry-agent``: every other component reads its replica and is its
tenant, gossiping through it), the workers (without an agent, each gossiping on
a fixed port, joining those before it), one broker and one proxy in the first
region.
Each component is ``bodega <role> ...`` with a ready file and a log file of its
own; its flags map back to the ``bodega up`` flags that set them, so an error
it prints can be worded in the user's terms. Secrets go in the environment,
each only where it is needed; the gossip keyring stays in its file (mode
0600), whose path every component that gossips is given. Workers, the broker
and the proxy each have a TLS directory in their data dir (``tls_dir``), where
the supervisor puts the key and certificate of their identity before starting
them.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bodega.cluster.config import AGENT_NAME, ClusterConfig
from bodega.cluster.edge_files import CA_CRT
from bodega.model.duration import format_duration
from bodega.model.json import JsonObject
from bodega.runtime.tls.core.access import METRICS_STORE as METRICS_ROLE

if TYPE_CHECKING:
    from bodega.cluster.forked import ForkedProcess

# Never inherited from `bodega up`'s own environment: each is given here, or not at all.
# BODEGA_CLUSTER_SECRET is what older versions used for everything.
TOKEN_DIGEST = "BODEGA_API_TOKEN_SHA256"  # the admin token's SHA-256 (hex): the registry's
METRICS_NAME = "metrics"  # the metrics store's component name and its dir in the data dir
SECRET_VARIABLES = ("BODEGA_API_TOKEN", "BODEGA_SECRETS_KEY", "BODEGA_GOSSIP_KEYRING",
                    "BODEGA_GOSSIP_KEYRING_FILE", "BODEGA_CERTS_KEY",
                    "BODEGA_CLUSTER_SECRET", TOKEN_DIGEST)


@dataclass
class Component:
    role: str
    name: str
    region: str
    argv: list[str]
    ready_file: Path
    log_file: Path
    process: asyncio.subprocess.Process | ForkedProcess | None = None
    url: str | None = None
    restarts: int = 0
    started_at: float = 0.0
    info: dict[str, str] = field(default_factory=dict)  # what its ready file says besides
    # The component's own flag -> the ``bodega up`` flag that sets it, to word its errors.
    flags: dict[str, str] = field(default_factory=dict)
    tls_dir: Path | None = None  # where its key and certificate go (None: no TLS identity)

    def to_json(self) -> JsonObject:  # as ``bodega up`` writes its state file
        return {
            "role": self.role, "name": self.name, "region": self.region,
            "pid": self.process.pid if self.process else None, "url": self.url,
            "restarts": self.restarts, **self.info,
        }


def component_env(inherited: Mapping[str, str], role: str, config: ClusterConfig
                  ) -> dict[str, str]:
    """The environment a component starts with.

    Secrets travel in the environment, never on a command line others can
    read, and each goes only where it is needed: brokers and workers get the
    secrets key (a proxy never opens an app's secrets), only the broker the
    admin token, and the image registry (which lets a push in with it) its
    SHA-256, which opens nothing. The gossip
    keyring is a file every component is given the path of, never a variable.
    ``bodega up`` may itself have been given the token as ``BODEGA_API_TOKEN``; a
    worker or a proxy that inherited it would hold a key it never uses.
    """
    env = {k: v for k, v in inherited.items() if k not in SECRET_VARIABLES}
    if role in ("broker", "worker") and config.secrets_key:
        env["BODEGA_SECRETS_KEY"] = config.secrets_key
    if role in ("broker", "proxy") and config.certs_key:
        env["BODEGA_CERTS_KEY"] = config.certs_key  # brokers seal certificate keys, proxies open
    if role == "broker":
        env["BODEGA_API_TOKEN"] = config.token
    if role == "registry" and config.internal_tls:  # it takes pushes with the token
        env[TOKEN_DIGEST] = hashlib.sha256(config.token.encode()).hexdigest()
    return env


def tls_args(config: ClusterConfig) -> tuple[str, ...]:
    """Every component's flags for its internal links (none: mutual TLS, the default)."""
    return () if config.internal_tls else ("--internal-tls", "off")


def bodega_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bodega", *args]


def components_for(config: ClusterConfig) -> list[Component]:
    components = []
    run_dir = config.data_dir / "run"
    logs = config.data_dir / "logs"
    nearest = config.regions[0]
    images: tuple[str, ...] = ()
    if config.registry_port:  # the image registry first: workers pull from it
        registry = f"{config.host}:{config.registry_port}"
        # With the cluster CA, it serves HTTPS with a certificate the CA issues it: workers
        # and the broker (which tells `bodega build`) are given the CA to check it by.
        images = ("--image-registry", registry, *(
            ("--image-registry-ca", str(config.data_dir / CA_CRT)) if config.internal_tls
            else ()))
        components.append(registry_component(
            config.data_dir, nearest, registry,
            config.cert_lifetime if config.internal_tls else None))
    agent = config.agent_dir
    hosted: tuple[str, ...] = ("--registry-agent", str(agent)) if agent else ()
    if agent is not None:  # before every other component: they read its replica
        components.append(Component(
            "agent", AGENT_NAME, nearest,
            bodega_argv("agent", "--name", AGENT_NAME, "--region", nearest,
                        "--data-dir", str(agent), "--listen", f"{config.host}:0",
                        "--gossip-listen", config.gossip(AGENT_NAME),
                        "--gossip-keyring", str(config.keyring_file),
                        "--exit-with-parent", "--ready-file", str(run_dir / "agent.json"),
                        "--log-level", config.log_level, *tls_args(config)),
            run_dir / "agent.json", logs / "agent.log",
            flags={"--gossip-listen": "--gossip-port"}, tls_dir=_tls_dir(config, agent)))
    for index, (name, region) in enumerate(config.worker_names()):
        # With an agent, the agent gossips for every worker (they are its tenants). Without
        # one, every worker gossips on a fixed port; the first joins nobody, each other one
        # joins through those before it, so any of them still up lets a restarted worker
        # back in (the first rejoins through the peers it remembers).
        joins = [config.worker_gossip(i) for i in range(index)]
        gossip = () if agent else (
            "--gossip-listen", config.worker_gossip(index),
            *(("--join", ",".join(joins)) if joins else ()))
        argv = bodega_argv(
            "worker", "--name", name, "--region", region,
            "--data-dir", str(config.data_dir / "workers" / name),
            "--listen", f"{config.host}:0", "--driver", config.driver,
            "--cpus", str(config.worker_cpus), "--memory-mb", str(config.worker_memory_mb),
            "--disk-gb", str(config.worker_disk_gb),
            "--machine-subnet", config.worker_subnet(index),
            *(("--cluster-id", config.cluster_id) if config.cluster_id else ()),
            "--stop-machines-on-interrupt", "--exit-with-parent",
            "--ready-file", str(run_dir / f"{name}.json"), "--log-level", config.log_level,
            *gossip, "--gossip-keyring", str(config.keyring_file), *images,
            # Its host's registry: advertised in its row, for every host to pull from.
            *(("--image-registry-here",) if images else ()), *tls_args(config),
            *private_network_args(config.private_network, config.worker_wireguard(index),
                                  f"{config.host}:{config.proxy_port}"),
            *hosted, *config.extra_worker_args,
        )
        components.append(Component("worker", name, region, argv, run_dir / f"{name}.json",
                                    logs / f"{name}.log",
                                    flags={"--gossip-listen": "--gossip-port",
                                           "--machine-subnet": "--machine-cidr"},
                                    tls_dir=_tls_dir(config, config.data_dir / "workers" / name)))
    seeds = ",".join(config.worker_gossip(i) for i in range(config.worker_count))
    # One broker and one proxy, in the first region: tenants of the agent, as the workers
    # are, or joined to the workers' gossip.
    for role, port, extra, flag in (
            ("broker", config.api_port, config.extra_broker_args, "--api-port"),
            ("proxy", config.proxy_port, config.extra_proxy_args, "--proxy-port")):
        argv = bodega_argv(
            role, "--name", role, "--region", nearest,
            "--data-dir", str(config.data_dir / role),
            "--listen", f"{config.host}:{port}",
            *(() if agent else ("--gossip-listen", config.gossip(role), "--join", seeds)),
            "--gossip-keyring", str(config.keyring_file),
            "--exit-with-parent", "--ready-file", str(run_dir / f"{role}.json"),
            "--log-level", config.log_level, *tls_args(config), *hosted,
            *(_broker_args(config) if role == "broker" else _proxy_tls_args(config)),
            # The proxy's admin listener serves registry sync: members on other hosts reach it.
            *(("--admin-listen", f"{config.host}:0") if role == "proxy" else ()), *extra,
            # The broker tells clients where the registry is (GET /v1/cluster).
            *(images if role == "broker" else ()),
            *(("--metrics-store", str(config.data_dir / METRICS_NAME))
              if role == "broker" and config.metrics_store else ()),
        )
        components.append(Component(role, role, nearest, argv, run_dir / f"{role}.json",
                                    logs / f"{role}.log",
                                    flags={"--listen": flag, "--gossip-listen": "--gossip-port",
                                           "--tls-listen": "--proxy-tls-port"},
                                    tls_dir=_tls_dir(config, config.data_dir / role)))
    if config.metrics_store:
        components.append(metrics_component(
            config.data_dir, nearest, run_dir / "broker.json", config.metrics_interval,
            config.internal_tls, config.cert_lifetime, config.log_level))
    return components


def metrics_component(data_dir: Path, region: str, broker_ready: Path, interval: float,
                      tls: bool, cert_lifetime: float | None = None,
                      log_level: str = "info") -> Component:
    """The metrics store (``cluster/metrics_store.py``), after the host's broker: it
    discovers what to scrape at the broker's internal listener, named in its ready file.
    With TLS it renews its certificate with the CA in ``<data_dir>/tls`` (a server's)."""
    store_dir = data_dir / METRICS_NAME
    ready = data_dir / "run" / f"{METRICS_NAME}.json"
    tls_dir = store_dir / "tls" if tls else None
    return Component(
        METRICS_ROLE, METRICS_NAME, region,
        bodega_argv("metrics-store", "--data-dir", str(store_dir),
                    "--broker-ready-file", str(broker_ready),
                    "--scrape-interval", format_duration(interval),
                    *(("--tls-dir", str(tls_dir), "--ca-dir", str(data_dir / "tls"))
                      if tls_dir is not None else ()),
                    *(("--cert-validity", format_duration(cert_lifetime))
                      if tls_dir is not None and cert_lifetime is not None else ()),
                    "--ready-file", str(ready), "--log-level", log_level, "--exit-with-parent"),
        ready, data_dir / "logs" / f"{METRICS_NAME}.log", tls_dir=tls_dir)


def registry_component(data_dir: Path, region: str, listen: str,
                       cert_lifetime: float | None) -> Component:
    """The host's image registry on ``listen`` (host:port), its storage under ``data_dir``:
    with ``cert_lifetime``, HTTPS with a certificate the cluster CA (in ``<data-dir>/tls``,
    where a server host keeps it) issues it for that long; None: plain HTTP
    (``--internal-tls off``). Every server host runs one (``bodega up``, ``bodega join
    --server``)."""
    run_dir, logs = data_dir / "run", data_dir / "logs"
    return Component(
        "registry", "registry", region,
        bodega_argv("image-registry", "--data-dir", str(data_dir / "images"),
                    "--listen", listen, "--ready-file", str(run_dir / "registry.json"),
                    "--exit-with-parent", *(
                        ("--ca-dir", str(data_dir / "tls"), "--cert-validity",
                         format_duration(cert_lifetime))
                        if cert_lifetime is not None else ())),
        run_dir / "registry.json", logs / "registry.log",
        flags={"--listen": "--registry-port"})


def private_network_args(on: bool, wireguard_port: int, proxy: str | None
                         ) -> tuple[str, ...]:
    """A worker's private network flags: its own WireGuard port (workers sharing a host each
    have one) and the proxy Flycast addresses are relayed to. The cluster id it shares with
    every other worker is passed already."""
    if not on:
        return ()
    return ("--private-network", "--network", "netns", "--wireguard-port", str(wireguard_port),
            *(("--flycast-proxy", proxy) if proxy else ()))


def _tls_dir(config: ClusterConfig, component_dir: Path) -> Path | None:
    return component_dir / "tls" if config.internal_tls else None


def _proxy_tls_args(config: ClusterConfig) -> tuple[str, ...]:
    """The proxy's TLS listener and its default certificate, when the cluster has a CA."""
    if not config.proxy_tls_port or config.proxy_tls_cert is None:
        return ()
    return ("--tls-listen", f"{config.host}:{config.proxy_tls_port}",
            "--tls-cert", str(config.proxy_tls_cert))


def _broker_args(config: ClusterConfig) -> tuple[str, ...]:
    """The broker's internal listener, and (with TLS) the CA it signs renewals with."""
    listen = ("--internal-listen", f"{config.host}:0")
    if not config.internal_tls:
        return listen
    joins = (("--join-listen", f"{config.host}:{config.join_port}",
              "--join-subnets", config.join_subnets,
              # Joined hosts relay Flycast to this proxy (with --private-network).
              "--join-proxy", f"{config.host}:{config.proxy_port}") if config.advertise else ())
    return (*listen, "--ca-dir", str(config.data_dir / "tls"),
            "--cert-validity", format_duration(config.cert_lifetime), *joins)
