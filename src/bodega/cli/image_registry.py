"""``bodega image-registry``: the cluster's OCI registry as a component (``bodega up``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.errors import friendly
from bodega.cluster.image_registry import run_registry
from bodega.runtime import hostinfo


@friendly
def image_registry(
    data_dir: Annotated[Path, typer.Option(help="Where the registry stores images")],
    listen: Annotated[str, typer.Option(help="host:port to serve on")] = "127.0.0.1:5050",
    ready_file: Annotated[Path | None, typer.Option(help="Written once it answers")] = None,
    exit_with_parent: Annotated[bool, typer.Option(hidden=True)] = False,
) -> None:
    """Run docker-registry (CNCF distribution) with its storage under DATA_DIR."""
    host, port = hostinfo.split_host_port(listen, 5050)
    raise typer.Exit(asyncio.run(run_registry(data_dir.resolve(), host, port, ready_file,
                                               exit_with_parent)))
