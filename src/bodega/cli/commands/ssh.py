"""``bodega ssh console``: a terminal in one of an app's machines, as flyctl's ``fly ssh console``.

``bodega ssh console -a APP [--machine ID | -s] [-C CMD]`` runs CMD (else the
machine's shell) on a terminal in the machine, where ``machine exec`` runs a command
(its namespaces, cgroups, user, environment and directory), through the cluster's
public API alone: a WebSocket to the broker's ``/v1/apps/{app}/machines/{id}/console``,
relayed to the machine's worker, which starts the program on a pseudo-terminal
(docs/cli.md, "ssh console"). The user's terminal goes raw while it runs, so every
key reaches the program as typed (Ctrl-C too: the far terminal makes it SIGINT);
its size is sent at the start and on each SIGWINCH; the command exits with the
program's exit code.

The choices (the command, the machine) and the messages are pure functions, first;
the session after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import termios
import tty
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.commands.port_forward import choose_machine
from bodega.cli.session.api import ApiUrl, ContextName, Token, call_target, target, token_of
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.model.console import DEFAULT_COLS, DEFAULT_ROWS, ClientControl, TerminalSize

if TYPE_CHECKING:
    from bodega.model.machine import Machine
    from bodega.wire.public.machines_client import MachinesClient

LINK_TIMEOUT = 30.0  # seconds for the broker's answer: the worker starts the program first
READ_CHUNK = 4096

ssh = typer.Typer(help="Open a terminal in an app's machine (fly ssh).", no_args_is_help=True)


# -- pure: what runs, where, and the messages -----------------------------------------------
def parse_command(text: str | None) -> list[str]:
    """``-C``'s command as an argv (split as a shell would, nothing expanded); [] without
    one: the machine's shell."""
    if text is None:
        return []
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"--command {text!r}: {exc}") from None
    if not argv:
        raise ValueError("--command is empty; leave it out for the machine's shell")
    return argv


def selection_lines(machines: Sequence[Machine]) -> list[str]:
    """The numbered list ``-s`` shows, one started machine a line."""
    return [f"{number:>3}. {m.id}  {m.name}  {m.region}  {m.private_ip or '-'}"
            for number, m in enumerate(machines, start=1)]


def started_machines(machines: Sequence[Machine], app: str) -> list[Machine]:
    """An app's started machines, oldest first, for ``-s`` to list."""
    started = sorted((m for m in machines if m.state == "started"),
                     key=lambda m: (m.created_at, m.id))
    if not started:
        choose_machine(machines, app)  # raises, saying which states the app's machines are in
    return started


def pick(machines: Sequence[Machine], answer: str) -> Machine:
    """The machine the user's answer (its number in the list, or its id) names."""
    text = answer.strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= len(machines):
        return machines[int(text) - 1]
    for machine in machines:
        if machine.id == text:
            return machine
    raise ValueError(f"no machine {text!r} in the list: give a number from 1 to "
                     f"{len(machines)}")


def console_query(command: Sequence[str], size: TerminalSize) -> list[tuple[str, str]]:
    """The upgrade's query: the first size, and the command, one ``command`` an argument."""
    return [("rows", str(size.rows)), ("cols", str(size.cols)),
            *(("command", part) for part in command)]


def resize_message(size: TerminalSize) -> str:
    return ClientControl(resize=size).model_dump_json()


# -- the shell ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Console:
    app: str
    machine: str | None  # named with --machine
    select: bool
    command: list[str]
    api_url: str
    token: str


def size_of(fd: int) -> TerminalSize:
    """The size of the terminal on ``fd`` (24 by 80 when it is not one)."""
    try:
        columns, lines = os.get_terminal_size(fd)
    except OSError:
        return TerminalSize(rows=DEFAULT_ROWS, cols=DEFAULT_COLS)
    return TerminalSize(rows=lines or DEFAULT_ROWS, cols=columns or DEFAULT_COLS)


@contextlib.contextmanager
def raw(fd: int) -> Iterator[None]:
    """The terminal on ``fd`` raw (every key as typed, no echo, no signals) until the way
    out, however it is left; nothing is done to one that is not a terminal."""
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSADRAIN)  # not TCSAFLUSH: keys typed ahead are kept
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def choose(client: MachinesClient, plan: Console) -> str:
    if plan.machine:
        return plan.machine
    machines = await client.machines(plan.app)
    if not plan.select:
        return choose_machine(machines, plan.app).id
    started = started_machines(machines, plan.app)
    for line in selection_lines(started):
        typer.echo(line, err=True)
    typer.echo(f"Select a machine [1-{len(started)}]: ", err=True, nl=False)
    answer = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return pick(started, answer).id


async def run(client: MachinesClient, plan: Console) -> int:
    """The console's session; the program's exit code."""
    from websockets.exceptions import ConnectionClosed

    from bodega.model.console import server_control
    from bodega.wire.transport.forward_link import open_link, socket_url

    machine_id = await choose(client, plan)
    keyboard, screen = sys.stdin.fileno(), sys.stdout.fileno()
    url = socket_url(plan.api_url, f"/v1/apps/{plan.app}/machines/{machine_id}/console",
                     console_query(plan.command, size_of(keyboard)))
    headers = {"authorization": f"Bearer {plan.token}"}
    async with open_link(url, what=f"the bodega API at {plan.api_url}", headers=headers,
                         timeout=LINK_TIMEOUT) as link:
        loop = asyncio.get_running_loop()
        outgoing: asyncio.Queue[bytes | str] = asyncio.Queue()

        def typed() -> None:
            try:
                data = os.read(keyboard, READ_CHUNK)
            except OSError:
                data = b""
            if data:
                outgoing.put_nowait(data)
            else:  # the keyboard's end: nothing more to type
                loop.remove_reader(keyboard)

        async def send() -> None:
            while True:
                await link.send(await outgoing.get())

        code: int | None = None
        with raw(keyboard):
            loop.add_reader(keyboard, typed)
            if os.isatty(keyboard):
                loop.add_signal_handler(signal.SIGWINCH, lambda: outgoing.put_nowait(
                    resize_message(size_of(keyboard))))
            sending = asyncio.create_task(send())
            try:
                async for message in link:
                    if isinstance(message, str):
                        code = server_control(message).exit
                    else:
                        write_all(screen, bytes(message))
            except ConnectionClosed:
                pass
            finally:
                loop.remove_reader(keyboard)
                loop.remove_signal_handler(signal.SIGWINCH)
                sending.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                    await sending
        if code is None:
            why = link.close_reason or "the link was lost"
            raise ValueError(f"the console ended before its program did: {why}")
        return code


@ssh.command("console")
@friendly
def console(
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    machine: Annotated[str | None, typer.Option(
        "--machine", help="The machine's ID (default: a started machine of the app)")] = None,
    select: Annotated[bool, typer.Option(
        "--select", "-s", help="Pick the machine from a list of the app's started ones")] = False,
    command: Annotated[str | None, typer.Option(
        "--command", "-C", help="The command to run (default: the machine's shell)")] = None,
    api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
) -> None:
    """Open a terminal in a machine of the app, running its shell or a command."""
    argv = parse_command(command)
    app = app_name(app, config)
    chosen = target(api_url, token, context)
    plan = Console(app=app, machine=machine, select=select, command=argv,
                   api_url=chosen.api_url, token=token_of(chosen))
    code = call_target(chosen, lambda client: run(client, plan))
    raise typer.Exit(code)
