"""``bodega up``: run a whole local cluster in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from bodega.cli.daemons.metrics_store import metrics_choice
from bodega.cli.daemons.options import LogLevelOption
from bodega.cli.daemons.up_banner import banner
from bodega.cli.session import context_store
from bodega.cli.session.core.contexts import ContextError, Contexts, Registered, register_cluster
from bodega.cli.session.errors import fail, friendly
from bodega.cluster import cleanup, host_commands, host_network, machine_range, ports
from bodega.cluster.admin_token import admin_token
from bodega.cluster.cluster_keys import ensure_ca, ensure_join_token, ensure_keys
from bodega.cluster.components import components_for
from bodega.cluster.config import ClusterConfig
from bodega.cluster.data_dir_lock import DataDirLock
from bodega.cluster.edge_files import CA_CRT, ensure_certs_key, ensure_edge
from bodega.cluster.port_claims import PortClaims
from bodega.cluster.registry_sync import keep_caught_up
from bodega.cluster.supervisor import READY_TIMEOUT, LocalCluster, StartFailed
from bodega.model.duration import parse_duration
from bodega.registry.sealing import keyfile
from bodega.runtime import cluster_id, hostinfo
from bodega.runtime.binding import BindError
from bodega.runtime.lifecycle import StopCause, until_stopped
from bodega.runtime.logs import configure
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core import pki
from bodega.wire.transport.json_client import JsonClient

WIREGUARD_PORT = 51820  # the first worker's, with --advertise

T = TypeVar("T")


@friendly
def up(
    data_dir: Annotated[Path, typer.Option(help="Where the cluster keeps its state")]
    = Path(".bodega"),
    regions: Annotated[str, typer.Option(help="Comma-separated region codes")] = "ams,syd",
    workers_per_region: Annotated[int, typer.Option(min=1, max=50)] = 2,
    worker_cpus: Annotated[int, typer.Option(min=1)] = 4,
    worker_memory_mb: Annotated[int, typer.Option(min=256)] = 4096,
    worker_disk_gb: Annotated[int, typer.Option(min=0)] = 20,
    api_port: Annotated[int, typer.Option(help="Machines API port")] = 4280,
    proxy_port: Annotated[int, typer.Option(help="HTTP proxy port")] = 8080,
    proxy_tls_port: Annotated[int, typer.Option(
        min=0, max=65535,
        help="HTTPS proxy port (443 when asked; 0: none); trust <data-dir>/ca.crt")] = 8443,
    gossip_port: Annotated[int | None, typer.Option(
        help="First gossip (UDP) port; the others take the next ones (default: free ports, "
             "remembered in the data dir)")] = None,
    token: Annotated[
        str | None, typer.Option(envvar="BODEGA_API_TOKEN", help="Admin API token")
    ] = None,
    driver: Annotated[str, typer.Option(
        help="auto (process, plus oci when root with runc), process, oci or null")] = "auto",
    registry_port: Annotated[int | None, typer.Option(
        min=0, max=65535,
        help="Image registry (docker-registry) port; 0: none (default: a free port, "
             "remembered in the data dir)")] = None,
    machine_cidr: Annotated[str, typer.Option(
        help="Machine addresses, a /24 per worker; one cluster per range on a host")]
    = "10.209.0.0/16",
    log_level: LogLevelOption = "info",
    worker_arg: Annotated[list[str] | None, typer.Option(
        help="A flag for every worker, e.g. --worker-arg=--job-queue-limit=500 (repeatable)")]
    = None,
    broker_arg: Annotated[list[str] | None, typer.Option(
        help="A flag for the broker, e.g. --broker-arg=--probe-ratio=3 (repeatable)")] = None,
    cert_validity: Annotated[str, typer.Option(
        help="How long components' certificates last (renewed at two thirds, no restart)")]
    = "8760h",
    advertise: Annotated[str | None, typer.Option(
        help="An address of this host other hosts reach: serve the API, proxy, workers and "
             "gossip there, and let hosts join (`bodega join`). Default: loopback only")]
    = None,
    join_port: Annotated[int, typer.Option(help="Where hosts join, with --advertise (TLS)")]
    = 4281,
    private_network: Annotated[bool | None, typer.Option(
        "--private-network/--no-private-network", show_default=False,
        help="The private network (docs/networking.md): machines get 6PN addresses and "
             "<app>.internal names, and reach other hosts' machines over WireGuard. On by "
             "default where it can run (root, IPv6, nftables, WireGuard); turns on IP "
             "forwarding on this host")] = None,
    wireguard_port: Annotated[int | None, typer.Option(
        min=1, max=65535, show_default=False,
        help="UDP port of the first worker's WireGuard overlay; the next workers take the "
             "next ports (default: 51820 with --advertise, else free ports, remembered)")]
    = None,
    registry_agent: Annotated[bool, typer.Option(
        "--registry-agent/--no-registry-agent",
        help="One registry agent for the host (bodega agent): the workers, the broker and "
             "the proxy read its replica and hand it their rows, instead of each replicating "
             "the cluster on its own (docs/registry.md)")] = True,
    fork_server: Annotated[bool, typer.Option(
        "--fork-server/--no-fork-server",
        help="Fork every component from one interpreter that has imported bodega, so the "
             "host holds one copy of its modules, not one per worker")] = True,
    metrics: Annotated[bool, typer.Option(
        "--metrics/--no-metrics",
        help="Run the metrics store (victoria-metrics, when installed): it scrapes the "
             "cluster and apps' \\[metrics], queried per org at /prometheus/<org> "
             "(docs/metrics.md)")] = True,
    metrics_interval: Annotated[str, typer.Option(
        help="How often the metrics store scrapes every target")] = "15s",
    internal_tls: Annotated[str, typer.Option(
        hidden=True, help="off: plain, unauthenticated internal links, to measure what TLS "
                          "costs (benchmarks only)")] = "on",
) -> None:
    """Run a local cluster: workers in each region, a broker and a proxy, until Ctrl-C."""
    region_list = hostinfo.comma_list(regions)
    if not region_list:
        raise ValueError("--regions needs at least one region code")
    if internal_tls not in ("on", "off"):
        raise ValueError("--internal-tls is on or off")
    # On by default where it can run; asked for where it cannot, refused in one line.
    host_commands.require(driver)  # before anything is written or started
    unable_why = host_network.unable(driver)
    if private_network and unable_why is not None:
        raise ValueError(f"--private-network: {unable_why}")
    private = unable_why is None if private_network is None else private_network
    if advertise is not None and internal_tls == "off":
        raise ValueError("--advertise serves other hosts: not with --internal-tls off")
    lifetime = parse_duration(cert_validity, 0.0)
    if lifetime < pki.MIN_LIFETIME:
        raise ValueError(f"--cert-validity must be at least {pki.MIN_LIFETIME:g}s")
    data_dir = data_dir.resolve()
    config = ClusterConfig(
        data_dir=data_dir, token="", regions=region_list,
        internal_tls=internal_tls == "on", cert_lifetime=lifetime,
        workers_per_region=workers_per_region, worker_cpus=worker_cpus,
        worker_memory_mb=worker_memory_mb, worker_disk_gb=worker_disk_gb, api_port=api_port,
        proxy_port=proxy_port, driver=driver, machine_cidr=machine_cidr, log_level=log_level,
        extra_worker_args=tuple(worker_arg or ()), extra_broker_args=tuple(broker_arg or ()),
        advertise=advertise, join_port=join_port, host=advertise or "127.0.0.1",
        private_network=private, registry_agent=registry_agent, fork_server=fork_server,
    )
    registry_wanted = registry_port != 0 and shutil.which("docker-registry") is not None
    store, every = metrics_choice(metrics, metrics_interval)
    config = dataclasses.replace(config, metrics_store=store, metrics_interval=every)
    if internal_tls == "off":
        proxy_tls_port = 0  # no cluster CA, so no certificates to serve
    elif proxy_tls_port and not shutil.which("haproxy"):
        typer.echo("HTTPS is off: the proxy serves TLS with haproxy, which is not installed "
                   "(apt-get install haproxy)", err=True)
        proxy_tls_port = 0
    subnets = [config.worker_subnet(i) for i in range(config.worker_count)]
    # Everything that can be refused is refused before anything is started: a second
    # `bodega up` on this data dir first (it would also find the ports taken), then ports.
    # A refused run takes back what it wrote in the data dir (data_dir_lock.py).
    lock = DataDirLock.take(data_dir, cleanup.UP_LOCK,
                            f"bodega up is already running on {data_dir}")
    claim = machine_range.RangeClaim()
    claims = PortClaims.here()  # the internal ports it picks, which another cluster skips
    try:
        ports.check_listeners(config.host, {"--api-port": api_port, "--proxy-port": proxy_port,
                                            **({"--join-port": join_port} if advertise else {}),
                                            **({"--proxy-tls-port": proxy_tls_port}
                                               if proxy_tls_port else {}),
                                            **({"--registry-port": registry_port}
                                               if registry_wanted and registry_port else {})})
        # Made once per data dir; every namespace, link and cgroup of the cluster carries it.
        config = dataclasses.replace(config, cluster_id=cluster_id.ensure(data_dir))
        if os.geteuid() == 0 and driver in ("process", "auto", "oci"):
            claim = machine_range.claim(machine_cidr, subnets, data_dir, config.cluster_id)
        try:
            plan = ports.choose_gossip(data_dir, config.host, config.component_names(),
                                       gossip_port, claims)
        except BindError as err:
            raise ValueError(f"{err}; move it with --gossip-port") from None
        for name, (old, new) in plan.moved.items():
            typer.echo(f"{name}: gossip port {old} is taken now; it gossips on {new} instead "
                       f"(remembered in {data_dir / ports.PORTS_FILE})", err=True)
        if config.private_network:
            config = _wireguard_ports(config, wireguard_port, claims)
        if registry_wanted:
            registry = ports.choose_registry(data_dir, config.host, registry_port, claims)
            if registry.moved_from is not None:
                typer.echo(f"registry: port {registry.moved_from} is taken now; it serves on "
                           f"{registry.port} instead (remembered in "
                           f"{data_dir / ports.PORTS_FILE})", err=True)
            config = dataclasses.replace(config, registry_port=registry.port)
        api_token, made = admin_token(data_dir, token)
        keys = ensure_keys(data_dir)
        keyfile.ensure(config.keyring_file)  # a new cluster's, or a data dir's from before it
        config = dataclasses.replace(config, token=api_token, secrets_key=keys.secrets_key,
                                     gossip_ports=plan.ports)
        configure(log_level, "up")
        authority = (ensure_ca(data_dir, config.trust_domain, lifetime)
                     if config.internal_tls else None)
        if authority is not None:
            config = dataclasses.replace(
                config, certs_key=ensure_certs_key(data_dir), proxy_tls_port=proxy_tls_port,
                proxy_tls_cert=ensure_edge(data_dir, authority, "localhost"))
        lock.started()
        changes = (host_network.turn_on_forwarding() if config.private_network
                   else host_network.HostChanges())
        network_lines = host_network.banner(
            on=config.private_network, cluster_id=config.cluster_id, subnets=subnets,
            wireguard_ports=[config.worker_wireguard(i) for i in range(config.worker_count)],
            changes=changes, unable_why=unable_why if private_network is None else None)
        asyncio.run(_run(config, made or token is None, authority=authority,
                         contexts_file=context_store.config_path(os.environ),
                         network_lines=network_lines))
    except StartFailed as err:
        fail(str(err))
    finally:
        claims.release()
        claim.release()
        lock.release()


def _wireguard_ports(config: ClusterConfig, first: int | None,
                     claims: PortClaims) -> ClusterConfig:
    """The workers' WireGuard ports: from ``first`` (--wireguard-port; 51820 with
    --advertise, the port other hosts' firewalls let through), else free ones."""
    if first is None and config.advertise is not None:
        first = WIREGUARD_PORT
    names = [name for name, _ in config.worker_names()]
    try:
        chosen = ports.choose_wireguard(config.data_dir, names, first, claims)
    except BindError as err:
        raise ValueError(f"{err}; move it with --wireguard-port") from None
    return dataclasses.replace(config, wireguard_ports=chosen.ports,
                               wireguard_port=chosen.ports[names[0]])


