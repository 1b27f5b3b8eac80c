"""``/sched``: the article's job API on the broker, behind the same tokens as the rest.

Users submit (one job, or a JSON list of them: ``submit_list.py``), look and cancel;
external workers poll and claim (claim mode) or register and are assigned (assignment
mode). A job belongs to an app: ``?app=`` (or ``App`` in a submit) names it, an app
token implies its own, and an admin token naming none finds the job by name across the
apps (400 if two apps have one). A submit that names no app (the article's shape, with
an admin token) goes to the app ``jobs``, made on first use. Errors are the usual
``{"error", "status"}``; a full queue is 429 and a job's home that does not answer 503,
both with ``Retry-After``.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.jobs.assignment import Assignment
from bodega.broker.jobs.claims import Claims
from bodega.broker.jobs.desk import JobDesk
from bodega.broker.jobs.output import STATUS_LINES, task_logs, with_output
from bodega.broker.jobs.submit_list import submit_each
from bodega.jobs.passes import TTL, JobPasses
from bodega.jobs.tail import MAX_LINES
from bodega.model.errors import BadRequest, NotFound
from bodega.wire.public.jobs.api import (
    ClaimBody,
    JobPassAnswer,
    RegisterBody,
    ReleaseBody,
    RenewBody,
    SubmitBody,
)
from bodega.wire.transport.http import (
    RouteMaker,
    answer_response,
    parse_model,
    query_int,
    read_json,
    read_model,
)


def given_app(request: Request, who: Principal, named: str | None = None) -> str | None:
    app = named or request.query_params.get("app") or None
    if app is not None:
        who.check(app)
        return app
    return who.app


def worker_param(request: Request) -> str:
    worker = request.query_params.get("worker")
    if not worker:
        raise BadRequest("invalid_argument: ?worker= is required (the worker's id)")
    return worker


def jobs_routes(r: RouteMaker, desk: JobDesk, claims: Claims,
                 assignment: Assignment, passes: JobPasses | None = None) -> list[Route]:
    def job_app(request: Request, who: Principal) -> tuple[str, str]:
        name = request.path_params["name"]
        app = given_app(request, who)
        return (app if app is not None else desk.app_of(name, None)), name

    def submit_app(request: Request, who: Principal, body: SubmitBody) -> str:
        return given_app(request, who, body.app) or desk.jobs_app()

    async def submit(request: Request, who: Principal) -> Response:
        data = await read_json(request)
        if isinstance(data, list):  # the article's config: each element a job of its own
            return answer_response(await submit_each(
                desk, data, lambda body: submit_app(request, who, body)))
        if not isinstance(data, dict):
            raise BadRequest("the JSON body must be a job (an object) or a list of jobs")
        body = parse_model(data, SubmitBody)
        return answer_response(await desk.submit(submit_app(request, who, body), body))

    async def job_pass(request: Request, who: Principal) -> Response:
        """A pass to submit the app's jobs at their homes' doors, and the doors."""
        if passes is None:
            raise NotFound("not_found: this cluster has no secrets key, so its workers open "
                           "no jobs door: submit with POST /sched/submit")
        app = given_app(request, who) or desk.jobs_app()
        desk.apps.require(app)
        now = time.time()
        return answer_response(JobPassAnswer(token=passes.mint(app, now), app=app,
                                             expires_at=int(now + TTL), homes=desk.doors()))

    async def status(request: Request, who: Principal) -> Response:
        lines = query_int(request, "lines", STATUS_LINES)
        if not 0 <= lines <= MAX_LINES:
            raise BadRequest(f"invalid_argument: lines must be 0 to {MAX_LINES}, not {lines}")
        job = await desk.status(*job_app(request, who))
        return answer_response(await with_output(desk, job, lines))

    async def cancel(request: Request, who: Principal) -> Response:
        return answer_response(await desk.cancel(*job_app(request, who)))

    async def jobs(request: Request, who: Principal) -> Response:
        q = request.query_params
        state = q.get("state") or "unclaimed"
        app, pool = given_app(request, who), q.get("pool") or None
        limit = query_int(request, "limit", 1000)
        if state == "unclaimed":  # what the claimants poll: the view's alone
            return answer_response(desk.shuffled(desk.index.listing(
                app=app, pool=pool, queued_only=True))[:limit])
        listed = await desk.listed(app, pool, None if state == "any" else state)
        return answer_response(sorted(listed, key=lambda j: j.id, reverse=True)[:limit])

    async def claim(request: Request, who: Principal) -> Response:
        body = await read_model(request, ClaimBody)
        return answer_response(await claims.claim(*job_app(request, who), body))

    async def renew(request: Request, who: Principal) -> Response:
        body = await read_model(request, RenewBody)
        return answer_response(await claims.renew(*job_app(request, who), body))

    async def release(request: Request, who: Principal) -> Response:
        body = await read_model(request, ReleaseBody)
        return answer_response(await claims.release(*job_app(request, who), body))

    async def cancellations(request: Request, who: Principal) -> Response:
        return answer_response(claims.cancellations(worker_param(request),
                                                    given_app(request, who)))

    async def register(request: Request, who: Principal) -> Response:
        body = await read_model(request, RegisterBody)
        return answer_response(assignment.register(body, given_app(request, who)))

    async def assigned(request: Request, who: Principal) -> Response:
        return answer_response(await assignment.assigned(worker_param(request),
                                                         given_app(request, who)))

    async def started(request: Request, who: Principal) -> Response:
        body = await read_model(request, RenewBody)
        return answer_response(await claims.renew(*job_app(request, who), body))

    async def logs(request: Request, who: Principal) -> Response:
        task = query_int(request, "task", 0)
        data = await task_logs(desk, *job_app(request, who), task)
        return Response(data, media_type="text/plain; charset=utf-8")

    return [
        r("/sched/submit", submit, "POST"),
        r("/sched/pass", job_pass, "POST"),
        r("/sched/status/{name}", status, "GET"),
        r("/sched/cancel/{name}", cancel, "POST"),
        r("/sched/jobs", jobs, "GET"),
        r("/sched/claim/{name}", claim, "POST"),
        r("/sched/renew/{name}", renew, "POST"),
        r("/sched/release/{name}", release, "POST"),
        r("/sched/cancellations", cancellations, "GET"),
        r("/sched/register", register, "POST"),
        r("/sched/assigned", assigned, "GET"),
        r("/sched/started/{name}", started, "POST"),
        r("/sched/stopped/{name}", release, "POST"),
        r("/sched/logs/{name}", logs, "GET"),
    ]
