"""``bodega status``: an app, its current release and its machines.

It imports only what it shows (no bodega.toml models unless it reads one for
the app's name): a status is asked often, and answers quickly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from bodega.cli.commands.core.standby_pairs import both_started, state_label
from bodega.cli.session.api import (
    ApiUrl,
    ContextName,
    Json,
    Token,
    call,
    console,
    plain,
    show_json,
    table,
)
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.deploy.core.machine_keys import DEFAULT_GROUP, GROUP_KEY, RELEASE_KEY

if TYPE_CHECKING:
    from bodega.model.machine import Machine
    from bodega.wire.public.machines_client import MachinesClient
    from bodega.wire.public.releases import Release


@friendly
def status_command(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                   api_url: ApiUrl = None, token: Token = None,
                   context: ContextName = None,
                   json: Json = False) -> None:
    """The app, its current release, and its machines by process group and region."""
    name = app_name(app, config)

    async def work(client: MachinesClient) -> tuple[list[Machine], Release | None]:
        machines = await client.machines(name)
        releases = await client.releases(name)
        return machines, next((r for r in releases if r.status == "complete"), None)

    machines, release = call(api_url, token, work, context=context)
    warnings = both_started(machines)
    if json:
        show_json({"app": name,
                   "release": release.model_dump(mode="json", exclude_none=True,
                                                 exclude={"config"}) if release else None,
                   "machines": [{
                       "id": m.id, "name": m.name, "state": m.state,
                       "host_status": m.host_status or "ok", "region": m.region,
                       "process_group": group(m), "release": m.metadata().get(RELEASE_KEY),
                       "standby_for": list(m.standbys()), "checks": plain(m.checks or []),
                   } for m in machines],
                   "warnings": warnings})
        return
    console.print(f"[bold]{name}[/bold]: release "
                  + (f"v{release.version} ({release.strategy}, {release.created_at})"
                     if release else "none yet"))
    rows = sorted(machines, key=lambda m: (group(m), m.region, m.id))
    table(["GROUP", "REGION", "ID", "STATE", "RELEASE", "CHECKS", "ROLE"],
          [(group(m), m.region, m.id, state_label(m),
            f"v{m.metadata()[RELEASE_KEY]}" if m.metadata().get(RELEASE_KEY) else "-",
            ", ".join(f"{c.name}={c.status}" for c in m.checks or []) or "-",
            f"standby for {', '.join(m.standbys())}" if m.standbys() else "")
           for m in rows])
    for warning in warnings:
        typer.echo(warning)


def group(machine: Machine) -> str:
    """The machine's process group, as a deploy labels it."""
    return machine.metadata().get(GROUP_KEY, DEFAULT_GROUP)
