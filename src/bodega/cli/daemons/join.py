"""``bodega join ADDR --token T --region R``: make this host a peer of a cluster elsewhere.

The first time on a data dir it joins (``cluster/joining.py``: the CA checked
against the token's pin before anything is sent, CSRs out, certificates and
the gossip keyring back); after that it starts the same members again with
the identity they keep, and needs no token. A joined host runs its workers,
a broker (the whole Machines API, on 4280) and a proxy (every app, on 8080
and 8443), as host 1 does, unless told ``--no-broker``/``--no-proxy``; with
``--server`` its broker also holds the CA's key and lets hosts join. Either
way it runs them in the foreground as ``bodega up`` runs its own: Ctrl-C
stops them and the workers' machines; a member that crashes is restarted (a
worker re-adopting its machines). Its API is kept as a CLI context, so
``bodega`` commands on the host talk to it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.daemons.metrics_store import metrics_choice
from bodega.cli.daemons.options import LogLevelOption
from bodega.cli.daemons.up import _unless_stopped, keep_context, stop_as_asked
from bodega.cli.session import context_store
from bodega.cli.session.errors import fail, friendly
from bodega.cluster import host_commands, host_network, ports
from bodega.cluster.config import ClusterConfig
from bodega.cluster.data_dir_lock import DataDirLock
from bodega.cluster.edge_files import CA_CRT, CERTS_KEY, DEFAULT_CERT, ensure_edge
from bodega.cluster.joined import (
    API_PORT,
    JOIN_LOCK,
    PROXY_PORT,
    PROXY_TLS_PORT,
    HostRoles,
    JoinedHost,
    joined_components,
)
from bodega.cluster.joining import JoinFailed
from bodega.cluster.joining import join as join_cluster
from bodega.cluster.port_claims import PortClaims
from bodega.cluster.registry_sync import keep_caught_up
from bodega.cluster.supervisor import LocalCluster, StartFailed
from bodega.runtime import hostinfo
from bodega.runtime.lifecycle import until_stopped
from bodega.runtime.logs import configure
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.files import CaDir
from bodega.runtime.waits import within
from bodega.wire.internal.join import JOIN_PORT

ANSWER_WAIT = 3.0  # seconds a restarted join gives the host it joined through to answer


def address_towards(host: str) -> str:
    """The address of this host that packets to ``host`` leave from (nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, 9))
        except OSError as exc:
            raise ValueError(f"no route to {host} ({exc.strerror}): pass --advertise") from None
        return str(probe.getsockname()[0])


