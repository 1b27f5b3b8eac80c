"""What the metrics store scrapes, from the view; pure.

Two kinds, each a Prometheus HTTP service discovery answer (a list of target
groups), each scraped by its own job of the store (``cluster/metrics_store.py``):

- ``cluster``: every worker's API (its row's URL) and every proxy's and registry
  agent's admin listener (their member's ``url``), all over mutual TLS at
  ``/metrics``, labelled ``role``, ``host`` (the member's name) and ``region``. A
  member SWIM holds dead or gone is left out; one suspected is kept (its ``up``
  falls to 0 while it does not answer). Their own series carry no ``org``: the
  per-machine ones a worker exports carry theirs.
- ``apps``: each started machine whose config has ``metrics`` (fly.toml's
  ``[metrics]``) where the proxy reaches its services (its ``service_host``, else its
  private address), labelled ``app``, ``machine``,
  ``region``, ``host`` (its worker) and ``org`` (its app's), which win over any
  label the app exports of the same name: an app cannot pass its series off as
  another org's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bodega.model.machine import Machine
from bodega.model.rows.workers import WorkerRow
from bodega.wire.internal.metrics_store import TargetGroup
from bodega.wire.public.platform import Member

LIVE = frozenset({"alive", "suspect"})
SCRAPED_ROLES = ("proxy", "agent")  # members whose ``url`` serves GET /metrics


@dataclass(frozen=True)
class Daemon:
    """A daemon to scrape: its role, name, region and the URL of its listener."""

    role: str
    name: str
    region: str
    url: str


def address(url: str) -> str | None:
    """``host:port`` of an ``http(s)://host:port`` URL; None for anything else."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    hostport = rest.split("/", 1)[0]
    return hostport or None


def daemons(workers: Iterable[WorkerRow], members: Iterable[Member],
            status: Mapping[str, str | None]) -> list[Daemon]:
    """The cluster's daemons that serve ``/metrics``: workers by their rows, proxies and
    agents by their members' ``url``; ``status`` is each name's SWIM status (None:
    unknown, scraped all the same: a worker row without a member yet)."""
    found = [Daemon("worker", w.name, w.region, w.url) for w in workers
             if status.get(w.name) in LIVE or status.get(w.name) is None]
    found += [Daemon(m.role, m.name, m.region, m.meta["url"]) for m in members
              if m.role in SCRAPED_ROLES and m.status in LIVE and m.meta.get("url")]
    return sorted(found, key=lambda d: (d.role, d.name))


def cluster_targets(found: Iterable[Daemon]) -> list[TargetGroup]:
    groups = []
    for daemon in found:
        where = address(daemon.url)
        if where is not None:
            groups.append(TargetGroup(targets=[where], labels={
                "role": daemon.role, "host": daemon.name, "region": daemon.region}))
    return groups


def machine_address(ip: str, port: int) -> str | None:
    """``ip:port``, or ``[ip]:port`` for IPv6; None when ``ip`` is no address."""
    try:
        parsed = ipaddress.ip_address(ip)
    except ValueError:
        return None
    return f"[{parsed}]:{port}" if parsed.version == 6 else f"{parsed}:{port}"


def app_targets(machines: Iterable[Machine], orgs: Mapping[str, str]) -> list[TargetGroup]:
    """Each started machine with a ``[metrics]`` endpoint; ``orgs``: app -> its org (a
    machine of an app the view does not list yet is left for the next discovery)."""
    groups = []
    for machine in sorted(machines, key=lambda m: m.id):
        config = machine.config
        org = orgs.get(machine.app or "")
        if (machine.state != "started" or config is None or config.metrics is None
                or org is None or not machine.app):
            continue
        where = machine_address(machine.service_host or machine.private_ip,
                                config.metrics.port)
        if where is None:
            continue
        groups.append(TargetGroup(targets=[where], labels={
            "__metrics_path__": config.metrics.path,
            "__scheme__": "https" if config.metrics.https else "http",
            "app": machine.app, "machine": machine.id, "region": machine.region,
            "host": machine.worker or "", "org": org}))
    return groups
