"""``bodega metrics-store``: the cluster's metrics store as a component (``bodega up``)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.daemons.options import ExitWithParentOption, LogLevelOption
from bodega.cli.session.errors import friendly
from bodega.cluster.metrics_store import PROGRAM, StoreSettings, run_store
from bodega.model.duration import parse_duration
from bodega.runtime.logs import configure
from bodega.runtime.tls.core import pki


@friendly
def metrics_store(
    data_dir: Annotated[Path, typer.Option(help="Where the store keeps its series")],
    broker_ready_file: Annotated[Path, typer.Option(
        help="The host's broker's ready file: its internal listener serves the targets")],
    scrape_interval: Annotated[str, typer.Option(
        help="How often every target is scraped (and targets discovered again)")] = "15s",
    retention: Annotated[str, typer.Option(
        help="How long series are kept (VictoriaMetrics' -retentionPeriod: 30d, 12w...)")]
    = "30d",
    tls_dir: Annotated[Path | None, typer.Option(
        help="The store's key and certificate from the cluster CA (role metrics-store), to "
             "scrape the cluster's daemons over mutual TLS; without it, plain HTTP")] = None,
    ca_dir: Annotated[Path | None, typer.Option(
        help="The cluster CA (ca.pem, ca-key.pem): renew the store's certificate with it at "
             "two thirds of its life")] = None,
    cert_validity: Annotated[str, typer.Option(
        help="Life of the certificates it issues itself")] = "8760h",
    ready_file: Annotated[Path | None, typer.Option(help="Written once it answers")] = None,
    log_level: LogLevelOption = "info",
    exit_with_parent: ExitWithParentOption = False,
) -> None:
    """Run VictoriaMetrics on loopback, scraping what the host's broker lists."""
    configure(log_level, "metrics-store")
    interval = parse_duration(scrape_interval, 0.0)
    if interval < 1.0:
        raise ValueError("--scrape-interval must be at least 1s")
    lifetime = parse_duration(cert_validity, 0.0)
    if lifetime < pki.MIN_LIFETIME:
        raise ValueError(f"--cert-validity must be at least {pki.MIN_LIFETIME:g}s")
    settings = StoreSettings(data_dir.resolve(), broker_ready_file.resolve(), interval,
                             retention, tls_dir.resolve() if tls_dir is not None else None,
                             ca_dir.resolve() if ca_dir is not None else None, lifetime)
    raise typer.Exit(asyncio.run(run_store(settings, ready_file, exit_with_parent)))


def metrics_choice(wanted: bool, interval: str) -> tuple[bool, float]:
    """Whether the metrics store runs (when asked and installed; asked and not installed,
    one line says so and the cluster runs without it), and its scrape interval."""
    seconds = parse_duration(interval, 0.0)
    if seconds < 1.0:
        raise ValueError("--metrics-interval must be at least 1s")
    if wanted and shutil.which(PROGRAM) is None:
        typer.echo(f"metrics: no store ({PROGRAM} is not installed: apt-get install "
                   f"{PROGRAM}); the cluster runs without one", err=True)
        wanted = False
    return wanted, seconds
