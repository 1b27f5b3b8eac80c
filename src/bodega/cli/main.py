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


from bodega.cli.up import up  # noqa: E402
from bodega.cli.worker import worker  # noqa: E402

app.command(help="Run a worker (the per-host agent).")(worker)
app.command(help="Run a local cluster in the foreground.")(up)


def run() -> None:
    app()
