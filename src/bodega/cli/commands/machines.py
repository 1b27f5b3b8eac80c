"""``bodega machine``: run, list, inspect, start, stop, destroy, exec, and ask why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.commands.core.standby_pairs import both_started, state_label
from bodega.cli.session.api import (
    ApiUrl,
    ContextName,
    Json,
    Token,
    call,
    env_pairs,
    readable_time,
    show_json,
    table,
)
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly, worded_in_flags

# The request, config and placement models load in the commands that send them: listing
# machines builds none of them.
if TYPE_CHECKING:
    from bodega.model.machine import Machine, MachineEvent
    from bodega.model.machine_config import MachineConfig
    from bodega.wire.public.machines_client import MachinesClient

machine = typer.Typer(help="Run and manage machines.", no_args_is_help=True)

Id = Annotated[str, typer.Argument(help="Machine ID")]


def machine_config(command: list[str], image: str, port: list[int], size: str | None,
                   cpus: int | None, memory: int | None, cpu_kind: str, env: list[str] | None,
                   restart: str | None, autostop: bool, standby_for: list[str] | None,
                   metadata: list[str] | None, isolation: str | None = None) -> MachineConfig:
    """The config the options describe, checked as the broker checks it (``checked``)."""
    from bodega.model.machine_config import MachineConfig, preset
    from bodega.wire.public.fly import checked

    kind, n, mem = preset(size) if size else (cpu_kind, 1, 256)
    return checked(MachineConfig, {
        "image": image,
        "guest": {"cpu_kind": kind, "cpus": n if cpus is None else cpus,
                  "memory_mb": mem if memory is None else memory,
                  **({"isolation": isolation} if isolation else {})},
        "init": {"exec": command} if command else None,
        "env": env_pairs(env) if env else None,
        "metadata": env_pairs(metadata) if metadata else None,
        "restart": {"policy": restart} if restart else None,
        "services": [{"protocol": "tcp", "internal_port": p, "autostart": True,
                      "autostop": "stop" if autostop else "off",
                      "ports": [{"port": 80, "handlers": ["http"]}]} for p in port] or None,
        "standbys": list(standby_for) if standby_for else None,
    }, "config")


@machine.command("run", context_settings={"allow_interspersed_args": False})
@friendly
def run(
    command: Annotated[list[str] | None, typer.Argument(help="Program and arguments to run")]
    = None,
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    image: Annotated[str, typer.Option(help="An OCI image naming its registry "
                                            "(host:port/app:tag) runs as an image; anything "
                                            "else labels the command")] = "process",
    region: Annotated[str | None, typer.Option(help="Region expression, e.g. ams or ams,syd")]
    = None,
    name: Annotated[str | None, typer.Option(help="Machine name")] = None,
    port: Annotated[list[int] | None, typer.Option(help="Internal port of an HTTP service")]
    = None,
    size: Annotated[str | None, typer.Option(help="Preset, e.g. shared-cpu-1x")] = None,
    cpus: Annotated[int | None, typer.Option(help="vCPUs")] = None,
    memory: Annotated[int | None, typer.Option(help="Memory in MB (multiple of 128)")] = None,
    cpu_kind: Annotated[str, typer.Option(help="shared or performance")] = "shared",
    isolation: Annotated[str | None, typer.Option(
        help="container (the default), sandbox (gVisor) or vm, for an image")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE")] = None,
    metadata: Annotated[list[str] | None, typer.Option(help="KEY=VALUE")] = None,
    restart: Annotated[str | None, typer.Option(help="no, always or on-failure")] = None,
    autostop: Annotated[bool, typer.Option(help="Let the proxy stop it when idle")] = False,
    standby_for: Annotated[list[str] | None, typer.Option(help="Machine IDs it stands by for")]
    = None,
    skip_start: Annotated[bool, typer.Option(help="Create it without starting it")] = False,
    detach: Annotated[bool, typer.Option(help="Do not wait for it to start")] = False,
    api_url: ApiUrl = None, token: Token = None,
    context: ContextName = None, json: Json = False,
) -> None:
    """Create a machine, placed by the broker, and wait until it has started."""
    from bodega.wire.public.fly import CreateMachineRequest, checked

    app = app_name(app, config)
    body = checked(CreateMachineRequest, {"config": machine_config(
        command or [], image, port or [], size, cpus, memory, cpu_kind, env, restart, autostop,
        standby_for, metadata, isolation), "skip_launch": skip_start, "region": region or None,
        "name": name or None})

    async def work(client: MachinesClient) -> Machine:
        created = await client.create_machine(app, body)
        if not (detach or skip_start):
            # Started, or come to rest some other way (a program that cannot run fails).
            await client.wait(app, created.id, "started,failed,stopped,destroyed", 60,
                              created.instance_id or None)
            created = await client.machine(app, created.id)
        return created

    created = call(api_url, token, work, context=context)
    if json:
        show_json(created)
        return
    if not (detach or skip_start) and created.state != "started":
        reason = created.trouble()
        raise ValueError(f"machine {created.id} is {created.state}, not started"
                         + (f": {reason}" if reason else "") +
                         f" (see `bodega machine events {created.id} --app {app}`)")
    typer.echo(f"Machine {created.id} ({created.name}) is {created.state} in "
               f"{created.region} at {created.private_ip or '-'}")


def _detail(event: MachineEvent) -> str:
    """Why the worker did it on its own (``host restarted``), and what the event says went
    wrong (its error, a failed run) or how its run ended."""
    exit_event = event.exit_event()
    said = event.trouble() or (exit_event.describe() if exit_event is not None else "")
    request = event.request
    moved = (f"from {request.moved_from} to {request.moved_to}"
             if request is not None and request.moved_to else "")
    return "; ".join(part for part in (moved, event.reason(), said) if part)


@machine.command("list")
@friendly
def list_machines(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                  all_: Annotated[bool, typer.Option(
                      "--all", help="Include destroyed machines")] = False,
                  quiet: Annotated[bool, typer.Option(
                      "--quiet", "-q", help="Only the machines' IDs, one a line")] = False,
                  api_url: ApiUrl = None, token: Token = None,
                  context: ContextName = None, json: Json = False) -> None:
    """List an app's machines."""
    app = app_name(app, config)
    params = {"include_deleted": "true"} if all_ else {}
    found = call(api_url, token, lambda c: c.machines(app, **params), context=context)
    if json:
        show_json(found)
        return
    if quiet:
        for m in found:
            typer.echo(m.id)
        return
    table(["ID", "NAME", "STATE", "REGION", "IMAGE", "IP", "UPDATED"],
          [(m.id, m.name, state_label(m), m.region, m.config.image if m.config else None,
            m.private_ip, m.updated_at) for m in found])
    for warning in both_started(found):
        typer.echo(warning)


