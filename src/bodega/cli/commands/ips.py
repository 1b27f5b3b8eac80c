"""``bodega ips``: an app's IP addresses; ``allocate-v6 --private`` gives it a Flycast address."""

from __future__ import annotations

from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.wire.public.apps import IpAssignment, IpAssignmentList

ips = typer.Typer(help="Manage an app's IP addresses (Flycast: a private one in its network).",
                  no_args_is_help=True)


@ips.command("allocate-v6")
@friendly
def allocate_v6(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                private: Annotated[bool, typer.Option(
                    "--private", help="A Flycast address: reachable only from the app's "
                                      "private network, served by the proxy, named "
                                      "<app>.flycast")] = False,
                api_url: ApiUrl = None, token: Token = None,
                context: ContextName = None, json: Json = False) -> None:
    """Allocate an IPv6 address for the app (with --private: its Flycast address)."""
    app = app_name(app, config)
    kind = "private_v6" if private else "v6"
    found: IpAssignment = call(api_url, token, lambda c: c.answer(
        IpAssignment, "POST", f"/v1/apps/{app}/ip_assignments", json={"type": kind}),
        context=context)
    if json:
        show_json(found)
        return
    name = f" ({app}.flycast inside its network)" if private else ""
    typer.echo(f"Allocated {'private ' if private else ''}IPv6 address {found.ip}{name}")


@ips.command("list")
@friendly
def list_ips(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
             api_url: ApiUrl = None, token: Token = None,
             context: ContextName = None, json: Json = False) -> None:
    """List the app's IP addresses."""
    app = app_name(app, config)
    found: IpAssignmentList = call(api_url, token, lambda c: c.answer(
        IpAssignmentList, "GET", f"/v1/apps/{app}/ip_assignments"), context=context)
    if json:
        show_json(found.ips)
        return
    table(["ADDRESS", "REGION", "CREATED"],
          [(r.ip, r.region or "", r.created_at or "") for r in found.ips])