@friendly
def join(
    address: Annotated[str, typer.Argument(
        help="The host to join through: ADDR[:PORT], as `bodega up --advertise` printed it")],
    token: Annotated[str | None, typer.Option(
        envvar="BODEGA_JOIN_TOKEN", show_default=False,
        help="A join token (K10...): `bodega up --advertise` prints one, `bodega cluster "
             "token create` makes more. Needed the first time only")] = None,
    region: Annotated[str | None, typer.Option(
        help="This host's region code, e.g. syd (the first time only)")] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Workers on this host")] = 1,
    data_dir: Annotated[Path, typer.Option(help="Where this host keeps its state")]
    = Path(".bodega"),
    advertise: Annotated[str | None, typer.Option(
        help="This host's address others reach (default: the one that routes to ADDR)")]
    = None,
    driver: Annotated[str, typer.Option(
        help="auto (process, plus oci when root with runc), process, oci or null")] = "auto",
    cpus: Annotated[int | None, typer.Option(min=1, help="Each worker's cpus (default: "
                                                          "the host's)")] = None,
    memory_mb: Annotated[int | None, typer.Option(min=256, help="Each worker's memory")]
    = None,
    private_network: Annotated[bool | None, typer.Option(
        "--private-network/--no-private-network", show_default=False,
        help="The private network (docs/networking.md): machines get 6PN addresses and "
             "<app>.internal names, and reach other hosts' machines over WireGuard. Default: "
             "as the cluster runs it. Turns on IP forwarding on this host. Kept in the data "
             "dir once given")] = None,
    wireguard_port: Annotated[int | None, typer.Option(
        min=1, max=65535, show_default=False,
        help="UDP port of the first worker's WireGuard overlay (the next workers take the "
             "next ports; default 51820, then kept)")] = None,
    broker: Annotated[bool, typer.Option(
        "--broker/--no-broker",
        help="Serve the Machines API here (the first time only; kept)")] = True,
    proxy: Annotated[bool, typer.Option(
        "--proxy/--no-proxy", help="Route apps' traffic here (the first time only; kept)")]
    = True,
    server: Annotated[bool, typer.Option(
        help="Hold the cluster CA's key and let hosts join through this one too: needs a "
             "server token (`bodega cluster token create --server`) and a broker (the first "
             "time only; kept)")] = False,
    api_port: Annotated[int, typer.Option(min=1, max=65535, help="The Machines API's port")]
    = API_PORT,
    proxy_port: Annotated[int, typer.Option(min=1, max=65535, help="The proxy's HTTP port")]
    = PROXY_PORT,
    proxy_tls_port: Annotated[int, typer.Option(
        min=0, max=65535, help="The proxy's HTTPS port (0: none; needs haproxy)")]
    = PROXY_TLS_PORT,
    join_port: Annotated[int, typer.Option(
        min=1, max=65535, help="A server's join listener (hosts join through it)")]
    = JOIN_PORT,
    registry_port: Annotated[int | None, typer.Option(
        min=0, max=65535, show_default=False,
        help="A server's image registry (docker-registry) port: every server host runs one, "
             "for every host to pull from and deploys to push to; 0: none here (default: a "
             "free port, remembered in the data dir)")] = None,
    log_level: LogLevelOption = "info",
    worker_arg: Annotated[list[str] | None, typer.Option(
        help="A flag for every worker of this host, e.g. "
             "--worker-arg=--snapshot-every=3600 (repeatable)")] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics/--no-metrics",
        help="On a server: run the metrics store (victoria-metrics, when installed), which "
             "scrapes the whole cluster (docs/metrics.md)")] = True,
    metrics_interval: Annotated[str, typer.Option(
        help="How often a server's metrics store scrapes every target")] = "15s",
    fork_server: Annotated[bool, typer.Option(
        "--fork-server/--no-fork-server",
        help="Fork this host's components from one interpreter that has imported bodega, "
             "so the host holds one copy of its modules")] = True,
) -> None:
    """Join a cluster and run this host's workers, broker and proxy until Ctrl-C."""
    data_dir = data_dir.resolve()
    if server and not broker:
        raise ValueError("--server lets hosts join through this host's broker: drop "
                         "--no-broker")
    roles = HostRoles(broker=broker, proxy=proxy, server=server, api_port=api_port,
                      proxy_port=proxy_port, proxy_tls_port=proxy_tls_port,
                      join_port=join_port)
    host_commands.require(driver)  # before anything is written or started
    unable_why = host_network.unable(driver)
    if private_network and unable_why is not None:
        raise ValueError(f"--private-network: {unable_why}")
    host, port = hostinfo.split_host_port(address, JOIN_PORT)
    # A join refused (no token, a bad one, a cluster that does not answer or says no)
    # takes back what it wrote in the data dir (data_dir_lock.py); a joined host's
    # identity, once written, stays.
    lock = DataDirLock.take(data_dir, JOIN_LOCK,
                            f"bodega join is already running on {data_dir}")
    claims = PortClaims.here()
    try:
        joined = JoinedHost.read(data_dir)
        if joined is None:
            if not token:
                raise ValueError("--token is needed to join: `bodega up --advertise` prints "
                                 "one, `bodega cluster token create` makes more")
            if not region:
                raise ValueError("--region is needed to join, e.g. --region syd")
            mine = advertise or address_towards(host)
            _check_ports(mine, roles)
            joined = asyncio.run(join_cluster(data_dir, host, port, token, region, workers,
                                              mine, roles))
            lock.started()
            typer.echo(f"joined cluster {joined.cluster_id} through {joined.join} as "
                       f"{', '.join(w.name for w in joined.workers)} ({joined.region}); "
                       f"identity kept in {data_dir}")
        else:
            typer.echo(f"{data_dir} joined cluster {joined.cluster_id} already: starting "
                       f"{', '.join(w.name for w in joined.workers)} again (no token needed)")
            silent = asyncio.run(_unanswered(joined.join))
            if silent is not None:
                typer.secho(
                    f"warning: {joined.join}, the host this one joined through, does not "
                    f"answer ({silent}): the workers start, run the machines kept here, and "
                    "join the cluster through any member that answers (they say so in their "
                    "logs until one does)", fg=typer.colors.YELLOW, err=True)
        joined = _remember(joined, data_dir, private_network, wireguard_port)
        if joined.private_network and unable_why is not None:
            raise ValueError(
                f"cluster {joined.cluster_id} runs the private network and this host cannot: "
                f"{unable_why}; or pass --no-private-network (this host's machines then have "
                "no private address, and other hosts' machines do not reach them)")
        changes = (host_network.turn_on_forwarding() if joined.private_network
                   else host_network.HostChanges())
        plan = ports.choose_gossip(data_dir, joined.advertise, joined.member_names(), None,
                                   claims)
        sizes = (*(("--cpus", str(cpus)) if cpus else ()),
                 *(("--memory-mb", str(memory_mb)) if memory_mb else ()),
                 *(worker_arg or ()))
        if joined.server and joined.proxy_name:  # a server issues its own default again
            ensure_edge(data_dir, CertificateAuthority.load(CaDir(data_dir / "tls")),
                        joined.edge_domain)
        tls = bool(shutil.which("haproxy"))
        store, every = (metrics_choice(metrics, metrics_interval) if joined.server
                        else (False, 0.0))
        own_registry = _own_registry(joined, data_dir, registry_port, claims)
        components = joined_components(
            joined, data_dir, plan.ports, driver=driver, log_level=log_level,
            extra_worker_args=sizes, proxy_tls=tls, metrics_interval=every if store else None,
            own_registry=own_registry)
        config = ClusterConfig(data_dir=data_dir, token=_read(data_dir, "api-token"),
                               secrets_key=_read(data_dir, "secrets-key"),
                               certs_key=_read(data_dir, CERTS_KEY),
                               cluster_id=joined.cluster_id, regions=(joined.region,),
                               host=joined.advertise, driver=driver, log_level=log_level,
                               api_port=joined.api_port, proxy_port=joined.proxy_port,
                               proxy_tls_port=joined.proxy_tls_port if tls else 0,
                               proxy_tls_cert=(data_dir / DEFAULT_CERT
                                               if joined.proxy_name else None),
                               registry_agent=bool(joined.registry_agent and joined.agent),
                               fork_server=fork_server)
        configure(log_level, "join")
        lock.started()
        network_lines = host_network.banner(
            on=joined.private_network, cluster_id=joined.cluster_id,
            subnets=[w.subnet for w in joined.workers if w.subnet],
            wireguard_ports=[joined.wireguard_port + i for i in range(len(joined.workers))],
            changes=changes, unable_why=None)
        # A server's CA issues its metrics store a certificate (its other members have theirs).
        authority = (CertificateAuthority.load(CaDir(data_dir / "tls"))
                     if store else None)
        asyncio.run(_run(LocalCluster(config, components, authority, sweep_kernel=False), joined,
                         network_lines, context_store.config_path(os.environ), own_registry))
    except (StartFailed, JoinFailed) as err:
        fail(str(err))
    finally:
        claims.release()
        lock.release()


