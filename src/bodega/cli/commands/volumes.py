"""``bodega volumes``: an app's volumes, as ``fly volumes`` manages them.

A volume is a slice of one worker's disk; a machine that mounts it runs on that
worker. ``create``, ``list``, ``show``, ``extend``, ``fork`` and ``destroy`` call
the Machines API's ``/v1/apps/{app}/volumes`` routes, ``snapshots list|create``
its ``.../snapshots``. A fork and a volume made from a snapshot go to any host of
their region, which fetches the snapshot from a host holding it (docs/volumes.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly, worded_in_flags

# The answer and request models load in the commands that read or send them.
if TYPE_CHECKING:
    from bodega.model.volume import ExtendVolumeAnswer, Volume, VolumeSnapshot
    from bodega.wire.public.machines_client import MachinesClient

volumes = typer.Typer(help="Manage an app's volumes and their snapshots.", no_args_is_help=True)
snapshots = typer.Typer(help="List a volume's snapshots, or take one.", no_args_is_help=True)
volumes.add_typer(snapshots, name="snapshots")

VolumeId = Annotated[str, typer.Argument(help="The volume's ID (vol_...)")]
Region = Annotated[str | None, typer.Option("--region", "-r", show_default=False,
                                            help="Region (default: the cluster's)")]

VOLUME_COLUMNS = ("ID", "STATE", "NAME", "SIZE", "REGION", "ZONE", "ENCRYPTED", "ATTACHED VM",
                  "CREATED AT")
# flyctl's columns, then bodega's: the workers holding it (a lone one: local-only).
SNAPSHOT_COLUMNS = ("ID", "STATUS", "STORED SIZE", "VOL SIZE", "CREATED AT", "RETENTION DAYS",
                    "HELD ON")
# The API names the size by its field; a command passes that on naming its flag.
SIZE_FLAG = {"size_gb": "--size"}
UNREACHABLE_NOTE = "* these volumes' hosts cannot be reached: they may have changed since"


# -- what is shown ------------------------------------------------------------------------
def true_false(value: bool | None) -> str:
    return "" if value is None else str(value).lower()


def volume_rows(found: Sequence[Volume]) -> list[tuple[str, ...]]:
    """One row a volume; an ID marked ``*`` is on a host membership cannot reach."""
    return [(v.id + ("*" if v.host_status == "unreachable" else ""), v.state, v.name,
             f"{v.size_gb}GB", v.region, v.zone, true_false(v.encrypted),
             v.attached_machine_id or "", v.created_at) for v in found]


def volume_lines(volume: Volume, app: str) -> list[str]:
    """A volume as ``show`` (and create, extend, fork) print it, one field a line."""
    fields = [("ID", volume.id), ("Name", volume.name), ("App", app), ("State", volume.state),
              ("Region", volume.region), ("Zone", volume.zone),
              ("Size GB", str(volume.size_gb)), ("Encrypted", true_false(volume.encrypted)),
              ("Attached VM", volume.attached_machine_id or ""),
              ("Created at", volume.created_at),
              ("Snapshot retention", "" if volume.snapshot_retention is None
               else f"{volume.snapshot_retention} days"),
              ("Scheduled snapshots", true_false(volume.auto_backup_enabled))]
    if volume.host_status:
        fields.append(("Host status", volume.host_status))
    return [f"{label + ':':<21}{value}".rstrip() for label, value in fields]


def target_size(given: str, current: int | None = None) -> int:
    """The size in GB ``extend --size`` asks for: ``N`` (or ``NGB``), or ``+N`` more than
    ``current``."""
    text = given.strip().lower().removesuffix("gb").removesuffix("g").strip()
    grow = text.startswith("+")
    number = text.removeprefix("+")
    if not (number.isascii() and number.isdigit()) or int(number) == 0:
        raise ValueError(f"--size takes a whole number of GB, or +N to grow by N: got {given!r}")
    if grow:
        if current is None:
            raise ValueError("--size +N needs the volume's current size")
        return current + int(number)
    return int(number)


def restart_line(extended: ExtendVolumeAnswer, app: str) -> str:
    """What the user does next: restart the machine mounting the volume, or nothing."""
    machine = extended.volume.attached_machine_id
    if extended.needs_restart and machine:
        return (f"Machine {machine} mounts this volume: restart it (`bodega machine restart "
                f"{machine} -a {app}`) for its file system to see the new size")
    if extended.needs_restart:
        return "The machine mounting this volume needs a restart to see the new size"
    return "No machine needs a restart: the new size is there now"


def in_bytes(count: int) -> str:
    """A byte count in powers of 1024, as ``fly volumes snapshots list`` shows sizes."""
    value, unit = float(count), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    if unit == "B":
        return f"{count} B"
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


def snapshot_rows(found: Sequence[VolumeSnapshot]) -> list[tuple[str, ...]]:
    return [(s.id or "(pending)", s.status, in_bytes(s.size),
             in_bytes(s.volume_size * 1024 ** 3), s.created_at, str(s.retention_days),
             held_on(s)) for s in found]


def held_on(snapshot: VolumeSnapshot) -> str:
    holders = snapshot.holders or []
    if not holders:
        return ""
    return ",".join(holders) + ("" if snapshot.off_host else " (local only)")


def _echo_volume(volume: Volume, app: str) -> None:
    for line in volume_lines(volume, app):
        typer.echo(line)


# -- the commands ---------------------------------------------------------------------------
@volumes.command("list")
@friendly
def list_volumes(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                 all_: Annotated[bool, typer.Option(
                     "--all", help="Include destroyed volumes")] = False,
                 api_url: ApiUrl = None, token: Token = None,
                 context: ContextName = None, json: Json = False) -> None:
    """List an app's volumes."""
    app = app_name(app, config)
    found = call(api_url, token, lambda c: c.volumes(app, include_deleted=all_),
                 context=context)
    if json:
        show_json(found)
        return
    table(VOLUME_COLUMNS, volume_rows(found))
    if any(v.host_status == "unreachable" for v in found):
        typer.echo(UNREACHABLE_NOTE)


