"""``bodega join ADDR --token T --region R``: run this host's workers in a cluster elsewhere.

The first time on a data dir it joins (``cluster/joining.py``: the CA checked
against the token's pin before anything is sent, CSRs out, certificates and
the gossip keyring back); after that it starts the same workers again with
the identity they keep, and needs no token. Either way it runs them in the
foreground as ``bodega up`` runs its own: Ctrl-C stops them and their
machines; a worker that crashes is restarted and re-adopts its machines.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.errors import fail, friendly
from bodega.cli.up import _unless_stopped
from bodega.cluster import host_network, ports
from bodega.cluster.config import ClusterConfig
from bodega.cluster.data_dir_lock import DataDirLock
from bodega.cluster.joined import JOIN_LOCK, JoinedHost, joined_components
from bodega.cluster.joining import JoinFailed
from bodega.cluster.joining import join as join_cluster
from bodega.cluster.port_claims import PortClaims
from bodega.cluster.supervisor import LocalCluster, StartFailed
from bodega.runtime import hostinfo
from bodega.runtime.lifecycle import until_stopped
from bodega.runtime.logs import configure
from bodega.runtime.waits import within
from bodega.wire.join import JOIN_PORT

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
    log_level: Annotated[str, typer.Option()] = "info",
) -> None:
    """Join a cluster and run this host's workers until Ctrl-C."""
    data_dir = data_dir.resolve()
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
            joined = asyncio.run(join_cluster(data_dir, host, port, token, region, workers,
                                              mine))
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
        names = [w.name for w in joined.workers]
        if joined.registry_agent and joined.agent:
            names = [joined.agent, *names]
        plan = ports.choose_gossip(data_dir, joined.advertise, names, None, claims)
        sizes = (*(("--cpus", str(cpus)) if cpus else ()),
                 *(("--memory-mb", str(memory_mb)) if memory_mb else ()))
        components = joined_components(joined, data_dir, plan.ports, driver=driver,
                                       log_level=log_level, extra_worker_args=sizes)
        config = ClusterConfig(data_dir=data_dir, token="", secrets_key=_read(data_dir),
                               cluster_id=joined.cluster_id, regions=(joined.region,),
                               host=joined.advertise, driver=driver, log_level=log_level,
                               registry_agent=bool(joined.registry_agent and joined.agent))
        configure(log_level, "join")
        lock.started()
        network_lines = host_network.banner(
            on=joined.private_network, cluster_id=joined.cluster_id,
            subnets=[w.subnet for w in joined.workers if w.subnet],
            wireguard_ports=[joined.wireguard_port + i for i in range(len(joined.workers))],
            changes=changes, unable_why=None)
        asyncio.run(_run(LocalCluster(config, components, sweep_kernel=False), joined,
                         network_lines))
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


def _read(data_dir: Path) -> str:
    try:
        return (data_dir / "secrets-key").read_text().strip()
    except FileNotFoundError:
        return ""


async def _run(cluster: LocalCluster, joined: JoinedHost, network_lines: list[str]) -> None:
    stop = asyncio.create_task(until_stopped())
    try:
        started, _ = await _unless_stopped(cluster.start(), stop)
        if started:
            typer.echo(f"bodega joined: {len(cluster.components)} workers in "
                       f"{joined.region}, serving on {joined.advertise}, Machines API "
                       f"{joined.api_url}; pid {os.getpid()}")
            for line in network_lines:
                typer.echo(line)
            if joined.private_network:
                typer.echo(f"  Flycast through "
                           f"{joined.proxy or 'no proxy (none was told at the join)'}")
            for component in cluster.components:
                typer.echo(f"  worker  {component.name:<16} {component.url}")
            typer.echo("Press Ctrl-C to stop.")
            await stop
    finally:
        stop.cancel()
        typer.echo("stopping...")
        await cluster.stop()
