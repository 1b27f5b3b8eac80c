"""``bodega agent``: a host's registry agent, the one replica its processes read and write."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import CollectorRegistry

from bodega.cli.daemons.core.listeners import Listener, listening
from bodega.cli.daemons.internal_links import tls_dir_for
from bodega.cli.daemons.options import (
    ExitWithParentOption,
    GossipKeyring,
    GossipListenOption,
    InternalTlsOption,
    JoinOption,
    LogLevelOption,
    ReadyFileOption,
    TlsDirOption,
    gossip_keyring,
)
from bodega.cli.session.errors import friendly
from bodega.registry.agent.daemon import AgentConfig, RegistryAgent
from bodega.registry.node import RegistryConfig
from bodega.runtime import hostinfo
from bodega.runtime.lifecycle import daemon_runtime, run_daemon
from bodega.runtime.logs import configure
from bodega.runtime.ready import Ready
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.files import TlsDir


@friendly
def agent(
    data_dir: Annotated[Path, typer.Option(
        help="Its replica (registry.db) and the socket the host's processes use")],
    region: Annotated[str, typer.Option(help="The host's region")],
    name: Annotated[str | None, typer.Option(help="Unique name (default: agent-HOSTNAME)")]
    = None,
    listen: Annotated[str, typer.Option(
        help="host:port where peers pull from it (mutual TLS)")] = "127.0.0.1:0",
    tls_dir: TlsDirOption = None,
    internal_tls: InternalTlsOption = "on",
    gossip_listen: GossipListenOption = None,
    join: JoinOption = None,
    keyring: GossipKeyring = None,
    ready_file: ReadyFileOption = None,
    exit_with_parent: ExitWithParentOption = False,
    log_level: LogLevelOption = "info",
) -> None:
    """Run a host's registry agent: it gossips and replicates the cluster's state once for
    the host; the host's workers, broker and proxy read its view and hand it their rows."""
    agent_name = name or f"agent-{hostinfo.hostname()}"
    host, port = hostinfo.split_host_port(listen, 0)
    gossip_host, gossip_port = hostinfo.split_host_port(gossip_listen or f"{host}:0", 0)
    keys = gossip_keyring(keyring)
    data = data_dir.resolve()
    tls_path = tls_dir_for(data, tls_dir, internal_tls, [host], "agent", agent_name)
    config = AgentConfig(RegistryConfig(
        name=agent_name, role="agent", region=region, data_dir=data,
        keyring=keys.keyring, keyring_file=keys.file, bind_host=gossip_host,
        bind_port=gossip_port, seeds=hostinfo.comma_list(join)),
        listen_host=host, listen_port=port)
    configure(log_level, f"agent[{agent_name}]")
    daemon_runtime()
    with listening(Listener("--listen", "TCP", port), Listener("--gossip-listen", "UDP",
                                                               gossip_port)):
        asyncio.run(_run(config, tls_path, ready_file, exit_with_parent))


async def _run(config: AgentConfig, tls_path: Path | None, ready_file: Path | None,
               exit_with_parent: bool) -> None:
    metrics = CollectorRegistry()  # the gossip's counters and the listener's refusals
    daemon = RegistryAgent(config, InternalTls(TlsDir(tls_path), metrics) if tls_path else None,
                           metrics)

    def ready() -> Ready:
        assert daemon.node is not None
        host, gport = daemon.node.gossip_addr
        return Ready(url=daemon.url, name=config.registry.name, region=config.registry.region,
                     gossip=f"{host}:{gport}")

    await run_daemon(daemon.start, lambda _cause: daemon.stop(),
                     exit_with_parent=exit_with_parent, ready_file=ready_file, ready=ready)