async def _unless_stopped(work: Awaitable[T], stop: asyncio.Task[StopCause]
                          ) -> tuple[bool, T | None]:
    """(True, result) if ``work`` finished first; (False, None) if Ctrl-C came first."""
    task = asyncio.ensure_future(work)
    await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False, None


async def _run(config: ClusterConfig, print_token: bool, *, cluster: LocalCluster | None = None,
               ready_timeout: float = READY_TIMEOUT, contexts_file: Path | None = None,
               authority: CertificateAuthority | None = None,
               network_lines: list[str] | None = None) -> None:
    """Start the cluster, say when it is up, and stop it on Ctrl-C.

    With ``contexts_file``, the cluster is kept there as a CLI context once its
    broker answers, so `--context NAME` reaches it from any directory."""
    cluster = cluster or LocalCluster(config, components_for(config), authority)
    stop = asyncio.create_task(until_stopped())
    registered: Registered | None = None
    syncing: asyncio.Task[None] | None = None
    try:
        started, _ = await _unless_stopped(cluster.start(), stop)
        if started and contexts_file is not None:
            registered = _register(contexts_file, config, cluster)
        while started:
            # "Up" only once a create can work; until then say what is missing, and wait on.
            finished, waiting = await _unless_stopped(cluster.until_ready(ready_timeout), stop)
            if not finished:
                return
            if waiting is None:
                if config.advertise is not None and cluster.authority is not None:
                    await _join_token(config, cluster, cluster.authority)
                banner(cluster, config, print_token, registered, contexts_file,
                        network_lines or [])
                if config.advertise is not None and config.registry_port:  # hosts join
                    syncing = keep_caught_up(  # catch up with other server hosts' registries
                        f"{config.host}:{config.registry_port}",
                        f"http://{config.host}:{config.api_port}", config.token,
                        config.data_dir / CA_CRT if config.internal_tls else None)
                await stop
                return
            typer.echo(f"not up yet: {waiting.line()}; still waiting (Ctrl-C stops)", err=True)
    finally:
        if syncing is not None:
            syncing.cancel()
        await stop_as_asked(cluster, stop)


