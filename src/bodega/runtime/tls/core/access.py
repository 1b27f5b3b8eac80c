"""Who may call what on the internal listeners: one table, route -> the roles allowed.

Every internal listener is mutual TLS: a caller without a certificate from
the cluster's CA never gets past the handshake. This table is the second
check, made on every request: the role in the caller's certificate
(``identity.py``) must be one the route allows, else 403. A route missing
from the table cannot be mounted (``roles_for`` raises when the listener is
built), so nothing is open by omission.

The roles: ``broker`` places and manages machines (all of a worker's machine
routes are its own); ``proxy`` wakes and idles them (start, stop, suspend,
read); ``agent`` (a host's registry agent), and ``worker``, ``broker`` and
``proxy`` when they run a replica of their own, replicate the registry among
themselves; all of them renew their own certificates; ``admin`` is the operator's
tools (``bodega up`` makes one such certificate beside the CA): metrics and
reads, never a change to a machine. Workers call each other in two places: batch
jobs (a task's runner claims, renews and releases at its job's home) and volume
snapshots (a snapshot's data is sent to, or fetched from, another worker).
``image-registry`` (the cluster's image registry, serving) may call nothing.
``metrics-store`` (a server host's metrics store) reads every daemon's ``GET /metrics``
and the brokers' service discovery of targets, nothing else.

The cluster's image registry has a door of its own (``image_registry_allows``): it
speaks the distribution protocol to buildah and skopeo, which hold no certificate of
the cluster, so a push is let in by the admin token, and a pull by that or by a
worker's certificate (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

WORKER, BROKER, PROXY, AGENT, ADMIN = "worker", "broker", "proxy", "agent", "admin"
IMAGE_REGISTRY = "image-registry"
METRICS_STORE = "metrics-store"  # the cluster's metrics store: scrapes and discovers, no more

# The listeners, by what they serve. The registry's routes are mounted on the one of
# whoever holds a replica: the host's agent's, or each daemon's with no agent.
WORKER_API = "worker-api"
BROKER_INTERNAL = "broker-internal"
PROXY_ADMIN = "proxy-admin"
AGENT_INTERNAL = "agent-internal"  # a host's registry agent: health and metrics beside sync
REGISTRY = "registry"

ANYONE = frozenset({WORKER, BROKER, PROXY, AGENT, ADMIN})  # of the cluster: health says little
# Who replicates the registry: a host's agent, and a daemon running a replica of its own.
MEMBERS = frozenset({WORKER, BROKER, PROXY, AGENT})
BROKER_ONLY = frozenset({BROKER})
WAKERS = frozenset({BROKER, PROXY})  # start, stop, suspend: the proxy wakes and idles machines
READERS = frozenset({BROKER, PROXY, ADMIN})
EDGE = frozenset({BROKER, PROXY})  # who serves a machine's statics to the public
OPERATORS = frozenset({BROKER, ADMIN})
ADMIN_ONLY = frozenset({ADMIN})
SCRAPERS = frozenset({ADMIN, METRICS_STORE})  # a daemon's /metrics: the operator, the store
# Batch jobs: brokers submit and cancel; workers claim, renew and probe at each other's homes.
JOB_PEERS = frozenset({BROKER, WORKER})
JOB_READERS = frozenset({BROKER, WORKER, ADMIN})
# What one worker hands another: a machine it moves and its volume's data, a snapshot's copy.
WORKER_PEERS = frozenset({WORKER})


@dataclass(frozen=True)
class Route:
    listener: str
    method: str
    path: str  # the route's template, as mounted: /v1/machines/{id}/start

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


class NoRule(LookupError):
    """A route with no entry in the table: it must get one before it can be mounted."""


def _routes(listener: str, rules: dict[tuple[str, str], frozenset[str]]
            ) -> dict[Route, frozenset[str]]:
    return {Route(listener, method, path): roles for (method, path), roles in rules.items()}


M = "/v1/machines/{id}"
V = "/v1/volumes/{id}"

POLICY: Mapping[Route, frozenset[str]] = {
    **_routes(WORKER_API, {
        ("GET", "/v1/health"): ANYONE,
        ("GET", "/v1/info"): OPERATORS,
        ("GET", "/v1/capacity"): OPERATORS,
        ("POST", "/v1/reservations"): BROKER_ONLY,
        ("DELETE", "/v1/reservations/{id}"): BROKER_ONLY,
        ("POST", "/v1/cordon"): BROKER_ONLY,
        ("POST", "/v1/uncordon"): BROKER_ONLY,
        ("GET", "/v1/log"): OPERATORS,
        ("GET", "/metrics"): SCRAPERS,
        ("GET", "/v1/machines"): READERS,
        ("POST", "/v1/machines"): BROKER_ONLY,
        ("GET", M): READERS,
        ("POST", M): BROKER_ONLY,
        ("DELETE", M): BROKER_ONLY,
        ("POST", f"{M}/start"): WAKERS,
        ("POST", f"{M}/stop"): WAKERS,
        ("POST", f"{M}/suspend"): WAKERS,
        ("POST", f"{M}/restart"): BROKER_ONLY,
        ("POST", f"{M}/move"): BROKER_ONLY,  # the machine's worker hands it to another
        ("POST", f"{M}/import"): WORKER_PEERS,  # a move's target, handed it by the machine's worker
        ("POST", f"{M}/import-volume"): WORKER_PEERS,  # and its volume's data first
        ("POST", f"{M}/migrate-in"): WORKER_PEERS,  # a live move's VM state, as it streams
        ("POST", f"{M}/switch"): WORKER_PEERS,  # and its end: the VM goes on there
        ("POST", f"{M}/signal"): BROKER_ONLY,
        ("POST", f"{M}/cordon"): BROKER_ONLY,
        ("POST", f"{M}/uncordon"): BROKER_ONLY,
        ("POST", f"{M}/exec"): BROKER_ONLY,
        ("GET", f"{M}/forward"): BROKER_ONLY,  # a WebSocket: a TCP connection to the machine
        ("GET", f"{M}/console"): BROKER_ONLY,  # a WebSocket: a terminal in the machine
        ("GET", f"{M}/ps"): BROKER_ONLY,
        ("GET", f"{M}/wait"): WAKERS,
        ("GET", f"{M}/events"): OPERATORS,
        ("GET", f"{M}/versions"): OPERATORS,
        ("GET", f"{M}/placement"): OPERATORS,
        ("GET", f"{M}/logs"): BROKER_ONLY,  # the app's own output
        ("GET", f"{M}/statics/{{path:path}}"): EDGE,  # the image's files the edge serves
        ("GET", f"{M}/lease"): BROKER_ONLY,
        ("POST", f"{M}/lease"): BROKER_ONLY,
        ("DELETE", f"{M}/lease"): BROKER_ONLY,
        ("GET", f"{M}/metadata"): BROKER_ONLY,
        ("PUT", f"{M}/metadata"): BROKER_ONLY,
        ("PATCH", f"{M}/metadata"): BROKER_ONLY,
        ("GET", f"{M}/metadata/{{key}}"): BROKER_ONLY,
        ("POST", f"{M}/metadata/{{key}}"): BROKER_ONLY,
        ("DELETE", f"{M}/metadata/{{key}}"): BROKER_ONLY,
        ("GET", "/v1/volumes"): OPERATORS,
        ("POST", "/v1/volumes"): BROKER_ONLY,
        ("GET", V): OPERATORS,
        ("PUT", V): BROKER_ONLY,
        ("DELETE", V): BROKER_ONLY,
        ("PUT", f"{V}/extend"): BROKER_ONLY,
        ("GET", f"{M}/memory"): OPERATORS,
        ("PUT", f"{M}/memory"): BROKER_ONLY,
        ("POST", f"{M}/memory/reclaim"): BROKER_ONLY,
        ("GET", f"{V}/snapshots"): OPERATORS,
        ("POST", f"{V}/snapshots"): BROKER_ONLY,
        ("GET", "/v1/snapshots/{id}"): OPERATORS,
        # A snapshot's data, worker to worker: a copy sent off its host, or fetched to
        # restore it (docs/volumes.md).
        ("GET", "/v1/snapshots/{id}/data"): WORKER_PEERS,
        ("PUT", "/v1/snapshots/{id}/data"): WORKER_PEERS,
        ("POST", "/v1/jobs"): JOB_PEERS,
        ("GET", "/v1/jobs"): JOB_READERS,
        ("GET", "/v1/jobs/by-name"): JOB_READERS,
        ("GET", "/v1/jobs/{id}"): JOB_READERS,
        ("POST", "/v1/jobs/{id}/claim"): JOB_PEERS,
        ("POST", "/v1/jobs/{id}/release"): JOB_PEERS,
        ("POST", "/v1/jobs/{id}/cancel"): JOB_PEERS,
        ("POST", "/v1/job-leases"): JOB_PEERS,
        ("POST", "/v1/job-releases"): JOB_PEERS,
        ("POST", "/v1/job-probes"): JOB_PEERS,
        ("DELETE", "/v1/job-probes/{job}"): JOB_PEERS,
        ("POST", "/v1/job-probe-batches"): JOB_PEERS,
        ("POST", "/v1/job-runs/stop"): JOB_PEERS,
        ("GET", "/v1/job-logs/{job}/{task}"): JOB_READERS,
    }),
    **_routes(BROKER_INTERNAL, {
        ("GET", "/v1/health"): ANYONE,
        # A renewal: the signer issues only the identity the caller's certificate names.
        ("POST", "/v1/cluster/certificates"): ANYONE,
        # Prometheus HTTP service discovery: what the host's metrics store scrapes.
        ("GET", "/v1/metrics/targets"): frozenset({METRICS_STORE, ADMIN}),
        # A PromQL query another broker hands this one's host's store, its org's filter added.
        ("POST", "/v1/metrics/query"): BROKER_ONLY,
    }),
    **_routes(PROXY_ADMIN, {
        ("GET", "/v1/health"): ANYONE,
        ("GET", "/metrics"): SCRAPERS,
        ("GET", "/v1/routes"): ADMIN_ONLY,  # names every app's machines and addresses
    }),
    **_routes(AGENT_INTERNAL, {
        ("GET", "/v1/health"): ANYONE,
        ("GET", "/metrics"): SCRAPERS,
    }),
    **_routes(REGISTRY, {
        # The whole view (token hashes, sealed secrets): members replicate it among themselves.
        ("POST", "/v1/registry/sync"): MEMBERS,
        ("POST", "/v1/registry/digest"): MEMBERS,
        ("POST", "/v1/registry/subscriptions"): frozenset({*MEMBERS, ADMIN}),
    }),
}


def roles_for(listener: str, method: str, path: str,
              policy: Mapping[Route, frozenset[str]] = POLICY) -> frozenset[str]:
    """The roles that may call ``method path`` on ``listener``; ``NoRule`` if none is set."""
    route = Route(listener, method, path)
    try:
        return policy[route]
    except KeyError:
        raise NoRule(f"no access rule for {route} on the {listener} listener") from None


def allowed(listener: str, method: str, path: str, role: str,
            policy: Mapping[Route, frozenset[str]] = POLICY) -> bool:
    """Whether a caller of ``role`` may call ``method path`` on ``listener`` (no rule: no)."""
    try:
        return role in roles_for(listener, method, path, policy)
    except NoRule:
        return False


# -- the cluster's image registry --------------------------------------------------------------
PULLS = frozenset({"GET", "HEAD"})  # the distribution protocol's reads; anything else writes
IMAGE_PULLERS = frozenset({WORKER})  # a worker pulls what its machines run, by its certificate


def image_registry_allows(method: str, role: str | None, admin: bool) -> bool:
    """Whether the cluster's image registry serves ``method``: to whoever gave an admin
    token (``admin``: pushes and pulls), else a read to a caller whose certificate from the
    cluster CA is of a role that pulls (``role``: None without one)."""
    return admin or (method in PULLS and role in IMAGE_PULLERS)
