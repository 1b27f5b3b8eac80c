"""``bodega secrets``: set, list and unset an app's secrets; deploy them to its machines."""

from __future__ import annotations

from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.model.plural import counted
from bodega.wire.public.fly import UpdateMachineRequest, checked
from bodega.wire.public.machines_client import MachinesClient

secrets = typer.Typer(help="Manage an app's secrets (environment variables kept sealed).",
                      no_args_is_help=True)


def pairs(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            # Never echo the argument: it may hold a secret value.
            raise ValueError("secrets set takes NAME=VALUE arguments")
        out[key] = val
    return out


async def deploy_secrets(client: MachinesClient, app: str) -> list[str]:
    """Update every started machine with its own config: it relaunches with the secrets now set.

    Stopped machines need nothing: a machine reads its secrets whenever it is launched.
    """
    updated = []
    for machine in await client.machines(app):
        if machine.state == "started" and machine.config is not None:
            await client.update_machine(app, machine.id, checked(
                UpdateMachineRequest, {"config": machine.config}))
            updated.append(machine.id)
    return updated


@secrets.command("set")
@friendly
def set_secrets(values: Annotated[list[str], typer.Argument(help="NAME=VALUE ...")],
                app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                stage: Annotated[bool, typer.Option(
                    "--stage", help="Only record them; machines get them at their next deploy")
                ] = False,
                api_url: ApiUrl = None, token: Token = None,
                context: ContextName = None) -> None:
    """Set secrets; without --stage, also update the app's started machines to apply them."""
    app = app_name(app, config)
    wanted = pairs(values)

    async def work(c: MachinesClient) -> list[str]:
        await c.update_secrets(app, wanted)
        return [] if stage else await deploy_secrets(c, app)

    updated = call(api_url, token, work, context=context)
    typer.echo(f"Set {', '.join(sorted(wanted))}" + (
        "" if stage else f"; updated {counted(len(updated), 'machine')}"))


@secrets.command("list")
@friendly
def list_secrets(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                 api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
                 json: Json = False) -> None:
    """List an app's secrets (names and digests, never values)."""
    app = app_name(app, config)
    found = call(api_url, token, lambda c: c.secrets(app), context=context)
    if json:
        show_json(found)
        return
    table(["NAME", "DIGEST", "UPDATED"],
          [(s.name, s.digest or "", s.updated_at or "") for s in found.secrets])


@secrets.command("unset")
@friendly
def unset(names: Annotated[list[str], typer.Argument(help="NAME ...")],
          app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
          stage: Annotated[bool, typer.Option("--stage", help="Do not update machines")] = False,
          api_url: ApiUrl = None, token: Token = None,
          context: ContextName = None) -> None:
    """Remove secrets; without --stage, also update the app's started machines."""
    app = app_name(app, config)

    async def work(c: MachinesClient) -> list[str]:
        await c.update_secrets(app, dict.fromkeys(names))
        return [] if stage else await deploy_secrets(c, app)

    updated = call(api_url, token, work, context=context)
    typer.echo(f"Unset {', '.join(sorted(names))}" + (
        "" if stage else f"; updated {counted(len(updated), 'machine')}"))


@secrets.command("deploy")
@friendly
def deploy(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
           api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None) -> None:
    """Update every started machine of the app so it runs with the current secrets."""
    app = app_name(app, config)
    updated = call(api_url, token, lambda c: deploy_secrets(c, app), context=context)
    typer.echo(f"Updated {counted(len(updated), 'machine')}: {' '.join(updated)}" if updated
               else "No started machine to update")
