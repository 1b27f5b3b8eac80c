"""``bodega install-service up|join ARGS...``: a systemd unit for the command, written.

Writes ``<unit-dir>/<name>.service`` (and, if the command had ``--token``,
``<env-dir>/<name>.env``, 0600, instead of the token in the unit), then says
how to start it. ``--print`` shows the unit and writes nothing.
``cluster/service_unit.py`` renders it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.session.errors import friendly
from bodega.cluster.service_unit import render
from bodega.runtime.tls.files import write_private


@friendly
def install_service(
    command: Annotated[list[str], typer.Argument(
        help="The command the service runs: up ... or join ... (put -- before its flags)")],
    name: Annotated[str | None, typer.Option(
        help="The unit's name (default: bodega-up or bodega-join)")] = None,
    unit_dir: Annotated[Path, typer.Option(help="Where the unit file goes")]
    = Path("/etc/systemd/system"),
    env_dir: Annotated[Path, typer.Option(help="Where a token given with --token goes")]
    = Path("/etc/bodega"),
    print_only: Annotated[bool, typer.Option("--print", help="Show the unit, write nothing")]
    = False,
) -> None:
    """Write a systemd unit that runs `bodega up` or `bodega join` as a service."""
    kind, *args = command
    unit_name = name or f"bodega-{kind}"
    env_file = env_dir.resolve() / f"{unit_name}.env"
    service = render(kind, args, python=sys.executable, workdir=Path.cwd(), name=unit_name,
                     env_file=env_file)
    if print_only:
        typer.echo(service.unit, nl=False)
        return
    path = unit_dir / f"{unit_name}.service"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(service.unit)
    tmp.chmod(0o644)
    tmp.replace(path)
    if service.environment:
        body = "".join(f"{k}={v}\n" for k, v in service.environment.items())
        write_private(env_file, body.encode())
        typer.echo(f"wrote {path} and {env_file} (the token, mode 0600)")
    else:
        typer.echo(f"wrote {path}")
    typer.echo(f"start it now and at every boot: systemctl daemon-reload && "
               f"systemctl enable --now {unit_name}")
