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
    target: str  # "bodega.cli.apps:apps": a command function or a typer.Typer
    help: str

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


COMMANDS = (
    Lazy("up", "bodega.cli.up:up", "Run a local cluster in the foreground."),
    Lazy("join", "bodega.cli.join:join", "Join a cluster and run this host's workers."),
    Lazy("install-service", "bodega.cli.service:install_service",
         "Write a systemd unit that runs bodega up or bodega join."),
    Lazy("clean", "bodega.cli.clean:clean",
         "Remove what a stopped cluster left in the kernel (namespaces, cgroups...)."),
    Lazy("worker", "bodega.cli.worker:worker", "Run a worker (flyd: a host's machines)."),
    Lazy("agent", "bodega.cli.agent:agent",
         "Run a host's registry agent (its one replica of the cluster's state)."),
    Lazy("build", "bodega.cli.build:build",
         "Build an image (Dockerfile, buildah) and push it to the cluster's registry."),
    Lazy("image-registry", "bodega.cli.image_registry:image_registry",
         "Run the cluster's image registry (docker-registry)."),
    Lazy("broker", "bodega.cli.broker:broker", "Run a broker (the Machines API and placement)."),
    Lazy("proxy", "bodega.cli.proxy:proxy", "Run a proxy (HTTP routing, autostart, autostop)."),
    Lazy("logs", "bodega.cli.logs:logs", "Show an app's logs; -f follows them."),
    Lazy("query", "bodega.cli.queries:query_command",
         "Run a read-only SQL query on the registry (the cluster's view)."),
    Lazy("watch", "bodega.cli.queries:watch_command",
         "Print a SQL query's rows, then each change to them, until Ctrl-C."),
    Lazy("regions", "bodega.cli.cluster:regions", "Regions and their room for a machine size."),
    Lazy("deploy", "bodega.cli.deploy:deploy_command", "Deploy an app from its bodega.toml."),
    Lazy("config", "bodega.cli.config_commands:config",
         "Check a bodega.toml or fly.toml, and show it as bodega reads it."),
    Lazy("releases", "bodega.cli.deploy:releases_command", "An app's releases, newest first."),
    Lazy("rollback", "bodega.cli.deploy:rollback_command", "Redeploy an earlier release."),
    Lazy("status", "bodega.cli.status:status_command", "An app, its release and its machines."),
    Lazy("launch", "bodega.cli.app_commands:launch_command", "Write a starter bodega.toml."),
    Lazy("apps", "bodega.cli.apps:apps", "Manage apps."),
    Lazy("machine", "bodega.cli.machines:machine", "Run and manage machines."),
    Lazy("port-forward", "bodega.cli.port_forward:port_forward",
         "Forward a local TCP port to a port of an app's machine, through the API."),
    Lazy("ssh", "bodega.cli.ssh:ssh", "Open a terminal in an app's machine (fly ssh)."),
    Lazy("cluster", "bodega.cli.cluster:cluster", "Look at the cluster."),
    Lazy("context", "bodega.cli.context_commands:context",
         "Name clusters (API URL, token, registry) and choose the current one."),
    Lazy("jobs", "bodega.cli.jobs:jobs", "Run batch jobs: submit, status, list, cancel, logs."),
    Lazy("ips", "bodega.cli.ips:ips",
         "Manage an app's IP addresses (Flycast: a private one in its network)."),
    Lazy("secrets", "bodega.cli.secrets:secrets",
         "Manage an app's secrets (environment variables kept sealed)."),
    Lazy("volumes", "bodega.cli.volumes:volumes",
         "Manage an app's volumes and their snapshots."),
    Lazy("certs", "bodega.cli.certs:certs",
         "Manage the TLS certificates the proxies serve for an app's hostnames."),
    Lazy("sim", "bodega.cli.sim:sim", "Simulate placement: compare policies, check the model."),
    Lazy("scale", "bodega.cli.app_commands:scale",
         "Change how many machines run, or their size."),
)