@machine.command("status")
@friendly
def status(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
           api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
           json: Json = False) -> None:
    """Show a machine and its latest events."""
    app = app_name(app, config)
    m = call(api_url, token, lambda c: c.machine(app, machine_id), context=context)
    if json:
        show_json(m)
        return
    for key in ("id", "name", "state", "host_status", "region", "instance_id", "private_ip",
                "created_at", "updated_at"):
        typer.echo(f"{key:<12} {getattr(m, key) or ''}")
    if (trouble := m.trouble()) is not None:
        typer.echo(f"{'reason':<12} {trouble}")
    table(["TIMESTAMP", "TYPE", "STATUS", "SOURCE", "DETAIL"],
          [(readable_time(e.timestamp), e.type, e.status, e.source, _detail(e))
           for e in m.events or []],
          title="Events")


def _simple(action: str, verb: str) -> None:
    @machine.command(action, help=f"{verb.capitalize()} a machine.")
    @friendly
    def command(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                api_url: ApiUrl = None, token: Token = None,
                context: ContextName = None) -> None:
        app = app_name(app, config)
        call(api_url, token, lambda c: c.action(app, machine_id, action), context=context)
        typer.echo(f"Machine {machine_id}: {verb} requested")


@machine.command("start")
@friendly
def start(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
          move: Annotated[bool, typer.Option(
              "--move", help="With no room on its worker, move it with its volume's data "
                             "to another worker of its region")] = False,
          api_url: ApiUrl = None, token: Token = None, context: ContextName = None) -> None:
    """Start a machine (with no room on its worker, one without a volume starts on another
    worker of its region; --move lets one with a volume go too, its data with it)."""
    app = app_name(app, config)
    params = {"move": "true"} if move else {}
    call(api_url, token, lambda c: c.action(app, machine_id, "start", **params),
         context=context)
    typer.echo(f"Machine {machine_id}: start requested")


_simple("restart", "restart")
_simple("suspend", "suspend")  # freeze it, memory kept; `start` resumes it
_simple("cordon", "cordon")
_simple("uncordon", "uncordon")


@machine.command("stop")
@friendly
def stop(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         signal: Annotated[str | None, typer.Option(help="Signal first, e.g. SIGTERM")] = None,
         timeout: Annotated[str | None, typer.Option(help="Then SIGKILL after, e.g. 10s")] = None,
         api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None) -> None:
    """Stop a machine."""
    app = app_name(app, config)
    call(api_url, token, lambda c: c.stop(app, machine_id, signal or None, timeout or None),
         context=context)
    typer.echo(f"Machine {machine_id}: stop requested")


