"""``bodega port-forward``: a local TCP port carried to a port of one of an app's machines.

flyctl's ``fly proxy 5432 -a db``: it listens on the user's host (``--bind-addr``,
127.0.0.1 by default), and each connection accepted there is carried to port REMOTE
(LOCAL unless given) of one machine of the app (``--machine``, else a started one),
through the cluster's public API alone: a WebSocket to the broker's
``/v1/apps/{app}/machines/{id}/forward``, which the broker relays to the machine's
worker, which connects to the machine (docs/cli.md, "port-forward"). So it works from
a laptop that reaches only the broker's API. A connection the machine refuses, or one
that fails on the way, is closed and said in one line; the command runs on until
Ctrl-C.

The choices (the ports, the machine) and the lines said are pure functions, first; the
listener and the relay of each connection (``wire/transport/forward_link.py``) after them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Token, call_target, target, token_of
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly

if TYPE_CHECKING:
    from bodega.model.machine import Machine
    from bodega.wire.public.machines_client import MachinesClient

LINK_TIMEOUT = 30.0  # seconds for the broker's answer: it waits on the worker, which connects
PORTS_HELP = "LOCAL or LOCAL:REMOTE, ports from 1 to 65535 (LOCAL may be 0: any free port)"


# -- pure: what to forward, to which machine, and what is said ---------------------------
@dataclass(frozen=True)
class Ports:
    local: int  # 0: a free port the system picks
    remote: int


def parse_ports(text: str) -> Ports:
    """``LOCAL[:REMOTE]``: ``5432`` is 5432 to 5432, ``15432:5432`` 15432 to 5432."""
    local_text, colon, remote_text = text.strip().partition(":")
    local = _port(local_text, 0)
    remote = _port(remote_text, 1) if colon else local
    if local is None or remote is None or remote == 0:
        raise ValueError(f"port-forward takes {PORTS_HELP}; got {text!r}")
    return Ports(local, remote)


def _port(text: str, lowest: int) -> int | None:
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    number = int(text)
    return number if lowest <= number <= 65535 else None


def choose_machine(machines: Sequence[Machine], app: str) -> Machine:
    """The machine a forward goes to when none is named: the app's oldest started one."""
    started = [m for m in machines if m.state == "started"]
    if not started:
        states = ", ".join(sorted({m.state for m in machines})) or "none"
        raise ValueError(f"app {app} has no started machine (its machines: {states}); start "
                         "one, or name one with --machine")
    return min(started, key=lambda m: (m.created_at, m.id))


def check_named(machine: Machine) -> Machine:
    """A machine named with ``--machine``: any but a destroyed one (a stopped one may be
    started while the command runs; until then each connection is refused, and said)."""
    if machine.state == "destroyed":
        raise ValueError(f"machine {machine.id} is destroyed")
    return machine


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def proxying_line(listening: str, machine: Machine, remote: int, app: str) -> str:
    private = f" ({machine.private_ip})" if machine.private_ip else ""
    return f"Proxying {listening} to machine {machine.id}{private} port {remote} of app {app}"


def failed_line(client: str, why: str) -> str:
    """The one line said for a connection that was refused or failed."""
    return f"connection from {client} closed: {why}"


# -- the shell ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Forward:
    app: str
    machine: str | None  # named with --machine
    ports: Ports
    bind: str
    api_url: str
    token: str


async def run(client: MachinesClient, plan: Forward) -> None:
    """Listen, and carry each connection until the command is stopped."""
    from bodega.model.errors import BodegaError
    from bodega.wire.transport.forward_link import LinkEnd, StreamEnd, open_link, relay, socket_url

    if plan.machine:
        machine = check_named(await client.machine(plan.app, plan.machine))
    else:
        machine = choose_machine(await client.machines(plan.app), plan.app)
    url = socket_url(plan.api_url, f"/v1/apps/{plan.app}/machines/{machine.id}/forward",
                     [("port", str(plan.ports.remote))])
    headers = {"authorization": f"Bearer {plan.token}"}

    async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client_at = address(str(peer[0]), int(peer[1])) if peer else "a client"
        try:
            async with open_link(url, what=f"the bodega API at {plan.api_url}",
                                 headers=headers, timeout=LINK_TIMEOUT) as link:
                finish = await relay(StreamEnd(reader, writer, f"the connection from {client_at}"),
                                     LinkEnd(link, "the broker"))
            if finish.failed:
                say(failed_line(client_at, finish.reason))
        except BodegaError as err:
            say(failed_line(client_at, err.message))
        finally:
            if not writer.is_closing():  # refused, or cancelled: the client sees a reset
                writer.transport.abort()

    server = await asyncio.start_server(carry, plan.bind, plan.ports.local)
    host, port = server.sockets[0].getsockname()[:2]
    typer.echo(proxying_line(address(str(host), int(port)), machine, plan.ports.remote,
                             plan.app))
    async with server:
        await server.serve_forever()


def say(line: str) -> None:
    typer.echo(line, err=True)


@friendly
def port_forward(
    ports: Annotated[str, typer.Argument(metavar="LOCAL[:REMOTE]", help=PORTS_HELP)],
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    machine: Annotated[str | None, typer.Option(
        "--machine", help="The machine's ID (default: a started machine of the app)")] = None,
    bind_addr: Annotated[str, typer.Option(
        "--bind-addr", help="The local address to listen on")] = "127.0.0.1",
    api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
) -> None:
    """Forward a local TCP port to a port of an app's machine, through the API."""
    chosen_ports = parse_ports(ports)
    app = app_name(app, config)
    chosen = target(api_url, token, context)
    plan = Forward(app=app, machine=machine, ports=chosen_ports, bind=bind_addr,
                   api_url=chosen.api_url, token=token_of(chosen))
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it ends
        call_target(chosen, lambda client: run(client, plan))
