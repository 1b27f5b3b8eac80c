"""Every ``bodega`` command: its name, its help line, and where it lives.

A command is named with its help line and its ``module:attribute`` (a function,
or a ``typer.Typer`` of subcommands); its module is imported only when the
command runs (``lazy_commands``). Nothing here imports typer: ``bodega --help``
lists these lines without it (``root_help``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

SUMMARY = "bodega: run machines on a fleet of workers, placed like a market."


@dataclass(frozen=True)
class Lazy:
    name: str
    target: str  # "bodega.cli.commands.apps:apps": a command function or a typer.Typer
    help: str

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


COMMANDS = (
    Lazy("up", "bodega.cli.daemons.up:up", "Run a local cluster in the foreground."),
    Lazy("join", "bodega.cli.daemons.join:join", "Join a cluster and run this host's workers."),
    Lazy("install-service", "bodega.cli.daemons.service:install_service",
         "Write a systemd unit that runs bodega up or bodega join."),
    Lazy("clean", "bodega.cli.daemons.clean:clean",
         "Remove what a stopped cluster left in the kernel (namespaces, cgroups...)."),
    Lazy("worker", "bodega.cli.daemons.worker:worker", "Run a worker (flyd: a host's machines)."),
    Lazy("agent", "bodega.cli.daemons.agent:agent",
         "Run a host's registry agent (its one replica of the cluster's state)."),
    Lazy("build", "bodega.cli.commands.build:build",
         "Build an image (Dockerfile, buildah) and push it to the cluster's registry."),
    Lazy("image-registry", "bodega.cli.daemons.image_registry:image_registry",
         "Run the cluster's image registry (docker-registry)."),
    Lazy("metrics-store", "bodega.cli.daemons.metrics_store:metrics_store",
         "Run the cluster's metrics store (victoria-metrics)."),
    Lazy("broker", "bodega.cli.daemons.broker:broker",
         "Run a broker (the Machines API and placement)."),
    Lazy("proxy", "bodega.cli.daemons.proxy:proxy",
         "Run a proxy (HTTP routing, autostart, autostop)."),
    Lazy("logs", "bodega.cli.commands.logs:logs", "Show an app's logs; -f follows them."),
    Lazy("metrics", "bodega.cli.commands.metrics:metrics",
         "A live top of an app's machines: CPU, memory, req/s, p95 latency."),
    Lazy("autoscale", "bodega.cli.commands.autoscale:autoscale",
         "Scale an app's machines on its load: bounds and a target."),
    Lazy("query", "bodega.cli.commands.queries:query_command",
         "Run a read-only SQL query on the registry (the cluster's view)."),
    Lazy("watch", "bodega.cli.commands.queries:watch_command",
         "Print a SQL query's rows, then each change to them, until Ctrl-C."),
    Lazy("regions", "bodega.cli.commands.cluster:regions",
         "Regions and their room for a machine size."),
    Lazy("deploy", "bodega.cli.commands.deploy:deploy_command",
         "Deploy an app from its bodega.toml."),
    Lazy("config", "bodega.cli.commands.config:config",
         "Check a bodega.toml or fly.toml, and show it as bodega reads it."),
    Lazy("releases", "bodega.cli.commands.deploy:releases_command",
         "An app's releases, newest first."),
    Lazy("rollback", "bodega.cli.commands.deploy:rollback_command", "Redeploy an earlier release."),
    Lazy("status", "bodega.cli.commands.status:status_command",
         "An app, its release and its machines."),
    Lazy("launch", "bodega.cli.commands.app_commands:launch_command",
         "Write a starter bodega.toml."),
    Lazy("apps", "bodega.cli.commands.apps:apps", "Manage apps."),
    Lazy("machine", "bodega.cli.commands.machines:machine", "Run and manage machines."),
    Lazy("port-forward", "bodega.cli.commands.port_forward:port_forward",
         "Forward a local TCP port to a port of an app's machine, through the API."),
    Lazy("ssh", "bodega.cli.commands.ssh:ssh", "Open a terminal in an app's machine (fly ssh)."),
    Lazy("cluster", "bodega.cli.commands.cluster:cluster", "Look at the cluster."),
    Lazy("host", "bodega.cli.commands.hosts:host",
         "Drain a host before maintenance (its machines moved off), and undrain it."),
    Lazy("context", "bodega.cli.commands.context:context",
         "Name clusters (API URL, token, registry) and choose the current one."),
    Lazy("jobs", "bodega.cli.commands.jobs:jobs",
         "Run batch jobs: submit, status, list, cancel, logs."),
    Lazy("ips", "bodega.cli.commands.ips:ips",
         "Manage an app's IP addresses (Flycast: a private one in its network)."),
    Lazy("secrets", "bodega.cli.commands.secrets:secrets",
         "Manage an app's secrets (environment variables kept sealed)."),
    Lazy("volumes", "bodega.cli.commands.volumes:volumes",
         "Manage an app's volumes and their snapshots."),
    Lazy("certs", "bodega.cli.commands.certs:certs",
         "Manage the TLS certificates the proxies serve for an app's hostnames."),
    Lazy("sim", "bodega.cli.commands.sim:sim",
         "Simulate placement: compare policies, check the model."),
    Lazy("scale", "bodega.cli.commands.app_commands:scale",
         "Change how many machines run, or their size."),
)