def _remember(joined: JoinedHost, data_dir: Path, private_network: bool | None,
              wireguard_port: int | None) -> JoinedHost:
    """``joined`` with the private network settings given now, kept for the next runs."""
    changed = {k: v for k, v in (("private_network", private_network),
                                 ("wireguard_port", wireguard_port)) if v is not None}
    if not changed or all(getattr(joined, k) == v for k, v in changed.items()):
        return joined
    joined = joined.model_copy(update=changed)
    joined.write(data_dir)
    return joined


async def _unanswered(address: str) -> str | None:
    """Why nothing answers at ``address`` (host:port), or None if something does."""
    host, port = hostinfo.split_host_port(address, JOIN_PORT)
    try:
        _reader, writer = await within(asyncio.open_connection(host, port), ANSWER_WAIT)
    except TimeoutError:
        return f"no answer in {ANSWER_WAIT:g}s"
    except OSError as exc:
        return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    writer.close()
    return None


def _own_registry(joined: JoinedHost, data_dir: Path, asked: int | None,
                  claims: PortClaims) -> str | None:
    """Where this host serves its image registry (host:port): a server host runs one, as
    host 1 does, unless told ``--registry-port 0`` or docker-registry is not installed."""
    if not joined.server or asked == 0:
        return None
    if shutil.which("docker-registry") is None:
        typer.echo("no image registry on this server host: docker-registry is not installed "
                   "(apt-get install docker-registry); its workers pull from the others",
                   err=True)
        return None
    if asked is not None:
        ports.check_listeners(joined.advertise, {"--registry-port": asked})
    chosen = ports.choose_registry(data_dir, joined.advertise, asked, claims)
    return f"{joined.advertise}:{chosen.port}"


