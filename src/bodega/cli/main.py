"""``bodega``: one command for the daemons, the local cluster and the API."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="bodega",
    help="bodega: run machines on a fleet of workers, placed like a market.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def run() -> None:
    app()
