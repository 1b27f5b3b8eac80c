"""``bodega apps``: create, list, show and destroy apps; mint app-scoped tokens."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.errors import friendly

if TYPE_CHECKING:
    from bodega.wire.public.apps import App
    from bodega.wire.public.machines_client import MachinesClient
    from bodega.wire.public.releases import Release

apps = typer.Typer(help="Manage apps.", no_args_is_help=True)


@apps.command("create")
@friendly
def create(name: Annotated[str, typer.Argument(help="App name (a DNS label)")],
           org: Annotated[str, typer.Option(help="Organization slug")] = "personal",
           network: Annotated[str | None, typer.Option(
               help="Private network the app's machines join, fixed for good (default: the "
                    "organization's own); apps of different networks exchange no packet")]
           = None,
           api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None, json: Json = False) -> None:
    """Create an app."""
    app = call(api_url, token, lambda c: c.create_app(name, org, network), context=context)
    show_json(app) if json else typer.echo(f"New app created: {app.name}")


@apps.command("list")
@friendly
def list_apps(api_url: ApiUrl = None, token: Token = None,
              context: ContextName = None, json: Json = False) -> None:
    """List the apps this token can see, each with its status and current release."""

    async def work(client: MachinesClient) -> tuple[list[App], list[str]]:
        found = await client.apps()
        if json:
            return found, []
        releases = await asyncio.gather(*(client.releases(a.name) for a in found))
        return found, [current_release(r) for r in releases]

    found, versions = call(api_url, token, work, context=context)
    if json:
        show_json(found)
        return
    table(["NAME", "ORG", "STATUS", "RELEASE", "MACHINES", "VOLUMES"],
          [(a.name, a.organization.slug, a.status, version, a.machine_count,
            a.volume_count) for a, version in zip(found, versions, strict=True)])


def current_release(releases: list[Release]) -> str:
    """The newest complete release, as ``vN``; ``-`` if none completed."""
    complete = [r.version for r in releases if r.status == "complete"]
    return f"v{max(complete)}" if complete else "-"


@apps.command("show")
@friendly
def show(name: Annotated[str, typer.Argument(help="App name")],
         api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None) -> None:
    """Show an app."""
    show_json(call(api_url, token, lambda c: c.app(name), context=context))


@apps.command("destroy")
@friendly
def destroy(name: Annotated[str, typer.Argument(help="App name")],
            yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask")] = False,
            api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None) -> None:
    """Destroy an app with all its machines and volumes."""
    if not yes:
        typer.confirm(f"Destroy app {name} and every machine and volume in it?", abort=True)
    call(api_url, token, lambda c: c.delete_app(name), context=context)
    typer.echo(f"Destroyed app {name}")


@apps.command("token")
@friendly
def token_cmd(name: Annotated[str, typer.Argument(help="App name")],
              expiry: Annotated[str | None, typer.Option(help="Lifetime, e.g. 720h")] = None,
              api_url: ApiUrl = None, token: Token = None,
              context: ContextName = None) -> None:
    """Create a token that can only use this app."""
    typer.echo(call(api_url, token, lambda c: c.deploy_token(name, expiry), context=context))