def _check_ports(address: str, roles: HostRoles) -> None:
    """Refuse, before the join, ports this host cannot serve on (one line naming the flag)."""
    ports.check_listeners(address, {
        **({"--api-port": roles.api_port} if roles.broker else {}),
        **({"--join-port": roles.join_port} if roles.server else {}),
        **({"--proxy-port": roles.proxy_port} if roles.proxy else {}),
        **({"--proxy-tls-port": roles.proxy_tls_port}
           if roles.proxy and roles.proxy_tls_port else {})})


def _read(data_dir: Path, name: str) -> str:
    try:
        return (data_dir / name).read_text().strip()
    except FileNotFoundError:
        return ""


async def _run(cluster: LocalCluster, joined: JoinedHost, network_lines: list[str],
               contexts_file: Path, own_registry: str | None = None) -> None:
    stop = asyncio.create_task(until_stopped())
    syncing: asyncio.Task[None] | None = None
    try:
        started, _ = await _unless_stopped(cluster.start(), stop)
        if started:
            workers = sum(1 for c in cluster.components if c.role == "worker")
            typer.echo(f"bodega joined: {workers} workers in {joined.region}, serving on "
                       f"{joined.advertise}, Machines API {joined.own_api or joined.api_url}; "
                       f"pid {os.getpid()}")
            for line in network_lines:
                typer.echo(line)
            if joined.private_network:
                typer.echo(f"  Flycast through "
                           f"{joined.flycast or 'no proxy (none was told at the join)'}")
            for component in cluster.components:
                typer.echo(f"  {component.role:<7} {component.name:<16} {component.url}")
            for line in _peer_lines(joined, cluster):
                typer.echo(line)
            if joined.own_api is not None:
                keep_context(contexts_file, cluster.config.data_dir, joined.own_api)
            typer.echo("Press Ctrl-C to stop.")
            # A server's image registry catches up with the other server hosts'.
            syncing = keep_caught_up(own_registry, joined.own_api, cluster.config.token,
                                     cluster.config.data_dir / CA_CRT)
            await stop
    finally:
        if syncing is not None:
            syncing.cancel()
        await stop_as_asked(cluster, stop)


def _peer_lines(joined: JoinedHost, cluster: LocalCluster) -> list[str]:
    """What this host serves besides its workers, in the words of `bodega up`'s banner."""
    lines = []
    if joined.own_api is not None:
        lines.append(f"Machines API: {joined.own_api}/v1 (any host's answers alike; token in "
                     f"{cluster.config.data_dir / 'api-token'})")
    if joined.proxy_name is not None:
        where = f"{joined.advertise}:{joined.proxy_port}"
        lines.append(f"Proxy: http://{where}/ with Host: <app>.{joined.edge_domain} (curl -H "
                     f"'Host: <app>.{joined.edge_domain}' http://{where}/)")
        if cluster.config.proxy_tls_port:
            lines.append(f"HTTPS: https://<app>.{joined.edge_domain}:"
                         f"{cluster.config.proxy_tls_port}/ at {joined.advertise}")
    if joined.server:
        where = joined.advertise if joined.join_port == JOIN_PORT else \
            f"{joined.advertise}:{joined.join_port}"
        lines.append(f"Server: this host lets hosts join (bodega join {where} --token ... "
                     "--region <REGION>) and renews certificates")
    return lines