@volumes.command("create")
@friendly
def create(name: Annotated[str, typer.Argument(help="The volume's name (a-z, 0-9, _)")],
           app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
           region: Region = None,
           size: Annotated[int | None, typer.Option(
               "--size", "-s", show_default=False,
               help="Size in GB (default: 1, or the snapshot's size)")] = None,
           snapshot_id: Annotated[str | None, typer.Option(
               "--snapshot-id", show_default=False,
               help="Make it a copy of this snapshot (fetched from a host holding it)")]
           = None,
           unique_zone: Annotated[bool, typer.Option(
               "--require-unique-zone/--no-require-unique-zone",
               help="Put it on a host holding no other volume of this name")] = True,
           scheduled: Annotated[bool, typer.Option(
               "--scheduled-snapshots/--no-scheduled-snapshots",
               help="Take a snapshot of it every day, kept on its host and another")] = True,
           retention: Annotated[int | None, typer.Option(
               "--snapshot-retention", show_default=False,
               help="Days its snapshots are kept (default: 5)")] = None,
           api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None, json: Json = False) -> None:
    """Create a volume for an app."""
    from bodega.wire.public.fly import CreateVolumeRequest, checked

    app = app_name(app, config)
    # Only what was given: an unsent size is the broker's (1 GB, or the snapshot's size).
    given = {"name": name, "region": region, "size_gb": size, "snapshot_id": snapshot_id,
             "require_unique_zone": unique_zone, "auto_backup_enabled": scheduled,
             "snapshot_retention": retention}
    with worded_in_flags({**SIZE_FLAG, "snapshot_retention": "--snapshot-retention"}):
        body = checked(CreateVolumeRequest, {k: v for k, v in given.items() if v is not None})
        made = call(api_url, token, lambda c: c.create_volume(app, body), context=context)
    if json:
        show_json(made)
        return
    _echo_volume(made, app)


@volumes.command("show")
@friendly
def show(volume_id: VolumeId, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None, json: Json = False) -> None:
    """Show a volume."""
    app = app_name(app, config)
    found = call(api_url, token, lambda c: c.volume(app, volume_id), context=context)
    if json:
        show_json(found)
        return
    _echo_volume(found, app)


