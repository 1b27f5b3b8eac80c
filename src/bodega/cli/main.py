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


from bodega.cli.app_commands import launch_command, scale, status_command  # noqa: E402
from bodega.cli.apps import apps  # noqa: E402
from bodega.cli.broker import broker  # noqa: E402
from bodega.cli.build import build  # noqa: E402
from bodega.cli.clean import clean  # noqa: E402
from bodega.cli.cluster import cluster, regions  # noqa: E402
from bodega.cli.deploy import deploy_command, releases_command, rollback_command  # noqa: E402
from bodega.cli.image_registry import image_registry  # noqa: E402
from bodega.cli.logs import logs  # noqa: E402
from bodega.cli.machines import machine  # noqa: E402
from bodega.cli.proxy import proxy  # noqa: E402
from bodega.cli.secrets import secrets  # noqa: E402
from bodega.cli.sim import sim  # noqa: E402
from bodega.cli.up import up  # noqa: E402
from bodega.cli.worker import worker  # noqa: E402

app.command(help="Run a local cluster in the foreground.")(up)
app.command(help="Remove what a stopped cluster left in the kernel (namespaces, cgroups...).")(
    clean)
app.command(help="Run a worker (the per-host agent).")(worker)
app.command(help="Build an image (Dockerfile, buildah) and push it to the cluster's registry.")(
    build)
app.command("image-registry", help="Run the cluster's image registry (docker-registry).")(
    image_registry)
app.command(help="Run a broker (the Machines API and placement).")(broker)
app.command(help="Run a proxy (HTTP routing, autostart, autostop).")(proxy)
app.add_typer(apps, name="apps")
app.add_typer(machine, name="machine")
app.add_typer(cluster, name="cluster")
app.add_typer(secrets, name="secrets")
app.command(help="Show an app's logs; -f follows them.")(logs)
app.add_typer(sim, name="sim")
app.command(help="Regions and their room for a machine size.")(regions)
app.command("deploy", help="Deploy an app from its bodega.toml.")(deploy_command)
app.command("releases", help="An app's releases, newest first.")(releases_command)
app.command("rollback", help="Redeploy an earlier release.")(rollback_command)
app.command("status", help="An app, its release and its machines.")(status_command)
app.add_typer(scale, name="scale")
app.command("launch", help="Write a starter bodega.toml.")(launch_command)


def run() -> None:
    app()