@machine.command("move")
@friendly
def move(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         to: Annotated[str | None, typer.Option("--to", help="The worker to move it to")] = None,
         region: Annotated[str | None, typer.Option(
             help="Any other worker of this region (default: its own region)")] = None,
         reason: Annotated[str | None, typer.Option(help="Why, kept in its events")] = None,
         api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
         json: Json = False) -> None:
    """Move a machine to another worker: the same id, config, metadata and events; a running
    machine is stopped (its stop_config honoured) and started there.

    bodega machine move ID --to WORKER | --region R [-a APP]
    """
    if to is not None and region is not None:
        raise typer.BadParameter("give --to or --region, not both")
    app = app_name(app, config)
    moved = call(api_url, token, lambda c: c.move(app, machine_id, worker=to, region=region,
                                                  reason=reason), context=context)
    if json:
        show_json(moved)
        return
    where = f"worker {to}" if to is not None else f"another worker of {moved.region}"
    typer.echo(f"Machine {machine_id}: moved to {where} ({moved.state})")


@machine.command("destroy")
@friendly
def destroy(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
            force: Annotated[bool, typer.Option(help="Kill it if it is running")] = False,
            api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None) -> None:
    """Destroy a machine."""
    app = app_name(app, config)
    with worded_in_flags({"force=true": "--force"}):
        call(api_url, token, lambda c: c.destroy(app, machine_id, force), context=context)
    typer.echo(f"Machine {machine_id}: destroy requested")


# Options anywhere before ``--``; everything after it is the command, its own options
# included (``bodega machine exec ID -a web -- ls -la``), as kubectl exec reads it.
@machine.command("exec")
@friendly
def exec_cmd(machine_id: Id, command: Annotated[list[str], typer.Argument(
                 help="The command and its arguments, after --")],
             app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
             timeout: Annotated[int, typer.Option(help="Seconds")] = 30,
             api_url: ApiUrl = None, token: Token = None,
             context: ContextName = None) -> None:
    """Run a command where a machine's program runs, and print its output.

    bodega machine exec ID [-a APP] -- COMMAND [ARGS...]
    """
    app = app_name(app, config)
    result = call(api_url, token, lambda c: c.exec(app, machine_id, command, timeout),
                  context=context)
    typer.echo(result.stdout, nl=False)
    typer.echo(result.stderr, nl=False, err=True)
    raise typer.Exit(result.exit_code)


@machine.command("events")
@friendly
def events(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
           api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
           json: Json = False) -> None:
    """A machine's events, newest first."""
    app = app_name(app, config)
    found = call(api_url, token, lambda c: c.events(app, machine_id, limit=50),
                 context=context)
    if json:
        show_json(found)
        return
    table(["TIMESTAMP", "TYPE", "STATUS", "SOURCE", "DETAIL"],
          [(readable_time(e.timestamp), e.type, e.status, e.source, _detail(e))
           for e in found])


@machine.command("explain")
@friendly
def explain(machine_id: Id, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
            api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
            json: Json = False) -> None:
    """Why the broker placed a machine where it is."""
    app = app_name(app, config)
    record = call(api_url, token, lambda c: c.placement(app, machine_id), context=context)
    if json:
        show_json(record)
        return
    from bodega.cli.commands.placement_report import show_record

    show_record(record)


@machine.command("place")
@friendly
def place(app: Annotated[str | None, typer.Option("--app", "-a", help="App (co-location "
                                                   "counts)")] = None,
          region: Annotated[str, typer.Option(help="Region expression")] = "any",
          size: Annotated[str, typer.Option(help="Preset size")] = "shared-cpu-1x",
          count: Annotated[int, typer.Option(help="Machines to place")] = 1,
          image: Annotated[str | None, typer.Option(
              help="The machines' image: one naming a registry goes only where images run, "
                   "and one a worker holds counts in its favour")] = None,
          explain_: Annotated[bool, typer.Option("--explain", help="Show the ranking")] = False,
          api_url: ApiUrl = None, token: Token = None,
          context: ContextName = None, json: Json = False) -> None:
    """Where machines would go, without creating anything."""
    from bodega.cli.commands.placement_report import show_region
    from bodega.model.machine_config import preset
    from bodega.wire.public.fly import PlacementsRequest, checked

    kind, cpus, memory = preset(size)
    body = checked(PlacementsRequest, {
        "org_slug": "personal", "region": region, "count": count,
        "compute": {"cpu_kind": kind, "cpus": cpus, "memory_mb": memory},
        "explain": explain_, "app": app or None, "image": image})
    result = call(api_url, token, lambda c: c.placements(body), context=context)
    if json:
        show_json(result)
        return
    table(["REGION", "COUNT", "HOSTS"],
          [(r.region, r.count, r.concurrency) for r in result.regions])
    for region_record in result.explain or []:
        show_region(region_record)