@volumes.command("extend")
@friendly
def extend(volume_id: VolumeId,
           size: Annotated[str, typer.Option(
               "--size", "-s", show_default=False,
               help="The new size in GB, or +N to grow it by N GB")],
           app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
           api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None, json: Json = False) -> None:
    """Grow a volume; says whether the machine mounting it needs a restart."""
    app = app_name(app, config)
    target_size(size, 0)  # a wrong --size is told before anything is called

    async def work(c: MachinesClient) -> ExtendVolumeAnswer:
        current = (await c.volume(app, volume_id)).size_gb if "+" in size else None
        return await c.extend_volume(app, volume_id, target_size(size, current))

    with worded_in_flags(SIZE_FLAG):
        extended = call(api_url, token, work, context=context)
    if json:
        show_json(extended)
        return
    _echo_volume(extended.volume, app)
    typer.echo(restart_line(extended, app))


@volumes.command("fork")
@friendly
def fork(volume_id: VolumeId, app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         name: Annotated[str | None, typer.Option(
             "--name", "-n", show_default=False,
             help="The new volume's name (default: the source's)")] = None,
         region: Annotated[str | None, typer.Option(
             "--region", "-r", show_default=False,
             help="Region (default: the source's; any host there, the data sent to it)")
         ] = None,
         api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None, json: Json = False) -> None:
    """Make a new volume holding a copy of a volume's data."""
    from bodega.wire.public.fly import CreateVolumeRequest, checked

    app = app_name(app, config)

    async def work(c: MachinesClient) -> Volume:
        chosen = name or (await c.volume(app, volume_id)).name
        # The copy may be placed on the source's host, which holds a volume of the source's
        # name (the source): asked to keep same-named volumes apart, that host could not be.
        given = {"name": chosen, "region": region, "require_unique_zone": False}
        body = checked(CreateVolumeRequest, {k: v for k, v in given.items() if v is not None})
        return await c.fork_volume(app, volume_id, body)

    made = call(api_url, token, work, context=context)
    if json:
        show_json(made)
        return
    _echo_volume(made, app)


@volumes.command("destroy")
@friendly
def destroy(volume_ids: Annotated[list[str], typer.Argument(help="The volumes' IDs (vol_...)")],
            app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
            yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask")] = False,
            api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None) -> None:
    """Destroy volumes and the data on them; a volume a machine mounts is refused."""
    app = app_name(app, config)
    if not yes and not sys.stdin.isatty():
        raise ValueError("destroying a volume deletes its data: pass --yes to confirm "
                         "(there is no terminal to ask on)")

    async def work(c: MachinesClient) -> None:
        for volume_id in volume_ids:
            if not yes:  # the prompt blocks the loop: this command has nothing else to do
                found = await c.volume(app, volume_id)
                typer.confirm(f"Destroy volume {found.id} ({found.name}, {found.size_gb}GB in "
                              f"{found.region})? Its data is deleted for good", abort=True)
            gone = await c.delete_volume(app, volume_id)
            typer.echo(f"Destroyed volume {gone.id} ({gone.name})")

    call(api_url, token, work, context=context)


@snapshots.command("list")
@friendly
def list_snapshots(volume_id: VolumeId, app: AppOption = None,
                   config: ConfigPath = DEFAULT_CONFIG,
                   api_url: ApiUrl = None, token: Token = None,
                   context: ContextName = None, json: Json = False) -> None:
    """List a volume's snapshots, oldest first."""
    app = app_name(app, config)
    found = call(api_url, token, lambda c: c.volume_snapshots(app, volume_id), context=context)
    if json:
        show_json(found)
        return
    if not found:
        typer.echo(f"No snapshots of volume {volume_id}", err=True)
        return
    table(SNAPSHOT_COLUMNS, snapshot_rows(found))
    typer.echo(f"Total stored size: {in_bytes(sum(s.size for s in found))}")


@snapshots.command("create")
@friendly
def create_snapshot(volume_id: VolumeId, app: AppOption = None,
                    config: ConfigPath = DEFAULT_CONFIG,
                    api_url: ApiUrl = None, token: Token = None,
                    context: ContextName = None, json: Json = False) -> None:
    """Take a snapshot of a volume now (a machine mounting it is frozen for the copy)."""
    app = app_name(app, config)
    taken = call(api_url, token, lambda c: c.take_snapshot(app, volume_id), context=context)
    if json:
        show_json(taken)
        return
    typer.echo(f"Took snapshot {taken.id} of volume {volume_id} ({in_bytes(taken.size)}, "
               f"kept {taken.retention_days} days)")
