"""``bodega broker``: run the stateless broker that serves the Machines API and places machines."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from bodega.broker.config import POLICIES, BrokerConfig
from bodega.broker.daemon import Broker
from bodega.cli.daemons.core.listeners import Listener, listening
from bodega.cli.daemons.internal_links import tls_dir_for
from bodega.cli.daemons.options import (
    CertsKeyOption,
    ExitWithParentOption,
    GossipKeyring,
    GossipListenOption,
    InternalTlsOption,
    JoinOption,
    LogLevelOption,
    ReadyFileOption,
    RegistryAgentOption,
    SecretsKeyOption,
    TlsDirOption,
    gossip_keyring,
)
from bodega.cli.session.errors import friendly
from bodega.model.duration import parse_duration
from bodega.placement import Curve, Weights
from bodega.placement.curves import BALANCED, ROOMY
from bodega.placement.named import DEFAULT_POLICY
from bodega.runtime import hostinfo
from bodega.runtime.lifecycle import StopCause, daemon_runtime, run_daemon, write_ready
from bodega.runtime.logs import configure
from bodega.runtime.ready import Ready
from bodega.runtime.tls.files import read_ca_file


def parse_weights(text: str | None) -> Weights:
    if not text:
        return Weights()
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise ValueError(f"--weights takes name=number pairs, got {part.strip()!r}")
        try:
            values[key] = float(value)
        except ValueError:
            raise ValueError(f"--weights: {key} is not a number: {value!r}") from None
    unknown = set(values) - {"cpu", "memory", "disk", "image", "app", "spread", "standby",
                             "hole", "fragmentation"}
    if unknown:
        raise ValueError(f"--weights: unknown weight {sorted(unknown)[0]!r}; use cpu, memory, "
                         "disk, image, app (or spread), standby, hole and fragmentation")
    return Weights().with_overrides(values)


@friendly
def broker(
    data_dir: Annotated[Path, typer.Option(help="Where its registry replica is cached")],
    name: Annotated[str | None, typer.Option(help="Unique name (default: broker-HOSTNAME)")]
    = None,
    listen: Annotated[str, typer.Option(help="host:port of the Machines API")]
    = "127.0.0.1:4280",
    region: Annotated[str, typer.Option(help="Region expression for creates that name none")]
    = "any",
    token: Annotated[list[str] | None, typer.Option(
        "--token", envvar="BODEGA_API_TOKEN", help="Admin API token (repeatable)")] = None,
    internal_listen: Annotated[str | None, typer.Option(
        help="host:port for members: registry sync, certificate renewals (mutual TLS) "
             "(default: --listen host, any port)")] = None,
    secrets_key: SecretsKeyOption = None,
    certs_key: CertsKeyOption = None,
    edge_domain: Annotated[str, typer.Option(
        help="With the CA and a certificates key, every app gets a certificate for "
             "<app>.<edge-domain>, as the proxies' --base-domain")] = "localhost",
    tls_dir: TlsDirOption = None,
    internal_tls: InternalTlsOption = "on",
    ca_dir: Annotated[Path | None, typer.Option(
        help="The cluster CA (ca.pem, ca-key.pem): sign members' certificate renewals")]
    = None,
    cert_validity: Annotated[str, typer.Option(
        help="How long the certificates it signs last, e.g. 8760h")] = "8760h",
    join_listen: Annotated[str | None, typer.Option(
        help="host:port where hosts join with a join token (TLS; needs --ca-dir)")] = None,
    join_subnets: Annotated[str | None, typer.Option(
        help="The range joined workers' machine subnets (/24s) are handed out from")] = None,
    join_proxy: Annotated[str | None, typer.Option(
        help="host:port of the proxy's public listener, told to joining hosts (their "
             "workers relay Flycast addresses to it)")] = None,
    gossip_listen: GossipListenOption = None,
    join: JoinOption = None,
    keyring: GossipKeyring = None,
    registry_agent: RegistryAgentOption = None,
    policy: Annotated[str, typer.Option(help=f"Placement policy: {', '.join(POLICIES)}")]
    = DEFAULT_POLICY,
    sample: Annotated[int, typer.Option(help="Power-of-d choices (0: rank every worker)")] = 0,
    cpu_curve: Annotated[str, typer.Option(help="Desirability by cpu utilization")]
    = BALANCED.describe(),
    memory_curve: Annotated[str, typer.Option(help="Desirability by memory utilization")]
    = BALANCED.describe(),
    disk_curve: Annotated[str, typer.Option(help="Desirability by disk utilization")]
    = ROOMY.describe(),
    weights: Annotated[str | None, typer.Option(help="e.g. cpu=1,memory=1,disk=0.5,app=0.1")]
    = None,
    deadline: Annotated[float, typer.Option(help="Seconds a placement may take")] = 5.0,
    hedge: Annotated[bool, typer.Option(help="Reserve on two workers, keep the first yes")]
    = False,
    shadow_policy: Annotated[str | None, typer.Option(
        help="A second policy to rank and log beside the live one, never acted on")] = None,
    shadow_sample: Annotated[float, typer.Option(
        help="Fraction of creates the shadow policy also ranks (0-1)")] = 0.1,
    image_registry: Annotated[str | None, typer.Option(
        help="host:port of the cluster's image registry, told to clients (GET /v1/cluster) "
             "so `bodega build` and `bodega deploy` push there")] = None,
    metrics_store: Annotated[Path | None, typer.Option(
        help="The host's metrics store's data dir (its endpoint.json): PromQL queries at "
             "/prometheus/<org>/api/v1 go there (docs/metrics.md)")] = None,
    image_registry_ca: Annotated[Path | None, typer.Option(
        help="The CA certificate (PEM) the image registry's certificate chains to, told to "
             "clients with it, so they push over TLS checked against it")] = None,
    probe_ratio: Annotated[float, typer.Option(
        min=1.0, help="Late binding: reservations placed per task of a bodega-pool job")]
    = 2.0,
    ready_file: ReadyFileOption = None,
    exit_with_parent: ExitWithParentOption = False,
    log_level: LogLevelOption = "info",
) -> None:
    """Run a broker: the Machines API, placing each create on a worker synchronously."""
    if not token:
        raise ValueError("--token (or BODEGA_API_TOKEN) is required: the admin API token")
    if policy not in POLICIES:
        raise ValueError(f"--policy must be one of {', '.join(POLICIES)}")
    if sample < 0 or deadline <= 0:
        raise ValueError("--sample must be >= 0 and --deadline > 0")
    if shadow_policy is not None and shadow_policy not in POLICIES:
        raise ValueError(f"--shadow-policy must be one of {', '.join(POLICIES)}")
    if not 0 <= shadow_sample <= 1:
        raise ValueError("--shadow-sample is a fraction of creates, between 0 and 1")
    broker_name = name or f"broker-{hostinfo.hostname()}"
    host, port = hostinfo.split_host_port(listen, 4280)
    gossip_host, gossip_port = hostinfo.split_host_port(gossip_listen or f"{host}:0", 0)
    internal_host, internal_port = hostinfo.split_host_port(internal_listen or f"{host}:0", 0)
    keys = gossip_keyring(keyring)
    tls = tls_dir_for(data_dir.resolve(), tls_dir, internal_tls, [internal_host], "broker",
                      broker_name)
    if ca_dir is not None and tls is None:
        raise ValueError("--ca-dir signs certificates for mutual TLS: not with --internal-tls off")
    if join_listen is not None and ca_dir is None:
        raise ValueError("--join-listen signs joining hosts' certificates: it needs --ca-dir")
    join_host, join_port = (hostinfo.split_host_port(join_listen, 4281) if join_listen
                            else (None, 0))
    config = BrokerConfig(
        name=broker_name, data_dir=data_dir.resolve(), secrets_key=secrets_key or "",
        certs_key=certs_key or "", edge_domain=edge_domain,
        tls_dir=tls, internal_host=internal_host,
        internal_port=internal_port, ca_dir=ca_dir.resolve() if ca_dir else None,
        cert_lifetime=parse_duration(cert_validity, 0.0), join_host=join_host,
        join_port=join_port, join_subnets=join_subnets, join_proxy=join_proxy,
        admin_tokens=tuple(token), region=region, listen_host=host, listen_port=port,
        gossip_host=gossip_host, gossip_port=gossip_port,
        seeds=hostinfo.comma_list(join), gossip_keyring=keys,
        registry_agent=registry_agent.resolve() if registry_agent else None,
        policy=policy, sample=sample, cpu_curve=Curve.parse(cpu_curve),
        memory_curve=Curve.parse(memory_curve), disk_curve=Curve.parse(disk_curve),
        weights=parse_weights(weights), deadline=deadline, hedge=hedge,
        shadow_policy=shadow_policy, shadow_sample=shadow_sample, image_registry=image_registry,
        image_registry_ca=read_ca_file(image_registry_ca, "--image-registry-ca"),
        metrics_store=metrics_store.resolve() if metrics_store is not None else None,
        probe_ratio=probe_ratio,
    )
    config.placement_policy()  # refuse a bad policy before anything starts
    configure(log_level, f"broker[{broker_name}]")
    daemon_runtime()
    with listening(Listener("--listen", "TCP", port),
                   Listener("--internal-listen", "TCP", internal_port),
                   Listener("--join-listen", "TCP", join_port),
                   Listener("--gossip-listen", "UDP", gossip_port)):
        asyncio.run(_run(config, ready_file, exit_with_parent))


async def _run(config: BrokerConfig, ready_file: Path | None, exit_with_parent: bool) -> None:
    daemon = Broker(config)
    marking: list[asyncio.Task[None]] = []

    def ready() -> Ready:
        gossip = None
        if daemon.node is not None:
            host, gport = daemon.node.gossip_addr
            gossip = f"{host}:{gport}"
        return Ready(url=daemon.url, internal_url=daemon.internal_url, name=config.name,
                     region=daemon.nearest, ready=daemon.gate.ready.is_set(), gossip=gossip)

    async def mark_ready() -> None:
        await daemon.until_ready()
        assert ready_file is not None
        write_ready(ready_file, ready())

    async def start() -> None:
        await daemon.start()
        # The ready file first says where the broker serves ("ready": false while it has
        # not heard from the cluster and answers 503), then "ready": true once creates get
        # honest answers, as GET /v1/health does.
        if ready_file is not None and not daemon.gate.ready.is_set():
            marking.append(asyncio.create_task(mark_ready()))

    async def stop(_cause: StopCause) -> None:
        for task in marking:
            task.cancel()
        await daemon.stop()

    await run_daemon(start, stop, exit_with_parent=exit_with_parent,
                     ready_file=ready_file, ready=ready)

