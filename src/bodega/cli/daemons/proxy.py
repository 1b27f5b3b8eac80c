"""``bodega proxy``: route HTTP to apps' machines, start sleeping ones, stop idle ones."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

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
    TlsDirOption,
    gossip_keyring,
)
from bodega.cli.session.errors import friendly
from bodega.proxy.daemon import Proxy, ProxyDaemonConfig
from bodega.proxy.plane import choose_plane
from bodega.runtime import hostinfo
from bodega.runtime.lifecycle import daemon_runtime, run_daemon
from bodega.runtime.logs import configure
from bodega.runtime.ready import Ready


@friendly
def proxy(
    data_dir: Annotated[Path, typer.Option(help="Where its registry replica is cached")],
    region: Annotated[str, typer.Option(help="The region this proxy serves from")],
    name: Annotated[str | None, typer.Option(help="Unique name (default: proxy-HOSTNAME)")]
    = None,
    listen: Annotated[str, typer.Option(help="host:port for client HTTP")] = "0.0.0.0:8080",
    tls_listen: Annotated[str | None, typer.Option(
        help="host:port for client TLS (HTTPS, h2 by ALPN; the haproxy data plane only)")]
    = None,
    tls_cert: Annotated[Path | None, typer.Option(
        help="PEM key and chain served when no certificate matches the SNI (default: "
             "self-signed for *.<base-domain>)")] = None,
    certs_key: CertsKeyOption = None,
    admin_listen: Annotated[str, typer.Option(
        help="host:port for health, metrics, sync (mutual TLS)")] = "127.0.0.1:0",
    tls_dir: TlsDirOption = None,
    internal_tls: InternalTlsOption = "on",
    gossip_listen: GossipListenOption = None,
    join: JoinOption = None,
    keyring: GossipKeyring = None,
    registry_agent: RegistryAgentOption = None,
    base_domain: Annotated[str, typer.Option(help="Apps answer at <app>.<base-domain>")]
    = "localhost",
    autostop_interval: Annotated[float, typer.Option(help="Seconds between autostop passes")]
    = 60.0,
    autostop_idle: Annotated[float, typer.Option(help="Seconds idle before a machine may stop")]
    = 60.0,
    data_plane: Annotated[str, typer.Option(
        help="auto (HAProxy when installed), haproxy, or python")] = "auto",
    haproxy_threads: Annotated[int, typer.Option(help="HAProxy's threads (nbthread)")] = 1,
    ready_file: ReadyFileOption = None,
    exit_with_parent: ExitWithParentOption = False,
    log_level: LogLevelOption = "info",
) -> None:
    """Run a proxy: Host <app>.<base-domain> reaches the app's machines, waking them if needed."""
    if autostop_interval <= 0 or autostop_idle < 0:
        raise ValueError("--autostop-interval must be > 0 and --autostop-idle >= 0")
    if haproxy_threads < 1:
        raise ValueError("--haproxy-threads must be at least 1")
    proxy_name = name or f"proxy-{hostinfo.hostname()}"
    host, port = hostinfo.split_host_port(listen, 8080)
    admin_host, admin_port = hostinfo.split_host_port(admin_listen, 0)
    tls_host, tls_port = (hostinfo.split_host_port(tls_listen, 8443) if tls_listen
                          else (host, None))
    if tls_cert is not None and not tls_cert.is_file():
        raise ValueError(f"--tls-cert {tls_cert}: no such file")
    gossip_host, gossip_port = hostinfo.split_host_port(gossip_listen or f"{admin_host}:0", 0)
    choose_plane(data_plane, tls=tls_port is not None)  # a plane that cannot serve: say so first
    keys = gossip_keyring(keyring)
    tls = tls_dir_for(data_dir.resolve(), tls_dir, internal_tls, [admin_host], "proxy",
                      proxy_name)
    config = ProxyDaemonConfig(
        name=proxy_name, region=region, data_dir=data_dir.resolve(),
        tls_dir=tls, listen_host=host, listen_port=port,
        admin_host=admin_host, admin_port=admin_port, gossip_host=gossip_host,
        gossip_port=gossip_port, seeds=hostinfo.comma_list(join),
        gossip_keyring=keys,
        registry_agent=registry_agent.resolve() if registry_agent else None,
        base_domain=base_domain, autostop_interval=autostop_interval,
        autostop_idle=autostop_idle, data_plane=data_plane, haproxy_threads=haproxy_threads,
        tls_host=tls_host, tls_port=tls_port,
        tls_cert=tls_cert.resolve() if tls_cert else None, certs_key=certs_key or "")
    configure(log_level, f"proxy[{proxy_name}]")
    daemon_runtime()
    with listening(Listener("--listen", "TCP", port), Listener("--admin-listen", "TCP", admin_port),
                   *([Listener("--tls-listen", "TCP", tls_port)] if tls_port is not None else []),
                   Listener("--gossip-listen", "UDP", gossip_port)):
        asyncio.run(_run(config, ready_file, exit_with_parent))


async def _run(config: ProxyDaemonConfig, ready_file: Path | None, exit_with_parent: bool) -> None:
    daemon = Proxy(config)

    def ready() -> Ready:
        assert daemon.node is not None
        assert daemon.admin is not None
        host, gport = daemon.node.gossip_addr
        return Ready(url=daemon.url, tls_url=daemon.tls_url, admin_url=daemon.admin.url,
                     name=config.name, region=config.region, gossip=f"{host}:{gport}")

    await run_daemon(daemon.start, lambda _cause: daemon.stop(),
                     exit_with_parent=exit_with_parent, ready_file=ready_file, ready=ready)