async def stop_as_asked(cluster: LocalCluster, stop: asyncio.Task[StopCause]) -> None:
    """Stop the cluster as its signal asked: Ctrl-C (SIGINT) stops the machines too;
    SIGTERM (systemd's stop, an upgrade), or a start that failed, stops bodega alone and
    leaves every machine running for the next start on this data dir to re-adopt."""
    cause = stop.result() if stop.done() and not stop.cancelled() else None
    stop.cancel()
    machines = cause is StopCause.INTERRUPT
    if machines:
        typer.echo("stopping bodega and its machines...")
    else:
        typer.echo("stopping bodega, leaving its machines running (the next start on "
                   f"{cluster.config.data_dir} re-adopts them; stopped with Ctrl-C instead, "
                   "bodega stops them too)...")
    await cluster.stop(machines=machines)


async def _join_token(config: ClusterConfig, cluster: LocalCluster,
                      authority: CertificateAuthority) -> None:
    """The join token the banner prints: kept while the join book (in the view, asked
    through the broker) takes it, else a new one."""
    broker = next(c for c in cluster.components if c.role == "broker")
    url = broker.url or f"http://{config.host}:{config.api_port}"
    async with JsonClient(url, config.token, what="broker") as api:
        await ensure_join_token(config.data_dir, authority, api)


def _register(path: Path, config: ClusterConfig, cluster: LocalCluster) -> Registered | None:
    """Keep (or update) this cluster's context: its broker's URL and its token file."""
    broker = next(c for c in cluster.components if c.role == "broker")
    return keep_context(path, config.data_dir,
                        broker.url or f"http://{config.host}:{config.api_port}")


def keep_context(path: Path, data_dir: Path, url: str) -> Registered | None:
    """Keep the API at ``url`` as the CLI context of ``data_dir`` (its ``api-token``); a
    warning, not a failure, when the contexts file cannot be written."""
    done: list[Registered] = []

    def edit(contexts: Contexts) -> Contexts:
        done.append(register_cluster(contexts, data_dir, url, data_dir / "api-token"))
        return done[-1].contexts

    try:
        context_store.update(path, edit)
    except (OSError, ContextError) as exc:
        typer.echo(f"warning: this cluster is not kept as a CLI context: {exc}", err=True)
        return None
    return done[-1]
