"""``bodega status``: an app, its current release and its machines.

It imports only what it shows (no bodega.toml models unless it reads one for
the app's name): a status is asked often, and answers quickly.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from bodega.cli.app_choice import AppOption, ConfigPath, app_name
from bodega.cli.errors import friendly
from bodega.cli.session import (
    ApiUrl,
    ContextName,
    Json,
    Token,
    call,
    console,
    show_json,
    table,
)
from bodega.cli.standby_pairs import both_started, state_label
from bodega.deploy import calls
from bodega.deploy.machine_keys import DEFAULT_GROUP, GROUP_KEY, RELEASE_KEY

if TYPE_CHECKING:
    from bodega.wire.machines_client import MachinesClient


@friendly
def status_command(app: AppOption = None, config: ConfigPath = Path("bodega.toml"),
                   api_url: ApiUrl = None, token: Token = None,
                   context: ContextName = None,
                   json: Json = False) -> None:
    """The app, its current release, and its machines by process group and region."""
    name = app_name(app, config)

    async def work(client: MachinesClient) -> dict[str, Any]:
        machines = await client.machines(name)
        releases = await calls.releases(client, name)
        current = next((r for r in releases if r["status"] == "complete"), None)
        return {"app": name,
                "release": {k: v for k, v in current.items() if k != "config"}
                if current else None,
                "machines": [{
                    "id": m["id"], "name": m["name"], "state": m["state"],
                    "host_status": m.get("host_status") or "ok", "region": m["region"],
                    "process_group": (m["config"].get("metadata") or {}).get(
                        GROUP_KEY, DEFAULT_GROUP),
                    "release": (m["config"].get("metadata") or {}).get(RELEASE_KEY),
                    "standby_for": m["config"].get("standbys") or [],
                    "checks": m.get("checks") or [],
                } for m in machines],
                "warnings": both_started(machines)}

    found = call(api_url, token, work, context=context)
    if json:
        show_json(found)
        return
    release = found["release"]
    console.print(f"[bold]{name}[/bold]: release "
                  + (f"v{release['version']} ({release['strategy']}, {release['created_at']})"
                     if release else "none yet"))
    rows = sorted(found["machines"], key=lambda m: (m["process_group"], m["region"], m["id"]))
    table(["GROUP", "REGION", "ID", "STATE", "RELEASE", "CHECKS", "ROLE"],
          [(m["process_group"], m["region"], m["id"], state_label(m),
            f"v{m['release']}" if m["release"] else "-",
            ", ".join(f"{c.get('name')}={c.get('status')}" for c in m["checks"]) or "-",
            f"standby for {', '.join(m['standby_for'])}" if m["standby_for"] else "")
           for m in rows])
    for warning in found["warnings"]:
        typer.echo(warning)


