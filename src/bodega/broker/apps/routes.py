"""``/v1/apps`` and ``/v1/orgs/{org}/machines``: apps, their deploy tokens and IP assignments.

An app is a row of the view (``Apps``); its answer counts the machines and
volumes it holds and reads its status from its releases. Deleting one goes
through ``AppDelete``, which asks every worker holding its machines first.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.apps.delete import AppDelete
from bodega.broker.apps.ip_assignments import IpAssignments
from bodega.broker.apps.releases import Releases, app_status
from bodega.broker.auth.tokens import Principal, Tokens
from bodega.broker.machines.core.org_list import page, parse_query
from bodega.broker.machines.service import Machines
from bodega.broker.view.apps import Apps
from bodega.broker.volumes.core import org_list as org_volumes
from bodega.broker.volumes.service import Volumes
from bodega.wire.public import fly
from bodega.wire.public.apps import App, AppList, DeployToken, IpAssignmentList
from bodega.wire.transport.http import RouteMaker, answer_response, read_model


def app_routes(r: RouteMaker, *, apps: Apps, machines: Machines, volumes: Volumes,
               tokens: Tokens) -> list[Route]:
    ips = IpAssignments(apps.catalog, apps)
    app_delete = AppDelete(apps, machines, volumes, tokens, ips)

    def app_answer(name: str) -> App:
        row = apps.require(name)
        held = machines.app_machines(name, destroyed=False)
        disks = [v for v in volumes.app_volumes(name) if v.state != "destroyed"]
        status = app_status(Releases(apps.catalog, apps).rows(name), len(held))
        return apps.answer(row, len(held), len(disks), status)

    async def list_apps(request: Request, who: Principal) -> Response:
        names = [n for n in apps.names(request.query_params.get("org_slug")) if who.can(n)]
        found = [app_answer(n) for n in names]
        return answer_response(AppList(total_apps=len(found), apps=found))

    async def create_app(request: Request, who: Principal) -> Response:
        who.check_admin("creating apps")
        body = await read_model(request, fly.CreateAppRequest)
        row = apps.create(body.chosen_name(), body.org_slug, body.network)
        return answer_response(apps.answer(row, 0, 0, app_status([], 0)), 201)

    async def get_app(request: Request, who: Principal) -> Response:
        return answer_response(app_answer(request.path_params["app"]))

    async def delete_app(request: Request, who: Principal) -> Response:
        await app_delete.delete(request.path_params["app"])
        return Response(status_code=202)

    async def deploy_token(request: Request, who: Principal) -> Response:
        app = request.path_params["app"]
        apps.require(app)
        body = await read_model(request, fly.CreateAppDeployTokenRequest, required=False)
        return answer_response(DeployToken(token=tokens.create_app_token(app, body.expiry)))

    async def list_ips(request: Request, who: Principal) -> Response:
        return answer_response(IpAssignmentList(ips=ips.list(request.path_params["app"])))

    async def assign_ip(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.AssignIpRequest)
        return answer_response(ips.assign(request.path_params["app"], body))

    async def remove_ip(request: Request, who: Principal) -> Response:
        ips.remove(request.path_params["app"], request.path_params["ip"])
        return Response(status_code=204)

    async def org_machines(request: Request, who: Principal) -> Response:
        query = parse_query({k: request.query_params.getlist(k) for k in request.query_params})
        names = [a for a in apps.names(request.path_params["org_slug"]) if who.can(a)]
        listed = [m for a in names
                  for m in machines.app_machines(a, destroyed=query.include_deleted)]
        return answer_response(page(listed, query))

    async def org_volume_list(request: Request, who: Principal) -> Response:
        query = parse_query({k: request.query_params.getlist(k) for k in request.query_params})
        names = [a for a in apps.names(request.path_params["org_slug"]) if who.can(a)]
        return answer_response(org_volumes.page(
            [v for a in names for v in volumes.app_volumes(a)], query))

    return [
        r("/v1/apps", list_apps, "GET"),
        r("/v1/apps", create_app, "POST"),
        r("/v1/apps/{app}", get_app, "GET"),
        r("/v1/apps/{app}", delete_app, "DELETE"),
        r("/v1/apps/{app}/deploy_token", deploy_token, "POST"),
        r("/v1/apps/{app}/ip_assignments", list_ips, "GET"),
        r("/v1/apps/{app}/ip_assignments", assign_ip, "POST"),
        r("/v1/apps/{app}/ip_assignments/{ip}", remove_ip, "DELETE"),
        r("/v1/orgs/{org_slug}/machines", org_machines, "GET"),
        r("/v1/orgs/{org_slug}/volumes", org_volume_list, "GET"),
    ]
