"""Hosts and their drain cordon: ``/v1/cluster/hosts`` (bodega's, admin tokens only).

A host is what runs one registry agent and the workers that check in through it
(``Member.host``, the agent's name); a worker with no agent is a host of its own.
``POST /v1/cluster/hosts/{name}/drain`` cordons every worker of host ``name``, or the one
worker so named (a ``bodega up`` with several workers drains one of them), with the
reason ``draining``: each worker keeps the cordon and its reason in its own store, so a
restart keeps them, and publishes them in its row, where placement refuses it saying
"draining" and the dashboard shows it. ``/undrain`` lifts it. Moving the machines off is
the caller's (``bodega host drain`` walks the plan and asks the move route), as a deploy's
steps are; ``GET /v1/cluster/machines`` gives it every machine with its app and worker.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.platform.service import Platform
from bodega.broker.view.core.host_status import with_host_status
from bodega.model.errors import NotFound
from bodega.model.machine import Machine
from bodega.model.rows.workers import DRAINING
from bodega.wire.public.platform import WorkerStatus
from bodega.wire.transport.http import RouteMaker, answer_response


class Hosts:
    """The view's workers grouped by host, and the drain cordon asked of them."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform

    def hosts_of(self) -> dict[str, str]:
        """Each worker's host: the agent that speaks for it, or itself."""
        return {m.name: m.host or m.name for m in self.platform.members() if m.role == "worker"}

    def workers(self) -> list[WorkerStatus]:
        """Every worker with its host."""
        hosts = self.hosts_of()
        return [w.model_copy(update={"host": hosts.get(w.name, w.name)})
                for w in self.platform.workers()]

    def named(self, name: str) -> list[WorkerStatus]:
        """The worker ``name``, or every worker of host ``name``; 404 when neither."""
        found = self.workers()
        chosen = [w for w in found if w.name == name] or [w for w in found if w.host == name]
        if not chosen:
            raise NotFound(f"not_found: no worker or host named {name!r} "
                           f"(bodega host ls lists them)")
        return chosen

    def machines(self) -> list[Machine]:
        """Every machine the view holds that is not destroyed, with its app and worker (a
        drain's and a rebalance's planners place them: the only answer that names its
        worker) and its host's status."""
        catalog = self.platform.catalog
        return sorted((with_host_status(m, catalog.member_status)
                       for m in catalog.rows(Machine) if m.state != "destroyed"),
                      key=lambda m: (m.app or "", m.id))

    async def set_draining(self, name: str, draining: bool) -> list[WorkerStatus]:
        """Cordon (``draining``) or uncordon each worker ``name`` names, as each answers."""
        out = []
        for worker in self.named(name):
            client = self.platform.machines.workers.client(worker.name)
            answer = await client.cordon(draining, DRAINING if draining else None)
            out.append(worker.model_copy(update={
                "cordoned": answer.cordoned,
                "cordon_reason": answer.cordon_reason if answer.cordoned else None}))
        return out


def host_routes(r: RouteMaker, hosts: Hosts) -> list[Route]:
    async def listed(request: Request, who: Principal) -> Response:
        who.check_admin("cluster hosts")
        return answer_response(hosts.workers())

    async def machines(request: Request, who: Principal) -> Response:
        who.check_admin("cluster machines")
        return answer_response(hosts.machines())

    async def drain(request: Request, who: Principal) -> Response:
        who.check_admin("a host's drain")
        return answer_response(await hosts.set_draining(request.path_params["name"], True))

    async def undrain(request: Request, who: Principal) -> Response:
        who.check_admin("a host's undrain")
        return answer_response(await hosts.set_draining(request.path_params["name"], False))

    return [
        r("/v1/cluster/hosts", listed, "GET", gated=False),
        r("/v1/cluster/machines", machines, "GET"),
        r("/v1/cluster/hosts/{name}/drain", drain, "POST"),
        r("/v1/cluster/hosts/{name}/undrain", undrain, "POST"),
    ]

