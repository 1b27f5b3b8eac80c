"""What ``bodega up`` prints once its cluster is up: its components, where the API, the proxy,
the dashboard and the metrics answer, how links are secured, how another host joins, and
the CLI context it registered."""

from __future__ import annotations

from pathlib import Path

import typer

from bodega.cli.session.core.contexts import Registered
from bodega.cluster.cluster_keys import JOIN_TOKEN
from bodega.cluster.config import ClusterConfig
from bodega.cluster.edge_files import CA_CRT
from bodega.cluster.supervisor import LocalCluster
from bodega.runtime.tls.core.identity import fingerprint
from bodega.wire.internal.join import JOIN_PORT


def entry_lines(config: ClusterConfig) -> list[str]:
    """Where the API and the proxy answer. ``<app>.localhost`` names 127.0.0.1, so with
    --advertise (where they listen on that address only) a request must go to the address
    and name the app otherwise: a Host header, or curl's --resolve for TLS (SNI)."""
    api = f"Machines API: http://{config.host}:{config.api_port}/v1"
    ca = config.data_dir / CA_CRT
    tls = config.proxy_tls_port and config.proxy_tls_cert is not None
    if config.advertise is None:
        lines = [f"{api}   Proxy: http://<app>.localhost:{config.proxy_port}/"]
        if tls:
            lines.append(f"HTTPS: https://<app>.localhost:{config.proxy_tls_port}/ (trust the "
                         f"cluster CA: curl --cacert {ca})")
        return lines
    where = config.advertise
    lines = [f"{api}   Proxy: http://{where}:{config.proxy_port}/ with Host: <app>.localhost "
             f"(curl -H 'Host: <app>.localhost' http://{where}:{config.proxy_port}/)"]
    if tls:
        port = config.proxy_tls_port
        lines.append(f"HTTPS: https://<app>.localhost:{port}/ at {where} (curl --resolve "
                     f"<app>.localhost:{port}:{where} --cacert {ca} "
                     f"https://<app>.localhost:{port}/)")
    return lines


def banner(cluster: LocalCluster, config: ClusterConfig, print_token: bool,
            registered: Registered | None = None, contexts_file: Path | None = None,
            network_lines: list[str] | tuple[str, ...] = ()) -> None:
    typer.echo(f"bodega is up: {len(cluster.components)} components, "
               f"state in {cluster.state_file}")
    for component in cluster.components:
        typer.echo(f"  {component.role:<7} {component.name:<10} {component.region:<5} "
                   f"{component.url}")
    if print_token:
        typer.echo(f"API token: {config.token}  (also in {config.data_dir / 'api-token'})")
    for line in entry_lines(config):
        typer.echo(line)
    if cluster.authority is not None:
        typer.echo(f"Internal links: mutual TLS, cluster CA "
                   f"{fingerprint(cluster.authority.cert)} ({config.data_dir / 'tls' / 'ca.pem'})")
    else:
        typer.echo("Internal links: PLAIN HTTP, unauthenticated (--internal-tls off: for "
                   "measurement only)")
    typer.echo(f"Dashboard: http://{config.host}:{config.api_port}/ui/  (sign in with the API "
               "token)")
    if config.metrics_store:
        typer.echo(f"Metrics: PromQL at http://{config.host}:{config.api_port}/prometheus/"
                   "<org>/api/v1/query (the API token); `bodega metrics -a APP`")
    for line in network_lines:
        typer.echo(line)
    if config.advertise is not None:
        where = config.advertise if config.join_port == JOIN_PORT else \
            f"{config.advertise}:{config.join_port}"
        token = (config.data_dir / JOIN_TOKEN).read_text().strip()
        typer.echo(f"Join another host (token valid 24h, in {config.data_dir / JOIN_TOKEN}):")
        typer.echo(f"  bodega join {where} --token {token} --region <REGION>")
    if registered is not None:
        name = registered.context.name
        if registered.current:
            typer.echo(f"CLI context: {name}, the current one (kept in {contexts_file}): "
                       "`bodega` commands talk to this cluster")
        else:
            typer.echo(f"CLI context: {name} (kept in {contexts_file}); the current one is "
                       f"{registered.contexts.current}: reach this cluster with "
                       f"`bodega apps list --context {name}`, or `bodega context use {name}`")
    typer.echo("Press Ctrl-C to stop.")
